CREATE TABLE "artifact" (
	"tenant_id" text NOT NULL,
	"artifact_id" text NOT NULL,
	"event_id" text NOT NULL,
	"direction" text NOT NULL,
	"kind" text NOT NULL,
	"content_type" text NOT NULL,
	"size_bytes" bigint NOT NULL,
	"content_digest" text NOT NULL,
	"content_ref" text NOT NULL,
	"storage" text NOT NULL,
	"backend_profile_id" text NOT NULL,
	"file_name" text,
	"source_ref" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "artifact_pkey" PRIMARY KEY("tenant_id","artifact_id"),
	CONSTRAINT "artifact_artifact_id_check" CHECK (artifact_id ~ '^art_[0-9A-Za-z_-]{1,100}$'),
	CONSTRAINT "artifact_direction_check" CHECK (direction IN ('inbound', 'outbound')),
	CONSTRAINT "artifact_kind_check" CHECK (kind IN ('image', 'audio', 'video', 'file')),
	CONSTRAINT "artifact_storage_check" CHECK (storage IN ('filesystem', 's3')),
	CONSTRAINT "artifact_content_type_check" CHECK (length(btrim(content_type)) BETWEEN 1 AND 200),
	CONSTRAINT "artifact_size_bytes_check" CHECK (size_bytes >= 0),
	CONSTRAINT "artifact_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "artifact_content_ref_check" CHECK (left(content_ref, length(tenant_id) + 1) = tenant_id || '/'),
	CONSTRAINT "artifact_file_name_check" CHECK (file_name IS NULL OR length(file_name) BETWEEN 1 AND 255)
);
--> statement-breakpoint
ALTER TABLE "secret" DROP CONSTRAINT "secret_purpose_check";--> statement-breakpoint
ALTER TABLE "backend_profile" ADD COLUMN "artifacts" jsonb DEFAULT '{"provider": "filesystem"}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "channel_binding" ADD COLUMN "capability_version" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "channel_binding" ADD COLUMN "capabilities" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "model_profile" ADD COLUMN "vision" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "model_profile_version" ADD COLUMN "vision" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "reply_outbox" ADD COLUMN "segment_kind" text DEFAULT 'text' NOT NULL;--> statement-breakpoint
ALTER TABLE "artifact" ADD CONSTRAINT "fk_artifact_event" FOREIGN KEY ("tenant_id","event_id") REFERENCES "public"."message_event"("tenant_id","event_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "artifact" ADD CONSTRAINT "fk_artifact_backend_profile" FOREIGN KEY ("tenant_id","backend_profile_id") REFERENCES "public"."backend_profile"("tenant_id","profile_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "artifact_tenant_event_idx" ON "artifact" USING btree ("tenant_id","event_id");--> statement-breakpoint
CREATE INDEX "artifact_created_idx" ON "artifact" USING btree ("created_at");--> statement-breakpoint
ALTER TABLE "backend_profile" ADD CONSTRAINT "backend_profile_artifacts_check" CHECK (artifacts ->> 'provider' IN ('filesystem', 's3'));--> statement-breakpoint
ALTER TABLE "channel_binding" ADD CONSTRAINT "channel_binding_capabilities_check" CHECK (jsonb_typeof(capabilities) = 'object');--> statement-breakpoint
ALTER TABLE "channel_binding" ADD CONSTRAINT "channel_binding_capability_version_check" CHECK (capability_version >= 1);--> statement-breakpoint
ALTER TABLE "reply_outbox" ADD CONSTRAINT "reply_outbox_segment_kind_check" CHECK (segment_kind IN ('text', 'image', 'file'));--> statement-breakpoint
ALTER TABLE "reply_outbox" ADD CONSTRAINT "reply_outbox_payload_ref_check" CHECK (segment_kind = 'text' OR payload_ref IS NOT NULL);--> statement-breakpoint
ALTER TABLE "secret" ADD CONSTRAINT "secret_purpose_check" CHECK (purpose IN ('model_api_key', 'telegram_bot', 'wecom_app', 'tool_credential', 'object_storage'));