-- Hand-written: repair after abnormal workflow ends, and tenant concurrency permits as rows.
--   * execution_permit (0019) gets row-level security, grants, and a trigger that releases a
--     holder's permit in the same transaction as it stops executing (its status moves on from
--     received/running: commit, finish, failure, repair), so a permit never outlives its execution. Permits of running executions
--     are backfilled from the lease-based count they replace.
--   * permit_try_acquire grants a permit in arrival order: a message may take a free permit only
--     when no waiting message of the tenant arrived before it (created_at; waiters carry
--     message_event.permit_requested_at). Used by
--     execution_start (fresh, resumed and repaired executions) and permit_acquire (an execution
--     resuming after an operator's decision); permit_release gives one back while an execution
--     parks on an operator.
--   * execution_start: a message in `execution_reconciling` (moved there by the repair sweeper or
--     an operator, under a new fencing token) resumes from what is durable — the pinned reply is
--     delivered (reply_pending again, the model never runs) or the execution continues (running
--     under a new claim and fence) once it holds a permit.
--   * execution_commit wakes the tenant's permit waiters in arrival order.
--   * message_repair_begin moves a message whose workflow ended abnormally to
--     execution_reconciling under a new fence and a derived workflow id (repair-<n>-<key>), or,
--     past the repair limit, fails it with an `execution` dead letter; with p_reopen it reopens a
--     failed message (an operator's retry of that dead letter), refused while a later message of
--     the session is unfinished (the chat's order).
--   * list_repair_candidates: the sweeper's cross-tenant scan (SECURITY DEFINER, like
--     list_unstarted_message_events).
-- IDEMPOTENT: CREATE OR REPLACE, DROP … IF EXISTS before CREATE, ON CONFLICT DO NOTHING backfill,
-- repeatable grants.
ALTER TABLE public.execution_permit ENABLE ROW LEVEL SECURITY;
--> statement-breakpoint
DROP POLICY IF EXISTS tenant_isolation ON public.execution_permit;
--> statement-breakpoint
CREATE POLICY tenant_isolation ON public.execution_permit
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
--> statement-breakpoint
REVOKE ALL PRIVILEGES ON public.execution_permit FROM PUBLIC;
--> statement-breakpoint
GRANT SELECT, INSERT, DELETE ON public.execution_permit TO tenant_app_writer;
--> statement-breakpoint
-- Operators end or repair executions (the trigger below then releases their permits).
GRANT SELECT, DELETE ON public.execution_permit TO tenant_admin_writer;
--> statement-breakpoint
-- An operator's repair or failure of a message writes its dead letter and wakes the next message.
GRANT EXECUTE ON FUNCTION public.execution_wake_list(text, text) TO tenant_admin_writer;
--> statement-breakpoint
INSERT INTO public.execution_permit (tenant_id, event_id, fencing_token, acquired_at)
SELECT e.tenant_id, e.event_id, e.execution_fencing_token, coalesce(e.execution_heartbeat_at, now())
FROM public.message_event e
JOIN public.tenant t ON t.tenant_id = e.tenant_id
WHERE e.status = 'running' AND e.execution_lease_expires_at > now() AND t.max_concurrent_executions IS NOT NULL
ON CONFLICT DO NOTHING;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.execution_permit_release_trigger() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
BEGIN
    DELETE FROM public.execution_permit WHERE tenant_id = NEW.tenant_id AND event_id = NEW.event_id;
    RETURN NULL;
END
$$;
--> statement-breakpoint
DROP TRIGGER IF EXISTS message_event_permit_release ON public.message_event;
--> statement-breakpoint
CREATE TRIGGER message_event_permit_release
    AFTER UPDATE OF status ON public.message_event
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status NOT IN ('received', 'running'))
    EXECUTE FUNCTION public.execution_permit_release_trigger();
--> statement-breakpoint
-- Takes one of the tenant's permits for this message if it may: it holds one already, or fewer
-- than p_max are held and no waiting message of the tenant arrived before it (arrival order:
-- created_at, event_id; a new arrival never barges past a waiter). Otherwise it joins the waiters
-- (permit_requested_at, when it first asked) and returns false. The caller holds the tenant's
-- permit lock (pg_advisory_xact_lock on 'permits:' || tenant) and the message's row lock, and runs
-- as tenant_app_writer with the tenant set.
CREATE OR REPLACE FUNCTION public.permit_try_acquire(p_tenant_id text, p_event_id text, p_max bigint)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_held bigint;
    v_ahead bigint;
    me record;
BEGIN
    IF EXISTS (SELECT 1 FROM public.execution_permit WHERE tenant_id = p_tenant_id AND event_id = p_event_id) THEN
        RETURN true;
    END IF;
    SELECT created_at, permit_requested_at INTO me FROM public.message_event
    WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
    SELECT count(*) INTO v_held FROM public.execution_permit WHERE tenant_id = p_tenant_id;
    IF v_held < p_max THEN
        SELECT count(*) INTO v_ahead FROM public.message_event w
        WHERE w.tenant_id = p_tenant_id AND w.permit_requested_at IS NOT NULL
          AND (w.created_at, w.event_id) < (me.created_at, p_event_id)
          AND w.status NOT IN ('replied', 'failed');
        IF v_held + v_ahead < p_max THEN
            INSERT INTO public.execution_permit (tenant_id, event_id, fencing_token)
            SELECT tenant_id, event_id, execution_fencing_token FROM public.message_event
            WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
            IF me.permit_requested_at IS NOT NULL THEN
                UPDATE public.message_event SET permit_requested_at = NULL
                WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
            END IF;
            RETURN true;
        END IF;
    END IF;
    IF me.permit_requested_at IS NULL THEN
        UPDATE public.message_event SET permit_requested_at = clock_timestamp()
        WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
    END IF;
    RETURN false;
END
$$;
--> statement-breakpoint
-- The tenant's permit waiters in arrival order (workflow ids, at most p_limit): woken when a
-- permit frees.
CREATE OR REPLACE FUNCTION public.permit_waiters(p_tenant_id text, p_limit int) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, public
AS $$
    SELECT coalesce(jsonb_agg(w.workflow_id ORDER BY w.created_at, w.event_id), '[]'::jsonb) FROM (
        SELECT workflow_id, created_at, event_id FROM public.message_event
        WHERE tenant_id = p_tenant_id AND permit_requested_at IS NOT NULL AND workflow_id IS NOT NULL
          AND status NOT IN ('replied', 'failed')
        ORDER BY created_at, event_id LIMIT p_limit) AS w
$$;
--> statement-breakpoint
-- An execution parks on an operator (a manual tool outcome, an approval): its permit is given
-- back until it resumes (permit_acquire). Returns the waiters to wake. Caller: tenant_app_writer
-- with the tenant set (withTenantTx).
CREATE OR REPLACE FUNCTION public.permit_release(p_tenant_id text, p_event_id text) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
BEGIN
    -- Parked, it is no waiter either (it asks again, in arrival order, when it resumes).
    UPDATE public.message_event SET permit_requested_at = NULL
    WHERE tenant_id = p_tenant_id AND event_id = p_event_id AND permit_requested_at IS NOT NULL;
    DELETE FROM public.execution_permit WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
    IF NOT FOUND THEN
        RETURN '[]'::jsonb;
    END IF;
    RETURN public.permit_waiters(p_tenant_id, 2);
END
$$;
--> statement-breakpoint
-- A running execution resuming after an operator's decision takes a permit again, in arrival
-- order. One statement (switches to the runtime role and tenant itself). Returns jsonb
-- {granted: boolean}; granted when the tenant has no limit or the message is no longer running.
CREATE OR REPLACE FUNCTION public.permit_acquire(p_tenant_id text, p_event_id text) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_status text;
    v_max bigint;
BEGIN
    PERFORM public.runtime_scope(p_tenant_id);
    SELECT status INTO v_status FROM public.message_event
    WHERE tenant_id = p_tenant_id AND event_id = p_event_id FOR UPDATE;
    IF NOT FOUND OR v_status <> 'running' THEN
        RETURN jsonb_build_object('granted', true);
    END IF;
    SELECT max_concurrent_executions INTO v_max FROM public.tenant_runtime_snapshot(p_tenant_id);
    IF v_max IS NULL THEN
        RETURN jsonb_build_object('granted', true);
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('permits:' || p_tenant_id, 0));
    RETURN jsonb_build_object('granted', public.permit_try_acquire(p_tenant_id, p_event_id, v_max));
