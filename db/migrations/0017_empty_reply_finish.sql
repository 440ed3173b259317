-- Hand-written: a reply with nothing to send (blank after the output guardrails) no longer goes
-- straight to `replied` in execution_commit, which skipped the terminal transition's audit entry
-- (`message.finished`) and session summary; it stays reply_pending and message_finish moves it
-- (every one of its zero segments is sent), like any other reply.
-- IDEMPOTENT: CREATE OR REPLACE with an unchanged signature.
CREATE OR REPLACE FUNCTION public.execution_commit(
    p_tenant_id text, p_event_id text, p_owner text, p_lease_seconds int,
    p_reply_id text, p_text text, p_content_digest text, p_outcome text, p_segments jsonb,
    p_wake_waiters boolean
) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    f record;
    v_count int := jsonb_array_length(p_segments);
    v_status text;
    v_outcome text;
BEGIN
    PERFORM public.runtime_scope(p_tenant_id);
    SELECT status, outcome, reply_id, payload, session_id INTO f FROM public.message_event
    WHERE tenant_id = p_tenant_id AND event_id = p_event_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('kind', 'fenced_out', 'status', NULL);
    END IF;
    IF f.status <> 'running' THEN
        -- Committed earlier (a retried or zombie attempt): the pinned reply, never a second one.
        IF f.reply_id IS NULL THEN
            RETURN jsonb_build_object('kind', 'fenced_out', 'status', f.status);
        END IF;
        RETURN jsonb_build_object(
            'kind', 'pinned', 'status', f.status, 'outcome', f.outcome, 'reply_id', f.reply_id,
            'segment_ids', (SELECT coalesce(jsonb_agg(segment_id ORDER BY segment_index), '[]'::jsonb)
                            FROM public.reply_outbox WHERE tenant_id = p_tenant_id AND reply_id = f.reply_id),
            'wake', '[]'::jsonb);
    END IF;

    -- Seeds: memory before the reply, with its source event.
    INSERT INTO public.memory_entry (tenant_id, memory_id, user_id, session_id, source_event_id, role,
                                     content, content_digest)
    SELECT p_tenant_id, 'mem_' || substr(p_event_id, 5) || '_' || m.suffix, f.payload ->> 'senderId',
           f.session_id, p_event_id, m.role, m.content, encode(sha256(convert_to(m.content, 'UTF8')), 'hex')
    FROM (VALUES ('user', coalesce(f.payload ->> 'text', ''), 'u'), ('assistant', p_text, 'a'))
         AS m(role, content, suffix)
    WHERE length(m.content) > 0
    ON CONFLICT DO NOTHING;

    -- Pin the reply and leave `running` in one write of the row (the whole commit is one
    -- transaction, so completed → reply_pending is never observable in between). The new fencing
    -- token fences out any older attempt still holding the execution.
    -- reply_pending even with nothing to send: the terminal transition (audit entry, session
    -- summary) is message_finish's for every reply, an empty one included.
    v_status := 'reply_pending';
    UPDATE public.message_event
    SET status = v_status, reply_id = p_reply_id, reply_cache_ref = p_reply_id, segment_count = v_count,
        outcome = coalesce(outcome, p_outcome), committed_at = now(),
        execution_fencing_token = execution_fencing_token + 1, execution_owner = p_owner, updated_at = now()
    WHERE tenant_id = p_tenant_id AND event_id = p_event_id
    RETURNING outcome INTO v_outcome;
    INSERT INTO public.reply_cache (tenant_id, reply_id, event_id, content, content_digest)
    VALUES (p_tenant_id, p_reply_id, p_event_id, p_text, p_content_digest);
    INSERT INTO public.reply_outbox (tenant_id, event_id, reply_id, idempotency_key, segment_id,
                                     segment_index, segment_count, content, channel, target, status)
    SELECT p_tenant_id, p_event_id, p_reply_id, s.value ->> 'idempotency_key', s.value ->> 'segment_id',
           (s.ordinality - 1)::int, v_count, s.value ->> 'content', f.payload ->> 'channel',
           jsonb_build_object('chatId', f.payload -> 'chatId', 'chatType', f.payload -> 'chatType',
                              'threadId', f.payload -> 'threadId', 'userId', f.payload -> 'senderId'),
           'pending'
    FROM jsonb_array_elements(p_segments) WITH ORDINALITY AS s(value, ordinality);

    RETURN jsonb_build_object(
        'kind', 'committed', 'status', v_status, 'outcome', v_outcome, 'reply_id', p_reply_id,
        'segment_ids', (SELECT coalesce(jsonb_agg(s.value -> 'segment_id' ORDER BY s.ordinality), '[]'::jsonb)
                        FROM jsonb_array_elements(p_segments) WITH ORDINALITY AS s(value, ordinality)),
        -- Oldest waiting messages of the tenant: this execution's concurrency permit is free now.
        'wake', CASE WHEN p_wake_waiters THEN (
            SELECT coalesce(jsonb_agg(w.workflow_id), '[]'::jsonb) FROM (
                SELECT workflow_id FROM public.message_event
                WHERE tenant_id = p_tenant_id AND status = 'received' AND workflow_id IS NOT NULL
                ORDER BY created_at LIMIT 3) AS w)
            ELSE '[]'::jsonb END);
END
$$;
