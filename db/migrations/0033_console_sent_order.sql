-- Hand-written: the order console segments were sent in (reply_outbox.sent_seq, 0032), for the
-- console chat's cursor (api/admin/console.ts, GET …/console/messages). A reader that has read up
-- to sent_seq N must never be handed a segment numbered below N later, so a number must be taken
-- in commit order within a conversation: the trigger takes the conversation's (the session's)
-- transaction-scoped advisory lock before nextval, and the lock is held until the send commits.
-- Two sends of one conversation therefore commit in the order of their numbers; sends of other
-- conversations and of other channels are not touched (the trigger's WHEN is console-only).
-- Every segment becomes `sent` through segment_record's UPDATE (0015); rows are inserted `pending`.
-- The function runs as the invoker (tenant_app_writer inside segment_record, under its
-- runtime_scope), so it reads the message's session through RLS and needs USAGE on the sequence.
-- Backfill: console segments sent before this migration get numbers in sent_at order (a migrator
-- that is not a superuser sees no rows under FORCEd RLS and fills none: those stay unnumbered and
-- are not listed, which only affects conversations older than this migration).
-- IDEMPOTENT: CREATE SEQUENCE IF NOT EXISTS, CREATE OR REPLACE FUNCTION, DROP TRIGGER IF EXISTS
-- before CREATE TRIGGER, and the backfill fills only NULLs.
CREATE SEQUENCE IF NOT EXISTS public.reply_outbox_sent_seq AS bigint;
--> statement-breakpoint
GRANT USAGE ON SEQUENCE public.reply_outbox_sent_seq TO tenant_app_writer, tenant_admin_writer;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.reply_outbox_console_sent() RETURNS TRIGGER
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_session text;
BEGIN
    SELECT e.session_id INTO v_session
    FROM public.message_event e
    WHERE e.tenant_id = NEW.tenant_id AND e.event_id = NEW.event_id;
    PERFORM pg_advisory_xact_lock(hashtextextended(
        'console_sent:' || NEW.tenant_id || ':' || coalesce(v_session, NEW.event_id), 0));
    NEW.sent_seq := nextval('public.reply_outbox_sent_seq');
    RETURN NEW;
END;
$$;
--> statement-breakpoint
DROP TRIGGER IF EXISTS reply_outbox_console_sent ON public.reply_outbox;
--> statement-breakpoint
CREATE TRIGGER reply_outbox_console_sent
BEFORE UPDATE OF status ON public.reply_outbox
FOR EACH ROW
WHEN (NEW.channel = 'console' AND NEW.status = 'sent' AND OLD.status IS DISTINCT FROM 'sent')
EXECUTE FUNCTION public.reply_outbox_console_sent();
--> statement-breakpoint
UPDATE public.reply_outbox o
SET sent_seq = s.n
FROM (
    SELECT q.tenant_id, q.segment_id, nextval('public.reply_outbox_sent_seq') AS n
    FROM (
        SELECT tenant_id, segment_id
        FROM public.reply_outbox
        WHERE channel = 'console' AND status = 'sent' AND sent_seq IS NULL
        ORDER BY sent_at, segment_index
    ) q
) s
WHERE o.tenant_id = s.tenant_id AND o.segment_id = s.segment_id;