END
$$;
--> statement-breakpoint
-- received → running, once the message may run: every earlier message of its session finished
-- (per-session FIFO) and the tenant grants a permit (arrival order). Applies the tenant gates and
-- fixes the ExecutionPlan. A message in execution_reconciling (a repair) resumes: its pinned reply
-- is delivered, or its execution continues under a new claim and fence once it holds a permit.
-- Idempotent. Returns jsonb as in 0016; `repaired` is true when this call resumed a repair, and
-- {kind: 'superseded', workflow_id} when p_workflow_id (the calling run's; NULL: not checked) is
-- no longer the message's workflow: a run replaced by a repair (say, reset in the Web UI after it)
-- must not work the message beside the repair run.
DROP FUNCTION IF EXISTS public.execution_start(text, text, text, int);
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.execution_start(
    p_tenant_id text, p_event_id text, p_owner text, p_lease_seconds int, p_workflow_id text
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
BEGIN
    PERFORM public.runtime_scope(p_tenant_id);
    SELECT e.status, e.kind, e.outcome, e.payload, e.execution_plan, e.workflow_started_at, e.reply_id,
           e.workflow_id, a.app_id, a.published_revision,
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
    -- (A message without a recorded workflow id, written by hand rather than by ingress, is not checked.)
    IF p_workflow_id IS NOT NULL AND ev.workflow_id IS NOT NULL AND ev.workflow_id <> p_workflow_id THEN
        RETURN jsonb_build_object('kind', 'superseded', 'workflow_id', ev.workflow_id);
    END IF;
    -- The workflow runs: the start reconciler no longer needs to start this message. Marked by the
    -- transition below when there is one (one write of the row per step), else here.
    IF ev.workflow_started_at IS NULL AND ev.status <> 'received' THEN
        UPDATE public.message_event SET workflow_started_at = now()
        WHERE tenant_id = p_tenant_id AND event_id = p_event_id AND workflow_started_at IS NULL;
    END IF;
    IF ev.status IN ('replied', 'failed') THEN
        -- Finished by an earlier run of this step's workflow task (e.g. its last segment's receipt
        -- before a worker crash): the session's next message must still be woken.
        RETURN jsonb_build_object('kind', 'finished', 'status', ev.status, 'outcome', ev.outcome,
                                  'wake', public.execution_wake_list(p_tenant_id, p_event_id));
    END IF;
    IF ev.status = 'execution_reconciling' AND ev.reply_id IS NOT NULL THEN
        -- A repair of a committed reply: deliver what was pinned, never run the model again.
        UPDATE public.message_event SET status = 'reply_pending', updated_at = now()
        WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
        ev.status := 'reply_pending';
    END IF;
    IF ev.status IN ('running', 'execution_reconciling') THEN
        -- Resumed (a restart, a continue-as-new, a repair): the plan fixed earlier stands; the
        -- execution needs a permit again if it gave its own back (repaired) — not while it is
        -- parked on an operator (it takes one when the decision comes: permit_acquire).
        SELECT * INTO t FROM public.tenant_runtime_snapshot(p_tenant_id);
        IF t.max_concurrent_executions IS NOT NULL THEN
            IF EXISTS (
                SELECT 1 FROM public.tool_invocation i
                WHERE i.tenant_id = p_tenant_id AND i.event_id = p_event_id
                  AND i.status IN ('manual', 'awaiting_approval')
            ) THEN
                -- Parked: it is no waiter (a continue-as-new inside a permit wait may have left one).
                UPDATE public.message_event SET permit_requested_at = NULL
                WHERE tenant_id = p_tenant_id AND event_id = p_event_id AND permit_requested_at IS NOT NULL;
            ELSE
                PERFORM pg_advisory_xact_lock(hashtextextended('permits:' || p_tenant_id, 0));
                IF NOT public.permit_try_acquire(p_tenant_id, p_event_id, t.max_concurrent_executions) THEN
                    RETURN jsonb_build_object('kind', 'wait', 'reason', 'tenant_concurrency');
                END IF;
            END IF;
        END IF;
        IF ev.status = 'execution_reconciling' THEN
            -- Seeds: a running execution always holds an owner, claim, lease and fence.
            UPDATE public.message_event
            SET status = 'running', execution_owner = p_owner, execution_claim_token = gen_random_uuid()::text,
                execution_lease_expires_at = now() + make_interval(secs => p_lease_seconds),
                execution_heartbeat_at = now(), execution_fencing_token = execution_fencing_token + 1,
                execution_attempts = execution_attempts + 1, updated_at = now()
            WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
        END IF;
    END IF;
    IF ev.status <> 'received' THEN
        RETURN jsonb_build_object(
            'kind', 'execute', 'started', false, 'plan', ev.execution_plan, 'outcome', ev.outcome,
            'committed', ev.status IN ('completed', 'reply_pending'), 'permit_limited', true,
            'limits', ev.revision_limits, 'budgeted', true, 'text', ev.payload ->> 'text',
            'repaired', ev.status = 'execution_reconciling',
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
        IF NOT public.permit_try_acquire(p_tenant_id, p_event_id, t.max_concurrent_executions) THEN
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
-- Seeds' commit order (unchanged from 0017); the permit it frees wakes the tenant's permit
-- waiters in arrival order.
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
    -- reply_pending even with nothing to send: the terminal transition (audit entry, session
    -- summary) is message_finish's for every reply, an empty one included.
    v_status := 'reply_pending';
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
        -- The tenant's oldest permit waiters: this execution's permit was released with the status
        -- change above (trigger message_event_permit_release).
        'wake', CASE WHEN p_wake_waiters THEN public.permit_waiters(p_tenant_id, 2) ELSE '[]'::jsonb END);
END
$$;
--> statement-breakpoint
-- A message whose workflow ended abnormally (terminated, failed, timed out, cancelled, lost) is
-- handed to a repair run, in the caller's transaction (the sweeper as tenant_app_writer, an operator
-- as tenant_admin_writer; the tenant set). Under a new fencing token, a message that had started
-- executing moves to execution_reconciling (execution_start resumes it from what is durable); one
-- still `received` stays so. The repair run gets the derived workflow id repair-<n>-<idempotency
-- key>, recorded on the message so wake signals and the sweeper follow it. Past p_max_repairs the
-- message is failed instead, with an `execution` dead letter of class p_reason_class that an
-- operator can retry (p_reopen: a failed message is reopened, refused while a later message of its
-- session is unfinished, which would interleave the chat). p_expected_workflow_id guards against a
-- concurrent repair (NULL: any). Returns jsonb:
--   {kind: 'not_found'} | {kind: 'terminal', status} | {kind: 'changed', workflow_id}
--   {kind: 'later_pending' | 'earlier_pending', event_id, event_seq, status}
--   {kind: 'dead_lettered', dead_letter_id, wake} | {kind: 'repair', workflow_id, repair, status, channel}
CREATE OR REPLACE FUNCTION public.message_repair_begin(
    p_tenant_id text, p_event_id text, p_expected_workflow_id text, p_reason_class text,
    p_max_repairs int, p_reopen boolean
) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    ev record;
    v_later record;
    v_status text;
    v_workflow text;
    v_dead_letter text;
