CREATE TABLE "model_profile_version" (
	"tenant_id" text NOT NULL,
	"model_profile_id" text NOT NULL,
	"version" bigint NOT NULL,
	"provider" text NOT NULL,
	"model" text NOT NULL,
	"base_url" text,
	"api_key_secret_ref" text,
	"parameters" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"input_per_mtok_minor" bigint,
	"output_per_mtok_minor" bigint,
	"content_digest" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "model_profile_version_pkey" PRIMARY KEY("tenant_id","model_profile_id","version"),
	CONSTRAINT "model_profile_version_version_check" CHECK (version >= 1),
	CONSTRAINT "model_profile_version_provider_check" CHECK (provider IN ('scripted', 'openai_compatible')),
	CONSTRAINT "model_profile_version_model_check" CHECK (length(btrim(model)) BETWEEN 1 AND 200),
	CONSTRAINT "model_profile_version_base_url_check" CHECK (base_url IS NULL OR base_url ~ '^https?://'),
	CONSTRAINT "model_profile_version_parameters_check" CHECK (jsonb_typeof(parameters) = 'object'),
	CONSTRAINT "model_profile_version_input_price_check" CHECK (input_per_mtok_minor IS NULL OR input_per_mtok_minor >= 0),
	CONSTRAINT "model_profile_version_output_price_check" CHECK (output_per_mtok_minor IS NULL OR output_per_mtok_minor >= 0),
	CONSTRAINT "model_profile_version_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]{64}$')
);
--> statement-breakpoint
ALTER TABLE "model_profile_version" ADD CONSTRAINT "fk_model_profile_version_profile" FOREIGN KEY ("tenant_id","model_profile_id") REFERENCES "public"."model_profile"("tenant_id","model_profile_id") ON DELETE no action ON UPDATE no action;