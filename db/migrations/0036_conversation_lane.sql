-- Hand-written: the double-texting policy of a revision (`conversation`, issue #15), decided in the
-- session lane's step functions, so it holds across worker crashes, repairs and lost signals.
--   * enqueue (default): one turn per message, FIFO — execution_start as before.
--   * collect: when a message's turn starts (execution_start, received → running), the session's
--     later waiting text messages (up to the first one that is not mergeable: media or non-text,
--     conversation_mergeable; it keeps a turn of its own) are merged into it
--     (conversation_merge_later: merged_into = the turn's event, set on the turn's event too) in the
--     same transaction; with debounce_ms the head waits until the session has been quiet that long.
--     The model sees the merged texts in order (conversation_turn_text); one reply answers them.
--   * interrupt: as collect, and a message that arrives while a turn runs stops that turn before its
--     commit unless a side-effecting tool call was made in it (conversation_side_effects):
--     conversation_absorb merges it into the running turn, and execution_commit refuses the commit
--     (kind `interrupted`) while such a message waits, so the turn runs again with it. The waiting
--     message's start returns the running turn's workflow as an `interrupt` hint (a signal: the
--     turn absorbs, and cancels its model call only if something joined) when the message could
--     join; correctness never depends on that signal.
--   * reject: a text message that arrives while an earlier message of its session executes (running
--     or reconciling, not itself a busy reply) is decided once, here: running with outcome
--     `busy_rejected`, no plan and no permit; its reply is the revision's fixed busy reply. It is
--     no exchange of the conversation: no memory entry, no move of the session summary
--     (message_finish, redefined here), not in the model's history (sessionHistory).
--   * A merged message has no reply of its own: when its turn's event ends (replied or failed), the
--     trigger conversation_finish_merged ends every message merged into it the same way, in the same
--     transaction (the pinned-reply check exempts them since 0031_conversation_policy); a failed
--     turn reopened by an operator that then ends replied replies its failed merged messages too.
-- execution_start and execution_commit keep their signatures and, with the default policy (every
-- revision before 0031), their behaviour: nothing is merged, nothing interrupted or rejected.
-- IDEMPOTENT: CREATE OR REPLACE, DROP TRIGGER IF EXISTS before CREATE TRIGGER, repeatable grants.

-- The texts a turn answers, oldest first, one per line: the merged messages, else the message's own.
CREATE OR REPLACE FUNCTION public.conversation_turn_text(p_tenant_id text, p_event_id text) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, public
AS $$
    SELECT coalesce(
        (SELECT string_agg(coalesce(m.payload ->> 'text', ''), E'\n' ORDER BY m.event_seq)
         FROM public.message_event m WHERE m.tenant_id = p_tenant_id AND m.merged_into = p_event_id),
        (SELECT e.payload ->> 'text' FROM public.message_event e
         WHERE e.tenant_id = p_tenant_id AND e.event_id = p_event_id))
$$;
--> statement-breakpoint
-- Whether the execution made (or durably prepared) a call of a side-effecting tool of its pinned
-- revision: such a turn is never interrupted.
CREATE OR REPLACE FUNCTION public.conversation_side_effects(p_tenant_id text, p_event_id text) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, public
AS $$
    SELECT EXISTS (
        SELECT 1 FROM public.tool_invocation i
        JOIN public.message_event e ON e.tenant_id = i.tenant_id AND e.event_id = i.event_id
        JOIN public.agent_app_revision r
          ON r.tenant_id = e.tenant_id AND r.app_id = e.execution_plan -> 'app' ->> 'id'
         AND r.revision = (e.execution_plan -> 'app' ->> 'revision')::int
        CROSS JOIN LATERAL jsonb_array_elements(r.tools) AS d(def)
        WHERE i.tenant_id = p_tenant_id AND i.event_id = p_event_id AND i.status <> 'refused'
          AND d.def ->> 'name' = i.tool_name AND coalesce((d.def ->> 'side_effect')::boolean, true))
$$;
--> statement-breakpoint
-- Whether a waiting message may join another message's turn: a text without media. A media message
-- (kind 'text' with payload.media, recorded by ingress) keeps a turn of its own, since a turn fetches
-- only its own event's attachments (activities/model.ts); so does anything not executed as text.
CREATE OR REPLACE FUNCTION public.conversation_mergeable(p_kind text, p_payload jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, public
AS $$
    SELECT p_kind = 'text' AND (jsonb_typeof(p_payload -> 'media') IS DISTINCT FROM 'array'
                                OR jsonb_array_length(p_payload -> 'media') = 0)
$$;
--> statement-breakpoint
-- Merges the session's later waiting text messages (received, not merged, before the first
-- waiting message that is not mergeable — a media or non-text one: that one keeps its place and
-- its own turn, and so does everything after it) into p_event_id's turn. Returns
-- {merged: n, wake: [their workflow ids]}. Caller: tenant_app_writer with the tenant set, holding
-- p_event_id's row lock.
CREATE OR REPLACE FUNCTION public.conversation_merge_later(p_tenant_id text, p_event_id text) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    me record;
    v_stop bigint;
    v_n int;
    v_wake jsonb;
BEGIN
    SELECT session_id, event_seq INTO me FROM public.message_event
    WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
    SELECT min(n.event_seq) INTO v_stop FROM public.message_event n
    WHERE n.tenant_id = p_tenant_id AND n.session_id = me.session_id AND n.event_seq > me.event_seq
      AND n.status = 'received' AND n.merged_into IS NULL
      AND NOT public.conversation_mergeable(n.kind, n.payload);
    WITH merged AS (
        UPDATE public.message_event n
        SET merged_into = p_event_id, workflow_started_at = coalesce(n.workflow_started_at, now()),
            updated_at = now()
        WHERE n.tenant_id = p_tenant_id AND n.session_id = me.session_id AND n.event_seq > me.event_seq
          AND n.status = 'received' AND n.merged_into IS NULL
          AND public.conversation_mergeable(n.kind, n.payload)
          AND (v_stop IS NULL OR n.event_seq < v_stop)
        RETURNING n.workflow_id
    )
    SELECT count(*), coalesce(jsonb_agg(workflow_id) FILTER (WHERE workflow_id IS NOT NULL), '[]'::jsonb)
    INTO v_n, v_wake FROM merged;
    IF v_n > 0 THEN
        UPDATE public.message_event SET merged_into = p_event_id
        WHERE tenant_id = p_tenant_id AND event_id = p_event_id AND merged_into IS NULL;
    END IF;
    RETURN jsonb_build_object('merged', v_n, 'wake', v_wake);
END
$$;
--> statement-breakpoint
-- Policy interrupt: the running execution takes in the messages that arrived during its turn, if
-- its pinned revision says interrupt and it made no side-effecting tool call. One statement (the
-- worker calls it after cancelling a model call; execution_commit calls it before committing).
-- Returns {merged: n, wake}.
CREATE OR REPLACE FUNCTION public.conversation_absorb(p_tenant_id text, p_event_id text) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    ev record;
BEGIN
    PERFORM public.runtime_scope(p_tenant_id);
    SELECT e.status, e.merged_into, e.outcome, r.conversation INTO ev
    FROM public.message_event e
    LEFT JOIN public.agent_app_revision r
      ON r.tenant_id = e.tenant_id AND r.app_id = e.execution_plan -> 'app' ->> 'id'
     AND r.revision = (e.execution_plan -> 'app' ->> 'revision')::int
    WHERE e.tenant_id = p_tenant_id AND e.event_id = p_event_id
    FOR UPDATE OF e;
    IF NOT FOUND OR ev.status <> 'running' OR ev.outcome IS NOT NULL
       OR coalesce(ev.conversation ->> 'policy', 'enqueue') <> 'interrupt'
       OR (ev.merged_into IS NOT NULL AND ev.merged_into <> p_event_id)
       OR public.conversation_side_effects(p_tenant_id, p_event_id) THEN
        RETURN jsonb_build_object('merged', 0, 'wake', '[]'::jsonb);
    END IF;
    RETURN public.conversation_merge_later(p_tenant_id, p_event_id);
END
$$;
--> statement-breakpoint
-- A merged turn's event ended: every unfinished message merged into it ends the same way. Audited
-- per message on the worker's paths; an operator's action audits itself. A reopened turn (an
-- operator's DLQ retry, a repair with reopen) that ends replied also answers the merged messages
-- its failure had failed: they are replied with it (the retried reply answers all of them).
CREATE OR REPLACE FUNCTION public.conversation_finish_merged() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    m record;
BEGIN
    FOR m IN
        UPDATE public.message_event n
        SET status = NEW.status,
            outcome = CASE WHEN NEW.status = 'failed' THEN coalesce(NEW.outcome, n.outcome) ELSE NEW.outcome END,
            failure_reason = CASE WHEN NEW.status = 'failed' THEN NEW.failure_reason END,
            updated_at = now()
        WHERE n.tenant_id = NEW.tenant_id AND n.merged_into = NEW.event_id AND n.event_id <> NEW.event_id
          AND (n.status NOT IN ('replied', 'failed') OR (NEW.status = 'replied' AND n.status = 'failed'))
        RETURNING n.event_id
    LOOP
        IF current_user = 'tenant_app_writer' THEN
            PERFORM public.execution_audit_finished(NEW.tenant_id, m.event_id, NEW.status,
                                                    coalesce(NEW.outcome, 'merged'), 'merged:' || NEW.event_id);
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
--> statement-breakpoint
DROP TRIGGER IF EXISTS message_event_finish_merged ON public.message_event;
--> statement-breakpoint
CREATE TRIGGER message_event_finish_merged
    AFTER UPDATE OF status ON public.message_event
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN ('replied', 'failed')
          AND NEW.merged_into = NEW.event_id)
    EXECUTE FUNCTION public.conversation_finish_merged();
--> statement-breakpoint
-- received → running (0020), with the revision's conversation policy (see the header). Returns
-- jsonb as in 0020, plus: {kind: 'merged', into, status}; {kind: 'wait', reason: 'debounce',
-- retry_after_ms}; `interrupt` (workflow ids) on a session_order wait; and on execute `text` (the
-- turn's texts), `conversation`, `busy_reply`, `wake` (merged messages' runs).
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
    v_conversation jsonb;
    v_policy text;
    v_debounce_ms int;
    v_remaining_ms int;
    v_head record;
    v_merge jsonb := '{"merged": 0, "wake": []}'::jsonb;
BEGIN
    PERFORM public.runtime_scope(p_tenant_id);
    SELECT e.status, e.kind, e.outcome, e.payload, e.execution_plan, e.workflow_started_at, e.reply_id,
           e.workflow_id, e.merged_into, e.session_id, e.event_seq, a.app_id, a.published_revision,
           r.conversation AS revision_conversation, pinned.conversation AS pinned_conversation,
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
    IF ev.merged_into IS NOT NULL AND ev.merged_into <> p_event_id THEN
        -- Answered by another message's turn (collect / interrupt): it ends with that message
        -- (conversation_finish_merged), so this run has nothing to do.
        RETURN jsonb_build_object('kind', 'merged', 'into', ev.merged_into, 'status', ev.status);
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
        -- A busy reply (policy reject) runs beside the turn it answers for and takes no permit.
        IF t.max_concurrent_executions IS NOT NULL AND ev.outcome IS DISTINCT FROM 'busy_rejected' THEN
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
            'limits', ev.revision_limits, 'budgeted', true,
            'text', public.conversation_turn_text(p_tenant_id, p_event_id),
            'conversation', coalesce(ev.pinned_conversation, ev.revision_conversation),
            'busy_reply', coalesce(ev.pinned_conversation, ev.revision_conversation) ->> 'busy_reply',
            'repaired', ev.status = 'execution_reconciling',
            'scripted', CASE WHEN ev.execution_plan -> 'modelProfile' ->> 'provider' = 'scripted'
                             THEN ev.pinned_scripted END);
    END IF;
    -- The published revision's double-texting policy decides what a message does while its session
    -- is busy (0031): enqueue (wait), reject (a busy reply now), collect / interrupt (wait, then
    -- merged into the next turn; interrupt also asks the running turn to stop).
    v_conversation := coalesce(ev.revision_conversation, '{}'::jsonb);
    v_policy := coalesce(v_conversation ->> 'policy', 'enqueue');
    SELECT p.event_id, p.event_seq, p.status, p.outcome, p.workflow_id INTO v_head FROM public.message_event p
    WHERE p.tenant_id = p_tenant_id AND p.session_id = ev.session_id AND p.event_seq < ev.event_seq
      AND p.status NOT IN ('replied', 'failed')
    ORDER BY p.event_seq LIMIT 1;
    IF FOUND THEN
        IF v_policy = 'reject' AND ev.kind = 'text' AND EXISTS (
            SELECT 1 FROM public.message_event p
            WHERE p.tenant_id = p_tenant_id AND p.session_id = ev.session_id AND p.event_seq < ev.event_seq
              AND p.status IN ('running', 'execution_reconciling')
              AND p.outcome IS DISTINCT FROM 'busy_rejected'
        ) THEN
            SELECT * INTO t FROM public.tenant_runtime_snapshot(p_tenant_id);
            IF FOUND AND t.status = 'active' THEN
                -- Decided here, once: the message runs now (no plan, no permit) and its reply is the
                -- fixed busy reply (committed by the caller with outcome busy_rejected).
                UPDATE public.message_event
                SET status = 'running', outcome = 'busy_rejected',
                    workflow_started_at = coalesce(workflow_started_at, now()),
                    execution_owner = p_owner, execution_claim_token = gen_random_uuid()::text,
                    execution_lease_expires_at = now() + make_interval(secs => p_lease_seconds),
                    execution_heartbeat_at = now(), execution_fencing_token = execution_fencing_token + 1,
                    execution_attempts = execution_attempts + 1, updated_at = now()
                WHERE tenant_id = p_tenant_id AND event_id = p_event_id AND status = 'received';
                RETURN jsonb_build_object(
                    'kind', 'execute', 'started', true, 'plan', NULL, 'outcome', 'busy_rejected',
                    'committed', false, 'permit_limited', false, 'limits', NULL, 'budgeted', false,
                    'text', ev.payload ->> 'text', 'scripted', NULL, 'conversation', v_conversation,
                    'busy_reply', v_conversation ->> 'busy_reply');
            END IF;
        END IF;
        PERFORM public.execution_mark_started(p_tenant_id, p_event_id);
        IF v_policy = 'interrupt' AND v_head.status = 'running' AND v_head.outcome IS NULL
           AND v_head.workflow_id IS NOT NULL AND ev.merged_into IS NULL
           AND public.conversation_mergeable(ev.kind, ev.payload)
           AND NOT EXISTS (
               SELECT 1 FROM public.message_event n
               WHERE n.tenant_id = p_tenant_id AND n.session_id = ev.session_id
                 AND n.event_seq > v_head.event_seq AND n.event_seq < ev.event_seq
                 AND n.status = 'received' AND n.merged_into IS NULL
                 AND NOT public.conversation_mergeable(n.kind, n.payload))
           AND NOT public.conversation_side_effects(p_tenant_id, v_head.event_id) THEN
            -- A hint for the running turn to stop early, only when conversation_absorb would take
            -- this message in (a mergeable text, nothing unmergeable waiting before it): a hint
            -- for a message that cannot join would stop the turn for nothing. conversation_absorb
            -- decides (and the turn's commit refuses while this message waits, whether or not the
            -- hint arrives).
            RETURN jsonb_build_object('kind', 'wait', 'reason', 'session_order',
                                      'interrupt', jsonb_build_array(v_head.workflow_id));
        END IF;
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
    -- Debounce (collect / interrupt): the turn starts once the session has been quiet for
    -- debounce_ms since its latest waiting message; asked again after the time left (no permit held).
    v_debounce_ms := CASE WHEN v_policy IN ('collect', 'interrupt') AND t.status = 'active'
                          THEN coalesce((v_conversation ->> 'debounce_ms')::int, 0) ELSE 0 END;
    IF v_debounce_ms > 0 THEN
        SELECT ceil(extract(epoch FROM (max(n.created_at) + make_interval(secs => v_debounce_ms / 1000.0)
                                        - clock_timestamp())) * 1000)::int
        INTO v_remaining_ms
        FROM public.message_event n
        WHERE n.tenant_id = p_tenant_id AND n.session_id = ev.session_id AND n.event_seq >= ev.event_seq
          AND n.status = 'received' AND n.merged_into IS NULL;
        IF v_remaining_ms > 0 THEN
            PERFORM public.execution_mark_started(p_tenant_id, p_event_id);
            RETURN jsonb_build_object('kind', 'wait', 'reason', 'debounce', 'retry_after_ms', v_remaining_ms);
        END IF;
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
    -- Collect / interrupt: the session's waiting messages join this turn (in order); their runs
    -- are woken to see it and stop.
    IF v_plan IS NOT NULL AND v_policy IN ('collect', 'interrupt') THEN
        v_merge := public.conversation_merge_later(p_tenant_id, p_event_id);
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
        'text', public.conversation_turn_text(p_tenant_id, p_event_id),
        'conversation', CASE WHEN v_plan IS NULL THEN NULL ELSE v_conversation END,
        'wake', v_merge -> 'wake',
        'scripted', CASE WHEN ev.model_profile_provider = 'scripted' AND v_plan IS NOT NULL
                         THEN ev.revision_scripted END);
