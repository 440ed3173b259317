-- Hand-written: housekeeping (the Temporal Schedule of runtime/housekeeping-schedule.ts).
--   switchyard_janitor  NOLOGIN, BYPASSRLS, owns the functions below and may only SELECT/DELETE the
--                       tables they prune (plus the retention checkpoints). No login can become it.
--   audit_retention_prune   per tenant, removes audit rows older than the tenant's
--                           audit_retention_days (oldest first, bounded per run) and moves the
--                           tenant's audit_retention_checkpoint to the last removed row (never the
--                           head; only a row whose keyed digest holds), signed with the
--                           connection's audit key exactly as lib/audit-key.ts
--                           signRetentionCheckpoint does (a label of its own: a verification
--                           checkpoint cannot pose as one), so the chain stays verifiable.
--                           The append-only guard lets only this role delete audit rows.
--   housekeeping_prune      rate-limit windows older than 10 minutes and replay-guard rows older
--                           than 15 minutes (ingress keeps them 2 × 300 s plus a skew margin).
--   dead_letter_depth       open dead letters by kind, across tenants (a metrics gauge).
-- The worker (tenant_app_writer) may execute them; each returns what it did. Also: message_finish
-- returns the outcome, and execution_audit_finished records the message's trace id (last statements).
-- IDEMPOTENT: roles tolerate existing ones; CREATE OR REPLACE; grants are repeatable.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'switchyard_janitor') THEN
        BEGIN
            CREATE ROLE switchyard_janitor NOLOGIN NOINHERIT BYPASSRLS;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END IF;
    ALTER ROLE switchyard_janitor NOLOGIN BYPASSRLS;
    IF NOT pg_catalog.pg_has_role(current_user, 'switchyard_janitor', 'MEMBER') THEN
        EXECUTE format('GRANT switchyard_janitor TO %I', current_user);
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE EXCEPTION 'the migrating role % cannot create switchyard_janitor', current_user
        USING HINT = 'Have a superuser run: CREATE ROLE switchyard_janitor NOLOGIN BYPASSRLS; GRANT switchyard_janitor TO <migrator>;';
END
$$;
--> statement-breakpoint
GRANT USAGE ON SCHEMA public TO switchyard_janitor;
--> statement-breakpoint
GRANT USAGE ON SCHEMA switchyard_crypto TO switchyard_janitor;
--> statement-breakpoint
GRANT SELECT, DELETE ON public.audit_log, public.rate_limit_window, public.ingress_replay_guard
TO switchyard_janitor;
--> statement-breakpoint
GRANT SELECT ON public.tenant TO switchyard_janitor;
--> statement-breakpoint
GRANT SELECT, INSERT, UPDATE ON public.audit_retention_checkpoint TO switchyard_janitor;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.audit_digest(public.audit_log) TO switchyard_janitor;
--> statement-breakpoint
GRANT SELECT ON public.audit_retention_checkpoint TO tenant_admin_writer;
--> statement-breakpoint
GRANT SELECT ON public.dead_letter TO switchyard_lookup;
--> statement-breakpoint
REVOKE ALL ON public.audit_retention_checkpoint FROM PUBLIC;
--> statement-breakpoint
ALTER TABLE public.audit_retention_checkpoint ENABLE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE public.audit_retention_checkpoint FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
DROP POLICY IF EXISTS tenant_isolation ON public.audit_retention_checkpoint;
--> statement-breakpoint
CREATE POLICY tenant_isolation ON public.audit_retention_checkpoint
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
--> statement-breakpoint
-- The append-only guard, with the one exception: retention, run by the janitor role.
CREATE OR REPLACE FUNCTION reject_append_only_change()
RETURNS TRIGGER
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_TABLE_NAME = 'audit_log' AND TG_OP = 'DELETE' AND current_user = 'switchyard_janitor' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '% is append-only: % is not allowed', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.audit_retention_prune(p_limit int) RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_key text := current_setting('app.audit_key', true);
    v_limit int := least(greatest(p_limit, 1), 100000);
    v record;
    v_upto bigint;
    v_row public.audit_log;
    v_digest text;
    v_removed int;
    v_out jsonb := '[]'::jsonb;
