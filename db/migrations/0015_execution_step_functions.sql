-- Hand-written: one statement per step of a message's execution and delivery.
-- Each step of the worker (start an execution, commit its reply, claim a segment, record a send
-- and finish the message) used to be a transaction of 4–14 statements from the application; over
-- a message that was ~55 round trips, most of the message's cost. These functions run the same
-- steps, with the same checks, CAS conditions and fencing, inside the database: one call, in its
-- own (autocommit) transaction, per step.
--
-- Tenancy: each function is SECURITY INVOKER and first switches, transaction-locally, to the
-- runtime role tenant_app_writer and the given tenant (exactly what db/tx.ts withTenantTx does),
-- so every statement inside runs under that role's grants and row-level security; every query
-- also names the tenant. The application connects as the schema owner and calls them directly.
-- Decisions that need application code (segmentation, the scripted agent, sending) stay in the
-- worker; these functions only persist them.
-- IDEMPOTENT: CREATE OR REPLACE; grants are repeatable.

-- Switches the current transaction to the runtime role and tenant (callers: the functions below).
CREATE OR REPLACE FUNCTION public.runtime_scope(p_tenant_id text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
BEGIN
    IF p_tenant_id IS NULL OR p_tenant_id = '' THEN
        RAISE EXCEPTION 'a tenant is required' USING ERRCODE = '22023';
    END IF;
    PERFORM set_config('role', 'tenant_app_writer', true);
    PERFORM set_config('app.tenant_id', p_tenant_id, true);
END
$$;
--> statement-breakpoint
-- The session's next unfinished message after this one (to wake when this one finishes), as a
-- jsonb array of workflow ids (empty or one).
CREATE OR REPLACE FUNCTION public.execution_wake_list(p_tenant_id text, p_event_id text) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, public
AS $$
    SELECT coalesce(jsonb_agg(w.workflow_id), '[]'::jsonb) FROM (
        SELECT n.workflow_id FROM public.message_event e
        JOIN public.message_event n ON n.tenant_id = e.tenant_id AND n.session_id = e.session_id
                                    AND n.event_seq > e.event_seq
        WHERE e.tenant_id = p_tenant_id AND e.event_id = p_event_id
          AND n.status NOT IN ('replied', 'failed')
        ORDER BY n.event_seq LIMIT 1
    ) AS w
    WHERE w.workflow_id IS NOT NULL
$$;
--> statement-breakpoint
-- The `message.finished` audit entry of a terminal transition, in the caller's transaction (a
-- message can finish more than once: an operator's DLQ retry reopens a failed one).
CREATE OR REPLACE FUNCTION public.execution_audit_finished(
    p_tenant_id text, p_event_id text, p_status text, p_outcome text, p_actor text
) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v record;
BEGIN
    SELECT e.session_id, e.binding_id, e.event_seq, b.channel, e.payload, e.execution_plan INTO v
    FROM public.message_event e
    JOIN public.channel_binding b ON b.tenant_id = e.tenant_id AND b.binding_id = e.binding_id
    WHERE e.tenant_id = p_tenant_id AND e.event_id = p_event_id;
    PERFORM public.audit_append(jsonb_build_object(
        'tenant_id', p_tenant_id,
        'audit_id', 'aud_' || substr(p_event_id, 5) || '_' || replace(gen_random_uuid()::text, '-', ''),
        'action', 'message.finished',
        'actor_type', 'worker',
        'actor_id', p_actor,
        'decision', p_status,
        'reason', p_outcome,
        'binding_id', v.binding_id,
        'channel', v.channel,
        'user_id', v.payload ->> 'senderId',
        'session_id', v.session_id,
        'agent_app_id', v.execution_plan -> 'app' ->> 'id',
        'revision', (v.execution_plan -> 'app' ->> 'revision')::int,
        'model_profile_id', v.execution_plan -> 'modelProfile' ->> 'id',
        'event_seq', v.event_seq,
        'error_type', CASE WHEN p_status = 'failed' THEN p_outcome END,
        'details', jsonb_build_object('event_id', p_event_id)
    ));
END
$$;
--> statement-breakpoint
-- The workflow runs: the start reconciler no longer needs to start this message.
CREATE OR REPLACE FUNCTION public.execution_mark_started(p_tenant_id text, p_event_id text) RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, public
AS $$
    UPDATE public.message_event SET workflow_started_at = now()
    WHERE tenant_id = p_tenant_id AND event_id = p_event_id AND workflow_started_at IS NULL
$$;
--> statement-breakpoint
-- A message decided at start and never executed: failed with its outcome and reason, audited,
-- and the session's next message woken. Returns execution_start's `finished` result.
CREATE OR REPLACE FUNCTION public.execution_fail_at_start(
    p_tenant_id text, p_event_id text, p_outcome text, p_reason text, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
BEGIN
    UPDATE public.message_event
    SET status = 'failed', outcome = coalesce(outcome, p_outcome), failure_reason = p_reason,
        workflow_started_at = coalesce(workflow_started_at, now()), updated_at = now()
    WHERE tenant_id = p_tenant_id AND event_id = p_event_id AND status NOT IN ('replied', 'failed');
    PERFORM public.execution_audit_finished(p_tenant_id, p_event_id, 'failed', p_outcome, p_actor);
    RETURN jsonb_build_object('kind', 'finished', 'status', 'failed', 'outcome', p_outcome,
                              'wake', public.execution_wake_list(p_tenant_id, p_event_id));
END
$$;
--> statement-breakpoint
-- received → running, once the message may run: every earlier message of its session finished
-- (per-session FIFO) and the tenant has a free concurrency permit. Applies the tenant gates and
-- fixes the ExecutionPlan (ids, versions, digests; no secrets). Idempotent. Returns jsonb:
--   {kind: 'not_found'}
--   {kind: 'finished', status, outcome, wake}          (already terminal, or failed here)
--   {kind: 'wait', reason: 'session_order' | 'tenant_concurrency'}
--   {kind: 'execute', started, plan, outcome, committed, permit_limited, limits, budgeted,
--    text, scripted}
-- `started` is true when this call moved the message to running (a fresh plan); `scripted` is the
-- pinned revision's scripted agent configuration when the plan's model is scripted.
CREATE OR REPLACE FUNCTION public.execution_start(
    p_tenant_id text, p_event_id text, p_owner text, p_lease_seconds int
) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    ev record;
    t record;
    v_backend record;
    v_plan jsonb;
    v_problem text;
    v_running int;
BEGIN
    PERFORM public.runtime_scope(p_tenant_id);
    SELECT e.status, e.kind, e.outcome, e.payload, e.execution_plan, e.workflow_started_at,
           a.app_id, a.published_revision,
           r.content_digest AS revision_digest, r.model_profile_id, r.scripted AS revision_scripted,
           coalesce(pinned.limits, r.limits) AS revision_limits,
           pinned.scripted AS pinned_scripted,
           m.version AS model_profile_version, m.content_digest AS model_profile_digest,
           m.provider AS model_profile_provider, m.status AS model_profile_status
    INTO ev
    FROM public.message_event e
    JOIN public.channel_binding b ON b.tenant_id = e.tenant_id AND b.binding_id = e.binding_id
    JOIN public.agent_app a ON a.tenant_id = b.tenant_id AND a.app_id = b.app_id
    LEFT JOIN public.agent_app_revision r
      ON r.tenant_id = a.tenant_id AND r.app_id = a.app_id AND r.revision = a.published_revision
    LEFT JOIN public.model_profile m ON m.tenant_id = r.tenant_id AND m.model_profile_id = r.model_profile_id
    LEFT JOIN public.agent_app_revision pinned
      ON pinned.tenant_id = e.tenant_id AND pinned.app_id = e.execution_plan -> 'app' ->> 'id'
     AND pinned.revision = (e.execution_plan -> 'app' ->> 'revision')::int
    WHERE e.tenant_id = p_tenant_id AND e.event_id = p_event_id
    FOR UPDATE OF e;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('kind', 'not_found');
    END IF;
    -- The workflow runs: the start reconciler no longer needs to start this message. Marked by the
    -- transition below when there is one (one write of the row per step), else here.
    IF ev.workflow_started_at IS NULL AND ev.status <> 'received' THEN
        UPDATE public.message_event SET workflow_started_at = now()
        WHERE tenant_id = p_tenant_id AND event_id = p_event_id AND workflow_started_at IS NULL;
    END IF;
    IF ev.status IN ('replied', 'failed') THEN
        RETURN jsonb_build_object('kind', 'finished', 'status', ev.status, 'outcome', ev.outcome,
                                  'wake', '[]'::jsonb);
    END IF;
    IF ev.status <> 'received' THEN
        -- Resumed after a restart: the plan fixed earlier stands.
        RETURN jsonb_build_object(
            'kind', 'execute', 'started', false, 'plan', ev.execution_plan, 'outcome', ev.outcome,
            'committed', ev.status IN ('completed', 'reply_pending'), 'permit_limited', true,
            'limits', ev.revision_limits, 'budgeted', true, 'text', ev.payload ->> 'text',
            'scripted', CASE WHEN ev.execution_plan -> 'modelProfile' ->> 'provider' = 'scripted'
                             THEN ev.pinned_scripted END);
    END IF;
    IF EXISTS (
        SELECT 1 FROM public.message_event e
        JOIN public.message_event p ON p.tenant_id = e.tenant_id AND p.session_id = e.session_id
                                    AND p.event_seq < e.event_seq
        WHERE e.tenant_id = p_tenant_id AND e.event_id = p_event_id
          AND p.status NOT IN ('replied', 'failed')
    ) THEN
        PERFORM public.execution_mark_started(p_tenant_id, p_event_id);
        RETURN jsonb_build_object('kind', 'wait', 'reason', 'session_order');
    END IF;

    IF ev.kind <> 'text' THEN
        RETURN public.execution_fail_at_start(p_tenant_id, p_event_id, 'unsupported_message',
                                              'message type is recorded but not executed', p_owner);
    END IF;
    SELECT * INTO t FROM public.tenant_runtime_snapshot(p_tenant_id);
    IF NOT FOUND OR t.status = 'disabled' THEN
        RETURN public.execution_fail_at_start(p_tenant_id, p_event_id, 'tenant_disabled', 'tenant is disabled',
                                              p_owner);
    END IF;
    IF t.max_concurrent_executions IS NOT NULL THEN
        -- Two claims must not both take the last permit: one claimer per tenant at a time.
        PERFORM pg_advisory_xact_lock(hashtextextended('permits:' || p_tenant_id, 0));
        SELECT count(*) INTO v_running FROM public.message_event
        WHERE tenant_id = p_tenant_id AND status = 'running' AND execution_lease_expires_at > now();
        IF v_running >= t.max_concurrent_executions THEN
            PERFORM public.execution_mark_started(p_tenant_id, p_event_id);
            RETURN jsonb_build_object('kind', 'wait', 'reason', 'tenant_concurrency');
        END IF;
    END IF;

    IF t.status <> 'suspended' THEN
        IF ev.published_revision IS NULL OR ev.revision_digest IS NULL THEN
            v_problem := 'the app has no published revision';
        ELSIF ev.model_profile_id IS NULL OR ev.model_profile_status <> 'active' OR ev.model_profile_provider IS NULL THEN
            v_problem := 'the revision’s model profile is not active';
        ELSIF t.default_backend_profile_id IS NULL THEN
            v_problem := 'the tenant has no default backend profile';
        ELSE
            SELECT profile_id, version, content_digest INTO v_backend FROM public.backend_profile
            WHERE tenant_id = p_tenant_id AND profile_id = t.default_backend_profile_id AND status = 'active';
            IF NOT FOUND THEN
                v_problem := 'the tenant’s default backend profile is not active';
            END IF;
        END IF;
        IF v_problem IS NOT NULL THEN
            RETURN public.execution_fail_at_start(p_tenant_id, p_event_id, 'configuration_error', v_problem, p_owner);
        END IF;
        v_plan := jsonb_build_object(
            'tenant', jsonb_build_object('id', p_tenant_id, 'version', t.version),
            'app', jsonb_build_object('id', ev.app_id, 'revision', ev.published_revision,
                                      'digest', ev.revision_digest),
            'modelProfile', jsonb_build_object('id', ev.model_profile_id,
                                               'version', coalesce(ev.model_profile_version, 1),
                                               'digest', coalesce(ev.model_profile_digest, ''),
                                               'provider', ev.model_profile_provider),
            'backendProfile', jsonb_build_object('id', v_backend.profile_id, 'version', v_backend.version,
                                                 'digest', v_backend.content_digest));
    END IF;

    -- Seeds: a running execution always holds an owner, claim, lease and fence.
    UPDATE public.message_event
    SET status = 'running', execution_plan = v_plan, workflow_started_at = coalesce(workflow_started_at, now()),
        outcome = CASE WHEN t.status = 'suspended' THEN 'tenant_suspended' END,
        execution_owner = p_owner, execution_claim_token = gen_random_uuid()::text,
        execution_lease_expires_at = now() + make_interval(secs => p_lease_seconds),
        execution_heartbeat_at = now(), execution_fencing_token = execution_fencing_token + 1,
        execution_attempts = execution_attempts + 1, updated_at = now()
    WHERE tenant_id = p_tenant_id AND event_id = p_event_id AND status = 'received';
    RETURN jsonb_build_object(
        'kind', 'execute', 'started', true, 'plan', v_plan,
        'outcome', CASE WHEN t.status = 'suspended' THEN 'tenant_suspended' END,
        'committed', false, 'permit_limited', t.max_concurrent_executions IS NOT NULL,
        'limits', CASE WHEN v_plan IS NULL THEN NULL ELSE ev.revision_limits END,
        'budgeted', t.monthly_token_budget IS NOT NULL OR t.monthly_spend_limit_minor IS NOT NULL,
        'text', ev.payload ->> 'text',
        'scripted', CASE WHEN ev.model_profile_provider = 'scripted' AND v_plan IS NOT NULL
                         THEN ev.revision_scripted END);
END
$$;
--> statement-breakpoint
-- Seeds' commit order, in one transaction holding the message's row lock: durable memory of the
-- turn → the pinned reply_id / reply_cache_ref / segment_count → reply cache → every outbox segment,
-- the message moving from running straight to reply_pending (or replied when there is nothing to
-- send). The application computed
-- the segments (ids, idempotency keys, content). Idempotent: when the execution is no longer
-- running, returns the reply pinned earlier (never a second one). Returns jsonb:
--   {kind: 'committed' | 'pinned', status, outcome, reply_id, segment_ids, wake}
--   {kind: 'fenced_out', status}                        (not running and nothing pinned)
CREATE OR REPLACE FUNCTION public.execution_commit(
    p_tenant_id text, p_event_id text, p_owner text, p_lease_seconds int,
    p_reply_id text, p_text text, p_content_digest text, p_outcome text, p_segments jsonb,
    p_wake_waiters boolean
) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    f record;
    v_count int := jsonb_array_length(p_segments);
    v_status text;
    v_outcome text;
BEGIN
    PERFORM public.runtime_scope(p_tenant_id);
    SELECT status, outcome, reply_id, payload, session_id INTO f FROM public.message_event
    WHERE tenant_id = p_tenant_id AND event_id = p_event_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('kind', 'fenced_out', 'status', NULL);
    END IF;
    IF f.status <> 'running' THEN
        -- Committed earlier (a retried or zombie attempt): the pinned reply, never a second one.
        IF f.reply_id IS NULL THEN
            RETURN jsonb_build_object('kind', 'fenced_out', 'status', f.status);
        END IF;
        RETURN jsonb_build_object(
            'kind', 'pinned', 'status', f.status, 'outcome', f.outcome, 'reply_id', f.reply_id,
            'segment_ids', (SELECT coalesce(jsonb_agg(segment_id ORDER BY segment_index), '[]'::jsonb)
                            FROM public.reply_outbox WHERE tenant_id = p_tenant_id AND reply_id = f.reply_id),
            'wake', '[]'::jsonb);
    END IF;

    -- Seeds: memory before the reply, with its source event.
    INSERT INTO public.memory_entry (tenant_id, memory_id, user_id, session_id, source_event_id, role,
                                     content, content_digest)
    SELECT p_tenant_id, 'mem_' || substr(p_event_id, 5) || '_' || m.suffix, f.payload ->> 'senderId',
           f.session_id, p_event_id, m.role, m.content, encode(sha256(convert_to(m.content, 'UTF8')), 'hex')
    FROM (VALUES ('user', coalesce(f.payload ->> 'text', ''), 'u'), ('assistant', p_text, 'a'))
         AS m(role, content, suffix)
    WHERE length(m.content) > 0
    ON CONFLICT DO NOTHING;

    -- Pin the reply and leave `running` in one write of the row (the whole commit is one
    -- transaction, so completed → reply_pending is never observable in between). The new fencing
    -- token fences out any older attempt still holding the execution.
    v_status := CASE WHEN v_count = 0 THEN 'replied' ELSE 'reply_pending' END;
    UPDATE public.message_event
    SET status = v_status, reply_id = p_reply_id, reply_cache_ref = p_reply_id, segment_count = v_count,
        outcome = coalesce(outcome, p_outcome), committed_at = now(),
        execution_fencing_token = execution_fencing_token + 1, execution_owner = p_owner, updated_at = now()
    WHERE tenant_id = p_tenant_id AND event_id = p_event_id
    RETURNING outcome INTO v_outcome;
    INSERT INTO public.reply_cache (tenant_id, reply_id, event_id, content, content_digest)
    VALUES (p_tenant_id, p_reply_id, p_event_id, p_text, p_content_digest);
    INSERT INTO public.reply_outbox (tenant_id, event_id, reply_id, idempotency_key, segment_id,
                                     segment_index, segment_count, content, channel, target, status)
    SELECT p_tenant_id, p_event_id, p_reply_id, s.value ->> 'idempotency_key', s.value ->> 'segment_id',
           (s.ordinality - 1)::int, v_count, s.value ->> 'content', f.payload ->> 'channel',
           jsonb_build_object('chatId', f.payload -> 'chatId', 'chatType', f.payload -> 'chatType',
                              'threadId', f.payload -> 'threadId', 'userId', f.payload -> 'senderId'),
           'pending'
    FROM jsonb_array_elements(p_segments) WITH ORDINALITY AS s(value, ordinality);

    RETURN jsonb_build_object(
        'kind', 'committed', 'status', v_status, 'outcome', v_outcome, 'reply_id', p_reply_id,
        'segment_ids', (SELECT coalesce(jsonb_agg(s.value -> 'segment_id' ORDER BY s.ordinality), '[]'::jsonb)
                        FROM jsonb_array_elements(p_segments) WITH ORDINALITY AS s(value, ordinality)),
        -- Oldest waiting messages of the tenant: this execution's concurrency permit is free now.
        'wake', CASE WHEN p_wake_waiters THEN (
            SELECT coalesce(jsonb_agg(w.workflow_id), '[]'::jsonb) FROM (
                SELECT workflow_id FROM public.message_event
                WHERE tenant_id = p_tenant_id AND status = 'received' AND workflow_id IS NOT NULL
                ORDER BY created_at LIMIT 3) AS w)
            ELSE '[]'::jsonb END);
END
$$;
--> statement-breakpoint
-- Terminal transition: `replied` only when every segment of the pinned reply is sent (then
-- `failed` after all for an outcome whose fallback reply was delivered), or `failed` with the
-- given failure, the unsent segments kept. Audited and, when replied, the session summary extended
-- from durable memory (seeds: after memory, never before). Idempotent. Returns jsonb:
--   {status, wake}              (status null: the message does not exist)
--   {status, wake, not_all_sent: true}   (nothing changed)
CREATE OR REPLACE FUNCTION public.message_finish(
    p_tenant_id text, p_event_id text, p_failure_outcome text, p_failure_reason text, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    cur record;
    v_status text;
    v_outcome text;
    v_summary text;
BEGIN
    PERFORM public.runtime_scope(p_tenant_id);
    SELECT status, outcome, session_id, event_seq, reply_id, segment_count INTO cur
    FROM public.message_event WHERE tenant_id = p_tenant_id AND event_id = p_event_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('status', NULL, 'wake', '[]'::jsonb);
    END IF;
    IF cur.status IN ('replied', 'failed') THEN
        RETURN jsonb_build_object('status', cur.status, 'wake', public.execution_wake_list(p_tenant_id, p_event_id));
    END IF;
    v_outcome := cur.outcome;
    IF p_failure_outcome IS NOT NULL THEN
        v_outcome := coalesce(cur.outcome, p_failure_outcome);
        -- The failure's own outcome is what the audit reports (the stored one is kept if set).
        UPDATE public.message_event
        SET status = 'failed', outcome = coalesce(outcome, p_failure_outcome),
            failure_reason = p_failure_reason, updated_at = now()
        WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
        v_status := 'failed';
        v_outcome := p_failure_outcome;
    ELSE
        IF cur.status <> 'reply_pending' OR (
            SELECT count(*) FROM public.reply_outbox o
            WHERE o.tenant_id = p_tenant_id AND o.reply_id = cur.reply_id AND o.status = 'sent'
        ) <> cur.segment_count THEN
            RETURN jsonb_build_object('status', cur.status, 'wake', '[]'::jsonb, 'not_all_sent', true);
        END IF;
        IF cur.outcome IN ('budget_exhausted', 'model_failed') THEN
            v_status := 'failed';
        ELSE
            v_status := 'replied';
        END IF;
        UPDATE public.message_event
        SET status = v_status,
            failure_reason = CASE WHEN v_status = 'failed' THEN 'fallback reply delivered' ELSE failure_reason END,
            updated_at = now()
        WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
    END IF;
    IF v_status = 'replied' THEN
        -- The session summary, kept incrementally: the previous one plus this turn's lines (user,
        -- then assistant; whitespace runs folded, 300 characters each), the newest lines kept within
        -- 4000 characters and 40 lines. Turns arrive in event_seq order (per-session FIFO); the
        -- base_event_seq CAS drops a turn older than the summary (a late DLQ retry).
        SELECT string_agg(m.role || ': ' || left(regexp_replace(m.content, '\s+', ' ', 'g'), 300), E'\n'
                          ORDER BY m.role DESC)
        INTO v_summary
        FROM public.memory_entry m
        WHERE m.tenant_id = p_tenant_id
          AND m.memory_id IN ('mem_' || substr(p_event_id, 5) || '_u', 'mem_' || substr(p_event_id, 5) || '_a');
        SELECT concat_ws(E'\n', nullif(ss.content, ''), v_summary) INTO v_summary
        FROM (SELECT 1) AS one
        LEFT JOIN public.session_summary ss ON ss.tenant_id = p_tenant_id AND ss.session_id = cur.session_id;
        SELECT coalesce(string_agg(x.line, E'\n' ORDER BY x.n), '') INTO v_summary
        FROM (
            SELECT l.line, l.n,
                   sum(length(l.line) + 1) OVER (ORDER BY l.n DESC) - 1 AS total,
                   row_number() OVER (ORDER BY l.n DESC) AS k
            FROM unnest(string_to_array(nullif(v_summary, ''), E'\n')) WITH ORDINALITY AS l(line, n)
        ) AS x
        WHERE (x.total <= 4000 AND x.k <= 40) OR x.k = 1;
        INSERT INTO public.session_summary (tenant_id, session_id, base_event_seq, content, content_digest)
        VALUES (p_tenant_id, cur.session_id, cur.event_seq, v_summary,
                encode(sha256(convert_to(v_summary, 'UTF8')), 'hex'))
        ON CONFLICT (tenant_id, session_id) DO UPDATE
            SET content = excluded.content, content_digest = excluded.content_digest,
                base_event_seq = excluded.base_event_seq,
                summary_version = session_summary.summary_version + 1, updated_at = now()
            WHERE session_summary.base_event_seq < excluded.base_event_seq;
    END IF;
    -- Last: the audit entry holds the tenant's chain lock until commit, so nothing else runs under it.
    PERFORM public.execution_audit_finished(p_tenant_id, p_event_id, v_status, v_outcome, p_actor);
    RETURN jsonb_build_object('status', v_status, 'wake', public.execution_wake_list(p_tenant_id, p_event_id));
END
$$;
--> statement-breakpoint
-- Claims a segment for one send attempt (CAS pending/retryable → sending, or a `sending` row whose
-- lease expired: taken_over, an unknown outcome for the caller), with a new fencing token;
-- reserves the chat's next send slot (p_intervals_ms: per-chat interval by "channel/chatType",
-- shared by every worker; a provider penalty moves it further) and returns the binding's sealed
-- secret. When nothing is claimed, returns the current row (and the secret only for an `unknown`
-- row, which the caller resolves by the binding's policy). No row: the segment does not exist.
CREATE OR REPLACE FUNCTION public.segment_claim(
    p_tenant_id text, p_segment_id text, p_owner text, p_lease_seconds int, p_intervals_ms jsonb
) RETURNS TABLE (
    claimed boolean, taken_over boolean, segment_id text, event_id text, reply_id text, segment_index int,
    segment_count int, content text, channel text, target jsonb, status text, attempts int,
    fencing_token bigint, idempotency_key text, binding_id text, created_at timestamptz, last_error text,
    lease_expires_at timestamptz, wait_ms float8, config jsonb, secret_ref text, key_id text, ciphertext bytea
)
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
#variable_conflict use_column
DECLARE
    o public.reply_outbox;
    v_previous text;
    v_claimed boolean := false;
    v_binding text;
    v_wait float8 := 0;
    v_interval float8;
BEGIN
    PERFORM public.runtime_scope(p_tenant_id);
    -- Locks the claimable row (under concurrency it is re-checked after the lock wait, so only one
    -- claimer gets it) and remembers its status before the update.
    SELECT x.status INTO v_previous FROM public.reply_outbox x
    WHERE x.tenant_id = p_tenant_id AND x.segment_id = p_segment_id
      AND (x.status IN ('pending', 'retryable') OR (x.status = 'sending' AND x.lease_expires_at < now()))
    FOR UPDATE;
    IF FOUND THEN
        UPDATE public.reply_outbox x
        SET status = 'sending', claim_owner = p_owner, claim_token = gen_random_uuid()::text,
            lease_expires_at = now() + make_interval(secs => p_lease_seconds),
            fencing_token = x.fencing_token + 1, attempts = x.attempts + 1
        WHERE x.tenant_id = p_tenant_id AND x.segment_id = p_segment_id
        RETURNING x.* INTO o;
        v_claimed := true;
    ELSE
        SELECT x.* INTO o FROM public.reply_outbox x WHERE x.tenant_id = p_tenant_id AND x.segment_id = p_segment_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    SELECT e.binding_id INTO v_binding FROM public.message_event e
    WHERE e.tenant_id = p_tenant_id AND e.event_id = o.event_id;

    IF v_claimed THEN
        v_interval := coalesce((p_intervals_ms ->> (o.channel || '/' || (o.target ->> 'chatType')))::float8, 1000) / 1000;
        INSERT INTO public.chat_pacing AS c (tenant_id, binding_id, chat_id, next_allowed_at)
        VALUES (p_tenant_id, v_binding, o.target ->> 'chatId', now() + make_interval(secs => v_interval))
        ON CONFLICT (tenant_id, binding_id, chat_id) DO UPDATE
            SET next_allowed_at = greatest(c.next_allowed_at, now()) + make_interval(secs => v_interval)
        RETURNING greatest(0, extract(epoch FROM (c.next_allowed_at - now())) * 1000 - v_interval * 1000)::float8
        INTO v_wait;
    END IF;

    RETURN QUERY
    SELECT v_claimed, v_claimed AND v_previous = 'sending', o.segment_id, o.event_id, o.reply_id,
           o.segment_index, o.segment_count, o.content, o.channel, o.target, o.status, o.attempts,
           o.fencing_token, o.idempotency_key, v_binding, o.created_at, o.last_error, o.lease_expires_at,
           v_wait, s.config, s.secret_ref, s.key_id, s.ciphertext
    FROM (SELECT 1) AS one
    LEFT JOIN LATERAL (
        SELECT b.config, b.secret_ref, v.key_id, v.ciphertext
        FROM public.channel_binding b
        JOIN public.secret sc ON sc.tenant_id = b.tenant_id AND sc.secret_ref = b.secret_ref
        JOIN public.secret_version v ON v.tenant_id = sc.tenant_id AND v.secret_ref = sc.secret_ref
                                    AND v.version = sc.current_version
        WHERE b.tenant_id = p_tenant_id AND b.binding_id = v_binding
          AND (v_claimed OR o.status = 'unknown')
    ) AS s ON true;
END
$$;
--> statement-breakpoint
-- Records a send attempt's outcome, fenced (a stale attempt's result is dropped: ok false). A
-- `possible_duplicate:` note stays on the segment for good (a later error is appended to it), so a
-- duplicate the binding's policy allowed remains visible after the resend succeeds. A provider's
-- retry_after becomes the chat's penalty (no worker sends to it before it ends). With p_finish, a
-- sent last segment also finishes the message in the same transaction (message_finish).
-- Returns jsonb {ok, finished?}.
CREATE OR REPLACE FUNCTION public.segment_record(
    p_tenant_id text, p_segment_id text, p_fencing_token bigint, p_status text,
    p_provider_message_id text, p_error text, p_retry_after_ms int, p_finish boolean, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    o record;
    v_binding text;
    v_penalty interval;
    v_finished jsonb;
BEGIN
    PERFORM public.runtime_scope(p_tenant_id);
    UPDATE public.reply_outbox x
    SET status = p_status,
        provider_message_id = CASE WHEN p_status = 'sent' THEN p_provider_message_id END,
        sent_at = CASE WHEN p_status = 'sent' THEN now() END,
        last_error = CASE
            WHEN p_status = 'sent' THEN
                CASE WHEN x.last_error LIKE 'possible\_duplicate:%' THEN split_part(x.last_error, ' | ', 1) END
            WHEN x.last_error LIKE 'possible\_duplicate:%' THEN split_part(x.last_error, ' | ', 1) || ' | ' || p_error
            ELSE p_error END,
        updated_at = now(),
        next_attempt_at = CASE WHEN p_status = 'retryable'
                               THEN now() + make_interval(secs => coalesce(p_retry_after_ms, 0) / 1000.0) END,
        lease_expires_at = NULL
    WHERE x.tenant_id = p_tenant_id AND x.segment_id = p_segment_id
      AND x.status = 'sending' AND x.fencing_token = p_fencing_token
    RETURNING x.event_id, x.target INTO o;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false);
    END IF;
    -- The receipt above must commit whatever happens below: the penalty and the finish run in
    -- subtransactions, and a failure there (a lock timeout, a cancel, a bug) only loses them. The
    -- workflow then finishes the message itself; a lost penalty leaves the chat's regular pacing.
    IF p_status = 'retryable' AND coalesce(p_retry_after_ms, 0) > 0 THEN
        BEGIN
            SELECT e.binding_id INTO v_binding FROM public.message_event e
            WHERE e.tenant_id = p_tenant_id AND e.event_id = o.event_id;
            v_penalty := make_interval(secs => p_retry_after_ms / 1000.0);
            INSERT INTO public.chat_pacing AS c (tenant_id, binding_id, chat_id, next_allowed_at, penalty_until)
            VALUES (p_tenant_id, v_binding, o.target ->> 'chatId', now() + v_penalty, now() + v_penalty)
            ON CONFLICT (tenant_id, binding_id, chat_id) DO UPDATE
                SET next_allowed_at = greatest(c.next_allowed_at, excluded.next_allowed_at),
                    penalty_until = greatest(c.penalty_until, excluded.penalty_until);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'segment_record: chat penalty not recorded (%)', SQLSTATE;
        END;
    END IF;
    IF p_finish AND p_status = 'sent' THEN
        BEGIN
            v_finished := public.message_finish(p_tenant_id, o.event_id, NULL, NULL, p_actor);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'segment_record: message not finished with the receipt (%)', SQLSTATE;
            v_finished := NULL;
        END;
        RETURN jsonb_build_object('ok', true, 'finished', v_finished);
    END IF;
    RETURN jsonb_build_object('ok', true);
END
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.runtime_scope(text) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.execution_wake_list(text, text) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.execution_audit_finished(text, text, text, text, text) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.execution_mark_started(text, text) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.execution_fail_at_start(text, text, text, text, text) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.execution_start(text, text, text, int) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.execution_commit(text, text, text, int, text, text, text, text, jsonb, boolean) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.message_finish(text, text, text, text, text) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.segment_claim(text, text, text, int, jsonb) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.segment_record(text, text, bigint, text, text, text, int, boolean, text) FROM PUBLIC;
--> statement-breakpoint
-- Called again after the switch to the runtime role (nested calls check EXECUTE as that role).
GRANT EXECUTE ON FUNCTION public.runtime_scope(text) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.execution_wake_list(text, text) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.execution_audit_finished(text, text, text, text, text) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.execution_fail_at_start(text, text, text, text, text) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.execution_mark_started(text, text) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.message_finish(text, text, text, text, text) TO tenant_app_writer;