END
$$;
--> statement-breakpoint
-- The commit (0020), refused with {kind: 'interrupted', status, wake} when policy interrupt takes a
-- message into the running turn (see the header); the turn's user memory is its merged texts.
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
    v_absorb jsonb;
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
    -- Policy interrupt (0036): a message that arrived during this turn stops it before its commit,
    -- unless a side-effecting tool call was made in it (then it waits for the next turn, as with
    -- collect). It joins the turn, nothing is committed, and the caller runs the turn again with it.
    -- Fallback replies (an outcome) are never interrupted.
    IF p_outcome IS NULL THEN
        v_absorb := public.conversation_absorb(p_tenant_id, p_event_id);
        IF (v_absorb ->> 'merged')::int > 0 THEN
            RETURN jsonb_build_object('kind', 'interrupted', 'status', f.status, 'wake', v_absorb -> 'wake');
        END IF;
    END IF;

    -- Seeds: memory before the reply, with its source event. A busy reply (policy reject) is no
    -- exchange of the conversation: it writes no memory (nor, in message_finish, the summary).
    INSERT INTO public.memory_entry (tenant_id, memory_id, user_id, session_id, source_event_id, role,
                                     content, content_digest)
    SELECT p_tenant_id, 'mem_' || substr(p_event_id, 5) || '_' || m.suffix, f.payload ->> 'senderId',
           f.session_id, p_event_id, m.role, m.content, encode(sha256(convert_to(m.content, 'UTF8')), 'hex')
    FROM (VALUES ('user', coalesce(public.conversation_turn_text(p_tenant_id, p_event_id), ''), 'u'),
                 ('assistant', p_text, 'a'))
         AS m(role, content, suffix)
    WHERE length(m.content) > 0 AND f.outcome IS DISTINCT FROM 'busy_rejected'
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
-- message_finish (0025), except that a busy reply's finish (outcome busy_rejected) leaves the
-- session summary alone: the busy reply finishes before the turn it answers for, and the summary's
-- base_event_seq CAS would then refuse that turn. Otherwise unchanged.
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
        RETURN jsonb_build_object('status', cur.status, 'outcome', cur.outcome,
                                  'wake', public.execution_wake_list(p_tenant_id, p_event_id));
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
    -- A busy reply (policy reject, 0036) is no exchange of the conversation: it finishes before
    -- the turn it answered for, so moving the summary's base past that turn would drop the turn.
    IF v_status = 'replied' AND cur.outcome IS DISTINCT FROM 'busy_rejected' THEN
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
    -- Last: the audit entry (enqueued, sealed later: 0030; it takes no chain lock).
    PERFORM public.execution_audit_finished(p_tenant_id, p_event_id, v_status, v_outcome, p_actor);
    RETURN jsonb_build_object('status', v_status, 'outcome', v_outcome,
                              'wake', public.execution_wake_list(p_tenant_id, p_event_id));
END
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.conversation_mergeable(text, jsonb) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.conversation_turn_text(text, text) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.conversation_side_effects(text, text) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.conversation_merge_later(text, text) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.conversation_absorb(text, text) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.conversation_finish_merged() FROM PUBLIC;
--> statement-breakpoint
-- Called by the worker (conversation_absorb) and nested inside the step functions after their
-- switch to tenant_app_writer; the trigger also fires under tenant_admin_writer (an operator's fail).
GRANT EXECUTE ON FUNCTION public.conversation_mergeable(text, jsonb) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.conversation_turn_text(text, text) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.conversation_side_effects(text, text) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.conversation_merge_later(text, text) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.conversation_absorb(text, text) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.conversation_finish_merged() TO tenant_app_writer, tenant_admin_writer;
--> statement-breakpoint
SELECT switchyard_claim_ownership();
