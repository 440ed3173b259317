-- Hand-written: the seed's normative tenant-root behaviour that Drizzle cannot express — the
-- identity-immutability trigger, the SECURITY DEFINER functions transition_tenant_status and
-- update_tenant_configuration (bodies verbatim from the seed), and the seed's tenant grants.
-- The seed's BEGIN/COMMIT are dropped: the migrator already runs every migration in one
-- transaction. IDEMPOTENT: CREATE OR REPLACE, DROP TRIGGER IF EXISTS, and GRANT/REVOKE are
-- repeatable.
CREATE OR REPLACE FUNCTION tenant_reject_identity_change()
RETURNS TRIGGER
LANGUAGE plpgsql
AS $$
BEGIN
    IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
       OR NEW.tenant_key IS DISTINCT FROM OLD.tenant_key THEN
        RAISE EXCEPTION 'tenant identity is immutable';
    END IF;
    RETURN NEW;
END;
$$;
--> statement-breakpoint
DROP TRIGGER IF EXISTS tenant_identity_immutable ON tenant;
--> statement-breakpoint
CREATE TRIGGER tenant_identity_immutable
BEFORE UPDATE ON tenant
FOR EACH ROW EXECUTE FUNCTION tenant_reject_identity_change();
--> statement-breakpoint
CREATE OR REPLACE FUNCTION transition_tenant_status(
    p_tenant_id TEXT,
    p_expected_version BIGINT,
    p_next_status TEXT,
    p_actor_type TEXT,
    p_actor_id TEXT,
    p_reason TEXT,
    p_correlation_id TEXT
) RETURNS VOID
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_previous_status TEXT;
    v_next_version BIGINT;
BEGIN
    IF p_actor_type IS NULL OR length(btrim(p_actor_type)) = 0
       OR p_actor_id IS NULL OR length(btrim(p_actor_id)) = 0 THEN
        RAISE EXCEPTION 'tenant status transition requires a non-blank actor';
    END IF;
    IF p_correlation_id IS NULL OR length(btrim(p_correlation_id)) = 0 THEN
        RAISE EXCEPTION 'tenant status transition requires a non-blank correlation ID';
    END IF;

    SELECT status INTO v_previous_status
    FROM public.tenant
    WHERE tenant_id = p_tenant_id
    FOR UPDATE;

    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenant % does not exist', p_tenant_id;
    END IF;
    IF v_previous_status = 'disabled' THEN
        RAISE EXCEPTION 'disabled tenant cannot be re-enabled';
    END IF;
    IF (v_previous_status, p_next_status) NOT IN (
        ('active', 'suspended'),
        ('active', 'disabled'),
        ('suspended', 'active'),
        ('suspended', 'disabled')
    ) THEN
        RAISE EXCEPTION 'invalid tenant status transition: % -> %',
            v_previous_status, p_next_status;
    END IF;

    UPDATE public.tenant
    SET status = p_next_status, version = version + 1, updated_at = now()
    WHERE tenant_id = p_tenant_id AND version = p_expected_version
    RETURNING version INTO v_next_version;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenant version conflict';
    END IF;

    INSERT INTO public.tenant_status_change_outbox (
        tenant_id, previous_status, next_status, actor_type, actor_id, reason,
        previous_version, next_version, correlation_id
    ) VALUES (
        p_tenant_id, v_previous_status, p_next_status, p_actor_type, p_actor_id,
        p_reason, p_expected_version, v_next_version, p_correlation_id
    );
