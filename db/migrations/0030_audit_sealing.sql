-- Hand-written: audit sealing off the hot path (issue #14). Until now every runtime audit entry
-- (message.finished from the step functions, model.turn / tool.invocation / budget refusals from
-- activities/audit-runtime.ts, the sweeper's message.repair) went through audit_append, whose
-- per-tenant chain lock is held until the writer's transaction commits: one tenant's finishes ran
-- one at a time, each waiting for the previous one's commit (WAL flush included).
-- Now the runtime writes through audit_enqueue into audit_pending (0029): no lock, same
-- transaction as the change it records (a rolled-back change leaves no entry), the row carrying
-- `mac`, an HMAC under the audit key over its content and pending_id. audit_seal, run by the
-- worker's sealer (runtime/audit-sealer.ts), by housekeeping and before verification, takes the
-- chain lock in a short transaction of its own, checks each pending row's mac, links the rows it
-- sees into audit_log (in pending_id order among them) computing seq, link and digest exactly as
-- audit_append does (so sealed rows verify as before) and deletes them from audit_pending.
-- Chain order is therefore sealing order, which is commit order up to one sealing pass: pending_id
-- is drawn before commit, so an entry with a lower pending_id whose transaction commits after a
-- pass is sealed in a later pass, behind entries with higher ids.
-- A row whose mac does not hold is never sealed: sealing of that tenant stops before it (and
-- verification reports it as `refused`) until an operator quarantines it (audit_quarantine).
-- The admin API keeps appending synchronously through audit_append (rare, and an operator expects
-- to see the entry at once); audit_append now seals the tenant's pending entries first (best
-- effort: a failure to seal never fails the admin mutation), so its entry follows every runtime
-- entry committed and sealable before it.
-- Not covered: whoever owns the database can DELETE a pending row (with the guard trigger
-- disabled) before it is sealed, undetected: the mac covers a row's content, not its existence,
-- and pending_id gaps are normal (rolled-back writers). A per-tenant counter would serialize the
-- tenant's writers again (the lock this migration removes) and be as writable by the owner.
--   audit_pending          RLS (FORCEd) like every tenant table; SELECT for both runtime roles,
--                          nothing else: rows enter only through audit_enqueue and leave only
--                          through audit_seal or audit_quarantine (a trigger refuses UPDATE,
--                          TRUNCATE and any DELETE not made by switchyard_owner, their definer).
--   audit_pending_canonical / audit_pending_mac
--                          the one definition of a pending row's mac (SECURITY DEFINER: pgcrypto).
--   audit_enqueue          SECURITY DEFINER (owner, FORCEd RLS): the tenant check of audit_append.
--   audit_seal             SECURITY DEFINER (owner, FORCEd RLS): one tenant, the caller's.
--   audit_quarantine       SECURITY DEFINER (owner): the operator's way past a refused row
--                          (platform only, POST .../audit-events/pending/{pending_id}/quarantine).
--   audit_pending_tenants  SECURITY DEFINER, owned by switchyard_lookup (added to its list in
--                          switchyard_claim_ownership, otherwise unchanged): which tenants have
--                          pending entries, oldest first, leaving out those a sealer backs off from.
--   audit_append (0021)    seals the pending entries first (best effort); otherwise unchanged.
--   execution_audit_finished (0027) enqueues instead of appending; otherwise unchanged.
-- IDEMPOTENT: CREATE OR REPLACE, DROP ... IF EXISTS before CREATE TRIGGER/POLICY; grants repeat.
REVOKE ALL ON public.audit_pending FROM PUBLIC;
--> statement-breakpoint
GRANT SELECT ON public.audit_pending TO tenant_admin_writer, tenant_app_writer, switchyard_lookup;
--> statement-breakpoint
ALTER TABLE public.audit_pending ENABLE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE public.audit_pending FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
DROP POLICY IF EXISTS tenant_isolation ON public.audit_pending;
--> statement-breakpoint
CREATE POLICY tenant_isolation ON public.audit_pending
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.audit_pending_guard()
RETURNS TRIGGER
LANGUAGE plpgsql
AS $$
BEGIN
    -- Sealing and quarantine (audit_seal, audit_quarantine: switchyard_owner, which no login can
    -- become) are the only ways out.
    IF TG_OP = 'DELETE' AND current_user = 'switchyard_owner' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_pending rows leave only by sealing: % is not allowed', TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;
--> statement-breakpoint
DROP TRIGGER IF EXISTS audit_pending_guard_rows ON public.audit_pending;
--> statement-breakpoint
CREATE TRIGGER audit_pending_guard_rows BEFORE UPDATE OR DELETE ON public.audit_pending
    FOR EACH ROW EXECUTE FUNCTION public.audit_pending_guard();
--> statement-breakpoint
DROP TRIGGER IF EXISTS audit_pending_guard_truncate ON public.audit_pending;
--> statement-breakpoint
CREATE TRIGGER audit_pending_guard_truncate BEFORE TRUNCATE ON public.audit_pending
    FOR EACH STATEMENT EXECUTE FUNCTION public.audit_pending_guard();
--> statement-breakpoint
-- The text a pending row's mac is the HMAC of: its content, its pending_id (its place in the
-- queue) and a label of its own (a pending mac can never pose as a chain digest). db/queries/audit.ts
-- builds the same text to recompute it in the application.
CREATE OR REPLACE FUNCTION public.audit_pending_canonical(r public.audit_pending) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, public
AS $$
    SELECT jsonb_build_object(
        'chain', 'switchyard.audit.v3.pending',
        'pending_id', r.pending_id,
        'tenant_id', r.tenant_id,
        'audit_id', r.audit_id,
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
        'occurred_at', to_char(r.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    )::text
$$;
--> statement-breakpoint
-- HMAC-SHA256 under the audit key of audit_pending_canonical.
CREATE OR REPLACE FUNCTION public.audit_pending_mac(r public.audit_pending) RETURNS text
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
    RETURN encode(switchyard_crypto.hmac(convert_to(public.audit_pending_canonical(r), 'UTF8'),
                                         decode(v_key, 'hex'), 'sha256'), 'hex');
END
$$;
--> statement-breakpoint
-- Records one entry (a jsonb object with audit_log's column names, as audit_append takes it;
-- pending_id, occurred_at and mac are set here) for the caller's tenant, to be sealed later.
-- No lock: concurrent writers of one tenant do not wait for each other.
CREATE OR REPLACE FUNCTION public.audit_enqueue(p_entry jsonb) RETURNS public.audit_pending
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_row public.audit_pending;
BEGIN
    v_row := jsonb_populate_record(NULL::public.audit_pending, p_entry);
    IF v_row.tenant_id IS NULL OR v_row.tenant_id IS DISTINCT FROM current_setting('app.tenant_id', true) THEN
        RAISE EXCEPTION 'audit entry for a tenant other than the transaction''s (% vs %)', v_row.tenant_id, current_setting('app.tenant_id', true) USING ERRCODE = '42501';
    END IF;
    v_row.pending_id := nextval('public.audit_pending_pending_id_seq'::regclass);
    v_row.occurred_at := clock_timestamp();
    v_row.details := coalesce(p_entry -> 'details', '{}'::jsonb);
    v_row.mac := public.audit_pending_mac(v_row);
    INSERT INTO public.audit_pending SELECT v_row.*;
    RETURN v_row;
END
$$;
--> statement-breakpoint
-- Seals up to p_limit of the tenant's pending entries (the caller's tenant only), those committed
-- and visible now, lowest pending_id first, in the caller's transaction, under the chain lock audit_append takes (p_wait false: gives
-- up at once when another transaction holds it, `busy`). Returns { sealed, more (entries are
-- left beyond the limit), refused (the audit_id of a row whose mac does not hold: it and every
-- later entry stay pending), busy, head_seq }.
CREATE OR REPLACE FUNCTION public.audit_seal(p_tenant_id text, p_limit int, p_wait boolean) RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_limit int := least(greatest(coalesce(p_limit, 500), 1), 10000);
    v_seq bigint;
    v_previous text;
    v_sealed int := 0;
    v_more boolean := false;
    v_refused text;
    p public.audit_pending;
    v_row public.audit_log;