BEGIN
    IF v_key IS NULL OR v_key !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'the audit chain key (app.audit_key) is not set on this connection'
            USING ERRCODE = '42501';
    END IF;
    FOR v IN
        SELECT t.tenant_id, t.audit_retention_days, c.seq AS from_seq, c.removed_total
        FROM public.tenant t
        LEFT JOIN public.audit_retention_checkpoint c ON c.tenant_id = t.tenant_id
        WHERE EXISTS (
            SELECT 1 FROM public.audit_log l
            WHERE l.tenant_id = t.tenant_id
              AND l.occurred_at < now() - make_interval(days => t.audit_retention_days))
        ORDER BY t.tenant_id
    LOOP
        -- One writer per chain: the lock audit_append takes.
        PERFORM pg_advisory_xact_lock(hashtextextended('audit_log:' || v.tenant_id, 0));
        -- Never the head: the next append links to it (a chain pruned empty would restart at seq 1).
        SELECT max(s.seq) INTO v_upto FROM (
            SELECT l.seq FROM public.audit_log l
            WHERE l.tenant_id = v.tenant_id
              AND l.occurred_at < now() - make_interval(days => v.audit_retention_days)
              AND l.seq < (SELECT max(h.seq) FROM public.audit_log h WHERE h.tenant_id = v.tenant_id)
            ORDER BY l.seq LIMIT v_limit
        ) s;
        CONTINUE WHEN v_upto IS NULL;
        SELECT l.* INTO v_row FROM public.audit_log l WHERE l.tenant_id = v.tenant_id AND l.seq = v_upto;
        -- The checkpoint vouches for the row it names: a row whose digest does not hold (edited,
        -- or written without the key) is not signed away; its tenant is left for an operator.
        IF public.audit_digest(v_row) IS DISTINCT FROM v_row.digest THEN
            v_out := v_out || jsonb_build_array(jsonb_build_object(
                'tenant_id', v.tenant_id, 'removed', 0, 'upto_seq', v_upto, 'refused', 'boundary_invalid'));
            CONTINUE;
        END IF;
        v_digest := v_row.digest;
        DELETE FROM public.audit_log l WHERE l.tenant_id = v.tenant_id AND l.seq <= v_upto;
        GET DIAGNOSTICS v_removed = ROW_COUNT;
        INSERT INTO public.audit_retention_checkpoint AS c (tenant_id, seq, digest, signature, removed_total, pruned_at)
        VALUES (
            v.tenant_id, v_upto, v_digest,
            encode(switchyard_crypto.hmac(
                convert_to('switchyard.audit.v3.retention' || E'\n' || v.tenant_id || E'\n' || v_upto::text
                           || E'\n' || v_digest, 'UTF8'),
                decode(v_key, 'hex'), 'sha256'), 'hex'),
            v_removed, now())
        ON CONFLICT (tenant_id) DO UPDATE
        SET seq = excluded.seq, digest = excluded.digest, signature = excluded.signature,
            removed_total = c.removed_total + excluded.removed_total, pruned_at = excluded.pruned_at;
        v_out := v_out || jsonb_build_array(jsonb_build_object(
            'tenant_id', v.tenant_id, 'removed', v_removed, 'upto_seq', v_upto));
    END LOOP;
    RETURN v_out;
END
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.housekeeping_prune(p_limit int) RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_limit int := least(greatest(p_limit, 1), 100000);
    v_windows int;
    v_guards int;
BEGIN
    DELETE FROM public.rate_limit_window w WHERE w.ctid IN (
        SELECT x.ctid FROM public.rate_limit_window x
        WHERE x.window_start < now() - interval '10 minutes' LIMIT v_limit);
    GET DIAGNOSTICS v_windows = ROW_COUNT;
    DELETE FROM public.ingress_replay_guard g WHERE g.ctid IN (
        SELECT x.ctid FROM public.ingress_replay_guard x
        WHERE x.seen_at < now() - interval '15 minutes' LIMIT v_limit);
    GET DIAGNOSTICS v_guards = ROW_COUNT;
    RETURN jsonb_build_object('rate_limit_windows', v_windows, 'replay_guards', v_guards);
