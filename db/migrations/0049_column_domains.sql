-- Written from db/schema/domains.ts (the domains, in declaration order) and drizzle-kit's diff of the
-- schema (which CHECKs each column drops): the single-column CHECKs of the tables a message writes
-- become domains, each with its CHECK's condition over VALUE and, but for the audit entry's shared
-- columns (audit_entry_*), its CHECK's name (`<domain>_check`). PostgreSQL re-reads and re-plans
-- every CHECK of a table for each INSERT or UPDATE statement and an UPDATE checks them all; a
-- domain's checks stay parsed in the type cache and an UPDATE checks only the columns it assigns
-- (why and how much: db/schema/domains.ts). Rules over several columns and jsonb shapes stay CHECKs.
-- Changing a column to a domain with a check rewrites its table and rebuilds its indexes under
-- ACCESS EXCLUSIVE (one ALTER TABLE per table, all of a table's columns in one pass) until the
-- migration run commits: on a large message_event or audit_log that is a pause for ingress and the
-- worker. Stop the API and the worker while it runs, not only their traffic: a statement a running
-- process prepared before it fails once per connection inside a transaction ("cached plan must not
-- change result type", 0A000). The changed columns lose their planner statistics; the migration
-- ends by analyzing the 11 tables.
CREATE DOMAIN public.session_session_id AS text CONSTRAINT session_session_id_check CHECK (VALUE ~ '^ses_[0-9A-Za-z_-]+$' AND length(VALUE) BETWEEN 5 AND 104);
--> statement-breakpoint
CREATE DOMAIN public.session_kind AS text CONSTRAINT session_kind_check CHECK (VALUE IN ('direct', 'group', 'thread'));
--> statement-breakpoint
CREATE DOMAIN public.session_identity_key AS text CONSTRAINT session_identity_key_check CHECK (length(btrim(VALUE)) BETWEEN 1 AND 2000);
--> statement-breakpoint
CREATE DOMAIN public.session_status AS text CONSTRAINT session_status_check CHECK (VALUE IN ('active', 'closed'));
--> statement-breakpoint
CREATE DOMAIN public.session_state_version AS bigint CONSTRAINT session_state_version_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.session_last_event_seq AS bigint CONSTRAINT session_last_event_seq_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.message_event_event_id AS text CONSTRAINT message_event_event_id_check CHECK (VALUE ~ '^evt_[0-9A-Za-z_-]+$' AND length(VALUE) BETWEEN 5 AND 104);
--> statement-breakpoint
CREATE DOMAIN public.message_event_external_message_id AS text CONSTRAINT message_event_external_message_id_check CHECK (length(btrim(VALUE)) BETWEEN 1 AND 500);
--> statement-breakpoint
CREATE DOMAIN public.message_event_idempotency_key AS text CONSTRAINT message_event_idempotency_key_check CHECK (length(btrim(VALUE)) BETWEEN 1 AND 200);
--> statement-breakpoint
CREATE DOMAIN public.message_event_event_seq AS bigint CONSTRAINT message_event_event_seq_check CHECK (VALUE >= 1);
--> statement-breakpoint
CREATE DOMAIN public.message_event_kind AS text CONSTRAINT message_event_kind_check CHECK (VALUE IN ('text', 'unsupported'));
--> statement-breakpoint
CREATE DOMAIN public.message_event_payload_digest AS text CONSTRAINT message_event_payload_digest_check CHECK (VALUE ~ '^[0-9a-f]+$' AND length(VALUE) = 64);
--> statement-breakpoint
CREATE DOMAIN public.message_event_status AS text CONSTRAINT message_event_status_check CHECK (VALUE IN ('received', 'running', 'execution_reconciling', 'completed', 'reply_pending', 'replied', 'failed'));
--> statement-breakpoint
CREATE DOMAIN public.message_event_request_id AS text CONSTRAINT message_event_request_id_check CHECK (length(btrim(VALUE)) BETWEEN 1 AND 200);
--> statement-breakpoint
CREATE DOMAIN public.message_event_fencing_token AS bigint CONSTRAINT message_event_fencing_token_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.message_event_execution_attempts AS integer CONSTRAINT message_event_execution_attempts_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.message_event_reply_id AS text CONSTRAINT message_event_reply_id_check CHECK (VALUE ~ '^rep_[0-9A-Za-z_-]+$' AND length(VALUE) BETWEEN 5 AND 104);
--> statement-breakpoint
CREATE DOMAIN public.message_event_segment_count AS integer CONSTRAINT message_event_segment_count_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.message_event_repair_count AS integer CONSTRAINT message_event_repair_count_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.audit_entry_audit_id AS text CONSTRAINT audit_entry_audit_id_check CHECK (VALUE ~ '^aud_[0-9A-Za-z_-]+$' AND length(VALUE) BETWEEN 5 AND 104);
--> statement-breakpoint
CREATE DOMAIN public.audit_entry_action AS text CONSTRAINT audit_entry_action_check CHECK (length(btrim(VALUE)) BETWEEN 1 AND 200);
--> statement-breakpoint
CREATE DOMAIN public.audit_entry_actor_type AS text CONSTRAINT audit_entry_actor_type_check CHECK (length(btrim(VALUE)) BETWEEN 1 AND 100);
--> statement-breakpoint
CREATE DOMAIN public.audit_entry_actor_id AS text CONSTRAINT audit_entry_actor_id_check CHECK (length(btrim(VALUE)) BETWEEN 1 AND 200);
--> statement-breakpoint
CREATE DOMAIN public.audit_entry_channel AS text CONSTRAINT audit_entry_channel_check CHECK (VALUE IN ('telegram', 'wecom', 'console'));
--> statement-breakpoint
CREATE DOMAIN public.audit_entry_latency_ms AS bigint CONSTRAINT audit_entry_latency_ms_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.audit_entry_cost_minor AS bigint CONSTRAINT audit_entry_cost_minor_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.audit_log_seq AS bigint CONSTRAINT audit_log_seq_check CHECK (VALUE >= 1);
--> statement-breakpoint
CREATE DOMAIN public.audit_log_previous_digest AS text CONSTRAINT audit_log_previous_digest_check CHECK (VALUE ~ '^[0-9a-f]+$' AND length(VALUE) = 64);
--> statement-breakpoint
CREATE DOMAIN public.audit_log_digest AS text CONSTRAINT audit_log_digest_check CHECK (VALUE ~ '^[0-9a-f]+$' AND length(VALUE) = 64);
--> statement-breakpoint
CREATE DOMAIN public.audit_pending_mac AS text CONSTRAINT audit_pending_mac_check CHECK (VALUE ~ '^[0-9a-f]+$' AND length(VALUE) = 64);
--> statement-breakpoint
CREATE DOMAIN public.reply_outbox_segment_id AS text CONSTRAINT reply_outbox_segment_id_check CHECK (VALUE ~ '^seg_[0-9A-Za-z_-]+$' AND length(VALUE) BETWEEN 5 AND 104);
--> statement-breakpoint
CREATE DOMAIN public.reply_outbox_idempotency_key AS text CONSTRAINT reply_outbox_idempotency_key_check CHECK (length(btrim(VALUE)) BETWEEN 1 AND 200);
--> statement-breakpoint
CREATE DOMAIN public.reply_outbox_channel AS text CONSTRAINT reply_outbox_channel_check CHECK (VALUE IN ('telegram', 'wecom', 'console'));
--> statement-breakpoint
CREATE DOMAIN public.reply_outbox_segment_kind AS text CONSTRAINT reply_outbox_segment_kind_check CHECK (VALUE IN ('text', 'image', 'file'));
--> statement-breakpoint
CREATE DOMAIN public.reply_outbox_status AS text CONSTRAINT reply_outbox_status_check CHECK (VALUE IN ('pending', 'sending', 'reconciling', 'sent', 'retryable', 'unknown', 'failed', 'discarded'));
--> statement-breakpoint
CREATE DOMAIN public.reply_outbox_attempts AS integer CONSTRAINT reply_outbox_attempts_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.reply_outbox_fencing_token AS bigint CONSTRAINT reply_outbox_fencing_token_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.tool_invocation_invocation_id AS text CONSTRAINT tool_invocation_invocation_id_check CHECK (VALUE ~ '^inv_[0-9A-Za-z_-]+$' AND length(VALUE) BETWEEN 5 AND 104);
--> statement-breakpoint
CREATE DOMAIN public.tool_invocation_tool_name AS text CONSTRAINT tool_invocation_tool_name_check CHECK (VALUE ~ '^[A-Za-z0-9_-]+$' AND length(VALUE) BETWEEN 1 AND 64);
--> statement-breakpoint
CREATE DOMAIN public.tool_invocation_capability_digest AS text CONSTRAINT tool_invocation_capability_digest_check CHECK (VALUE ~ '^[0-9a-f]+$' AND length(VALUE) = 64);
--> statement-breakpoint
CREATE DOMAIN public.tool_invocation_idempotency_key AS text CONSTRAINT tool_invocation_idempotency_key_check CHECK (length(btrim(VALUE)) BETWEEN 1 AND 200);
--> statement-breakpoint
CREATE DOMAIN public.tool_invocation_request_digest AS text CONSTRAINT tool_invocation_request_digest_check CHECK (VALUE ~ '^[0-9a-f]+$' AND length(VALUE) = 64);
--> statement-breakpoint
CREATE DOMAIN public.tool_invocation_status AS text CONSTRAINT tool_invocation_status_check CHECK (VALUE IN ('prepared', 'dispatching', 'accepted', 'rejected', 'unknown', 'reconciling', 'manual', 'failed', 'awaiting_approval', 'refused'));
--> statement-breakpoint
CREATE DOMAIN public.tool_invocation_attempts AS integer CONSTRAINT tool_invocation_attempts_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.tool_invocation_fencing_token AS bigint CONSTRAINT tool_invocation_fencing_token_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.tool_invocation_model_call_id AS text CONSTRAINT tool_invocation_model_call_id_check CHECK (length(VALUE) BETWEEN 1 AND 200);
--> statement-breakpoint
CREATE DOMAIN public.live_draft_chat_id AS text CONSTRAINT live_draft_chat_id_check CHECK (length(btrim(VALUE)) BETWEEN 1 AND 200);
--> statement-breakpoint
CREATE DOMAIN public.live_draft_provider_message_id AS text CONSTRAINT live_draft_provider_message_id_check CHECK (length(btrim(VALUE)) BETWEEN 1 AND 100);
--> statement-breakpoint
CREATE DOMAIN public.live_draft_state AS text CONSTRAINT live_draft_state_check CHECK (VALUE IN ('reserved', 'open', 'abandoned', 'delivered', 'replaced', 'deleted'));
--> statement-breakpoint
CREATE DOMAIN public.memory_entry_memory_id AS text CONSTRAINT memory_entry_memory_id_check CHECK (VALUE ~ '^mem_[0-9A-Za-z_-]+$' AND length(VALUE) BETWEEN 5 AND 104);
--> statement-breakpoint
CREATE DOMAIN public.memory_entry_role AS text CONSTRAINT memory_entry_role_check CHECK (VALUE IN ('user', 'assistant'));
--> statement-breakpoint
CREATE DOMAIN public.memory_entry_content_digest AS text CONSTRAINT memory_entry_content_digest_check CHECK (VALUE ~ '^[0-9a-f]+$' AND length(VALUE) = 64);
--> statement-breakpoint
CREATE DOMAIN public.memory_entry_visibility AS text CONSTRAINT memory_entry_visibility_check CHECK (VALUE IN ('session', 'user'));
--> statement-breakpoint
CREATE DOMAIN public.memory_entry_index_status AS text CONSTRAINT memory_entry_index_status_check CHECK (VALUE IN ('not_indexed', 'pending', 'indexed', 'failed'));
--> statement-breakpoint
CREATE DOMAIN public.reply_cache_reply_id AS text CONSTRAINT reply_cache_reply_id_check CHECK (VALUE ~ '^rep_[0-9A-Za-z_-]+$' AND length(VALUE) BETWEEN 5 AND 104);
--> statement-breakpoint
CREATE DOMAIN public.reply_cache_content_digest AS text CONSTRAINT reply_cache_content_digest_check CHECK (VALUE ~ '^[0-9a-f]+$' AND length(VALUE) = 64);
--> statement-breakpoint
CREATE DOMAIN public.session_summary_version AS bigint CONSTRAINT session_summary_version_check CHECK (VALUE >= 1);
--> statement-breakpoint
CREATE DOMAIN public.session_summary_base_event_seq AS bigint CONSTRAINT session_summary_base_event_seq_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.session_summary_content_digest AS text CONSTRAINT session_summary_content_digest_check CHECK (VALUE ~ '^[0-9a-f]+$' AND length(VALUE) = 64);
--> statement-breakpoint
CREATE DOMAIN public.session_summary_status AS text CONSTRAINT session_summary_status_check CHECK (VALUE IN ('pending', 'ready', 'failed'));
--> statement-breakpoint
CREATE DOMAIN public.usage_event_usage_id AS text CONSTRAINT usage_event_usage_id_check CHECK (VALUE ~ '^use_[0-9A-Za-z_-]+$' AND length(VALUE) BETWEEN 5 AND 104);
--> statement-breakpoint
CREATE DOMAIN public.usage_event_tokens_in AS bigint CONSTRAINT usage_event_tokens_in_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.usage_event_tokens_out AS bigint CONSTRAINT usage_event_tokens_out_check CHECK (VALUE >= 0);
--> statement-breakpoint
CREATE DOMAIN public.usage_event_cost_minor AS bigint CONSTRAINT usage_event_cost_minor_check CHECK (VALUE >= 0);
--> statement-breakpoint
-- Triggers whose WHEN reads a column changed below: PostgreSQL refuses to change the type under
-- them, so they are dropped here and created again, as they were (0020, 0033, 0036, 0046), at the end.
DROP TRIGGER message_event_permit_release ON public.message_event;
--> statement-breakpoint
DROP TRIGGER message_event_finish_merged ON public.message_event;
--> statement-breakpoint
DROP TRIGGER message_event_finish_session_lock ON public.message_event;
--> statement-breakpoint
DROP TRIGGER reply_outbox_console_sent ON public.reply_outbox;
--> statement-breakpoint
ALTER TABLE "audit_log"
    DROP CONSTRAINT "audit_log_audit_id_check",
    DROP CONSTRAINT "audit_log_seq_check",
    DROP CONSTRAINT "audit_log_action_check",
    DROP CONSTRAINT "audit_log_actor_type_check",
    DROP CONSTRAINT "audit_log_actor_id_check",
    DROP CONSTRAINT "audit_log_channel_check",
    DROP CONSTRAINT "audit_log_latency_ms_check",
    DROP CONSTRAINT "audit_log_cost_minor_check",
    DROP CONSTRAINT "audit_log_previous_digest_check",
    DROP CONSTRAINT "audit_log_digest_check",
    ALTER COLUMN "audit_id" TYPE public.audit_entry_audit_id,
    ALTER COLUMN "action" TYPE public.audit_entry_action,
    ALTER COLUMN "actor_type" TYPE public.audit_entry_actor_type,
    ALTER COLUMN "actor_id" TYPE public.audit_entry_actor_id,
    ALTER COLUMN "channel" TYPE public.audit_entry_channel,
    ALTER COLUMN "latency_ms" TYPE public.audit_entry_latency_ms,
    ALTER COLUMN "cost_minor" TYPE public.audit_entry_cost_minor,
    ALTER COLUMN "seq" TYPE public.audit_log_seq,
    ALTER COLUMN "previous_digest" TYPE public.audit_log_previous_digest,
    ALTER COLUMN "digest" TYPE public.audit_log_digest;
--> statement-breakpoint
ALTER TABLE "audit_pending"
    DROP CONSTRAINT "audit_pending_audit_id_check",
    DROP CONSTRAINT "audit_pending_action_check",
    DROP CONSTRAINT "audit_pending_actor_type_check",
    DROP CONSTRAINT "audit_pending_actor_id_check",
    DROP CONSTRAINT "audit_pending_channel_check",
    DROP CONSTRAINT "audit_pending_latency_ms_check",
    DROP CONSTRAINT "audit_pending_cost_minor_check",
    DROP CONSTRAINT "audit_pending_mac_check",
    ALTER COLUMN "audit_id" TYPE public.audit_entry_audit_id,
    ALTER COLUMN "action" TYPE public.audit_entry_action,
    ALTER COLUMN "actor_type" TYPE public.audit_entry_actor_type,
    ALTER COLUMN "actor_id" TYPE public.audit_entry_actor_id,
    ALTER COLUMN "channel" TYPE public.audit_entry_channel,
    ALTER COLUMN "latency_ms" TYPE public.audit_entry_latency_ms,
    ALTER COLUMN "cost_minor" TYPE public.audit_entry_cost_minor,
    ALTER COLUMN "mac" TYPE public.audit_pending_mac;
--> statement-breakpoint
ALTER TABLE "live_draft"
    DROP CONSTRAINT "live_draft_state_check",
    DROP CONSTRAINT "live_draft_chat_id_check",
    DROP CONSTRAINT "live_draft_provider_message_id_check",
    ALTER COLUMN "chat_id" TYPE public.live_draft_chat_id,
    ALTER COLUMN "provider_message_id" TYPE public.live_draft_provider_message_id,
    ALTER COLUMN "state" TYPE public.live_draft_state;
--> statement-breakpoint
ALTER TABLE "memory_entry"
    DROP CONSTRAINT "memory_entry_memory_id_check",
    DROP CONSTRAINT "memory_entry_role_check",
    DROP CONSTRAINT "memory_entry_content_digest_check",
    DROP CONSTRAINT "memory_entry_visibility_check",
    DROP CONSTRAINT "memory_entry_index_status_check",
    ALTER COLUMN "memory_id" TYPE public.memory_entry_memory_id,
    ALTER COLUMN "role" TYPE public.memory_entry_role,
    ALTER COLUMN "content_digest" TYPE public.memory_entry_content_digest,
    ALTER COLUMN "visibility" TYPE public.memory_entry_visibility,
    ALTER COLUMN "index_status" TYPE public.memory_entry_index_status;
--> statement-breakpoint
ALTER TABLE "message_event"
    DROP CONSTRAINT "message_event_event_id_check",
    DROP CONSTRAINT "message_event_external_message_id_check",
    DROP CONSTRAINT "message_event_idempotency_key_check",
    DROP CONSTRAINT "message_event_event_seq_check",
    DROP CONSTRAINT "message_event_kind_check",
    DROP CONSTRAINT "message_event_payload_digest_check",
    DROP CONSTRAINT "message_event_status_check",
    DROP CONSTRAINT "message_event_request_id_check",
    DROP CONSTRAINT "message_event_fencing_token_check",
    DROP CONSTRAINT "message_event_execution_attempts_check",
    DROP CONSTRAINT "message_event_repair_count_check",
    DROP CONSTRAINT "message_event_reply_id_check",
    DROP CONSTRAINT "message_event_segment_count_check",
    ALTER COLUMN "event_id" TYPE public.message_event_event_id,
    ALTER COLUMN "external_message_id" TYPE public.message_event_external_message_id,
    ALTER COLUMN "idempotency_key" TYPE public.message_event_idempotency_key,
    ALTER COLUMN "event_seq" TYPE public.message_event_event_seq,
    ALTER COLUMN "kind" TYPE public.message_event_kind,
    ALTER COLUMN "payload_digest" TYPE public.message_event_payload_digest,
    ALTER COLUMN "status" TYPE public.message_event_status,
    ALTER COLUMN "request_id" TYPE public.message_event_request_id,
    ALTER COLUMN "execution_fencing_token" TYPE public.message_event_fencing_token,
    ALTER COLUMN "execution_attempts" TYPE public.message_event_execution_attempts,
    ALTER COLUMN "reply_id" TYPE public.message_event_reply_id,
    ALTER COLUMN "segment_count" TYPE public.message_event_segment_count,
    ALTER COLUMN "repair_count" TYPE public.message_event_repair_count;
--> statement-breakpoint
ALTER TABLE "reply_cache"
    DROP CONSTRAINT "reply_cache_reply_id_check",
    DROP CONSTRAINT "reply_cache_content_digest_check",
    ALTER COLUMN "reply_id" TYPE public.reply_cache_reply_id,
    ALTER COLUMN "content_digest" TYPE public.reply_cache_content_digest;
--> statement-breakpoint
ALTER TABLE "reply_outbox"
    DROP CONSTRAINT "reply_outbox_segment_id_check",
    DROP CONSTRAINT "reply_outbox_idempotency_key_check",
    DROP CONSTRAINT "reply_outbox_channel_check",
    DROP CONSTRAINT "reply_outbox_status_check",
    DROP CONSTRAINT "reply_outbox_segment_kind_check",
    DROP CONSTRAINT "reply_outbox_attempts_check",
    DROP CONSTRAINT "reply_outbox_fencing_token_check",
    ALTER COLUMN "segment_id" TYPE public.reply_outbox_segment_id,
    ALTER COLUMN "idempotency_key" TYPE public.reply_outbox_idempotency_key,
    ALTER COLUMN "channel" TYPE public.reply_outbox_channel,
    ALTER COLUMN "segment_kind" TYPE public.reply_outbox_segment_kind,
    ALTER COLUMN "status" TYPE public.reply_outbox_status,
    ALTER COLUMN "attempts" TYPE public.reply_outbox_attempts,
    ALTER COLUMN "fencing_token" TYPE public.reply_outbox_fencing_token;
--> statement-breakpoint
ALTER TABLE "session"
    DROP CONSTRAINT "session_session_id_check",
    DROP CONSTRAINT "session_kind_check",
    DROP CONSTRAINT "session_identity_key_check",
    DROP CONSTRAINT "session_status_check",
    DROP CONSTRAINT "session_state_version_check",
    DROP CONSTRAINT "session_last_event_seq_check",
    ALTER COLUMN "session_id" TYPE public.session_session_id,
    ALTER COLUMN "kind" TYPE public.session_kind,
    ALTER COLUMN "identity_key" TYPE public.session_identity_key,
    ALTER COLUMN "status" TYPE public.session_status,
    ALTER COLUMN "state_version" TYPE public.session_state_version,
    ALTER COLUMN "last_event_seq" TYPE public.session_last_event_seq;
--> statement-breakpoint
ALTER TABLE "session_summary"
    DROP CONSTRAINT "session_summary_version_check",
    DROP CONSTRAINT "session_summary_base_event_seq_check",
    DROP CONSTRAINT "session_summary_content_digest_check",
    DROP CONSTRAINT "session_summary_status_check",
    ALTER COLUMN "summary_version" TYPE public.session_summary_version,
    ALTER COLUMN "base_event_seq" TYPE public.session_summary_base_event_seq,
    ALTER COLUMN "content_digest" TYPE public.session_summary_content_digest,
    ALTER COLUMN "status" TYPE public.session_summary_status;
--> statement-breakpoint
ALTER TABLE "tool_invocation"
    DROP CONSTRAINT "tool_invocation_invocation_id_check",
    DROP CONSTRAINT "tool_invocation_tool_name_check",
    DROP CONSTRAINT "tool_invocation_capability_digest_check",
    DROP CONSTRAINT "tool_invocation_idempotency_key_check",
    DROP CONSTRAINT "tool_invocation_request_digest_check",
    DROP CONSTRAINT "tool_invocation_status_check",
    DROP CONSTRAINT "tool_invocation_attempts_check",
    DROP CONSTRAINT "tool_invocation_fencing_token_check",
    DROP CONSTRAINT "tool_invocation_model_call_id_check",
    ALTER COLUMN "invocation_id" TYPE public.tool_invocation_invocation_id,
    ALTER COLUMN "tool_name" TYPE public.tool_invocation_tool_name,
    ALTER COLUMN "tool_capability_digest" TYPE public.tool_invocation_capability_digest,
    ALTER COLUMN "idempotency_key" TYPE public.tool_invocation_idempotency_key,
    ALTER COLUMN "request_digest" TYPE public.tool_invocation_request_digest,
    ALTER COLUMN "status" TYPE public.tool_invocation_status,
    ALTER COLUMN "attempts" TYPE public.tool_invocation_attempts,
    ALTER COLUMN "fencing_token" TYPE public.tool_invocation_fencing_token,
    ALTER COLUMN "model_call_id" TYPE public.tool_invocation_model_call_id;
--> statement-breakpoint
ALTER TABLE "usage_event"
    DROP CONSTRAINT "usage_event_usage_id_check",
    DROP CONSTRAINT "usage_event_tokens_in_check",
    DROP CONSTRAINT "usage_event_tokens_out_check",
    DROP CONSTRAINT "usage_event_cost_minor_check",
    ALTER COLUMN "usage_id" TYPE public.usage_event_usage_id,
    ALTER COLUMN "tokens_in" TYPE public.usage_event_tokens_in,
    ALTER COLUMN "tokens_out" TYPE public.usage_event_tokens_out,
    ALTER COLUMN "cost_minor" TYPE public.usage_event_cost_minor;
--> statement-breakpoint
CREATE TRIGGER message_event_permit_release
    AFTER UPDATE OF status ON public.message_event
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status NOT IN ('received', 'running'))
    EXECUTE FUNCTION public.execution_permit_release_trigger();
--> statement-breakpoint
CREATE TRIGGER message_event_finish_merged
    AFTER UPDATE OF status ON public.message_event
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN ('replied', 'failed')
          AND NEW.merged_into = NEW.event_id)
    EXECUTE FUNCTION public.conversation_finish_merged();
