-- Hand-written: runtime roles. The application connects as the schema owner and drops to one of
-- these NOLOGIN roles per transaction (db/tx.ts), so grants and row-level security apply to every
-- application statement. Roles are cluster-wide, so this is IDEMPOTENT: it tolerates roles left by
-- another database of the same cluster, including one migrating concurrently.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'tenant_admin_writer') THEN
        CREATE ROLE tenant_admin_writer NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- created concurrently by another migrator
END
$$;
--> statement-breakpoint
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'tenant_app_writer') THEN
        CREATE ROLE tenant_app_writer NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- created concurrently by another migrator
END
$$;
--> statement-breakpoint
-- The application connects as the schema owner and switches role per transaction. A superuser
-- may switch to any role. A non-superuser owner needs membership with the SET option: since
-- PostgreSQL 16 the automatic grant a CREATEROLE creator receives has ADMIN but not SET, so check
-- for SET there (MEMBER before 16, where membership implied SET ROLE) and grant it explicitly.
DO $$
DECLARE
    v_role TEXT;
    v_pg16 BOOLEAN := current_setting('server_version_num')::int >= 160000;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['tenant_admin_writer', 'tenant_app_writer'] LOOP
        IF NOT pg_catalog.pg_has_role(current_user, v_role, CASE WHEN v_pg16 THEN 'SET' ELSE 'MEMBER' END) THEN
            IF v_pg16 THEN
                EXECUTE format('GRANT %I TO %I WITH SET TRUE, INHERIT FALSE', v_role, current_user);
            ELSE
                EXECUTE format('GRANT %I TO %I', v_role, current_user);
            END IF;
        END IF;
    END LOOP;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE EXCEPTION 'the migrating role % cannot switch to the runtime roles', current_user
        USING HINT = 'As a superuser: GRANT tenant_admin_writer, tenant_app_writer TO the owner (WITH SET TRUE), then migrate again.';
END
$$;