BEGIN
    SELECT e.status, e.workflow_id, e.idempotency_key, e.repair_count, e.reply_id, e.execution_plan,
           e.session_id, e.event_seq, b.channel
    INTO ev
    FROM public.message_event e
    JOIN public.channel_binding b ON b.tenant_id = e.tenant_id AND b.binding_id = e.binding_id
    WHERE e.tenant_id = p_tenant_id AND e.event_id = p_event_id
    FOR UPDATE OF e;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('kind', 'not_found');
    END IF;
    IF (NOT p_reopen AND ev.status IN ('replied', 'failed')) OR (p_reopen AND ev.status <> 'failed') THEN
        RETURN jsonb_build_object('kind', 'terminal', 'status', ev.status);
    END IF;
    IF p_expected_workflow_id IS NOT NULL AND ev.workflow_id IS DISTINCT FROM p_expected_workflow_id THEN
        RETURN jsonb_build_object('kind', 'changed', 'workflow_id', ev.workflow_id);
    END IF;
    IF p_reopen THEN
        -- One retry per session at a time: two concurrent retries of one chat would each see the
        -- other still failed (this row lock is the only one held).
        PERFORM pg_advisory_xact_lock(hashtextextended('session:' || p_tenant_id || ':' || ev.session_id, 0));
        SELECT n.event_id, n.event_seq, n.status INTO v_later FROM public.message_event n
        WHERE n.tenant_id = p_tenant_id AND n.session_id = ev.session_id AND n.event_seq > ev.event_seq
          AND n.status NOT IN ('replied', 'failed')
        ORDER BY n.event_seq LIMIT 1;
        IF FOUND THEN
            RETURN jsonb_build_object('kind', 'later_pending', 'event_id', v_later.event_id,
                                      'event_seq', v_later.event_seq, 'status', v_later.status);
        END IF;
        -- An earlier message reopened too (another retry) would race this one to the chat.
        SELECT n.event_id, n.event_seq, n.status INTO v_later FROM public.message_event n
        WHERE n.tenant_id = p_tenant_id AND n.session_id = ev.session_id AND n.event_seq < ev.event_seq
          AND n.status NOT IN ('replied', 'failed')
        ORDER BY n.event_seq LIMIT 1;
        IF FOUND THEN
            RETURN jsonb_build_object('kind', 'earlier_pending', 'event_id', v_later.event_id,
                                      'event_seq', v_later.event_seq, 'status', v_later.status);
        END IF;
    ELSIF ev.repair_count >= p_max_repairs THEN
        v_dead_letter := 'dl_' || substr(p_event_id, 5) || '_repair_' || ev.repair_count;
        UPDATE public.message_event
        SET status = 'failed', outcome = coalesce(outcome, p_reason_class),
            failure_reason = 'workflow ended abnormally (' || p_reason_class || ') after '
                             || ev.repair_count || ' repair runs',
            execution_fencing_token = execution_fencing_token + 1, permit_requested_at = NULL,
            updated_at = now()
        WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
        INSERT INTO public.dead_letter (tenant_id, dead_letter_id, event_id, kind, reason_class, detail)
        VALUES (p_tenant_id, v_dead_letter, p_event_id, 'execution', p_reason_class,
                jsonb_build_object('workflow_id', ev.workflow_id, 'repairs', ev.repair_count,
                                   'status', ev.status))
        ON CONFLICT (tenant_id, dead_letter_id) DO NOTHING;
        RETURN jsonb_build_object('kind', 'dead_lettered', 'dead_letter_id', v_dead_letter,
                                  'wake', public.execution_wake_list(p_tenant_id, p_event_id));
    END IF;
    -- Nothing executed yet (never claimed): it starts over as received; anything else reconciles.
    v_status := CASE
        WHEN ev.status = 'received' THEN 'received'
        WHEN p_reopen AND ev.execution_plan IS NULL AND ev.reply_id IS NULL THEN 'received'
        ELSE 'execution_reconciling' END;
    v_workflow := 'repair-' || (ev.repair_count + 1) || '-' || ev.idempotency_key;
    UPDATE public.message_event
    SET status = v_status, workflow_id = v_workflow, repair_count = repair_count + 1,
        execution_fencing_token = execution_fencing_token + 1,
        outcome = CASE WHEN p_reopen THEN NULL ELSE outcome END,
        failure_reason = CASE WHEN p_reopen THEN NULL ELSE failure_reason END,
        sweep_checked_at = NULL, updated_at = now()
    WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
    RETURN jsonb_build_object('kind', 'repair', 'workflow_id', v_workflow, 'repair', ev.repair_count + 1,
                              'status', v_status, 'channel', ev.channel);
