CREATE TABLE "chat_pacing" (
	"tenant_id" text NOT NULL,
	"binding_id" text NOT NULL,
	"chat_id" text NOT NULL,
	"next_allowed_at" timestamp with time zone DEFAULT now() NOT NULL,
	"penalty_until" timestamp with time zone,
	CONSTRAINT "chat_pacing_pkey" PRIMARY KEY("tenant_id","binding_id","chat_id")
);
--> statement-breakpoint
ALTER TABLE "chat_pacing" ADD CONSTRAINT "chat_pacing_tenant_id_tenant_tenant_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenant"("tenant_id") ON DELETE no action ON UPDATE no action;