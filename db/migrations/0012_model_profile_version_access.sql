-- Hand-written: access, isolation and immutability for model_profile_version (0011), plus the
-- backfill of every existing profile's current content as its version row. Executions pin
-- (model_profile_id, version, content_digest) and read the pinned content from this table, so a
-- profile edited while an execution runs only affects executions that start afterwards; the rows
-- must therefore never change (append-only, like 0006) and every existing profile needs its row.
-- Grants: the admin API appends a row on create and on each content change and reads them; the
-- worker only reads them. Row-level security as for every tenant-owned table (0005).
-- IDEMPOTENT: REVOKE/GRANT and ENABLE are repeatable, the policy and triggers are dropped before
-- they are created, and the backfill skips rows that already exist.
REVOKE ALL PRIVILEGES ON public.model_profile_version FROM PUBLIC;
--> statement-breakpoint
GRANT SELECT, INSERT ON public.model_profile_version TO tenant_admin_writer;
--> statement-breakpoint
GRANT SELECT ON public.model_profile_version TO tenant_app_writer;
--> statement-breakpoint
ALTER TABLE public.model_profile_version ENABLE ROW LEVEL SECURITY;
--> statement-breakpoint
DROP POLICY IF EXISTS tenant_isolation ON public.model_profile_version;
--> statement-breakpoint
CREATE POLICY tenant_isolation ON public.model_profile_version
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
--> statement-breakpoint
DROP TRIGGER IF EXISTS model_profile_version_append_only ON public.model_profile_version;
--> statement-breakpoint
CREATE TRIGGER model_profile_version_append_only BEFORE UPDATE OR DELETE ON public.model_profile_version
    FOR EACH ROW EXECUTE FUNCTION reject_append_only_change();
--> statement-breakpoint
DROP TRIGGER IF EXISTS model_profile_version_no_truncate ON public.model_profile_version;
--> statement-breakpoint
CREATE TRIGGER model_profile_version_no_truncate BEFORE TRUNCATE ON public.model_profile_version
    FOR EACH STATEMENT EXECUTE FUNCTION reject_append_only_change();
--> statement-breakpoint
-- Backfill: the current content of every profile is its current version (older versions were
-- never kept; executions pinned to one of those still fail with PlanDrift, as before).
INSERT INTO public.model_profile_version (
    tenant_id, model_profile_id, version, provider, model, base_url, api_key_secret_ref, parameters,
    input_per_mtok_minor, output_per_mtok_minor, content_digest, created_at
)
SELECT tenant_id, model_profile_id, version, provider, model, base_url, api_key_secret_ref, parameters,
       input_per_mtok_minor, output_per_mtok_minor, content_digest, updated_at
FROM public.model_profile
ON CONFLICT (tenant_id, model_profile_id, version) DO NOTHING;
