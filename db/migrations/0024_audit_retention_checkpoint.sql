CREATE TABLE "audit_retention_checkpoint" (
	"tenant_id" text PRIMARY KEY NOT NULL,
	"seq" bigint NOT NULL,
	"digest" text NOT NULL,
	"signature" text NOT NULL,
	"removed_total" bigint NOT NULL,
	"pruned_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "audit_retention_checkpoint_seq_check" CHECK (seq >= 1),
	CONSTRAINT "audit_retention_checkpoint_removed_check" CHECK (removed_total >= 1),
	CONSTRAINT "audit_retention_checkpoint_digest_check" CHECK (digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "audit_retention_checkpoint_signature_check" CHECK (signature ~ '^[0-9a-f]{64}$')
);
--> statement-breakpoint
ALTER TABLE "audit_retention_checkpoint" ADD CONSTRAINT "audit_retention_checkpoint_tenant_id_tenant_tenant_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenant"("tenant_id") ON DELETE no action ON UPDATE no action;