END;
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION update_tenant_configuration(
    p_tenant_id TEXT,
    p_expected_version BIGINT,
    p_display_name TEXT,
    p_rate_limit_rpm BIGINT,
    p_max_concurrent_executions BIGINT,
    p_monthly_token_budget BIGINT,
    p_monthly_spend_limit_minor BIGINT,
    p_billing_currency CHAR(3),
    p_audit_retention_days INT,
    p_log_masking_level TEXT,
    p_trace_sampling_rate REAL,
    p_default_agent_app_id TEXT,
    p_default_backend_profile_id TEXT
) RETURNS BIGINT
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_next_version BIGINT;
BEGIN
    -- Keep the global lock order Tenant -> referenced Profile. Status
    -- transitions use the same order, avoiding a default-assignment race.
    PERFORM 1
    FROM public.tenant
    WHERE tenant_id = p_tenant_id
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenant does not exist';
    END IF;

    IF p_default_backend_profile_id IS NOT NULL THEN
        PERFORM 1
        FROM public.backend_profile
        WHERE tenant_id = p_tenant_id
          AND profile_id = p_default_backend_profile_id
          AND status = 'active'
        FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'default backend profile must exist in the tenant and be active';
        END IF;
    END IF;

    -- A full, validated configuration snapshot avoids ambiguous patch/null semantics.
    UPDATE public.tenant
    SET display_name = p_display_name,
        rate_limit_rpm = p_rate_limit_rpm,
        max_concurrent_executions = p_max_concurrent_executions,
        monthly_token_budget = p_monthly_token_budget,
        monthly_spend_limit_minor = p_monthly_spend_limit_minor,
        billing_currency = p_billing_currency,
        audit_retention_days = p_audit_retention_days,
        log_masking_level = p_log_masking_level,
        trace_sampling_rate = p_trace_sampling_rate,
        default_agent_app_id = p_default_agent_app_id,
        default_backend_profile_id = p_default_backend_profile_id,
        version = version + 1,
        updated_at = now()
    -- disabled is terminal: archival work uses a separately designed path.
    WHERE tenant_id = p_tenant_id
      AND version = p_expected_version
      AND status <> 'disabled'
    RETURNING version INTO v_next_version;

    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenant is disabled, has a version conflict, or does not exist';
    END IF;
    RETURN v_next_version;
END;
$$;
--> statement-breakpoint
-- Runtime roles are provisioned without table ownership, inherited broad DML,
-- or direct tenant reads. All configuration and lifecycle mutations are
-- function-only, so version and updated_at cannot be independently changed.
REVOKE ALL PRIVILEGES ON tenant FROM PUBLIC;
--> statement-breakpoint
-- Workers receive tenant-scoped configuration snapshots from the control plane;
-- they must not enumerate tenant configuration through a shared database role.
REVOKE SELECT, UPDATE ON tenant FROM tenant_app_writer;
--> statement-breakpoint
-- Cross-tenant root-table reads are an explicit Admin control-plane capability.
GRANT SELECT ON tenant TO tenant_admin_writer;
--> statement-breakpoint
-- Tenant creation (POST /v1/admin/tenants) is a plain INSERT by the admin writer; there is
-- deliberately no UPDATE or DELETE: every later change goes through the functions above.
GRANT INSERT ON tenant TO tenant_admin_writer;
--> statement-breakpoint
-- The outbox is written only by transition_tenant_status (as its owner); the admin writer may read
-- it (RLS scopes the rows to the tenant in context, see 0005).
REVOKE ALL PRIVILEGES ON tenant_status_change_outbox FROM PUBLIC;
--> statement-breakpoint
GRANT SELECT ON tenant_status_change_outbox TO tenant_admin_writer;
--> statement-breakpoint
-- PostgreSQL grants EXECUTE on new functions to PUBLIC by default. Revoke it
-- before the role-specific grants while this migration transaction is open.
REVOKE ALL ON FUNCTION transition_tenant_status(
    TEXT, BIGINT, TEXT, TEXT, TEXT, TEXT, TEXT
) FROM PUBLIC;
--> statement-breakpoint
REVOKE ALL ON FUNCTION update_tenant_configuration(
    TEXT, BIGINT, TEXT, BIGINT, BIGINT, BIGINT, BIGINT, CHAR(3), INT,
    TEXT, REAL, TEXT, TEXT
) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION transition_tenant_status(
    TEXT, BIGINT, TEXT, TEXT, TEXT, TEXT, TEXT
) TO tenant_admin_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION update_tenant_configuration(
    TEXT, BIGINT, TEXT, BIGINT, BIGINT, BIGINT, BIGINT, CHAR(3), INT,
    TEXT, REAL, TEXT, TEXT
) TO tenant_admin_writer;
--> statement-breakpoint
-- The trigger function needs no caller privilege (triggers run regardless of EXECUTE), so keep it
-- out of PUBLIC reach as well.
REVOKE ALL ON FUNCTION tenant_reject_identity_change() FROM PUBLIC;
