-- Hand-written: the database roles the seeds intend ("SECURITY DEFINER 函数由不属于运行时连接池的专用 owner
-- 持有"). Before this the application logged in as the schema owner: it owned every table and
-- definer function, RLS did not apply to it outside withTenantTx, and it could ALTER anything.
--
--   switchyard_owner   NOLOGIN. Owns the schema objects and the tenant-scoped SECURITY DEFINER
--                      functions. Row-level security is FORCEd, so even the owner sees a tenant's
--                      rows only with that tenant in `app.tenant_id`.
--   switchyard_lookup  NOLOGIN, BYPASSRLS, SELECT on five tables and nothing else. Owns the four
--                      cross-tenant read functions (route-key → binding, key digest → API key, the
--                      sweeper's scans), the only code that may look across tenants.
--   switchyard_api     the API's login: SET (not INHERIT) tenant_admin_writer for admin
--                      transactions; INHERIT tenant_app_writer for ingress (webhooks record
--                      messages through tenant_app_writer's functions in autocommit).
--   switchyard_worker  the worker's login: tenant_app_writer only.
-- The login roles are created NOLOGIN here, with no password: provisioning (db/provision.ts; the
-- embedded default does it itself) turns on LOGIN with a password that never enters the repo.
-- Migrations run as the migrating identity (a superuser, or a role that is a member of
-- switchyard_owner): db/migrate.ts hands every object to switchyard_owner afterwards
-- (switchyard_claim_ownership), so objects later migrations create are owned the same way.
--
-- Also: EXECUTE on every function revoked from PUBLIC (each role gets what it calls), CREATE on
-- the public schema revoked from PUBLIC, TEMPORARY/CONNECT on the database only for our roles,
-- audit rows appended only through audit_append (direct INSERT revoked), and the chain keyed:
-- each digest is an HMAC-SHA256 (pgcrypto) with a key the application holds
-- (`app.audit_key`, a connection parameter; lib/audit-key.ts). Rows of the unkeyed v2 chain written
-- before this migration verify as broken (no deployment holds any).
-- Needs a superuser for BYPASSRLS and the roles; the HINT says what a DBA runs otherwise.
-- IDEMPOTENT: every role step tolerates existing roles; ALTER/GRANT/REVOKE are repeatable.
DO $$
DECLARE
    v_role TEXT;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['switchyard_owner', 'switchyard_lookup', 'switchyard_api', 'switchyard_worker'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN NOINHERIT', v_role);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- created concurrently by another migrator
            END;
        END IF;
    END LOOP;
    -- The definer roles never log in, whatever a previous provisioning did.
    ALTER ROLE switchyard_owner NOLOGIN NOBYPASSRLS;
    ALTER ROLE switchyard_lookup NOLOGIN BYPASSRLS;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE EXCEPTION 'the migrating role % cannot create the switchyard roles', current_user
        USING HINT = 'Migrate as a superuser, or have one run: CREATE ROLE switchyard_owner NOLOGIN; CREATE ROLE switchyard_lookup NOLOGIN BYPASSRLS; CREATE ROLE switchyard_api NOLOGIN; CREATE ROLE switchyard_worker NOLOGIN; GRANT switchyard_owner, switchyard_lookup TO <migrator>;';
END
$$;
--> statement-breakpoint
-- Memberships. PostgreSQL 16+ separates SET from INHERIT; before 16 membership implies both.
DO $$
DECLARE
    v_pg16 BOOLEAN := current_setting('server_version_num')::int >= 160000;
BEGIN
    IF v_pg16 THEN
        EXECUTE 'GRANT tenant_admin_writer TO switchyard_api WITH SET TRUE, INHERIT FALSE';
        EXECUTE 'GRANT tenant_app_writer TO switchyard_api WITH SET TRUE, INHERIT TRUE';
        EXECUTE 'GRANT tenant_app_writer TO switchyard_worker WITH SET TRUE, INHERIT TRUE';
        EXECUTE 'REVOKE tenant_admin_writer FROM switchyard_worker';
    ELSE
        EXECUTE 'GRANT tenant_admin_writer, tenant_app_writer TO switchyard_api';
        EXECUTE 'GRANT tenant_app_writer TO switchyard_worker';
    END IF;
    ALTER ROLE switchyard_api INHERIT;
    ALTER ROLE switchyard_worker INHERIT;
    -- The migrator must be able to hand objects to the definer roles.
    IF NOT pg_catalog.pg_has_role(current_user, 'switchyard_owner', 'MEMBER') THEN
        EXECUTE format('GRANT switchyard_owner TO %I', current_user);
    END IF;
    IF NOT pg_catalog.pg_has_role(current_user, 'switchyard_lookup', 'MEMBER') THEN
        EXECUTE format('GRANT switchyard_lookup TO %I', current_user);
    END IF;
END
$$;
--> statement-breakpoint
CREATE SCHEMA IF NOT EXISTS switchyard_crypto;
--> statement-breakpoint
CREATE EXTENSION IF NOT EXISTS pgcrypto WITH SCHEMA switchyard_crypto;
--> statement-breakpoint
REVOKE ALL ON SCHEMA switchyard_crypto FROM PUBLIC;
--> statement-breakpoint
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
--> statement-breakpoint
DO $$
BEGIN
    EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO switchyard_api, switchyard_worker', current_database());
END
$$;
--> statement-breakpoint
GRANT USAGE ON SCHEMA public TO tenant_admin_writer, tenant_app_writer, switchyard_lookup;
--> statement-breakpoint
-- The keyed chain (v3). audit_digest is the one definition of a row's digest, used on append and
-- on verification; without the key it refuses rather than hash with none. SECURITY DEFINER: only
-- the owner may use pgcrypto (its schema is not granted to the runtime roles).
CREATE OR REPLACE FUNCTION public.audit_digest(r public.audit_log) RETURNS text
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_key text := current_setting('app.audit_key', true);
BEGIN
    IF v_key IS NULL OR v_key !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'the audit chain key (app.audit_key) is not set on this connection'
            USING ERRCODE = '42501';
    END IF;
    RETURN encode(switchyard_crypto.hmac(convert_to(jsonb_build_object(
        'chain', 'switchyard.audit.v3',
        'tenant_id', r.tenant_id,
        'audit_id', r.audit_id,
        'seq', r.seq,
        'action', r.action,
        'actor_type', r.actor_type,
        'actor_id', r.actor_id,
        'reason', r.reason,
        'binding_id', r.binding_id,
        'channel', r.channel,
        'user_id', r.user_id,
        'session_id', r.session_id,
        'agent_app_id', r.agent_app_id,
        'revision', r.revision,
        'model_profile_id', r.model_profile_id,
        'tool_name', r.tool_name,
        'decision', r.decision,
        'event_seq', r.event_seq,
        'latency_ms', r.latency_ms,
        'error_type', r.error_type,
        'cost_minor', r.cost_minor,
        'request_id', r.request_id,
        'trace_id', r.trace_id,
        'before_version', r.before_version,
        'after_version', r.after_version,
        'details', r.details,
        'occurred_at', to_char(r.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'previous_digest', r.previous_digest
    )::text, 'UTF8'), decode(v_key, 'hex'), 'sha256'), 'hex');
END
$$;
--> statement-breakpoint
-- SECURITY DEFINER now (the runtime roles lose INSERT on audit_log), owned by switchyard_owner and
-- under FORCEd RLS: the tenant check below and the policy's WITH CHECK both still apply.
CREATE OR REPLACE FUNCTION public.audit_append(p_entry jsonb) RETURNS public.audit_log
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_row public.audit_log;
    v_seq bigint;
    v_previous text;
BEGIN
    v_row := jsonb_populate_record(NULL::public.audit_log, p_entry);
    IF v_row.tenant_id IS NULL OR v_row.tenant_id IS DISTINCT FROM current_setting('app.tenant_id', true) THEN
        RAISE EXCEPTION 'audit entry for a tenant other than the transaction''s (% vs %)', v_row.tenant_id, current_setting('app.tenant_id', true) USING ERRCODE = '42501';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('audit_log:' || v_row.tenant_id, 0));
    SELECT l.seq, l.digest INTO v_seq, v_previous
    FROM public.audit_log l WHERE l.tenant_id = v_row.tenant_id ORDER BY l.seq DESC LIMIT 1;
    v_row.seq := coalesce(v_seq, 0) + 1;
    v_row.previous_digest := v_previous;
    v_row.occurred_at := clock_timestamp();
    v_row.details := coalesce(p_entry -> 'details', '{}'::jsonb);
    v_row.digest := public.audit_digest(v_row);
    INSERT INTO public.audit_log SELECT v_row.*;
    RETURN v_row;
END
$$;
--> statement-breakpoint
REVOKE INSERT ON public.audit_log FROM tenant_admin_writer, tenant_app_writer;
--> statement-breakpoint
-- The runtime snapshot returns the transaction's trusted tenant only.
CREATE OR REPLACE FUNCTION public.tenant_runtime_snapshot(p_tenant_id TEXT)
RETURNS TABLE (
    tenant_id TEXT,
    status TEXT,
    version BIGINT,
    rate_limit_rpm BIGINT,
    max_concurrent_executions BIGINT,
    monthly_token_budget BIGINT,
    monthly_spend_limit_minor BIGINT,
    billing_currency CHAR(3),
    log_masking_level TEXT,
    trace_sampling_rate REAL,
    default_agent_app_id TEXT,
    default_backend_profile_id TEXT
)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    SELECT t.tenant_id, t.status, t.version, t.rate_limit_rpm, t.max_concurrent_executions,
           t.monthly_token_budget, t.monthly_spend_limit_minor, t.billing_currency,
           t.log_masking_level, t.trace_sampling_rate, t.default_agent_app_id,
           t.default_backend_profile_id
    FROM public.tenant AS t
    WHERE t.tenant_id = p_tenant_id
      AND t.tenant_id = current_setting('app.tenant_id', true);
$$;
--> statement-breakpoint
-- Hands every object of the schema to switchyard_owner, the cross-tenant read functions to
-- switchyard_lookup and the housekeeping functions to switchyard_janitor (both by name; 0025
-- creates the janitor and its functions), never an extension's objects. db/migrate.ts calls it
-- after each migration run (objects a later migration
-- creates belong to the migrator until then). Also FORCEs row-level security on every table that
-- enables it. Callable by the migrator only (EXECUTE revoked from PUBLIC, granted to no one).
CREATE OR REPLACE FUNCTION public.switchyard_claim_ownership() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v record;
    v_lookup text[] := ARRAY['find_binding_candidate', 'authenticate_admin_api_key',
                             'list_unstarted_message_events', 'list_repair_candidates', 'dead_letter_depth'];
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
-- What the cross-tenant read functions read, and nothing more.
GRANT SELECT ON public.channel_binding, public.tenant, public.secret, public.secret_version,
    public.admin_api_key, public.message_event TO switchyard_lookup;
--> statement-breakpoint
GRANT USAGE ON SCHEMA switchyard_crypto TO switchyard_owner;
--> statement-breakpoint
SELECT public.switchyard_claim_ownership();
--> statement-breakpoint
-- Each runtime role executes exactly what it calls. The control plane:
GRANT EXECUTE ON FUNCTION
    public.transition_tenant_status(text, bigint, text, text, text, text, text),
    public.authenticate_admin_api_key(text),
    public.tenant_runtime_snapshot(text),
    public.audit_append(jsonb),
    public.audit_digest(public.audit_log),
    public.execution_wake_list(text, text),
    public.permit_waiters(text, int),
    public.message_repair_begin(text, text, text, text, int, boolean)
TO tenant_admin_writer;
--> statement-breakpoint
DO $$
DECLARE
    v_sig regprocedure;
BEGIN
    SELECT p.oid::regprocedure INTO v_sig FROM pg_catalog.pg_proc p
    WHERE p.proname = 'update_tenant_configuration' AND p.pronamespace = 'public'::regnamespace;
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO tenant_admin_writer', v_sig);
END
$$;
--> statement-breakpoint
-- The data plane (ingress and the worker): every non-trigger function but the control plane's.
DO $$
DECLARE
    v record;
BEGIN
    FOR v IN
        SELECT p.oid::regprocedure AS sig FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace
          AND p.prorettype <> 'trigger'::regtype
          AND p.proname NOT IN ('transition_tenant_status', 'update_tenant_configuration',
                                'authenticate_admin_api_key', 'switchyard_claim_ownership')
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO tenant_app_writer', v.sig);
    END LOOP;
END
$$;
--> statement-breakpoint
-- The security sink stays write-only for ingress; pruning goes through this function (rows older
-- than p_older_than_seconds, at most p_limit per call, oldest first), which returns how many it
-- removed.
CREATE OR REPLACE FUNCTION public.ingress_security_prune(p_older_than_seconds int, p_limit int) RETURNS int
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    WITH gone AS (
        DELETE FROM public.ingress_security_event
        WHERE ctid IN (
            SELECT ctid FROM public.ingress_security_event
            WHERE occurred_at < now() - make_interval(secs => greatest(p_older_than_seconds, 3600))
            ORDER BY occurred_at
            LIMIT least(greatest(p_limit, 1), 10000)
        )
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;
--> statement-breakpoint
SELECT public.switchyard_claim_ownership();
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.ingress_security_prune(int, int) TO tenant_app_writer;