BEGIN
    IF p_tenant_id IS NULL OR p_tenant_id IS DISTINCT FROM current_setting('app.tenant_id', true) THEN
        RAISE EXCEPTION 'sealing for a tenant other than the transaction''s (% vs %)', p_tenant_id, current_setting('app.tenant_id', true) USING ERRCODE = '42501';
    END IF;
    IF p_wait THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('audit_log:' || p_tenant_id, 0));
    ELSIF NOT pg_try_advisory_xact_lock(hashtextextended('audit_log:' || p_tenant_id, 0)) THEN
        RETURN jsonb_build_object('sealed', 0, 'more', true, 'refused', NULL, 'busy', true, 'head_seq', NULL);
    END IF;
    SELECT l.seq, l.digest INTO v_seq, v_previous
    FROM public.audit_log l WHERE l.tenant_id = p_tenant_id ORDER BY l.seq DESC LIMIT 1;
    v_seq := coalesce(v_seq, 0);
    FOR p IN
        SELECT * FROM public.audit_pending q WHERE q.tenant_id = p_tenant_id ORDER BY q.pending_id LIMIT v_limit + 1
    LOOP
        IF v_sealed = v_limit THEN
            v_more := true;
            EXIT;
        END IF;
        IF public.audit_pending_mac(p) IS DISTINCT FROM p.mac THEN
            v_refused := p.audit_id;
            EXIT;
        END IF;
        v_row := jsonb_populate_record(NULL::public.audit_log, to_jsonb(p));
        v_row.seq := v_seq + 1;
        v_row.previous_digest := v_previous;
        v_row.digest := public.audit_digest(v_row);
        INSERT INTO public.audit_log SELECT v_row.*;
        DELETE FROM public.audit_pending q WHERE q.pending_id = p.pending_id;
        v_seq := v_row.seq;
        v_previous := v_row.digest;
        v_sealed := v_sealed + 1;
    END LOOP;
    RETURN jsonb_build_object('sealed', v_sealed, 'more', v_more, 'refused', v_refused, 'busy', false,
                              'head_seq', nullif(v_seq, 0));
