-- Hand-written: the audit hash chain is computed by the database (chain version v2).
-- Before this, every append was three statements (advisory lock, read the chain head, insert with a
-- digest computed in the application) and verification recomputed the digest in JS. Now one
-- function appends (one statement from the admin API, and callable from the worker's step
-- functions of 0015, which write their audit entry in the same statement as the change it records)
-- and verification recomputes digests with the same function, so the two can never disagree.
-- The digest is sha256 over the jsonb text of every stored column except `digest` (jsonb text is
-- canonical: keys sorted, no duplicates, fixed spacing), with occurred_at in one fixed UTC
-- microsecond form and previous_digest and seq included, so order and links are covered.
-- No deployment holds v1 rows; a development database from before this migration verifies its old
-- entries as broken (they were hashed by the application's canonical JSON).
-- IDEMPOTENT: CREATE OR REPLACE; grants are repeatable.
CREATE OR REPLACE FUNCTION public.audit_digest(r public.audit_log) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, public
AS $$
    SELECT encode(sha256(convert_to(jsonb_build_object(
        'chain', 'switchyard.audit.v2',
        'tenant_id', r.tenant_id,
        'audit_id', r.audit_id,
        'seq', r.seq,
        'action', r.action,
        'actor_type', r.actor_type,
        'actor_id', r.actor_id,
        'reason', r.reason,
        'binding_id', r.binding_id,
        'channel', r.channel,
        'user_id', r.user_id,
        'session_id', r.session_id,
        'agent_app_id', r.agent_app_id,
        'revision', r.revision,
        'model_profile_id', r.model_profile_id,
        'tool_name', r.tool_name,
        'decision', r.decision,
        'event_seq', r.event_seq,
        'latency_ms', r.latency_ms,
        'error_type', r.error_type,
        'cost_minor', r.cost_minor,
        'request_id', r.request_id,
        'trace_id', r.trace_id,
        'before_version', r.before_version,
        'after_version', r.after_version,
        'details', r.details,
        'occurred_at', to_char(r.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'previous_digest', r.previous_digest
    )::text, 'UTF8')), 'hex')
$$;
--> statement-breakpoint
-- Appends one entry (a jsonb object with audit_log's column names; seq, occurred_at,
-- previous_digest and digest are set here) to the chain of the caller's tenant. SECURITY INVOKER:
-- it runs under the caller's role and `app.tenant_id`, so row-level security still decides which
-- tenant's chain may be written. One writer per tenant chain at a time: the advisory lock is held
-- until the caller's transaction ends, so a rolled-back change also rolls back its entry and never
-- leaves a hole in the sequence.
CREATE OR REPLACE FUNCTION public.audit_append(p_entry jsonb) RETURNS public.audit_log
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_row public.audit_log;
    v_seq bigint;
    v_previous text;
BEGIN
    v_row := jsonb_populate_record(NULL::public.audit_log, p_entry);
    IF v_row.tenant_id IS NULL OR v_row.tenant_id IS DISTINCT FROM current_setting('app.tenant_id', true) THEN
        RAISE EXCEPTION 'audit entry for a tenant other than the transaction''s (% vs %)', v_row.tenant_id, current_setting('app.tenant_id', true) USING ERRCODE = '42501';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('audit_log:' || v_row.tenant_id, 0));
    SELECT l.seq, l.digest INTO v_seq, v_previous
    FROM public.audit_log l WHERE l.tenant_id = v_row.tenant_id ORDER BY l.seq DESC LIMIT 1;
    v_row.seq := coalesce(v_seq, 0) + 1;
    v_row.previous_digest := v_previous;
    v_row.occurred_at := clock_timestamp();
    v_row.details := coalesce(p_entry -> 'details', '{}'::jsonb);
    v_row.digest := public.audit_digest(v_row);
    INSERT INTO public.audit_log SELECT v_row.*;
    RETURN v_row;
END
$$;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.audit_digest(public.audit_log) TO tenant_admin_writer, tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.audit_append(jsonb) TO tenant_admin_writer, tenant_app_writer;
