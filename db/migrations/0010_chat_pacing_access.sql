-- Hand-written: chat_pacing is tenant-owned like every runtime table: the app role reads and
-- writes it under row-level security keyed by app.tenant_id; the admin role only reads it.
-- IDEMPOTENT: ENABLE and GRANT are repeatable; the policy is dropped before it is created.
ALTER TABLE public.chat_pacing ENABLE ROW LEVEL SECURITY;
--> statement-breakpoint
DROP POLICY IF EXISTS tenant_isolation ON public.chat_pacing;
--> statement-breakpoint
CREATE POLICY tenant_isolation ON public.chat_pacing
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
--> statement-breakpoint
REVOKE ALL ON public.chat_pacing FROM PUBLIC;
--> statement-breakpoint
GRANT SELECT, INSERT, UPDATE ON public.chat_pacing TO tenant_app_writer;
--> statement-breakpoint
GRANT SELECT ON public.chat_pacing TO tenant_admin_writer;
