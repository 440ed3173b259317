ALTER TABLE "artifact" ADD COLUMN "deleting_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "tenant" ADD COLUMN "artifact_retention_days" integer DEFAULT 30 NOT NULL;--> statement-breakpoint
CREATE INDEX "artifact_tenant_created_idx" ON "artifact" USING btree ("tenant_id","created_at");--> statement-breakpoint
CREATE INDEX "reply_outbox_payload_ref_idx" ON "reply_outbox" USING btree ("tenant_id","payload_ref") WHERE payload_ref IS NOT NULL;--> statement-breakpoint
ALTER TABLE "tenant" ADD CONSTRAINT "tenant_artifact_retention_days_check" CHECK (artifact_retention_days > 0);