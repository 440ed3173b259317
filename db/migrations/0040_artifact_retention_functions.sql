-- Hand-written, after 0038 (tenant.artifact_retention_days, artifact.deleting_at): artifact retention,
-- a housekeeping part (activities/artifact-retention.ts). An artifact older than its tenant's
-- artifact_retention_days goes in three steps, each its own statement, so a crash between any two
-- leaves a row that is marked and picked up again by the next run: mark the row (deleting_at),
-- delete the object in the tenant's store, delete the row. Only a marked row can be deleted, so a
-- row never names a missing object unmarked; readers take a marked row as gone.
-- Kept whatever its age (artifact_still_needed): an artifact of a message still unfinished (the
-- execution may read its media), and one an unsent segment still attaches while its message is
-- unfinished or that segment has an open dead letter (an operator's retry sends it).
--   artifact_still_needed        plain SQL (invoker), the one definition of "kept".
--   artifact_retention_tenants   SECURITY DEFINER, owned by switchyard_lookup (added to its list in
--                                switchyard_claim_ownership, otherwise unchanged from 0030): the
--                                tenants that have artifacts to remove (or marked ones left over).
--   artifact_retention_mark      SECURITY DEFINER (owner, FORCEd RLS): one tenant, the caller's;
--                                marks up to p_limit due rows (left-over marked ones first).
--   artifact_retention_delete    SECURITY DEFINER (owner, FORCEd RLS): deletes the caller's tenant's
--                                given rows, only marked ones.
--   update_tenant_configuration  a 14-argument form: the seeds' 13 (0002, unchanged and still
--                                callable) plus p_artifact_retention_days, one version bump.
-- The worker (tenant_app_writer) may execute the retention functions, the admin writer the new
-- configuration form; switchyard_lookup reads artifact and reply_outbox for the listing.
-- IDEMPOTENT: CREATE OR REPLACE; grants repeat.
GRANT SELECT ON public.artifact, public.reply_outbox TO switchyard_lookup;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.artifact_still_needed(p_tenant_id text, p_artifact_id text, p_event_id text)
RETURNS boolean
LANGUAGE sql
STABLE
SET search_path = pg_catalog, public
AS $$
    SELECT EXISTS (
        SELECT 1 FROM public.message_event e
        WHERE e.tenant_id = p_tenant_id AND e.event_id = p_event_id AND e.status NOT IN ('replied', 'failed'))
    OR EXISTS (
        SELECT 1 FROM public.reply_outbox o
        JOIN public.message_event e ON e.tenant_id = o.tenant_id AND e.event_id = o.event_id
        WHERE o.tenant_id = p_tenant_id AND o.payload_ref = p_artifact_id
          AND o.status NOT IN ('sent', 'discarded')
          AND (e.status NOT IN ('replied', 'failed')
               OR EXISTS (SELECT 1 FROM public.dead_letter d
                          WHERE d.tenant_id = o.tenant_id AND d.segment_id = o.segment_id AND d.status = 'open')))
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.artifact_retention_tenants(p_limit int) RETURNS TABLE (tenant_id text)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    SELECT t.tenant_id FROM public.tenant t
    WHERE EXISTS (
        SELECT 1 FROM public.artifact a
        WHERE a.tenant_id = t.tenant_id
          AND (a.deleting_at IS NOT NULL
               OR (a.created_at < now() - make_interval(days => t.artifact_retention_days)
                   AND NOT public.artifact_still_needed(a.tenant_id, a.artifact_id, a.event_id))))
    ORDER BY t.tenant_id
    LIMIT least(greatest(coalesce(p_limit, 1000), 1), 10000)
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.artifact_retention_mark(p_tenant_id text, p_limit int)
RETURNS TABLE (
    artifact_id text,
    content_ref text,
    storage text,
    backend_profile_id text,
    size_bytes bigint
)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
#variable_conflict use_column
DECLARE
    v_limit int := least(greatest(coalesce(p_limit, 500), 1), 10000);
    v_days int;
