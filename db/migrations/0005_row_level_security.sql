-- Hand-written: tenant isolation by row-level security on every tenant-owned table (not on the
-- tenant root, whose access is by grants and SECURITY DEFINER functions, nor on the tenant-less
-- ingress tables). A row is visible and writable only when its tenant_id equals the transaction's
-- `app.tenant_id` (db/tx.ts sets it with set_config(..., true)); with no tenant set the setting is
-- NULL or '' and nothing matches. The table owner (the migrator, and the SECURITY DEFINER
-- functions it owns) bypasses RLS; the runtime roles never do. FORCE is deliberately not used so
-- the owner-run migrations and definer functions keep working.
-- IDEMPOTENT: ENABLE is repeatable and each policy is dropped before it is created.
DO $$
DECLARE
    v_table TEXT;
BEGIN
    FOREACH v_table IN ARRAY ARRAY[
        'tenant_status_change_outbox', 'agent_app', 'agent_app_revision', 'model_profile',
        'backend_profile', 'secret', 'secret_version', 'admin_api_key', 'channel_binding', 'session',
        'message_event', 'reply_cache', 'tool_invocation', 'reply_outbox', 'memory_entry',
        'session_summary', 'usage_event', 'audit_log', 'dead_letter', 'rate_limit_window'
    ] LOOP
        EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', v_table);
        EXECUTE format('DROP POLICY IF EXISTS tenant_isolation ON public.%I', v_table);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON public.%I '
            'USING (tenant_id = current_setting(''app.tenant_id'', true)) '
            'WITH CHECK (tenant_id = current_setting(''app.tenant_id'', true))',
            v_table
        );
    END LOOP;
END
$$;
