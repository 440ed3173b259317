-- Hand-written: record_inbound_message (0042) with its opportunistic prune of old rate-limit
-- windows made lock-free. Ingress now records concurrent webhooks in one statement (group commit,
-- api/ingress/record-batcher.ts): a batch holds its rows' session locks until it commits, and the
-- prune (about one call in 64) may run at any row of it, for any tenant in it. A DELETE that waited
-- for old windows another transaction holds — housekeeping's prune (0025), or a batch on the other
-- side of a minute boundary that pruned the same tenant — could then close a cycle with the session
-- locks. Now the prune takes only the old windows no one holds (FOR UPDATE SKIP LOCKED) and never
-- waits; what it skips is pruned by a later call or by housekeeping. Everything else is 0042's,
-- unchanged (same signature, SECURITY INVOKER, grants and ownership kept by CREATE OR REPLACE).
-- IDEMPOTENT: CREATE OR REPLACE with an unchanged signature; REVOKE is repeatable.
CREATE OR REPLACE FUNCTION public.record_inbound_message(
    p_tenant_id TEXT,
    p_binding_id TEXT,
    p_app_id TEXT,
    p_session_id TEXT,
    p_session_kind TEXT,
    p_external_user_id TEXT,
    p_external_chat_id TEXT,
    p_external_thread_id TEXT,
    p_identity_key TEXT,
    p_event_id TEXT,
    p_external_message_id TEXT,
    p_idempotency_key TEXT,
    p_workflow_id TEXT,
    p_kind TEXT,
    p_payload JSONB,
    p_payload_digest TEXT,
    p_outcome TEXT,
    p_request_id TEXT,
    p_trace_id TEXT,
    p_rate_limit_rpm BIGINT
)
RETURNS TABLE (kind TEXT, event_id TEXT, status TEXT)
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
AS $$
#variable_conflict use_column
DECLARE
    v_count BIGINT;
    v_limited BOOLEAN := false;
    v_event_id TEXT;
    v_status TEXT;
    v_found_status TEXT;
    v_session_id TEXT;
    v_duplicate BOOLEAN := false;
