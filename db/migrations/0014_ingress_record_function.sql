-- Hand-written: record_inbound_message, the whole record step of an accepted webhook in ONE statement
-- that the API calls outside any transaction (autocommit). Done from the application it cost a
-- transaction of four statements (begin, the role/tenant set_config, the session upsert + message
-- insert, commit), a fifth for the rate-limit count, and on a duplicate a second transaction to look
-- up the winner: round trips the webhook acknowledgement waited for. Behaviour is unchanged:
--   * SECURITY INVOKER, and its first statement drops to tenant_app_writer with the tenant in
--     `app.tenant_id`, both transaction-local exactly as withTenantTx (db/tx.ts) sets them, so every
--     statement inside runs under that role's grants (0004) and row-level security (0005). The
--     autocommit transaction ends with the call, which resets both; called inside a caller's
--     transaction they would last until that transaction ends, as withTenantTx's do.
--   * the rate limit counts the message in the tenant's shared minute window (across API
--     instances) and about one call in 64 prunes that tenant's windows older than 10 minutes; over
--     rate_limit_rpm the message is recorded as failed / rate_limited and never executed;
--   * the session upsert allocates the next event_seq and the message insert consumes it;
--   * a duplicate (tenant, binding, external message id) rolls the inner block back, so neither
--     its event_seq nor its rate-limit count is consumed (event_seq stays gap-free per session), and
--     returns the existing message's event_id and status.
-- The owner connection calls it (the role switch needs the session user's membership, 0001);
-- nothing else may, so EXECUTE is revoked from PUBLIC and granted to no one.
-- IDEMPOTENT: CREATE OR REPLACE with an unchanged signature; REVOKE is repeatable.
CREATE OR REPLACE FUNCTION record_inbound_message(
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
SET search_path = public, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_count BIGINT;
    v_limited BOOLEAN := false;
    v_event_id TEXT;
    v_status TEXT;
BEGIN
    PERFORM set_config('role', 'tenant_app_writer', true);
    PERFORM set_config('app.tenant_id', p_tenant_id, true);

    -- The block is a subtransaction: a duplicate rolls back the count and the session upsert.
    BEGIN
        IF p_rate_limit_rpm IS NOT NULL THEN
            INSERT INTO rate_limit_window AS w (tenant_id, window_start, count)
            VALUES (p_tenant_id, date_trunc('minute', now()), 1)
            ON CONFLICT (tenant_id, window_start) DO UPDATE SET count = w.count + 1
            RETURNING w.count INTO v_count;
            -- Old windows are never read again; about one call in 64 clears this tenant's.
            IF random() < 1.0 / 64 THEN
                DELETE FROM rate_limit_window AS w
                WHERE w.tenant_id = p_tenant_id AND w.window_start < now() - interval '10 minutes';
            END IF;
            v_limited := v_count > p_rate_limit_rpm;
        END IF;
        v_status := CASE WHEN v_limited THEN 'failed' ELSE 'received' END;

        -- The session row lock taken by the upsert orders concurrent messages of one session, so
        -- event_seq is allocated in commit order; a duplicate waits for the winner to commit, then
        -- fails the unique constraint instead of inserting.
        WITH s AS (
            INSERT INTO session AS se (tenant_id, session_id, binding_id, app_id, kind, external_user_id,
                                       external_chat_id, external_thread_id, identity_key, last_event_seq)
            VALUES (p_tenant_id, p_session_id, p_binding_id, p_app_id, p_session_kind, p_external_user_id,
                    p_external_chat_id, p_external_thread_id, p_identity_key, 1)
            ON CONFLICT (tenant_id, binding_id, identity_key)
            DO UPDATE SET last_event_seq = se.last_event_seq + 1, updated_at = now()
            RETURNING se.session_id, se.last_event_seq
        )
        INSERT INTO message_event AS e (tenant_id, event_id, session_id, binding_id, external_message_id,
                                        idempotency_key, event_seq, kind, payload, payload_digest, status,
                                        outcome, request_id, trace_id, workflow_id)
        SELECT p_tenant_id, p_event_id, s.session_id, p_binding_id, p_external_message_id,
               p_idempotency_key, s.last_event_seq, p_kind, p_payload, p_payload_digest, v_status,
               CASE WHEN v_limited THEN 'rate_limited' ELSE p_outcome END, p_request_id, p_trace_id,
               p_workflow_id
        FROM s
        RETURNING e.event_id INTO v_event_id;
    EXCEPTION WHEN unique_violation THEN
        SELECT e.event_id, e.status INTO v_event_id, v_status
        FROM message_event AS e
        WHERE e.tenant_id = p_tenant_id AND e.binding_id = p_binding_id
          AND e.external_message_id = p_external_message_id;
        IF NOT FOUND THEN
            RAISE; -- not a duplicate message: some other constraint
        END IF;
        RETURN QUERY SELECT 'duplicate'::TEXT, v_event_id, v_status;
        RETURN;
    END;

    RETURN QUERY SELECT CASE WHEN v_limited THEN 'rate_limited' ELSE 'recorded' END, v_event_id, v_status;
END;
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION record_inbound_message(
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, JSONB, TEXT,
    TEXT, TEXT, TEXT, BIGINT
) FROM PUBLIC;
