-- Hand-written, after 0037 (the live_draft table, model_profile.stream): live_draft is tenant-owned
-- runtime state like chat_pacing (0010) and artifact (0035): row-level security on app.tenant_id
-- (switchyard_claim_ownership FORCEs it and gives the table to switchyard_owner), the worker reads,
-- inserts and updates it (a draft's state moves forward; rows are never deleted by a runtime role),
-- the admin API may read it.
-- IDEMPOTENT: ENABLE/GRANT/REVOKE repeat, the policy is dropped first, and claiming ownership is
-- itself idempotent.
ALTER TABLE public.live_draft ENABLE ROW LEVEL SECURITY;
--> statement-breakpoint
DROP POLICY IF EXISTS tenant_isolation ON public.live_draft;
--> statement-breakpoint
CREATE POLICY tenant_isolation ON public.live_draft
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
--> statement-breakpoint
REVOKE ALL PRIVILEGES ON public.live_draft FROM PUBLIC;
--> statement-breakpoint
GRANT SELECT, INSERT, UPDATE ON public.live_draft TO tenant_app_writer;
--> statement-breakpoint
GRANT SELECT ON public.live_draft TO tenant_admin_writer;
--> statement-breakpoint
SELECT switchyard_claim_ownership();
