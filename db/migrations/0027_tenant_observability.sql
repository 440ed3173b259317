-- Hand-written: find_binding_candidate also returns the owning tenant's trace_sampling_rate and
-- log_masking_level, so ingress decides sampling and masking for a request once it is trusted,
-- without a second round trip (telemetry/sampling.ts, lib/masking.ts). Like the gates of 0008, the
-- values are used only after the request verified.
-- IDEMPOTENT: DROP ... IF EXISTS then CREATE (the result type changes, so OR REPLACE cannot be used).
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
SELECT switchyard_claim_ownership();
