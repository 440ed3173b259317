-- Hand-written: find_binding_candidate also returns the owning tenant's trace_sampling_rate and
-- log_masking_level, so ingress decides sampling and masking for a request once it is trusted,
-- without a second round trip (telemetry/sampling.ts, lib/masking.ts). Like the gates of 0008, the
-- values are used only after the request verified.
-- authenticate_admin_api_key also returns the key's tenant's trace_sampling_rate, for the admin
-- request's sampling once its principal is known (api/admin/tracing.ts).
-- execution_audit_finished (0025) writes the message's user as a pseudonym when the tenant's
-- log_masking_level is `strict` (lib/masking.ts computes the same pseudonym in TypeScript).
-- IDEMPOTENT: DROP ... IF EXISTS then CREATE where the result type changes (OR REPLACE cannot).
DROP FUNCTION IF EXISTS find_binding_candidate(TEXT, TEXT);
--> statement-breakpoint
CREATE FUNCTION find_binding_candidate(p_channel TEXT, p_route_key_digest TEXT)
RETURNS TABLE (
    tenant_id TEXT,
    binding_id TEXT,
    status TEXT,
    secret_ref TEXT,
    app_id TEXT,
    provider_account_id TEXT,
    config JSONB,
    secret_key_id TEXT,
    secret_ciphertext BYTEA,
    tenant_status TEXT,
    tenant_rate_limit_rpm BIGINT,
    tenant_trace_sampling_rate REAL,
    tenant_log_masking_level TEXT
)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    -- A disabled secret yields no ciphertext, so verification fails closed.
    SELECT b.tenant_id, b.binding_id, b.status, b.secret_ref, b.app_id, b.provider_account_id,
           b.config, v.key_id, v.ciphertext, t.status, t.rate_limit_rpm,
           t.trace_sampling_rate, t.log_masking_level
    FROM public.channel_binding AS b
    JOIN public.tenant AS t ON t.tenant_id = b.tenant_id
    LEFT JOIN public.secret AS s
           ON s.tenant_id = b.tenant_id AND s.secret_ref = b.secret_ref AND s.status = 'active'
    LEFT JOIN public.secret_version AS v
           ON v.tenant_id = s.tenant_id AND v.secret_ref = s.secret_ref AND v.version = s.current_version
    WHERE b.channel = p_channel
      AND b.public_route_key_digest = p_route_key_digest;
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION find_binding_candidate(TEXT, TEXT) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION find_binding_candidate(TEXT, TEXT) TO tenant_app_writer;
--> statement-breakpoint
DROP FUNCTION IF EXISTS authenticate_admin_api_key(TEXT);
--> statement-breakpoint
CREATE FUNCTION authenticate_admin_api_key(p_key_digest TEXT)
RETURNS TABLE (tenant_id TEXT, key_id TEXT, role TEXT, tenant_trace_sampling_rate REAL)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    SELECT k.tenant_id, k.key_id, k.role, t.trace_sampling_rate
    FROM public.admin_api_key AS k
    JOIN public.tenant AS t ON t.tenant_id = k.tenant_id
    WHERE k.key_digest = p_key_digest
      AND k.status = 'active';
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION authenticate_admin_api_key(TEXT) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION authenticate_admin_api_key(TEXT) TO tenant_admin_writer;
--> statement-breakpoint
-- `ext_` + 16 hex characters of HMAC-SHA256(audit key, label \n tenant \n id): lib/masking.ts.
CREATE OR REPLACE FUNCTION public.masking_pseudonym(p_tenant_id text, p_external_id text) RETURNS text
LANGUAGE plpgsql
STABLE
SECURITY DEFINER -- the owner's USAGE on switchyard_crypto; callers get a digest, never the key
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_key text := current_setting('app.audit_key', true);
BEGIN
    IF p_external_id IS NULL THEN
        RETURN NULL;
    END IF;
    IF v_key IS NULL OR v_key !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'the audit chain key (app.audit_key) is not set on this connection'
            USING ERRCODE = '42501';
    END IF;
    RETURN 'ext_' || left(encode(switchyard_crypto.hmac(
        convert_to('switchyard.audit.v3.pseudonym' || E'\n' || p_tenant_id || E'\n' || p_external_id, 'UTF8'),
        decode(v_key, 'hex'), 'sha256'), 'hex'), 16);
END
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.masking_pseudonym(text, text) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.masking_pseudonym(text, text) TO tenant_app_writer, tenant_admin_writer;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.execution_audit_finished(
    p_tenant_id text, p_event_id text, p_status text, p_outcome text, p_actor text
) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v record;
    v_masking text;
BEGIN
    SELECT e.session_id, e.binding_id, e.event_seq, b.channel, e.payload, e.execution_plan, e.trace_id INTO v
    FROM public.message_event e
    JOIN public.channel_binding b ON b.tenant_id = e.tenant_id AND b.binding_id = e.binding_id
    WHERE e.tenant_id = p_tenant_id AND e.event_id = p_event_id;
    SELECT s.log_masking_level INTO v_masking FROM public.tenant_runtime_snapshot(p_tenant_id) s;
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
        'user_id', CASE WHEN v_masking = 'strict'
                        THEN public.masking_pseudonym(p_tenant_id, v.payload ->> 'senderId')
                        ELSE v.payload ->> 'senderId' END,
        'session_id', v.session_id,
        'agent_app_id', v.execution_plan -> 'app' ->> 'id',
        'revision', (v.execution_plan -> 'app' ->> 'revision')::int,
        'model_profile_id', v.execution_plan -> 'modelProfile' ->> 'id',
        'event_seq', v.event_seq,
        'trace_id', v.trace_id,
        'error_type', CASE WHEN p_status = 'failed' THEN p_outcome END,
        'details', jsonb_build_object('event_id', p_event_id)
    ));
END
$$;
--> statement-breakpoint
SELECT switchyard_claim_ownership();
