-- Hand-written: a message's end takes its session's row lock, so the wake that frees the session's
-- next message can no longer be lost to a race with that message's record.
--
-- A finishing message (message_finish, execution_fail_at_start, a merged turn's end, the sweeper's
-- dead letter) computes whom to wake (execution_wake_list) after its status update and before it
-- commits; the next message's first execution_start reads whether the predecessor has finished.
-- Without a common lock, a message recorded while its predecessor finished could miss both: not
-- yet committed when the finisher read its wake list, and started (its first execution_start)
-- before the finisher committed — it then waited for a wake that never came, until the sweeper's
-- stale-head pass (a minute or more of silence in that chat). Ingress's record updates the session
-- row (last_event_seq, 0042); now a status change to replied/failed locks that row too. Either the
-- finisher locks first, and the record waits for its commit (the new message's first start then
-- sees the predecessor finished), or the record does, and the finisher's later wake-list read
-- (a fresh snapshot in READ COMMITTED) sees the new message and wakes it.
--
-- No deadlock: when it asks for the session's row, the finisher holds its own message row and
-- possibly its merged followers' rows (message_event_finish_merged fires first: trigger names
-- order AFTER triggers, and it must stay so), the tenant's permit lock or a reply_outbox row; a
-- record (or a batch of them, api/ingress/record-batcher.ts) waits only for session rows and
-- rate-limit windows, never for any of those.
-- An operator's action (tenant_admin_writer, which may only read sessions) takes no lock: its rare
-- race is still the sweeper's to catch.
-- IDEMPOTENT: CREATE OR REPLACE, DROP TRIGGER IF EXISTS; grants are repeatable.
CREATE OR REPLACE FUNCTION public.message_finish_session_lock_trigger() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
BEGIN
    IF current_user = 'tenant_app_writer' THEN
        PERFORM 1 FROM public.session s
        WHERE s.tenant_id = NEW.tenant_id AND s.session_id = NEW.session_id
        FOR NO KEY UPDATE;
    END IF;
    RETURN NULL;
END
$$;
--> statement-breakpoint
DROP TRIGGER IF EXISTS message_event_finish_session_lock ON public.message_event;
--> statement-breakpoint
CREATE TRIGGER message_event_finish_session_lock
    AFTER UPDATE OF status ON public.message_event
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN ('replied', 'failed'))
    EXECUTE FUNCTION public.message_finish_session_lock_trigger();
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.message_finish_session_lock_trigger() FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.message_finish_session_lock_trigger() TO tenant_app_writer, tenant_admin_writer;
--> statement-breakpoint
SELECT public.switchyard_claim_ownership();