--> statement-breakpoint
CREATE TRIGGER message_event_finish_session_lock
    AFTER UPDATE OF status ON public.message_event
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN ('replied', 'failed'))
    EXECUTE FUNCTION public.message_finish_session_lock_trigger();
--> statement-breakpoint
CREATE TRIGGER reply_outbox_console_sent
    BEFORE UPDATE OF status ON public.reply_outbox
    FOR EACH ROW
    WHEN (NEW.channel = 'console' AND NEW.status = 'sent' AND OLD.status IS DISTINCT FROM 'sent')
    EXECUTE FUNCTION public.reply_outbox_console_sent();
--> statement-breakpoint
-- segment_claim (0016) as it was, but for the casts in its RETURN QUERY: PL/pgSQL requires the
-- query's column types to be the declared ones exactly, and reply_outbox's are domains now.
CREATE OR REPLACE FUNCTION public.segment_claim(
    p_tenant_id text, p_segment_id text, p_owner text, p_lease_seconds int, p_intervals_ms jsonb,
    p_max_wait_ms int
) RETURNS TABLE (
    claimed boolean, taken_over boolean, segment_id text, event_id text, reply_id text, segment_index int,
    segment_count int, content text, channel text, target jsonb, status text, attempts int,
    fencing_token bigint, idempotency_key text, binding_id text, created_at timestamptz, last_error text,
    lease_expires_at timestamptz, wait_ms float8, config jsonb, secret_ref text, key_id text, ciphertext bytea
)
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
#variable_conflict use_column
DECLARE
    o public.reply_outbox;
    v_previous text;
    v_claimed boolean := false;
    v_binding text;
    v_wait float8 := 0;
    v_interval float8;
