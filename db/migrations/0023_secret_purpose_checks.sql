-- Hand-written: the database half of purpose-bound secrets (0022 added secret.purpose). The admin
-- API checks every reference first and answers with a named 4xx; these triggers are the backstop
-- for any other writer. A reference must name a secret of the purpose its holder needs:
--   channel_binding.secret_ref (telegram) → telegram_bot, (wecom) → wecom_app;
--   model_profile[_version].api_key_secret_ref → model_api_key.
-- A missing secret is left to the foreign key. Purpose is immutable once the secret exists, so a
-- reference checked at write time stays valid without locking the secret. Violations raise
-- check_violation (23514) with a constraint name, which the admin API maps to a 400.
-- The trigger functions run with the invoker's rights (both runtime roles may read secret; RLS
-- keeps the lookup in the writer's tenant, which RLS also forces the referencing row to be in).
-- IDEMPOTENT: CREATE OR REPLACE, DROP TRIGGER IF EXISTS before each CREATE TRIGGER, and a
-- repeatable REVOKE.
CREATE OR REPLACE FUNCTION secret_reference_check_purpose()
RETURNS TRIGGER
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_ref TEXT;
    v_expected TEXT;
    v_constraint TEXT;
    v_actual TEXT;
BEGIN
    IF TG_TABLE_NAME = 'channel_binding' THEN
        v_ref := NEW.secret_ref;
        v_expected := CASE NEW.channel WHEN 'telegram' THEN 'telegram_bot' WHEN 'wecom' THEN 'wecom_app' END;
        v_constraint := 'channel_binding_secret_purpose_check';
    ELSIF TG_TABLE_NAME IN ('model_profile', 'model_profile_version') THEN
        v_ref := NEW.api_key_secret_ref;
        v_expected := 'model_api_key';
        v_constraint := TG_TABLE_NAME || '_api_key_secret_purpose_check';
    ELSE
        RAISE EXCEPTION 'secret_reference_check_purpose() is not defined for table %', TG_TABLE_NAME;
    END IF;
    IF v_ref IS NULL THEN
        RETURN NEW;
    END IF;
    SELECT s.purpose INTO v_actual
    FROM public.secret AS s
    WHERE s.tenant_id = NEW.tenant_id AND s.secret_ref = v_ref;
    IF FOUND AND v_actual IS DISTINCT FROM v_expected THEN
        RAISE EXCEPTION 'secret % has purpose %, % requires %', v_ref, v_actual, TG_TABLE_NAME, v_expected
            USING ERRCODE = 'check_violation', CONSTRAINT = v_constraint;
    END IF;
    RETURN NEW;
END;
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION secret_reference_check_purpose() FROM PUBLIC;
--> statement-breakpoint
DROP TRIGGER IF EXISTS channel_binding_secret_purpose ON public.channel_binding;
--> statement-breakpoint
CREATE TRIGGER channel_binding_secret_purpose
BEFORE INSERT OR UPDATE OF channel, secret_ref ON public.channel_binding
FOR EACH ROW EXECUTE FUNCTION secret_reference_check_purpose();
--> statement-breakpoint
DROP TRIGGER IF EXISTS model_profile_api_key_secret_purpose ON public.model_profile;
--> statement-breakpoint
CREATE TRIGGER model_profile_api_key_secret_purpose
BEFORE INSERT OR UPDATE OF api_key_secret_ref ON public.model_profile
FOR EACH ROW EXECUTE FUNCTION secret_reference_check_purpose();
--> statement-breakpoint
DROP TRIGGER IF EXISTS model_profile_version_api_key_secret_purpose ON public.model_profile_version;
--> statement-breakpoint
CREATE TRIGGER model_profile_version_api_key_secret_purpose
BEFORE INSERT ON public.model_profile_version
FOR EACH ROW EXECUTE FUNCTION secret_reference_check_purpose();
--> statement-breakpoint
CREATE OR REPLACE FUNCTION secret_reject_purpose_change()
RETURNS TRIGGER
LANGUAGE plpgsql
AS $$
BEGIN
    IF NEW.purpose IS DISTINCT FROM OLD.purpose THEN
        RAISE EXCEPTION 'secret purpose is immutable'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'secret_purpose_immutable';
    END IF;
    RETURN NEW;
END;
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION secret_reject_purpose_change() FROM PUBLIC;
--> statement-breakpoint
DROP TRIGGER IF EXISTS secret_purpose_immutable ON public.secret;
--> statement-breakpoint
CREATE TRIGGER secret_purpose_immutable
BEFORE UPDATE OF purpose ON public.secret
FOR EACH ROW EXECUTE FUNCTION secret_reject_purpose_change();
