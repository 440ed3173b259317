ALTER TABLE "message_event" DROP CONSTRAINT "message_event_pinned_reply_check";--> statement-breakpoint
ALTER TABLE "agent_app_revision" ADD COLUMN "conversation" jsonb DEFAULT '{"policy": "enqueue"}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "message_event" ADD COLUMN "merged_into" text;--> statement-breakpoint
CREATE INDEX "message_event_merged_into_idx" ON "message_event" USING btree ("tenant_id","merged_into") WHERE merged_into IS NOT NULL;--> statement-breakpoint
ALTER TABLE "agent_app_revision" ADD CONSTRAINT "agent_app_revision_conversation_check" CHECK (jsonb_typeof(conversation) = 'object');--> statement-breakpoint
ALTER TABLE "message_event" ADD CONSTRAINT "message_event_pinned_reply_check" CHECK (status NOT IN ('completed', 'reply_pending', 'replied') OR (reply_id IS NOT NULL AND reply_cache_ref IS NOT NULL AND segment_count IS NOT NULL) OR (merged_into IS NOT NULL AND merged_into <> event_id));