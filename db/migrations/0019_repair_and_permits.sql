CREATE TABLE "execution_permit" (
	"tenant_id" text NOT NULL,
	"event_id" text NOT NULL,
	"fencing_token" bigint NOT NULL,
	"acquired_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "execution_permit_pkey" PRIMARY KEY("tenant_id","event_id"),
	CONSTRAINT "execution_permit_fencing_token_check" CHECK (fencing_token >= 0)
);
--> statement-breakpoint
ALTER TABLE "message_event" ADD COLUMN "repair_count" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "message_event" ADD COLUMN "permit_requested_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "message_event" ADD COLUMN "sweep_checked_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "tool_invocation" ADD COLUMN "step" integer;--> statement-breakpoint
ALTER TABLE "tool_invocation" ADD COLUMN "call_ordinal" integer;--> statement-breakpoint
ALTER TABLE "tool_invocation" ADD COLUMN "model_call_id" text;--> statement-breakpoint
ALTER TABLE "execution_permit" ADD CONSTRAINT "fk_execution_permit_event" FOREIGN KEY ("tenant_id","event_id") REFERENCES "public"."message_event"("tenant_id","event_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "message_event_permit_waiters_idx" ON "message_event" USING btree ("tenant_id","created_at","event_id") WHERE permit_requested_at IS NOT NULL;--> statement-breakpoint
CREATE INDEX "message_event_unfinished_idx" ON "message_event" USING btree ("created_at") WHERE status NOT IN ('replied', 'failed');--> statement-breakpoint
ALTER TABLE "message_event" ADD CONSTRAINT "message_event_repair_count_check" CHECK (repair_count >= 0);--> statement-breakpoint
ALTER TABLE "tool_invocation" ADD CONSTRAINT "tool_invocation_position_check" CHECK ((step IS NULL) = (call_ordinal IS NULL) AND coalesce(step, 0) >= 0 AND coalesce(call_ordinal, 0) >= 0);--> statement-breakpoint
ALTER TABLE "tool_invocation" ADD CONSTRAINT "tool_invocation_model_call_id_check" CHECK (model_call_id IS NULL OR length(model_call_id) BETWEEN 1 AND 200);