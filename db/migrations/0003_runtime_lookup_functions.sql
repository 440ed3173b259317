-- Hand-written: narrow SECURITY DEFINER read paths for the runtime roles, which have no access to
-- the tenant root table (seed) and see tenant-owned rows only through RLS with a trusted tenant in
-- context. Each function answers exactly one question and returns only what that question needs:
--   tenant_runtime_snapshot   one tenant's runtime configuration (gates, limits, defaults)
--   find_binding_candidate    the candidate binding for a public route-key digest, read before
--                             verification and thus before any tenant is trusted; it includes the
--                             binding secret's current ciphertext (never plaintext) to verify with
--   authenticate_admin_api_key  the active key for a bearer-token digest (tenant not yet known)
--   list_unstarted_message_events  the reconciler's cross-tenant scan for recorded messages whose
--                             workflow never started
-- IDEMPOTENT: CREATE OR REPLACE with unchanged signatures; REVOKE/GRANT are repeatable.
CREATE OR REPLACE FUNCTION tenant_runtime_snapshot(p_tenant_id TEXT)
RETURNS TABLE (
    tenant_id TEXT,
    status TEXT,
    version BIGINT,
    rate_limit_rpm BIGINT,
    max_concurrent_executions BIGINT,
    monthly_token_budget BIGINT,
    monthly_spend_limit_minor BIGINT,
    billing_currency CHAR(3),
    log_masking_level TEXT,
    trace_sampling_rate REAL,
    default_agent_app_id TEXT,
    default_backend_profile_id TEXT
)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    SELECT t.tenant_id, t.status, t.version, t.rate_limit_rpm, t.max_concurrent_executions,
           t.monthly_token_budget, t.monthly_spend_limit_minor, t.billing_currency,
           t.log_masking_level, t.trace_sampling_rate, t.default_agent_app_id,
           t.default_backend_profile_id
    FROM public.tenant AS t
    WHERE t.tenant_id = p_tenant_id;
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION find_binding_candidate(p_channel TEXT, p_route_key_digest TEXT)
RETURNS TABLE (
    tenant_id TEXT,
    binding_id TEXT,
    status TEXT,
    secret_ref TEXT,
    app_id TEXT,
    provider_account_id TEXT,
    config JSONB,
    secret_key_id TEXT,
    secret_ciphertext BYTEA
)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    -- A disabled secret yields no ciphertext, so verification fails closed.
    SELECT b.tenant_id, b.binding_id, b.status, b.secret_ref, b.app_id, b.provider_account_id,
           b.config, v.key_id, v.ciphertext
    FROM public.channel_binding AS b
    LEFT JOIN public.secret AS s
           ON s.tenant_id = b.tenant_id AND s.secret_ref = b.secret_ref AND s.status = 'active'
    LEFT JOIN public.secret_version AS v
           ON v.tenant_id = s.tenant_id AND v.secret_ref = s.secret_ref AND v.version = s.current_version
    WHERE b.channel = p_channel
      AND b.public_route_key_digest = p_route_key_digest;
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION authenticate_admin_api_key(p_key_digest TEXT)
RETURNS TABLE (tenant_id TEXT, key_id TEXT, role TEXT)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    SELECT k.tenant_id, k.key_id, k.role
    FROM public.admin_api_key AS k
    WHERE k.key_digest = p_key_digest
      AND k.status = 'active';
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION list_unstarted_message_events(p_older_than INTERVAL, p_limit INT)
RETURNS TABLE (tenant_id TEXT, event_id TEXT, workflow_id TEXT, created_at TIMESTAMPTZ)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    SELECT e.tenant_id, e.event_id, e.workflow_id, e.created_at
    FROM public.message_event AS e
    WHERE e.status = 'received'
      AND e.workflow_started_at IS NULL
      AND e.created_at < now() - p_older_than
    ORDER BY e.created_at
    LIMIT LEAST(GREATEST(p_limit, 1), 1000);
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION tenant_runtime_snapshot(TEXT) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION find_binding_candidate(TEXT, TEXT) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION authenticate_admin_api_key(TEXT) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION list_unstarted_message_events(INTERVAL, INT) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION tenant_runtime_snapshot(TEXT) TO tenant_app_writer, tenant_admin_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION find_binding_candidate(TEXT, TEXT) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION authenticate_admin_api_key(TEXT) TO tenant_admin_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION list_unstarted_message_events(INTERVAL, INT) TO tenant_app_writer;
