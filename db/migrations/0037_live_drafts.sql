CREATE TABLE "live_draft" (
	"tenant_id" text NOT NULL,
	"event_id" text NOT NULL,
	"binding_id" text NOT NULL,
	"chat_id" text NOT NULL,
	"thread_id" text,
	"provider_message_id" text,
	"state" text DEFAULT 'reserved' NOT NULL,
	"fencing_token" bigint NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "live_draft_pkey" PRIMARY KEY("tenant_id","event_id"),
	CONSTRAINT "live_draft_state_check" CHECK (state IN ('reserved', 'open', 'abandoned', 'delivered', 'replaced', 'deleted')),
	CONSTRAINT "live_draft_chat_id_check" CHECK (length(btrim(chat_id)) BETWEEN 1 AND 200),
	CONSTRAINT "live_draft_provider_message_id_check" CHECK (length(btrim(provider_message_id)) BETWEEN 1 AND 100),
	CONSTRAINT "live_draft_message_id_check" CHECK (state IN ('reserved', 'abandoned') OR provider_message_id IS NOT NULL)
);
--> statement-breakpoint
ALTER TABLE "model_profile" ADD COLUMN "stream" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "model_profile_version" ADD COLUMN "stream" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "live_draft" ADD CONSTRAINT "fk_live_draft_event" FOREIGN KEY ("tenant_id","event_id") REFERENCES "public"."message_event"("tenant_id","event_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "live_draft" ADD CONSTRAINT "fk_live_draft_binding" FOREIGN KEY ("tenant_id","binding_id") REFERENCES "public"."channel_binding"("tenant_id","binding_id") ON DELETE no action ON UPDATE no action;