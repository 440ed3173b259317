-- Hand-written, after 0034 (the artifact table, reply_outbox.segment_kind, backend_profile.artifacts,
-- channel_binding.capabilities, model_profile.vision, the object_storage secret purpose):
--   * artifact is tenant-owned: row-level security on app.tenant_id like every other such table
--     (0005; switchyard_claim_ownership FORCEs it), the worker reads and writes it, the admin API
--     reads it. No role may UPDATE an artifact (its digest and key are facts) or DELETE it (only
--     housekeeping would, through a function of its own).
--   * a backend profile's artifacts.credentials_secret_ref must name an object_storage secret:
--     secret_reference_check_purpose (0023) learns the backend_profile table.
--   * bindings written before 0034 get the capabilities of their channel (version 1, the same
--     values channels/capabilities.ts records for new ones).
-- IDEMPOTENT: ENABLE/GRANT/REVOKE repeat, the policy and the trigger are dropped first, CREATE OR
-- REPLACE, and the backfill only touches rows still holding the column default.
ALTER TABLE public.artifact ENABLE ROW LEVEL SECURITY;
--> statement-breakpoint
DROP POLICY IF EXISTS tenant_isolation ON public.artifact;
--> statement-breakpoint
CREATE POLICY tenant_isolation ON public.artifact
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
--> statement-breakpoint
REVOKE ALL PRIVILEGES ON public.artifact FROM PUBLIC;
--> statement-breakpoint
GRANT SELECT, INSERT ON public.artifact TO tenant_app_writer;
--> statement-breakpoint
GRANT SELECT ON public.artifact TO tenant_admin_writer;
--> statement-breakpoint
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
    ELSIF TG_TABLE_NAME = 'backend_profile' THEN
        v_ref := NEW.artifacts ->> 'credentials_secret_ref';
        v_expected := 'object_storage';
        v_constraint := 'backend_profile_artifacts_secret_purpose_check';
    ELSE
        RAISE EXCEPTION 'secret_reference_check_purpose() is not defined for table %', TG_TABLE_NAME;
    END IF;
    IF v_ref IS NULL THEN
        RETURN NEW;
    END IF;
    SELECT s.purpose INTO v_actual
    FROM public.secret AS s
    WHERE s.tenant_id = NEW.tenant_id AND s.secret_ref = v_ref;
    -- backend_profile has no foreign key to the secret (the reference sits in jsonb): a missing
    -- secret is refused here too.
    IF (NOT FOUND AND TG_TABLE_NAME = 'backend_profile') OR (FOUND AND v_actual IS DISTINCT FROM v_expected) THEN
        RAISE EXCEPTION 'secret % has purpose %, % requires %', v_ref, coalesce(v_actual, 'none'),
            TG_TABLE_NAME, v_expected
            USING ERRCODE = 'check_violation', CONSTRAINT = v_constraint;
    END IF;
    RETURN NEW;
END;
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION secret_reference_check_purpose() FROM PUBLIC;
--> statement-breakpoint
DROP TRIGGER IF EXISTS backend_profile_artifacts_secret_purpose ON public.backend_profile;
--> statement-breakpoint
CREATE TRIGGER backend_profile_artifacts_secret_purpose
BEFORE INSERT OR UPDATE OF artifacts ON public.backend_profile
FOR EACH ROW EXECUTE FUNCTION secret_reference_check_purpose();
--> statement-breakpoint
UPDATE public.channel_binding
SET capabilities = CASE channel
    WHEN 'telegram' THEN '{"typing": true, "drafts": true, "media_in": ["image", "audio", "video", "file"], "media_out": ["image", "file"], "text_limit": {"unit": "utf16", "max": 4096}}'::jsonb
    WHEN 'wecom' THEN '{"typing": false, "drafts": false, "media_in": ["image", "audio", "video", "file"], "media_out": ["image", "file"], "text_limit": {"unit": "utf8_bytes", "max": 2048}}'::jsonb
    ELSE '{"typing": false, "drafts": false, "media_in": [], "media_out": [], "text_limit": {"unit": "utf16", "max": 4096}}'::jsonb
END
WHERE capabilities = '{}'::jsonb;
--> statement-breakpoint
SELECT switchyard_claim_ownership();