BEGIN
    IF p_tenant_id IS NULL OR p_tenant_id IS DISTINCT FROM current_setting('app.tenant_id', true) THEN
        RAISE EXCEPTION 'artifact retention for a tenant other than the transaction''s' USING ERRCODE = '42501';
    END IF;
    SELECT t.artifact_retention_days INTO v_days FROM public.tenant t WHERE t.tenant_id = p_tenant_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH picked AS (
        SELECT a.artifact_id FROM public.artifact a
        WHERE a.tenant_id = p_tenant_id
          AND (a.deleting_at IS NOT NULL
               OR (a.created_at < now() - make_interval(days => v_days)
                   AND NOT public.artifact_still_needed(a.tenant_id, a.artifact_id, a.event_id)))
        ORDER BY a.deleting_at NULLS LAST, a.created_at, a.artifact_id
        LIMIT v_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE public.artifact a SET deleting_at = coalesce(a.deleting_at, now())
    FROM picked p
    WHERE a.tenant_id = p_tenant_id AND a.artifact_id = p.artifact_id
    RETURNING a.artifact_id, a.content_ref, a.storage, a.backend_profile_id, a.size_bytes;
END
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.artifact_retention_delete(p_tenant_id text, p_artifact_ids text[]) RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_removed int;
BEGIN
    IF p_tenant_id IS NULL OR p_tenant_id IS DISTINCT FROM current_setting('app.tenant_id', true) THEN
        RAISE EXCEPTION 'artifact retention for a tenant other than the transaction''s' USING ERRCODE = '42501';
    END IF;
    -- Only marked rows: the mark is what tells a reader the object may already be gone.
    DELETE FROM public.artifact a
    WHERE a.tenant_id = p_tenant_id AND a.artifact_id = ANY (coalesce(p_artifact_ids, '{}'))
      AND a.deleting_at IS NOT NULL;
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    RETURN v_removed;
END
$$;
--> statement-breakpoint
-- The seeds' update_tenant_configuration (0002) with artifact_retention_days in the same snapshot.
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
    p_default_backend_profile_id TEXT,
    p_artifact_retention_days INT
) RETURNS BIGINT
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_next_version BIGINT;
BEGIN
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
        artifact_retention_days = p_artifact_retention_days,
        version = version + 1,
        updated_at = now()
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
CREATE OR REPLACE FUNCTION public.switchyard_claim_ownership() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v record;
    v_lookup text[] := ARRAY['find_binding_candidate', 'authenticate_admin_api_key',
                             'list_unstarted_message_events', 'list_repair_candidates', 'dead_letter_depth',
                             'audit_pending_tenants', 'artifact_retention_tenants'];
    v_janitor text[] := ARRAY['audit_retention_prune', 'housekeeping_prune'];
    v_owner text;
BEGIN
    FOR v IN
        SELECT c.relname, c.relkind, c.relrowsecurity, c.relforcerowsecurity,
               pg_catalog.pg_get_userbyid(c.relowner) AS owner
        FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
          AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                          WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
    LOOP
        IF v.owner <> 'switchyard_owner' AND v.relkind <> 'S' THEN
            EXECUTE format('ALTER TABLE public.%I OWNER TO switchyard_owner', v.relname);
        ELSIF v.owner <> 'switchyard_owner' THEN
            BEGIN
                EXECUTE format('ALTER SEQUENCE public.%I OWNER TO switchyard_owner', v.relname);
            EXCEPTION WHEN feature_not_supported OR object_not_in_prerequisite_state THEN
                NULL;
            END;
        END IF;
        IF v.relrowsecurity AND NOT v.relforcerowsecurity THEN
            EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', v.relname);
        END IF;
    END LOOP;
    FOR v IN
        SELECT p.oid::regprocedure AS sig, p.proname, pg_catalog.pg_get_userbyid(p.proowner) AS owner
        FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'public'
          -- an extension's functions are the extension's (pg_stat_statements in public, say)
          AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                          WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
    LOOP
        v_owner := CASE WHEN v.proname = ANY (v_lookup) THEN 'switchyard_lookup'
                        WHEN v.proname = ANY (v_janitor) THEN 'switchyard_janitor'
                        ELSE 'switchyard_owner' END;
        IF v.owner <> v_owner THEN
            EXECUTE format('ALTER FUNCTION %s OWNER TO %I', v.sig, v_owner);
        END IF;
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', v.sig);
    END LOOP;
    FOR v IN
        SELECT t.typname FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = 'public' AND t.typtype IN ('e', 'd')
          AND pg_catalog.pg_get_userbyid(t.typowner) <> 'switchyard_owner'
    LOOP
        EXECUTE format('ALTER TYPE public.%I OWNER TO switchyard_owner', v.typname);
    END LOOP;
    IF pg_catalog.pg_get_userbyid((SELECT nspowner FROM pg_catalog.pg_namespace WHERE nspname = 'switchyard_crypto'))
       <> 'switchyard_owner' THEN
        ALTER SCHEMA switchyard_crypto OWNER TO switchyard_owner;
    END IF;
END
$$;
--> statement-breakpoint
SELECT public.switchyard_claim_ownership();
--> statement-breakpoint
-- artifact_still_needed runs inside the lookup's listing (as switchyard_lookup) and the owner's mark.
GRANT EXECUTE ON FUNCTION public.artifact_still_needed(text, text, text) TO switchyard_lookup;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.artifact_retention_tenants(int), public.artifact_retention_mark(text, int),
    public.artifact_retention_delete(text, text[]) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION update_tenant_configuration(TEXT, BIGINT, TEXT, BIGINT, BIGINT, BIGINT, BIGINT,
    CHAR(3), INT, TEXT, REAL, TEXT, TEXT, INT) TO tenant_admin_writer;