END
$$;
--> statement-breakpoint
-- The repair sweeper's cross-tenant scan (it runs before any tenant is known, like the start
-- reconciler's list_unstarted_message_events): unfinished messages whose workflow may be gone.
--   * recorded and never started, older than p_unstarted_seconds (the webhook starts them itself);
--   * the head of its session (nothing earlier unfinished: only a head can block its chat) that
--     has not changed, nor been found alive by the sweeper, for p_stale_seconds.
-- Oldest check first, at most p_limit; p_tenant_ids (NULL: all) scopes a pass to some tenants.
CREATE OR REPLACE FUNCTION public.list_repair_candidates(
    p_unstarted_seconds int, p_stale_seconds int, p_limit int, p_tenant_ids text[]
) RETURNS TABLE (
    tenant_id text, event_id text, workflow_id text, status text, channel text, created_at timestamptz,
    started boolean, repair_count int, lease_expired_s float8
)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    SELECT e.tenant_id, e.event_id, e.workflow_id, e.status, b.channel, e.created_at,
           e.workflow_started_at IS NOT NULL, e.repair_count,
           extract(epoch FROM now() - e.execution_lease_expires_at)::float8
    FROM public.message_event AS e
    JOIN public.channel_binding AS b ON b.tenant_id = e.tenant_id AND b.binding_id = e.binding_id
    WHERE e.status NOT IN ('replied', 'failed')
      AND (p_tenant_ids IS NULL OR e.tenant_id = ANY (p_tenant_ids))
      AND (
        (e.status = 'received' AND e.workflow_started_at IS NULL
         AND e.created_at < now() - make_interval(secs => p_unstarted_seconds))
        OR (coalesce(e.sweep_checked_at, e.updated_at) < now() - make_interval(secs => p_stale_seconds)
            AND NOT EXISTS (
                SELECT 1 FROM public.message_event AS p
                WHERE p.tenant_id = e.tenant_id AND p.session_id = e.session_id AND p.event_seq < e.event_seq
                  AND p.status NOT IN ('replied', 'failed')))
      )
    ORDER BY coalesce(e.sweep_checked_at, e.created_at)
    LIMIT LEAST(GREATEST(p_limit, 1), 1000);
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.execution_permit_release_trigger() FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.permit_try_acquire(text, text, bigint) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.permit_waiters(text, int) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.permit_release(text, text) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.permit_acquire(text, text) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.message_repair_begin(text, text, text, text, int, boolean) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.list_repair_candidates(int, int, int, text[]) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.execution_start(text, text, text, int, text) FROM PUBLIC;
--> statement-breakpoint
-- Nested calls after runtime_scope's switch, and withTenantTx callers, run as tenant_app_writer.
GRANT EXECUTE ON FUNCTION public.execution_permit_release_trigger() TO tenant_app_writer, tenant_admin_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.permit_try_acquire(text, text, bigint) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.permit_waiters(text, int) TO tenant_app_writer, tenant_admin_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.permit_release(text, text) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.message_repair_begin(text, text, text, text, int, boolean) TO tenant_app_writer, tenant_admin_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.list_repair_candidates(int, int, int, text[]) TO tenant_app_writer;
