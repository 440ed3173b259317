-- Hand-written, after 0040: artifact_still_needed also keeps every artifact of a message with an
-- open dead letter of any kind. 0040 kept only the attachment of a segment with an open dead
-- letter; an execution dead letter (an operator's retry runs the execution again, which reads the
-- message's media) left that media to be deleted under it. Unchanged otherwise; plain SQL
-- (invoker), the one definition of "kept", used by artifact_retention_tenants and _mark.
-- IDEMPOTENT: CREATE OR REPLACE keeps the function's owner and grants; the grant repeats 0040's.
CREATE OR REPLACE FUNCTION public.artifact_still_needed(p_tenant_id text, p_artifact_id text, p_event_id text)
RETURNS boolean
LANGUAGE sql
STABLE
SET search_path = pg_catalog, public
AS $$
    SELECT EXISTS (
        SELECT 1 FROM public.message_event e
        WHERE e.tenant_id = p_tenant_id AND e.event_id = p_event_id AND e.status NOT IN ('replied', 'failed'))
    OR EXISTS (
        SELECT 1 FROM public.dead_letter d
        WHERE d.tenant_id = p_tenant_id AND d.event_id = p_event_id AND d.status = 'open')
    OR EXISTS (
        SELECT 1 FROM public.reply_outbox o
        JOIN public.message_event e ON e.tenant_id = o.tenant_id AND e.event_id = o.event_id
        WHERE o.tenant_id = p_tenant_id AND o.payload_ref = p_artifact_id
          AND o.status NOT IN ('sent', 'discarded')
          AND (e.status NOT IN ('replied', 'failed')
               OR EXISTS (SELECT 1 FROM public.dead_letter d
                          WHERE d.tenant_id = o.tenant_id AND d.segment_id = o.segment_id AND d.status = 'open')))
$$;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.artifact_still_needed(text, text, text) TO switchyard_lookup;