BEGIN
    PERFORM pg_catalog.set_config('role', 'tenant_app_writer', true), pg_catalog.set_config('app.tenant_id', p_tenant_id, true);

    IF p_rate_limit_rpm IS NOT NULL THEN
        INSERT INTO public.rate_limit_window AS w (tenant_id, window_start, count)
        VALUES (p_tenant_id, pg_catalog.date_trunc('minute', pg_catalog.now()), 1)
        ON CONFLICT (tenant_id, window_start) DO UPDATE SET count = w.count + 1
        RETURNING w.count INTO v_count;
        -- Old windows are never read again; about one call in 64 clears this tenant's, skipping
        -- any another transaction holds (0045: never a lock wait, so never a deadlock).
        IF pg_catalog.random() < 1.0 / 64 THEN
            DELETE FROM public.rate_limit_window AS w
            WHERE w.ctid = ANY (ARRAY(
                SELECT o.ctid FROM public.rate_limit_window AS o
                WHERE o.tenant_id = p_tenant_id AND o.window_start < pg_catalog.now() - interval '10 minutes'
                FOR UPDATE SKIP LOCKED));
        END IF;
        v_limited := v_count > p_rate_limit_rpm;
    END IF;
    v_status := CASE WHEN v_limited THEN 'failed' ELSE 'received' END;

    -- One statement: a committed duplicate leaves the session alone; otherwise the session's next
    -- event_seq (the UPDATE waits for a concurrent writer of the session to commit, then bumps the
    -- row it committed) and the message under it. No session row: both come back empty.
    WITH dup AS (
        SELECT e.event_id, e.status FROM public.message_event AS e
        WHERE e.tenant_id = p_tenant_id AND e.binding_id = p_binding_id
          AND e.external_message_id = p_external_message_id
    ), s AS (
        UPDATE public.session AS se SET last_event_seq = se.last_event_seq + 1, updated_at = pg_catalog.now()
        WHERE se.tenant_id = p_tenant_id AND se.binding_id = p_binding_id AND se.identity_key = p_identity_key
          AND NOT EXISTS (SELECT FROM dup)
        RETURNING se.session_id, se.last_event_seq
    ), ins AS (
        INSERT INTO public.message_event AS e (tenant_id, event_id, session_id, binding_id, external_message_id,
                                        idempotency_key, event_seq, kind, payload, payload_digest, status,
                                        outcome, request_id, trace_id, workflow_id)
        SELECT p_tenant_id, p_event_id, s.session_id, p_binding_id, p_external_message_id,
               p_idempotency_key, s.last_event_seq, p_kind, p_payload, p_payload_digest, v_status,
               CASE WHEN v_limited THEN 'rate_limited' ELSE p_outcome END, p_request_id, p_trace_id,
               p_workflow_id
        FROM s
        ON CONFLICT (tenant_id, binding_id, external_message_id) DO NOTHING
        RETURNING e.event_id
    )
    SELECT coalesce((SELECT ins.event_id FROM ins), (SELECT dup.event_id FROM dup)),
           (SELECT dup.status FROM dup), (SELECT s.session_id FROM s)
    INTO v_event_id, v_found_status, v_session_id;

    IF v_session_id IS NOT NULL AND v_event_id IS NOT NULL THEN
        RETURN QUERY SELECT CASE WHEN v_limited THEN 'rate_limited' ELSE 'recorded' END, v_event_id, v_status;
        RETURN;
    END IF;

    IF v_session_id IS NOT NULL THEN
        -- A duplicate committed while the UPDATE waited for the session: give its event_seq back.
        -- This transaction holds the row lock since the bump, so nothing else moved the counter.
        UPDATE public.session AS se SET last_event_seq = se.last_event_seq - 1
        WHERE se.tenant_id = p_tenant_id AND se.session_id = v_session_id;
        SELECT e.event_id, e.status INTO v_event_id, v_found_status
        FROM public.message_event AS e
        WHERE e.tenant_id = p_tenant_id AND e.binding_id = p_binding_id
          AND e.external_message_id = p_external_message_id;
        IF NOT FOUND THEN
            RAISE unique_violation USING MESSAGE = 'record_inbound_message: the conflicting message is gone';
        END IF;
    ELSIF v_event_id IS NULL THEN
        -- No session yet: this message opens it (0014's block, once per session). The block is a
        -- subtransaction: a duplicate rolls the new session (and its event_seq) back.
        BEGIN
            WITH s AS (
                INSERT INTO public.session AS se (tenant_id, session_id, binding_id, app_id, kind, external_user_id,
                                           external_chat_id, external_thread_id, identity_key, last_event_seq)
                VALUES (p_tenant_id, p_session_id, p_binding_id, p_app_id, p_session_kind, p_external_user_id,
                        p_external_chat_id, p_external_thread_id, p_identity_key, 1)
                ON CONFLICT (tenant_id, binding_id, identity_key)
                DO UPDATE SET last_event_seq = se.last_event_seq + 1, updated_at = pg_catalog.now()
                RETURNING se.session_id, se.last_event_seq
            )
            INSERT INTO public.message_event AS e (tenant_id, event_id, session_id, binding_id, external_message_id,
                                            idempotency_key, event_seq, kind, payload, payload_digest, status,
                                            outcome, request_id, trace_id, workflow_id)
            SELECT p_tenant_id, p_event_id, s.session_id, p_binding_id, p_external_message_id,
                   p_idempotency_key, s.last_event_seq, p_kind, p_payload, p_payload_digest, v_status,
                   CASE WHEN v_limited THEN 'rate_limited' ELSE p_outcome END, p_request_id, p_trace_id,
                   p_workflow_id
            FROM s
            RETURNING e.event_id INTO v_event_id;
        EXCEPTION WHEN unique_violation THEN
            SELECT e.event_id, e.status INTO v_event_id, v_found_status
            FROM public.message_event AS e
            WHERE e.tenant_id = p_tenant_id AND e.binding_id = p_binding_id
              AND e.external_message_id = p_external_message_id;
            IF NOT FOUND THEN
                RAISE; -- not a duplicate message: some other constraint
            END IF;
            v_duplicate := true;
        END;
        IF NOT v_duplicate THEN
            RETURN QUERY SELECT CASE WHEN v_limited THEN 'rate_limited' ELSE 'recorded' END, v_event_id, v_status;
            RETURN;
        END IF;
    END IF;

    -- A duplicate: the count taken above is given back (this transaction holds that row's lock).
    IF p_rate_limit_rpm IS NOT NULL THEN
        UPDATE public.rate_limit_window AS w SET count = w.count - 1
        WHERE w.tenant_id = p_tenant_id AND w.window_start = pg_catalog.date_trunc('minute', pg_catalog.now());
    END IF;
    RETURN QUERY SELECT 'duplicate'::TEXT, v_event_id, v_found_status;
END;
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION record_inbound_message(
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, JSONB, TEXT,
    TEXT, TEXT, TEXT, BIGINT
) FROM PUBLIC;
