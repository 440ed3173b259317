-- Hand-written: immutability guards that hold even for a role that somehow gets UPDATE/DELETE
-- (grants in 0004 already withhold them). audit_log is a hash chain, usage_event the billing truth,
-- agent_app_revision a published artifact executions pin, secret_version the key history; none of
-- them may change after insert, nor be truncated.
-- IDEMPOTENT: CREATE OR REPLACE and DROP TRIGGER IF EXISTS before each CREATE TRIGGER.
CREATE OR REPLACE FUNCTION reject_append_only_change()
RETURNS TRIGGER
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % is not allowed', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION reject_append_only_change() FROM PUBLIC;
--> statement-breakpoint
DO $$
DECLARE
    v_table TEXT;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['audit_log', 'usage_event', 'agent_app_revision', 'secret_version'] LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON public.%I', v_table || '_append_only', v_table);
        EXECUTE format(
            'CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON public.%I '
            'FOR EACH ROW EXECUTE FUNCTION reject_append_only_change()',
            v_table || '_append_only', v_table
        );
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON public.%I', v_table || '_no_truncate', v_table);
        EXECUTE format(
            'CREATE TRIGGER %I BEFORE TRUNCATE ON public.%I '
            'FOR EACH STATEMENT EXECUTE FUNCTION reject_append_only_change()',
            v_table || '_no_truncate', v_table
        );
    END LOOP;
END
$$;