END
$$;
--> statement-breakpoint
-- audit_append (0021) seals the tenant's pending entries first (up to 10,000), under the lock it
-- already takes: an admin entry follows every runtime entry committed before it in the chain (an
-- operator's approval after the awaiting_approval it answers). Best effort: if sealing raises, its
-- work is undone (a subtransaction) and the admin entry is appended after the sealed prefix as it
-- stands, so one unsealable row can never fail the tenant's admin mutations; the pending entries
-- then follow the admin entry once sealing works again (a WARNING says so). A refused row (mac)
-- does not raise: sealing stops before it, as anywhere. Otherwise unchanged.
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
    BEGIN
        PERFORM public.audit_seal(v_row.tenant_id, 10000, true);
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'audit_append: sealing the pending entries of % failed (%: %); appended after the sealed prefix',
            v_row.tenant_id, SQLSTATE, SQLERRM;
    END;
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
-- Tenants with pending entries, the longest-waiting first (cross-tenant: switchyard_lookup), leaving
-- out p_skip: the tenants a sealer found refused and backs off from, so that they cannot fill every
-- pass (they sort first: their oldest entry never leaves) and starve the others.
CREATE OR REPLACE FUNCTION public.audit_pending_tenants(p_limit int, p_skip text[] DEFAULT '{}') RETURNS TABLE (tenant_id text)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    SELECT p.tenant_id FROM public.audit_pending p
    WHERE p.tenant_id <> ALL (coalesce(p_skip, '{}'))
    GROUP BY p.tenant_id ORDER BY min(p.pending_id)
    LIMIT least(greatest(coalesce(p_limit, 100), 1), 10000)
$$;
--> statement-breakpoint
-- The operator's way past a refused pending entry (its mac does not hold: edited, or inserted
-- without the key), which otherwise stops the tenant's sealing for good. Under the chain lock: seals
-- what precedes it, then links an `audit.quarantined` entry in its place (p_entry: the operator's
-- entry as audit_append takes it; the action is forced) whose details keep only what identifies the
-- refused row, never its content: pending_id, the audit_id it claims, its mac and the SHA-256 of
-- its canonical text (audit_pending_canonical: whoever holds a copy of the row can match it), then
-- deletes the row and seals what follows (best effort, as audit_append). The caller's tenant only.
-- Returns { outcome: quarantined | not_found | not_refused, audit_id (the quarantine entry),
-- sealed (entries sealed after it) }; on any outcome but `quarantined` nothing was removed and the
-- caller should roll back (the sealing ahead of it is the caller's to keep or not).
CREATE OR REPLACE FUNCTION public.audit_quarantine(p_pending_id bigint, p_entry jsonb) RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_row public.audit_log;
    p public.audit_pending;
    v_seq bigint;
    v_previous text;
    v_after jsonb;
BEGIN
    v_row := jsonb_populate_record(NULL::public.audit_log, p_entry);
    IF v_row.tenant_id IS NULL OR v_row.tenant_id IS DISTINCT FROM current_setting('app.tenant_id', true) THEN
        RAISE EXCEPTION 'audit entry for a tenant other than the transaction''s (% vs %)', v_row.tenant_id, current_setting('app.tenant_id', true) USING ERRCODE = '42501';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('audit_log:' || v_row.tenant_id, 0));
    SELECT * INTO p FROM public.audit_pending q
    WHERE q.tenant_id = v_row.tenant_id AND q.pending_id = p_pending_id;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    IF public.audit_pending_mac(p) IS NOT DISTINCT FROM p.mac THEN
        RETURN jsonb_build_object('outcome', 'not_refused');
    END IF;
    PERFORM public.audit_seal(v_row.tenant_id, 10000, true);
    SELECT l.seq, l.digest INTO v_seq, v_previous
    FROM public.audit_log l WHERE l.tenant_id = v_row.tenant_id ORDER BY l.seq DESC LIMIT 1;
    v_row.action := 'audit.quarantined';
    v_row.seq := coalesce(v_seq, 0) + 1;
    v_row.previous_digest := v_previous;
    v_row.occurred_at := clock_timestamp();
    v_row.details := coalesce(p_entry -> 'details', '{}'::jsonb) || jsonb_build_object(
        'pending_id', p.pending_id,
        'claimed_audit_id', p.audit_id,
        'mac', p.mac,
        'content_sha256', encode(sha256(convert_to(public.audit_pending_canonical(p), 'UTF8')), 'hex'));
    v_row.digest := public.audit_digest(v_row);
    INSERT INTO public.audit_log SELECT v_row.*;
    DELETE FROM public.audit_pending q WHERE q.pending_id = p.pending_id;
    BEGIN
        v_after := public.audit_seal(v_row.tenant_id, 10000, true);
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'audit_quarantine: sealing the pending entries of % failed (%: %)',
            v_row.tenant_id, SQLSTATE, SQLERRM;
    END;
    RETURN jsonb_build_object('outcome', 'quarantined', 'audit_id', v_row.audit_id,
                              'sealed', coalesce((v_after ->> 'sealed')::int, 0));