END
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.dead_letter_depth() RETURNS TABLE (kind text, n bigint)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    SELECT d.kind, count(*) FROM public.dead_letter d WHERE d.status = 'open' GROUP BY d.kind
$$;
--> statement-breakpoint
-- The new functions to their owners (switchyard_claim_ownership, 0021: the lookup's and the
-- janitor's by name) and the FORCE on the new table happen in the claim below.
--
-- A function a later migration creates is not executable by PUBLIC even before the claim after the
-- migration run revokes it (this covers the migrating role's and the owner's new functions).
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
--> statement-breakpoint
ALTER DEFAULT PRIVILEGES FOR ROLE switchyard_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
--> statement-breakpoint
SELECT public.switchyard_claim_ownership();
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.audit_retention_prune(int), public.housekeeping_prune(int),
    public.dead_letter_depth() TO tenant_app_writer;
--> statement-breakpoint
-- message_finish (0015) also returns the message's outcome, for the finished-messages metric;
-- otherwise unchanged.
CREATE OR REPLACE FUNCTION public.message_finish(
    p_tenant_id text, p_event_id text, p_failure_outcome text, p_failure_reason text, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    cur record;
    v_status text;
    v_outcome text;
    v_summary text;
BEGIN
    PERFORM public.runtime_scope(p_tenant_id);
    SELECT status, outcome, session_id, event_seq, reply_id, segment_count INTO cur
    FROM public.message_event WHERE tenant_id = p_tenant_id AND event_id = p_event_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('status', NULL, 'wake', '[]'::jsonb);
    END IF;
    IF cur.status IN ('replied', 'failed') THEN
        RETURN jsonb_build_object('status', cur.status, 'outcome', cur.outcome,
                                  'wake', public.execution_wake_list(p_tenant_id, p_event_id));
    END IF;
    v_outcome := cur.outcome;
    IF p_failure_outcome IS NOT NULL THEN
        v_outcome := coalesce(cur.outcome, p_failure_outcome);
        -- The failure's own outcome is what the audit reports (the stored one is kept if set).
        UPDATE public.message_event
        SET status = 'failed', outcome = coalesce(outcome, p_failure_outcome),
            failure_reason = p_failure_reason, updated_at = now()
        WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
        v_status := 'failed';
        v_outcome := p_failure_outcome;
    ELSE
        IF cur.status <> 'reply_pending' OR (
            SELECT count(*) FROM public.reply_outbox o
            WHERE o.tenant_id = p_tenant_id AND o.reply_id = cur.reply_id AND o.status = 'sent'
        ) <> cur.segment_count THEN
            RETURN jsonb_build_object('status', cur.status, 'wake', '[]'::jsonb, 'not_all_sent', true);
        END IF;
        IF cur.outcome IN ('budget_exhausted', 'model_failed') THEN
            v_status := 'failed';
        ELSE
            v_status := 'replied';
        END IF;
        UPDATE public.message_event
        SET status = v_status,
            failure_reason = CASE WHEN v_status = 'failed' THEN 'fallback reply delivered' ELSE failure_reason END,
            updated_at = now()
        WHERE tenant_id = p_tenant_id AND event_id = p_event_id;
    END IF;
    IF v_status = 'replied' THEN
        -- The session summary, kept incrementally: the previous one plus this turn's lines (user,
        -- then assistant; whitespace runs folded, 300 characters each), the newest lines kept within
        -- 4000 characters and 40 lines. Turns arrive in event_seq order (per-session FIFO); the
        -- base_event_seq CAS drops a turn older than the summary (a late DLQ retry).
        SELECT string_agg(m.role || ': ' || left(regexp_replace(m.content, '\s+', ' ', 'g'), 300), E'\n'
                          ORDER BY m.role DESC)
        INTO v_summary
        FROM public.memory_entry m
        WHERE m.tenant_id = p_tenant_id
          AND m.memory_id IN ('mem_' || substr(p_event_id, 5) || '_u', 'mem_' || substr(p_event_id, 5) || '_a');
        SELECT concat_ws(E'\n', nullif(ss.content, ''), v_summary) INTO v_summary
        FROM (SELECT 1) AS one
        LEFT JOIN public.session_summary ss ON ss.tenant_id = p_tenant_id AND ss.session_id = cur.session_id;
        SELECT coalesce(string_agg(x.line, E'\n' ORDER BY x.n), '') INTO v_summary
        FROM (
            SELECT l.line, l.n,
                   sum(length(l.line) + 1) OVER (ORDER BY l.n DESC) - 1 AS total,
                   row_number() OVER (ORDER BY l.n DESC) AS k
            FROM unnest(string_to_array(nullif(v_summary, ''), E'\n')) WITH ORDINALITY AS l(line, n)
        ) AS x
        WHERE (x.total <= 4000 AND x.k <= 40) OR x.k = 1;
        INSERT INTO public.session_summary (tenant_id, session_id, base_event_seq, content, content_digest)
        VALUES (p_tenant_id, cur.session_id, cur.event_seq, v_summary,
                encode(sha256(convert_to(v_summary, 'UTF8')), 'hex'))
        ON CONFLICT (tenant_id, session_id) DO UPDATE
            SET content = excluded.content, content_digest = excluded.content_digest,
                base_event_seq = excluded.base_event_seq,
                summary_version = session_summary.summary_version + 1, updated_at = now()
            WHERE session_summary.base_event_seq < excluded.base_event_seq;
    END IF;
    -- Last: the audit entry holds the tenant's chain lock until commit, so nothing else runs under it.
    PERFORM public.execution_audit_finished(p_tenant_id, p_event_id, v_status, v_outcome, p_actor);
    RETURN jsonb_build_object('status', v_status, 'outcome', v_outcome,
                              'wake', public.execution_wake_list(p_tenant_id, p_event_id));
END
$$;
--> statement-breakpoint
-- execution_audit_finished (0015) also records the message's trace id on its audit row.
CREATE OR REPLACE FUNCTION public.execution_audit_finished(
    p_tenant_id text, p_event_id text, p_status text, p_outcome text, p_actor text
) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v record;
BEGIN
    SELECT e.session_id, e.binding_id, e.event_seq, b.channel, e.payload, e.execution_plan, e.trace_id INTO v
    FROM public.message_event e
    JOIN public.channel_binding b ON b.tenant_id = e.tenant_id AND b.binding_id = e.binding_id
    WHERE e.tenant_id = p_tenant_id AND e.event_id = p_event_id;
    PERFORM public.audit_append(jsonb_build_object(
        'tenant_id', p_tenant_id,
        'audit_id', 'aud_' || substr(p_event_id, 5) || '_' || replace(gen_random_uuid()::text, '-', ''),
        'action', 'message.finished',
        'actor_type', 'worker',
        'actor_id', p_actor,
        'decision', p_status,
        'reason', p_outcome,
        'binding_id', v.binding_id,
        'channel', v.channel,
        'user_id', v.payload ->> 'senderId',
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
