-- Hand-written: fixes to the step functions of 0015 found in review.
--   * segment_claim takes the caller's longest acceptable pacing wait (p_max_wait_ms; NULL: any).
--     The quick first send attempt (a local activity, holding a workflow task open) passes a short
--     one: when the chat's next slot is further away it claims nothing and reserves no slot, so
--     the regular attempt that follows reserves the chat's only slot (before, both reserved one
--     and every give-up pushed the chat's later sends back by one interval).
--   * execution_start returns the session's next message to wake when it finds the message
--     already finished (a workflow task re-run after its last segment's receipt finished it).
-- IDEMPOTENT: DROP … IF EXISTS of the old signature, CREATE OR REPLACE, repeatable grants.
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
        -- Finished by an earlier run of this step's workflow task (e.g. its last segment's receipt
        -- before a worker crash): the session's next message must still be woken.
        RETURN jsonb_build_object('kind', 'finished', 'status', ev.status, 'outcome', ev.outcome,
                                  'wake', public.execution_wake_list(p_tenant_id, p_event_id));
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
DROP FUNCTION IF EXISTS public.segment_claim(text, text, text, int, jsonb);
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.segment_claim(
    p_tenant_id text, p_segment_id text, p_owner text, p_lease_seconds int, p_intervals_ms jsonb,
    p_max_wait_ms int
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
    SELECT x.* INTO o FROM public.reply_outbox x
    WHERE x.tenant_id = p_tenant_id AND x.segment_id = p_segment_id
      AND (x.status IN ('pending', 'retryable') OR (x.status = 'sending' AND x.lease_expires_at < now()))
    FOR UPDATE;
    IF FOUND THEN
        v_previous := o.status;
        SELECT e.binding_id INTO v_binding FROM public.message_event e
        WHERE e.tenant_id = p_tenant_id AND e.event_id = o.event_id;
        IF p_max_wait_ms IS NOT NULL THEN
            -- A caller that will not wait this long (the quick first attempt) takes nothing: no
            -- claim, no reserved slot; it gets the wait and leaves the segment to the regular attempt.
            SELECT greatest(0, extract(epoch FROM (c.next_allowed_at - now())) * 1000)::float8 INTO v_wait
            FROM public.chat_pacing c
            WHERE c.tenant_id = p_tenant_id AND c.binding_id = v_binding AND c.chat_id = o.target ->> 'chatId';
            v_wait := coalesce(v_wait, 0);
        END IF;
        IF p_max_wait_ms IS NULL OR v_wait <= p_max_wait_ms THEN
            UPDATE public.reply_outbox x
            SET status = 'sending', claim_owner = p_owner, claim_token = gen_random_uuid()::text,
                lease_expires_at = now() + make_interval(secs => p_lease_seconds),
                fencing_token = x.fencing_token + 1, attempts = x.attempts + 1
            WHERE x.tenant_id = p_tenant_id AND x.segment_id = p_segment_id
            RETURNING x.* INTO o;
            v_claimed := true;
        END IF;
    ELSE
        SELECT x.* INTO o FROM public.reply_outbox x WHERE x.tenant_id = p_tenant_id AND x.segment_id = p_segment_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        SELECT e.binding_id INTO v_binding FROM public.message_event e
        WHERE e.tenant_id = p_tenant_id AND e.event_id = o.event_id;
    END IF;

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
REVOKE ALL ON FUNCTION public.segment_claim(text, text, text, int, jsonb, int) FROM PUBLIC;
