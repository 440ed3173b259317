-- Hand-written: version events for the in-process configuration registry (registry/). Every change
-- to what ingress and execution read per message raises one NOTIFY on channel
-- `switchyard_registry`, delivered to every listening API and worker process when (and only if)
-- the transaction commits, so a process drops its cached copy right after the change is visible.
--
-- Sources (one notification per logical change):
--   tenant_status_change_outbox INSERT → {"k":"tenant_status","t","v","s","e"}: the seeds' outbox is
--     the event of every status transition (transition_tenant_status writes it in the same
--     transaction); its consumer is the registry, each event id applied once per process.
--   tenant UPDATE → {"k":"tenant","t","v"}: configuration changes (update_tenant_configuration,
--     limits, sampling, masking, defaults). A status change that bumped the version by one came
--     through transition_tenant_status and is announced by its outbox row instead; a status change
--     without that bump (an owner editing the row directly) is announced here.
--   channel_binding INSERT/UPDATE/DELETE → {"k":"binding","t","id","v"}
--   secret UPDATE/DELETE (rotation bumps current_version; disabling) → {"k":"secret","t","id","v"}
--   agent_app UPDATE (publish, rollback, status) → {"k":"app","t","id","v"}
--   model_profile / backend_profile UPDATE → {"k":"model_profile"|"backend_profile","t","id","v"}
-- Payloads carry ids and versions only: never a value, a route key digest or a secret. Any role
-- that can connect may LISTEN, and only the switchyard logins may connect (0021).
-- The trigger functions touch no table and call only pg_notify (pg_catalog), so they run as the
-- invoker and need no SECURITY DEFINER or grant: EXECUTE is not checked when a trigger fires.
-- IDEMPOTENT: CREATE OR REPLACE FUNCTION; DROP TRIGGER IF EXISTS before each CREATE TRIGGER.
CREATE OR REPLACE FUNCTION registry_on_tenant_status_event() RETURNS TRIGGER
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
BEGIN
    PERFORM pg_notify('switchyard_registry', jsonb_build_object(
        'k', 'tenant_status', 't', NEW.tenant_id, 'v', NEW.next_version, 's', NEW.next_status,
        'e', NEW.event_id)::text);
    RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION registry_on_tenant_change() RETURNS TRIGGER
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
BEGIN
    PERFORM pg_notify('switchyard_registry', jsonb_build_object('k', 'tenant', 't', NEW.tenant_id, 'v', NEW.version)::text);
    RETURN NULL;
END;
$$;
--> statement-breakpoint
-- One function for the tenant-owned objects keyed (tenant_id, <id column>) with a version column.
-- TG_ARGV: the event kind, the id column, the version column.
CREATE OR REPLACE FUNCTION registry_on_object_change() RETURNS TRIGGER
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_row JSONB := to_jsonb(CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END);
BEGIN
    PERFORM pg_notify('switchyard_registry', jsonb_build_object(
        'k', TG_ARGV[0], 't', v_row ->> 'tenant_id', 'id', v_row ->> TG_ARGV[1],
        'v', (v_row ->> TG_ARGV[2])::bigint)::text);
    RETURN NULL;
END;
$$;
--> statement-breakpoint
DROP TRIGGER IF EXISTS registry_tenant_status_event ON tenant_status_change_outbox;
--> statement-breakpoint
CREATE TRIGGER registry_tenant_status_event
AFTER INSERT ON tenant_status_change_outbox
FOR EACH ROW EXECUTE FUNCTION registry_on_tenant_status_event();
--> statement-breakpoint
DROP TRIGGER IF EXISTS registry_tenant_change ON tenant;
--> statement-breakpoint
CREATE TRIGGER registry_tenant_change
AFTER UPDATE ON tenant
FOR EACH ROW
WHEN (OLD.* IS DISTINCT FROM NEW.*
      AND NOT (OLD.status IS DISTINCT FROM NEW.status AND NEW.version = OLD.version + 1))
EXECUTE FUNCTION registry_on_tenant_change();
--> statement-breakpoint
DROP TRIGGER IF EXISTS registry_binding_change ON channel_binding;
--> statement-breakpoint
CREATE TRIGGER registry_binding_change
AFTER INSERT OR UPDATE OR DELETE ON channel_binding
FOR EACH ROW EXECUTE FUNCTION registry_on_object_change('binding', 'binding_id', 'version');
--> statement-breakpoint
DROP TRIGGER IF EXISTS registry_secret_change ON secret;
--> statement-breakpoint
CREATE TRIGGER registry_secret_change
AFTER UPDATE OR DELETE ON secret
FOR EACH ROW EXECUTE FUNCTION registry_on_object_change('secret', 'secret_ref', 'current_version');
--> statement-breakpoint
DROP TRIGGER IF EXISTS registry_app_change ON agent_app;
--> statement-breakpoint
CREATE TRIGGER registry_app_change
AFTER UPDATE ON agent_app
FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*)
EXECUTE FUNCTION registry_on_object_change('app', 'app_id', 'version');
--> statement-breakpoint
DROP TRIGGER IF EXISTS registry_model_profile_change ON model_profile;
--> statement-breakpoint
CREATE TRIGGER registry_model_profile_change
AFTER UPDATE ON model_profile
FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*)
EXECUTE FUNCTION registry_on_object_change('model_profile', 'model_profile_id', 'version');
--> statement-breakpoint
DROP TRIGGER IF EXISTS registry_backend_profile_change ON backend_profile;
--> statement-breakpoint
CREATE TRIGGER registry_backend_profile_change
AFTER UPDATE ON backend_profile
FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*)
EXECUTE FUNCTION registry_on_object_change('backend_profile', 'profile_id', 'version');
--> statement-breakpoint
SELECT switchyard_claim_ownership();
