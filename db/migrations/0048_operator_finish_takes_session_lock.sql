-- Hand-written: an operator's end of a message (POST …/messages/{id}/fail, as tenant_admin_writer)
-- takes its session's row lock too, as the runtime's finishes do since 0046, so the wake it sends
-- to the session's next message can no longer be lost to a race with that message's record.
--
-- 0046 locked only for tenant_app_writer: FOR NO KEY UPDATE needs UPDATE on session, which
-- tenant_admin_writer does not have (it may only read sessions), so an operator's fail computed
-- its wake list unlocked and a message recorded meanwhile could wait for a wake that never came,
-- until the sweeper's stale-head pass. The trigger function is now SECURITY DEFINER (owned by
-- switchyard_owner, like the other definer functions): it locks as the owner, whoever finishes.
-- Row-level security is FORCEd on session, so the owner still sees only the transaction's tenant
-- (`app.tenant_id`, set by withTenantTx): the lock reaches no other tenant's rows, and a role that
-- sets no tenant locks nothing, as before.
--
-- No deadlock, as in 0046: every status change to replied/failed ends one message (or a merged
-- turn's messages, all of one session); when the trigger asks for the session's row the finisher
-- holds that message's row (an operator's transaction also the tenant's audit chain: it appends
-- its entry first, so it never waits for the chain while holding the session), and a record waits
-- only for session rows and rate-limit windows, never for those.
-- IDEMPOTENT: CREATE OR REPLACE; grants are repeatable.
CREATE OR REPLACE FUNCTION public.message_finish_session_lock_trigger() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
BEGIN
    PERFORM 1 FROM public.session s
    WHERE s.tenant_id = NEW.tenant_id AND s.session_id = NEW.session_id
    FOR NO KEY UPDATE;
    RETURN NULL;
END
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.message_finish_session_lock_trigger() FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.message_finish_session_lock_trigger() TO tenant_app_writer, tenant_admin_writer;
--> statement-breakpoint
SELECT public.switchyard_claim_ownership();