END
$$;
--> statement-breakpoint
-- The message's terminal audit entry, now enqueued: the finish no longer waits for the chain.
CREATE OR REPLACE FUNCTION public.execution_audit_finished(
    p_tenant_id text, p_event_id text, p_status text, p_outcome text, p_actor text
) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v record;
    v_masking text;
BEGIN
    SELECT e.session_id, e.binding_id, e.event_seq, b.channel, e.payload, e.execution_plan, e.trace_id INTO v
    FROM public.message_event e
    JOIN public.channel_binding b ON b.tenant_id = e.tenant_id AND b.binding_id = e.binding_id
    WHERE e.tenant_id = p_tenant_id AND e.event_id = p_event_id;
    SELECT s.log_masking_level INTO v_masking FROM public.tenant_runtime_snapshot(p_tenant_id) s;
    PERFORM public.audit_enqueue(jsonb_build_object(
        'tenant_id', p_tenant_id,
        'audit_id', 'aud_' || substr(p_event_id, 5) || '_' || replace(gen_random_uuid()::text, '-', ''),
        'action', 'message.finished',
        'actor_type', 'worker',
        'actor_id', p_actor,
        'decision', p_status,
        'reason', p_outcome,
        'binding_id', v.binding_id,
        'channel', v.channel,
        'user_id', CASE WHEN v_masking = 'strict'
                        THEN public.masking_pseudonym(p_tenant_id, v.payload ->> 'senderId')
                        ELSE v.payload ->> 'senderId' END,
        'session_id', v.session_id,
        'agent_app_id', v.execution_plan -> 'app' ->> 'id',
        'revision', (v.execution_plan -> 'app' ->> 'revision')::int,
        'model_profile_id', v.execution_plan -> 'modelProfile' ->> 'id',
        'event_seq', v.event_seq,
        'trace_id', v.trace_id,
        'error_type', CASE WHEN p_status = 'failed' THEN p_outcome END,
        'details', jsonb_build_object('event_id', p_event_id)
    ));
END
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.switchyard_claim_ownership() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v record;
    v_lookup text[] := ARRAY['find_binding_candidate', 'authenticate_admin_api_key',
                             'list_unstarted_message_events', 'list_repair_candidates', 'dead_letter_depth',
                             'audit_pending_tenants'];
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
SELECT public.switchyard_claim_ownership();
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.audit_enqueue(jsonb) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.audit_seal(text, int, boolean) TO tenant_app_writer, tenant_admin_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.audit_pending_tenants(int, text[]) TO tenant_app_writer;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.audit_quarantine(bigint, jsonb) TO tenant_admin_writer;