BEGIN
    PERFORM public.runtime_scope(p_tenant_id);
    -- Locks the claimable row (under concurrency it is re-checked after the lock wait, so only one
    -- claimer gets it) and remembers its status before the update.
    SELECT x.* INTO o FROM public.reply_outbox x
    WHERE x.tenant_id = p_tenant_id AND x.segment_id = p_segment_id
      AND (x.status IN ('pending', 'retryable') OR (x.status = 'sending' AND x.lease_expires_at < now()))
    FOR UPDATE;
    IF FOUND THEN
        v_previous := o.status;
        SELECT e.binding_id INTO v_binding FROM public.message_event e
        WHERE e.tenant_id = p_tenant_id AND e.event_id = o.event_id;
        IF p_max_wait_ms IS NOT NULL THEN
            -- A caller that will not wait this long (the quick first attempt) takes nothing: no
            -- claim, no reserved slot; it gets the wait and leaves the segment to the regular attempt.
            SELECT greatest(0, extract(epoch FROM (c.next_allowed_at - now())) * 1000)::float8 INTO v_wait
            FROM public.chat_pacing c
            WHERE c.tenant_id = p_tenant_id AND c.binding_id = v_binding AND c.chat_id = o.target ->> 'chatId';
            v_wait := coalesce(v_wait, 0);
        END IF;
        IF p_max_wait_ms IS NULL OR v_wait <= p_max_wait_ms THEN
            UPDATE public.reply_outbox x
            SET status = 'sending', claim_owner = p_owner, claim_token = gen_random_uuid()::text,
                lease_expires_at = now() + make_interval(secs => p_lease_seconds),
                fencing_token = x.fencing_token + 1, attempts = x.attempts + 1
            WHERE x.tenant_id = p_tenant_id AND x.segment_id = p_segment_id
            RETURNING x.* INTO o;
            v_claimed := true;
        END IF;
    ELSE
        SELECT x.* INTO o FROM public.reply_outbox x WHERE x.tenant_id = p_tenant_id AND x.segment_id = p_segment_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        SELECT e.binding_id INTO v_binding FROM public.message_event e
        WHERE e.tenant_id = p_tenant_id AND e.event_id = o.event_id;
    END IF;

    IF v_claimed THEN
        v_interval := coalesce((p_intervals_ms ->> (o.channel || '/' || (o.target ->> 'chatType')))::float8, 1000) / 1000;
        INSERT INTO public.chat_pacing AS c (tenant_id, binding_id, chat_id, next_allowed_at)
        VALUES (p_tenant_id, v_binding, o.target ->> 'chatId', now() + make_interval(secs => v_interval))
        ON CONFLICT (tenant_id, binding_id, chat_id) DO UPDATE
            SET next_allowed_at = greatest(c.next_allowed_at, now()) + make_interval(secs => v_interval)
        RETURNING greatest(0, extract(epoch FROM (c.next_allowed_at - now())) * 1000 - v_interval * 1000)::float8
        INTO v_wait;
    END IF;

    RETURN QUERY
    SELECT v_claimed, v_claimed AND v_previous = 'sending', o.segment_id::text, o.event_id, o.reply_id,
           o.segment_index, o.segment_count, o.content, o.channel::text, o.target, o.status::text,
           o.attempts::int, o.fencing_token::bigint, o.idempotency_key::text, v_binding, o.created_at,
           o.last_error, o.lease_expires_at,
           v_wait, s.config, s.secret_ref, s.key_id, s.ciphertext
    FROM (SELECT 1) AS one
    LEFT JOIN LATERAL (
        SELECT b.config, b.secret_ref, v.key_id, v.ciphertext
        FROM public.channel_binding b
        JOIN public.secret sc ON sc.tenant_id = b.tenant_id AND sc.secret_ref = b.secret_ref
        JOIN public.secret_version v ON v.tenant_id = sc.tenant_id AND v.secret_ref = sc.secret_ref
                                    AND v.version = sc.current_version
        WHERE b.tenant_id = p_tenant_id AND b.binding_id = v_binding
          AND (v_claimed OR o.status = 'unknown')
    ) AS s ON true;
END
$$;
--> statement-breakpoint
ANALYZE public.audit_log, public.audit_pending, public.live_draft, public.memory_entry, public.message_event,
    public.reply_cache, public.reply_outbox, public.session, public.session_summary, public.tool_invocation,
    public.usage_event;
