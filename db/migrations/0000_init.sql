CREATE TABLE "admin_api_key" (
	"tenant_id" text NOT NULL,
	"key_id" text NOT NULL,
	"role" text NOT NULL,
	"key_digest" text NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "admin_api_key_pkey" PRIMARY KEY("tenant_id","key_id"),
	CONSTRAINT "admin_api_key_key_digest_unique" UNIQUE("key_digest"),
	CONSTRAINT "admin_api_key_key_id_check" CHECK (key_id ~ '^key_[0-7][0-9A-HJKMNP-TV-Z]{25}$'),
	CONSTRAINT "admin_api_key_role_check" CHECK (role IN ('tenant_admin', 'tenant_viewer')),
	CONSTRAINT "admin_api_key_key_digest_check" CHECK (key_digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "admin_api_key_status_check" CHECK (status IN ('active', 'revoked')),
	CONSTRAINT "admin_api_key_revoked_at_check" CHECK ((status = 'revoked') = (revoked_at IS NOT NULL))
);
--> statement-breakpoint
CREATE TABLE "agent_app" (
	"tenant_id" text NOT NULL,
	"app_id" text NOT NULL,
	"app_key" text NOT NULL,
	"display_name" text NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"published_revision" integer,
	"version" bigint DEFAULT 1 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "agent_app_pkey" PRIMARY KEY("tenant_id","app_id"),
	CONSTRAINT "agent_app_tenant_app_key_unique" UNIQUE("tenant_id","app_key"),
	CONSTRAINT "agent_app_app_id_check" CHECK (app_id ~ '^app_[0-7][0-9A-HJKMNP-TV-Z]{25}$'),
	CONSTRAINT "agent_app_app_key_check" CHECK (app_key ~ '^[a-z][a-z0-9-]{1,63}$'),
	CONSTRAINT "agent_app_display_name_check" CHECK (length(btrim(display_name)) BETWEEN 1 AND 200),
	CONSTRAINT "agent_app_status_check" CHECK (status IN ('active', 'disabled')),
	CONSTRAINT "agent_app_published_revision_check" CHECK (published_revision IS NULL OR published_revision >= 1),
	CONSTRAINT "agent_app_version_check" CHECK (version >= 1)
);
--> statement-breakpoint
CREATE TABLE "agent_app_revision" (
	"tenant_id" text NOT NULL,
	"app_id" text NOT NULL,
	"revision" integer NOT NULL,
	"model_profile_id" text NOT NULL,
	"system_prompt" text NOT NULL,
	"tools" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"scripted" jsonb,
	"limits" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"content_digest" text NOT NULL,
	"created_by" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "agent_app_revision_pkey" PRIMARY KEY("tenant_id","app_id","revision"),
	CONSTRAINT "agent_app_revision_revision_check" CHECK (revision >= 1),
	CONSTRAINT "agent_app_revision_tools_check" CHECK (jsonb_typeof(tools) = 'array'),
	CONSTRAINT "agent_app_revision_scripted_check" CHECK (scripted IS NULL OR jsonb_typeof(scripted) = 'object'),
	CONSTRAINT "agent_app_revision_limits_check" CHECK (jsonb_typeof(limits) = 'object'),
	CONSTRAINT "agent_app_revision_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "agent_app_revision_created_by_check" CHECK (length(btrim(created_by)) BETWEEN 1 AND 200)
);
--> statement-breakpoint
CREATE TABLE "audit_log" (
	"tenant_id" text NOT NULL,
	"audit_id" text NOT NULL,
	"seq" bigint NOT NULL,
	"action" text NOT NULL,
	"actor_type" text NOT NULL,
	"actor_id" text NOT NULL,
	"reason" text,
	"binding_id" text,
	"channel" text,
	"user_id" text,
	"session_id" text,
	"agent_app_id" text,
	"revision" integer,
	"model_profile_id" text,
	"tool_name" text,
	"decision" text,
	"event_seq" bigint,
	"latency_ms" bigint,
	"error_type" text,
	"cost_minor" bigint,
	"request_id" text,
	"trace_id" text,
	"before_version" bigint,
	"after_version" bigint,
	"details" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"occurred_at" timestamp with time zone DEFAULT now() NOT NULL,
	"previous_digest" text,
	"digest" text NOT NULL,
	CONSTRAINT "audit_log_pkey" PRIMARY KEY("tenant_id","audit_id"),
	CONSTRAINT "audit_log_tenant_seq_unique" UNIQUE("tenant_id","seq"),
	CONSTRAINT "audit_log_audit_id_check" CHECK (audit_id ~ '^aud_[0-9A-Za-z_-]{1,100}$'),
	CONSTRAINT "audit_log_seq_check" CHECK (seq >= 1),
	CONSTRAINT "audit_log_action_check" CHECK (length(btrim(action)) BETWEEN 1 AND 200),
	CONSTRAINT "audit_log_actor_type_check" CHECK (length(btrim(actor_type)) BETWEEN 1 AND 100),
	CONSTRAINT "audit_log_actor_id_check" CHECK (length(btrim(actor_id)) BETWEEN 1 AND 200),
	CONSTRAINT "audit_log_channel_check" CHECK (channel IS NULL OR channel IN ('telegram', 'wecom')),
	CONSTRAINT "audit_log_latency_ms_check" CHECK (latency_ms IS NULL OR latency_ms >= 0),
	CONSTRAINT "audit_log_cost_minor_check" CHECK (cost_minor IS NULL OR cost_minor >= 0),
	CONSTRAINT "audit_log_details_check" CHECK (jsonb_typeof(details) = 'object'),
	CONSTRAINT "audit_log_previous_digest_check" CHECK (previous_digest IS NULL OR previous_digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "audit_log_digest_check" CHECK (digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "audit_log_chain_start_check" CHECK ((seq = 1) = (previous_digest IS NULL))
);
--> statement-breakpoint
CREATE TABLE "backend_profile" (
	"tenant_id" text NOT NULL,
	"profile_id" text NOT NULL,
	"profile_key" text NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"provider" text DEFAULT 'postgres' NOT NULL,
	"config" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"version" bigint DEFAULT 1 NOT NULL,
	"content_digest" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "backend_profile_pkey" PRIMARY KEY("tenant_id","profile_id"),
	CONSTRAINT "backend_profile_tenant_profile_key_unique" UNIQUE("tenant_id","profile_key"),
	CONSTRAINT "backend_profile_profile_id_check" CHECK (profile_id ~ '^bp_[0-7][0-9A-HJKMNP-TV-Z]{25}$'),
	CONSTRAINT "backend_profile_profile_key_check" CHECK (profile_key ~ '^[a-z][a-z0-9-]{1,63}$'),
	CONSTRAINT "backend_profile_status_check" CHECK (status IN ('active', 'suspended', 'disabled')),
	CONSTRAINT "backend_profile_provider_check" CHECK (provider IN ('postgres')),
	CONSTRAINT "backend_profile_config_check" CHECK (jsonb_typeof(config) = 'object'),
	CONSTRAINT "backend_profile_version_check" CHECK (version >= 1),
	CONSTRAINT "backend_profile_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]{64}$')
);
--> statement-breakpoint
CREATE TABLE "channel_binding" (
	"tenant_id" text NOT NULL,
	"binding_id" text NOT NULL,
	"channel" text NOT NULL,
	"provider_account_id" text NOT NULL,
	"public_route_key_digest" text NOT NULL,
	"app_id" text NOT NULL,
	"secret_ref" text NOT NULL,
	"config" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"config_digest" text NOT NULL,
	"status" text DEFAULT 'draft' NOT NULL,
	"version" bigint DEFAULT 1 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "channel_binding_pkey" PRIMARY KEY("tenant_id","binding_id"),
	CONSTRAINT "channel_binding_public_route_key_digest_unique" UNIQUE("public_route_key_digest"),
	CONSTRAINT "channel_binding_binding_id_check" CHECK (binding_id ~ '^cb_[0-7][0-9A-HJKMNP-TV-Z]{25}$'),
	CONSTRAINT "channel_binding_channel_check" CHECK (channel IN ('telegram', 'wecom')),
	CONSTRAINT "channel_binding_provider_account_id_check" CHECK (length(btrim(provider_account_id)) BETWEEN 1 AND 200),
	CONSTRAINT "channel_binding_route_key_digest_check" CHECK (public_route_key_digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "channel_binding_config_check" CHECK (jsonb_typeof(config) = 'object'),
	CONSTRAINT "channel_binding_config_digest_check" CHECK (config_digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "channel_binding_status_check" CHECK (status IN ('draft', 'active', 'suspended', 'disabled')),
	CONSTRAINT "channel_binding_version_check" CHECK (version >= 1)
);
--> statement-breakpoint
CREATE TABLE "dead_letter" (
	"tenant_id" text NOT NULL,
	"dead_letter_id" text NOT NULL,
	"event_id" text NOT NULL,
	"kind" text NOT NULL,
	"segment_id" text,
	"invocation_id" text,
	"reason_class" text NOT NULL,
	"detail" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"status" text DEFAULT 'open' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"resolved_at" timestamp with time zone,
	"resolved_by" text,
	"resolution_reason" text,
	CONSTRAINT "dead_letter_pkey" PRIMARY KEY("tenant_id","dead_letter_id"),
	CONSTRAINT "dead_letter_id_check" CHECK (dead_letter_id ~ '^dl_[0-9A-Za-z_-]{1,100}$'),
	CONSTRAINT "dead_letter_kind_check" CHECK (kind IN ('execution', 'segment', 'tool')),
	CONSTRAINT "dead_letter_reason_class_check" CHECK (reason_class ~ '^[a-z][a-z0-9_]{0,63}$'),
	CONSTRAINT "dead_letter_detail_check" CHECK (jsonb_typeof(detail) = 'object'),
	CONSTRAINT "dead_letter_status_check" CHECK (status IN ('open', 'retried', 'discarded')),
	CONSTRAINT "dead_letter_segment_check" CHECK (kind <> 'segment' OR segment_id IS NOT NULL),
	CONSTRAINT "dead_letter_tool_check" CHECK (kind <> 'tool' OR invocation_id IS NOT NULL),
	CONSTRAINT "dead_letter_resolution_check" CHECK ((status = 'open') = (resolved_at IS NULL) AND (status = 'open' OR resolved_by IS NOT NULL))
);
--> statement-breakpoint
CREATE TABLE "ingress_replay_guard" (
	"route_key_digest" text NOT NULL,
	"nonce" text NOT NULL,
	"seen_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "ingress_replay_guard_pkey" PRIMARY KEY("route_key_digest","nonce"),
	CONSTRAINT "ingress_replay_guard_route_key_digest_check" CHECK (route_key_digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "ingress_replay_guard_nonce_check" CHECK (length(nonce) BETWEEN 1 AND 128)
);
--> statement-breakpoint
CREATE TABLE "ingress_security_event" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "ingress_security_event_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"request_id" text NOT NULL,
	"channel" text NOT NULL,
	"route_key_digest" text,
	"failure_class" text NOT NULL,
	"occurred_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "ingress_security_event_request_id_check" CHECK (length(btrim(request_id)) BETWEEN 1 AND 200),
	CONSTRAINT "ingress_security_event_channel_check" CHECK (channel IN ('telegram', 'wecom')),
	CONSTRAINT "ingress_security_event_route_key_digest_check" CHECK (route_key_digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "ingress_security_event_failure_class_check" CHECK (failure_class ~ '^[a-z][a-z0-9_]{0,63}$')
);
--> statement-breakpoint
CREATE TABLE "memory_entry" (
	"tenant_id" text NOT NULL,
	"memory_id" text NOT NULL,
	"user_id" text,
	"session_id" text NOT NULL,
	"source_event_id" text NOT NULL,
	"role" text NOT NULL,
	"content" text,
	"content_ref" text,
	"content_digest" text NOT NULL,
	"visibility" text DEFAULT 'session' NOT NULL,
	"index_status" text DEFAULT 'not_indexed' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "memory_entry_pkey" PRIMARY KEY("tenant_id","memory_id"),
	CONSTRAINT "memory_entry_memory_id_check" CHECK (memory_id ~ '^mem_[0-9A-Za-z_-]{1,100}$'),
	CONSTRAINT "memory_entry_role_check" CHECK (role IN ('user', 'assistant')),
	CONSTRAINT "memory_entry_body_check" CHECK (content IS NOT NULL OR content_ref IS NOT NULL),
	CONSTRAINT "memory_entry_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "memory_entry_visibility_check" CHECK (visibility IN ('session', 'user')),
	CONSTRAINT "memory_entry_index_status_check" CHECK (index_status IN ('not_indexed', 'pending', 'indexed', 'failed'))
);
--> statement-breakpoint
CREATE TABLE "message_event" (
	"tenant_id" text NOT NULL,
	"event_id" text NOT NULL,
	"session_id" text NOT NULL,
	"binding_id" text NOT NULL,
	"external_message_id" text NOT NULL,
	"idempotency_key" text NOT NULL,
	"event_seq" bigint NOT NULL,
	"kind" text NOT NULL,
	"payload" jsonb NOT NULL,
	"payload_digest" text NOT NULL,
	"status" text DEFAULT 'received' NOT NULL,
	"outcome" text,
	"failure_reason" text,
	"request_id" text NOT NULL,
	"trace_id" text,
	"workflow_id" text,
	"workflow_started_at" timestamp with time zone,
	"execution_owner" text,
	"execution_claim_token" text,
	"execution_lease_expires_at" timestamp with time zone,
	"execution_fencing_token" bigint DEFAULT 0 NOT NULL,
	"execution_heartbeat_at" timestamp with time zone,
	"execution_attempts" integer DEFAULT 0 NOT NULL,
	"execution_plan" jsonb,
	"reply_id" text,
	"reply_cache_ref" text,
	"segment_count" integer,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"committed_at" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "message_event_pkey" PRIMARY KEY("tenant_id","event_id"),
	CONSTRAINT "message_event_tenant_idempotency_key_unique" UNIQUE("tenant_id","idempotency_key"),
	CONSTRAINT "message_event_tenant_session_seq_unique" UNIQUE("tenant_id","session_id","event_seq"),
	CONSTRAINT "message_event_tenant_binding_external_unique" UNIQUE("tenant_id","binding_id","external_message_id"),
	CONSTRAINT "message_event_tenant_reply_unique" UNIQUE("tenant_id","reply_id"),
	CONSTRAINT "message_event_pinned_reply_unique" UNIQUE("tenant_id","event_id","reply_id","segment_count"),
	CONSTRAINT "message_event_event_id_check" CHECK (event_id ~ '^evt_[0-9A-Za-z_-]{1,100}$'),
	CONSTRAINT "message_event_external_message_id_check" CHECK (length(btrim(external_message_id)) BETWEEN 1 AND 500),
	CONSTRAINT "message_event_idempotency_key_check" CHECK (length(btrim(idempotency_key)) BETWEEN 1 AND 200),
	CONSTRAINT "message_event_event_seq_check" CHECK (event_seq >= 1),
	CONSTRAINT "message_event_kind_check" CHECK (kind IN ('text', 'unsupported')),
	CONSTRAINT "message_event_payload_check" CHECK (jsonb_typeof(payload) = 'object'),
	CONSTRAINT "message_event_payload_digest_check" CHECK (payload_digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "message_event_status_check" CHECK (status IN ('received', 'running', 'execution_reconciling', 'completed', 'reply_pending', 'replied', 'failed')),
	CONSTRAINT "message_event_request_id_check" CHECK (length(btrim(request_id)) BETWEEN 1 AND 200),
	CONSTRAINT "message_event_fencing_token_check" CHECK (execution_fencing_token >= 0),
	CONSTRAINT "message_event_execution_attempts_check" CHECK (execution_attempts >= 0),
	CONSTRAINT "message_event_reply_id_check" CHECK (reply_id IS NULL OR reply_id ~ '^rep_[0-9A-Za-z_-]{1,100}$'),
	CONSTRAINT "message_event_segment_count_check" CHECK (segment_count IS NULL OR segment_count >= 0),
	CONSTRAINT "message_event_execution_plan_check" CHECK (execution_plan IS NULL OR jsonb_typeof(execution_plan) = 'object'),
	CONSTRAINT "message_event_running_claim_check" CHECK (status <> 'running' OR (execution_owner IS NOT NULL AND execution_claim_token IS NOT NULL AND execution_lease_expires_at IS NOT NULL AND execution_fencing_token >= 1)),
	CONSTRAINT "message_event_pinned_reply_check" CHECK (status NOT IN ('completed', 'reply_pending', 'replied') OR (reply_id IS NOT NULL AND reply_cache_ref IS NOT NULL AND segment_count IS NOT NULL))
);
--> statement-breakpoint
CREATE TABLE "model_profile" (
	"tenant_id" text NOT NULL,
	"model_profile_id" text NOT NULL,
	"profile_key" text NOT NULL,
	"provider" text NOT NULL,
	"model" text NOT NULL,
	"base_url" text,
	"api_key_secret_ref" text,
	"parameters" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"input_per_mtok_minor" bigint,
	"output_per_mtok_minor" bigint,
	"status" text DEFAULT 'active' NOT NULL,
	"version" bigint DEFAULT 1 NOT NULL,
	"content_digest" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "model_profile_pkey" PRIMARY KEY("tenant_id","model_profile_id"),
	CONSTRAINT "model_profile_tenant_profile_key_unique" UNIQUE("tenant_id","profile_key"),
	CONSTRAINT "model_profile_id_check" CHECK (model_profile_id ~ '^mp_[0-7][0-9A-HJKMNP-TV-Z]{25}$'),
	CONSTRAINT "model_profile_profile_key_check" CHECK (profile_key ~ '^[a-z][a-z0-9-]{1,63}$'),
	CONSTRAINT "model_profile_provider_check" CHECK (provider IN ('scripted', 'openai_compatible')),
	CONSTRAINT "model_profile_model_check" CHECK (length(btrim(model)) BETWEEN 1 AND 200),
	CONSTRAINT "model_profile_base_url_check" CHECK (base_url IS NULL OR base_url ~ '^https?://'),
	CONSTRAINT "model_profile_parameters_check" CHECK (jsonb_typeof(parameters) = 'object'),
	CONSTRAINT "model_profile_input_price_check" CHECK (input_per_mtok_minor IS NULL OR input_per_mtok_minor >= 0),
	CONSTRAINT "model_profile_output_price_check" CHECK (output_per_mtok_minor IS NULL OR output_per_mtok_minor >= 0),
	CONSTRAINT "model_profile_status_check" CHECK (status IN ('active', 'disabled')),
	CONSTRAINT "model_profile_version_check" CHECK (version >= 1),
	CONSTRAINT "model_profile_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]{64}$')
);
--> statement-breakpoint
CREATE TABLE "rate_limit_window" (
	"tenant_id" text NOT NULL,
	"window_start" timestamp with time zone NOT NULL,
	"count" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "rate_limit_window_pkey" PRIMARY KEY("tenant_id","window_start"),
	CONSTRAINT "rate_limit_window_count_check" CHECK (count >= 0)
);
--> statement-breakpoint
CREATE TABLE "reply_cache" (
	"tenant_id" text NOT NULL,
	"reply_id" text NOT NULL,
	"event_id" text NOT NULL,
	"content" text NOT NULL,
	"content_digest" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "reply_cache_pkey" PRIMARY KEY("tenant_id","reply_id"),
	CONSTRAINT "reply_cache_reply_id_check" CHECK (reply_id ~ '^rep_[0-9A-Za-z_-]{1,100}$'),
	CONSTRAINT "reply_cache_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]{64}$')
);
--> statement-breakpoint
CREATE TABLE "reply_outbox" (
	"tenant_id" text NOT NULL,
	"segment_id" text NOT NULL,
	"event_id" text NOT NULL,
	"reply_id" text NOT NULL,
	"idempotency_key" text NOT NULL,
	"segment_index" integer NOT NULL,
	"segment_count" integer NOT NULL,
	"channel" text NOT NULL,
	"target" jsonb NOT NULL,
	"content" text NOT NULL,
	"payload_ref" text,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone,
	"claim_owner" text,
	"claim_token" text,
	"lease_expires_at" timestamp with time zone,
	"fencing_token" bigint DEFAULT 0 NOT NULL,
	"provider_message_id" text,
	"last_error" text,
	"last_reconciled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"sent_at" timestamp with time zone,
	CONSTRAINT "reply_outbox_pkey" PRIMARY KEY("tenant_id","segment_id"),
	CONSTRAINT "reply_outbox_reply_segment_unique" UNIQUE("tenant_id","reply_id","segment_index"),
	CONSTRAINT "reply_outbox_idempotency_key_unique" UNIQUE("tenant_id","idempotency_key"),
	CONSTRAINT "reply_outbox_segment_id_check" CHECK (segment_id ~ '^seg_[0-9A-Za-z_-]{1,100}$'),
	CONSTRAINT "reply_outbox_idempotency_key_check" CHECK (length(btrim(idempotency_key)) BETWEEN 1 AND 200),
	CONSTRAINT "reply_outbox_segment_index_check" CHECK (segment_index >= 0 AND segment_index < segment_count),
	CONSTRAINT "reply_outbox_channel_check" CHECK (channel IN ('telegram', 'wecom')),
	CONSTRAINT "reply_outbox_target_check" CHECK (jsonb_typeof(target) = 'object'),
	CONSTRAINT "reply_outbox_status_check" CHECK (status IN ('pending', 'sending', 'reconciling', 'sent', 'retryable', 'unknown', 'failed', 'discarded')),
	CONSTRAINT "reply_outbox_attempts_check" CHECK (attempts >= 0),
	CONSTRAINT "reply_outbox_fencing_token_check" CHECK (fencing_token >= 0),
	CONSTRAINT "reply_outbox_sent_at_check" CHECK (status <> 'sent' OR sent_at IS NOT NULL)
);
--> statement-breakpoint
CREATE TABLE "secret" (
	"tenant_id" text NOT NULL,
	"secret_ref" text NOT NULL,
	"name" text NOT NULL,
	"current_version" integer DEFAULT 1 NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "secret_pkey" PRIMARY KEY("tenant_id","secret_ref"),
	CONSTRAINT "secret_tenant_name_unique" UNIQUE("tenant_id","name"),
	CONSTRAINT "secret_secret_ref_check" CHECK (secret_ref ~ '^sec_[0-7][0-9A-HJKMNP-TV-Z]{25}$'),
	CONSTRAINT "secret_name_check" CHECK (name ~ '^[a-z][a-z0-9_-]{0,63}$'),
	CONSTRAINT "secret_current_version_check" CHECK (current_version >= 1),
	CONSTRAINT "secret_status_check" CHECK (status IN ('active', 'disabled'))
);
--> statement-breakpoint
CREATE TABLE "secret_version" (
	"tenant_id" text NOT NULL,
	"secret_ref" text NOT NULL,
	"version" integer NOT NULL,
	"key_id" text NOT NULL,
	"ciphertext" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "secret_version_pkey" PRIMARY KEY("tenant_id","secret_ref","version"),
	CONSTRAINT "secret_version_version_check" CHECK (version >= 1),
	CONSTRAINT "secret_version_key_id_check" CHECK (length(btrim(key_id)) BETWEEN 1 AND 200),
	CONSTRAINT "secret_version_ciphertext_check" CHECK (octet_length(ciphertext) >= 29)
);
--> statement-breakpoint
CREATE TABLE "session" (
	"tenant_id" text NOT NULL,
	"session_id" text NOT NULL,
	"binding_id" text NOT NULL,
	"app_id" text NOT NULL,
	"kind" text NOT NULL,
	"external_user_id" text,
	"external_chat_id" text,
	"external_thread_id" text,
	"identity_key" text NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"state_version" bigint DEFAULT 0 NOT NULL,
	"last_event_seq" bigint DEFAULT 0 NOT NULL,
	"expires_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "session_pkey" PRIMARY KEY("tenant_id","session_id"),
	CONSTRAINT "session_tenant_binding_identity_unique" UNIQUE("tenant_id","binding_id","identity_key"),
	CONSTRAINT "session_session_id_check" CHECK (session_id ~ '^ses_[0-9A-Za-z_-]{1,100}$'),
	CONSTRAINT "session_kind_check" CHECK (kind IN ('direct', 'group', 'thread')),
	CONSTRAINT "session_identity_key_check" CHECK (length(btrim(identity_key)) BETWEEN 1 AND 2000),
	CONSTRAINT "session_status_check" CHECK (status IN ('active', 'closed')),
	CONSTRAINT "session_state_version_check" CHECK (state_version >= 0),
	CONSTRAINT "session_last_event_seq_check" CHECK (last_event_seq >= 0),
	CONSTRAINT "session_identity_tuple_check" CHECK ((kind = 'direct' AND external_user_id IS NOT NULL) OR (kind = 'group' AND external_chat_id IS NOT NULL) OR (kind = 'thread' AND external_chat_id IS NOT NULL AND external_thread_id IS NOT NULL))
);
--> statement-breakpoint
CREATE TABLE "session_summary" (
	"tenant_id" text NOT NULL,
	"session_id" text NOT NULL,
	"summary_version" bigint DEFAULT 1 NOT NULL,
	"base_event_seq" bigint NOT NULL,
	"content" text,
	"content_ref" text,
	"content_digest" text NOT NULL,
	"status" text DEFAULT 'ready' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "session_summary_pkey" PRIMARY KEY("tenant_id","session_id"),
	CONSTRAINT "session_summary_version_check" CHECK (summary_version >= 1),
	CONSTRAINT "session_summary_base_event_seq_check" CHECK (base_event_seq >= 0),
	CONSTRAINT "session_summary_body_check" CHECK (content IS NOT NULL OR content_ref IS NOT NULL),
	CONSTRAINT "session_summary_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "session_summary_status_check" CHECK (status IN ('pending', 'ready', 'failed'))
);
--> statement-breakpoint
CREATE TABLE "tenant" (
	"tenant_id" text PRIMARY KEY NOT NULL,
	"tenant_key" text NOT NULL,
	"display_name" text NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"rate_limit_rpm" bigint,
	"max_concurrent_executions" bigint,
	"monthly_token_budget" bigint,
	"monthly_spend_limit_minor" bigint,
	"billing_currency" char(3),
	"audit_retention_days" integer DEFAULT 90 NOT NULL,
	"log_masking_level" text DEFAULT 'basic' NOT NULL,
	"trace_sampling_rate" real DEFAULT 1 NOT NULL,
	"default_agent_app_id" text,
	"default_backend_profile_id" text,
	"version" bigint DEFAULT 1 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tenant_tenant_key_unique" UNIQUE("tenant_key"),
	CONSTRAINT "tenant_tenant_id_check" CHECK (tenant_id ~ '^t_[0-7][0-9A-HJKMNP-TV-Z]{25}$'),
	CONSTRAINT "tenant_tenant_key_check" CHECK (tenant_key ~ '^[a-z][a-z0-9-]{1,63}$'),
	CONSTRAINT "tenant_display_name_check" CHECK (length(btrim(display_name)) BETWEEN 1 AND 200),
	CONSTRAINT "tenant_status_check" CHECK (status IN ('active', 'suspended', 'disabled')),
	CONSTRAINT "tenant_rate_limit_rpm_check" CHECK (rate_limit_rpm IS NULL OR rate_limit_rpm >= 0),
	CONSTRAINT "tenant_max_concurrent_executions_check" CHECK (max_concurrent_executions IS NULL OR max_concurrent_executions > 0),
	CONSTRAINT "tenant_monthly_token_budget_check" CHECK (monthly_token_budget IS NULL OR monthly_token_budget >= 0),
	CONSTRAINT "tenant_monthly_spend_limit_minor_check" CHECK (monthly_spend_limit_minor IS NULL OR monthly_spend_limit_minor >= 0),
	CONSTRAINT "tenant_spend_limit_currency_check" CHECK (monthly_spend_limit_minor IS NULL OR billing_currency IS NOT NULL),
	CONSTRAINT "tenant_billing_currency_check" CHECK (billing_currency IS NULL OR billing_currency ~ '^[A-Z]{3}$'),
	CONSTRAINT "tenant_audit_retention_days_check" CHECK (audit_retention_days > 0),
	CONSTRAINT "tenant_log_masking_level_check" CHECK (log_masking_level IN ('none', 'basic', 'strict')),
	CONSTRAINT "tenant_trace_sampling_rate_check" CHECK (trace_sampling_rate BETWEEN 0 AND 1),
	CONSTRAINT "tenant_version_check" CHECK (version >= 1)
);
--> statement-breakpoint
CREATE TABLE "tenant_status_change_outbox" (
	"event_id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "tenant_status_change_outbox_event_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" text NOT NULL,
	"previous_status" text NOT NULL,
	"next_status" text NOT NULL,
	"actor_type" text NOT NULL,
	"actor_id" text NOT NULL,
	"reason" text NOT NULL,
	"previous_version" bigint NOT NULL,
	"next_version" bigint NOT NULL,
	"correlation_id" text NOT NULL,
	"occurred_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tscho_previous_status_check" CHECK (previous_status IN ('active', 'suspended')),
	CONSTRAINT "tscho_next_status_check" CHECK (next_status IN ('active', 'suspended', 'disabled')),
	CONSTRAINT "tscho_actor_type_check" CHECK (length(btrim(actor_type)) > 0),
	CONSTRAINT "tscho_actor_id_check" CHECK (length(btrim(actor_id)) > 0),
	CONSTRAINT "tscho_reason_check" CHECK (length(btrim(reason)) BETWEEN 1 AND 1000),
	CONSTRAINT "tscho_correlation_id_check" CHECK (length(btrim(correlation_id)) > 0),
	CONSTRAINT "tscho_transition_check" CHECK ((previous_status, next_status) IN (('active', 'suspended'), ('active', 'disabled'), ('suspended', 'active'), ('suspended', 'disabled'))),
	CONSTRAINT "tscho_version_step_check" CHECK (next_version = previous_version + 1)
);
--> statement-breakpoint
CREATE TABLE "tool_invocation" (
	"tenant_id" text NOT NULL,
	"invocation_id" text NOT NULL,
	"event_id" text NOT NULL,
	"session_id" text NOT NULL,
	"tool_name" text NOT NULL,
	"tool_capability_digest" text NOT NULL,
	"idempotency_key" text NOT NULL,
	"request_digest" text NOT NULL,
	"request_ref" text,
	"arguments" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"status" text DEFAULT 'prepared' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"claim_owner" text,
	"claim_token" text,
	"lease_expires_at" timestamp with time zone,
	"fencing_token" bigint DEFAULT 0 NOT NULL,
	"provider_receipt_ref" text,
	"provider_receipt" jsonb,
	"result_ref" text,
	"last_error" text,
	"requires_approval" boolean DEFAULT false NOT NULL,
	"approval_deadline" timestamp with time zone,
	"resolution" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"dispatched_at" timestamp with time zone,
	"reconciled_at" timestamp with time zone,
	"resolved_at" timestamp with time zone,
	CONSTRAINT "tool_invocation_pkey" PRIMARY KEY("tenant_id","invocation_id"),
	CONSTRAINT "tool_invocation_event_idempotency_unique" UNIQUE("tenant_id","event_id","idempotency_key"),
	CONSTRAINT "tool_invocation_invocation_id_check" CHECK (invocation_id ~ '^inv_[0-9A-Za-z_-]{1,100}$'),
	CONSTRAINT "tool_invocation_tool_name_check" CHECK (tool_name ~ '^[A-Za-z0-9_-]{1,64}$'),
	CONSTRAINT "tool_invocation_capability_digest_check" CHECK (tool_capability_digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "tool_invocation_idempotency_key_check" CHECK (length(btrim(idempotency_key)) BETWEEN 1 AND 200),
	CONSTRAINT "tool_invocation_request_digest_check" CHECK (request_digest ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "tool_invocation_arguments_check" CHECK (jsonb_typeof(arguments) = 'object'),
	CONSTRAINT "tool_invocation_status_check" CHECK (status IN ('prepared', 'dispatching', 'accepted', 'rejected', 'unknown', 'reconciling', 'manual', 'failed', 'awaiting_approval', 'refused')),
	CONSTRAINT "tool_invocation_attempts_check" CHECK (attempts >= 0),
	CONSTRAINT "tool_invocation_fencing_token_check" CHECK (fencing_token >= 0),
	CONSTRAINT "tool_invocation_resolution_check" CHECK (resolution IS NULL OR jsonb_typeof(resolution) = 'object'),
	CONSTRAINT "tool_invocation_approval_check" CHECK (status <> 'awaiting_approval' OR requires_approval)
);
--> statement-breakpoint
CREATE TABLE "usage_event" (
	"tenant_id" text NOT NULL,
	"usage_id" text NOT NULL,
	"event_id" text,
	"model_profile_id" text NOT NULL,
	"tokens_in" bigint NOT NULL,
	"tokens_out" bigint NOT NULL,
	"cost_minor" bigint DEFAULT 0 NOT NULL,
	"currency" char(3),
	"occurred_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "usage_event_pkey" PRIMARY KEY("tenant_id","usage_id"),
	CONSTRAINT "usage_event_usage_id_check" CHECK (usage_id ~ '^use_[0-9A-Za-z_-]{1,100}$'),
	CONSTRAINT "usage_event_tokens_in_check" CHECK (tokens_in >= 0),
	CONSTRAINT "usage_event_tokens_out_check" CHECK (tokens_out >= 0),
	CONSTRAINT "usage_event_cost_minor_check" CHECK (cost_minor >= 0),
	CONSTRAINT "usage_event_currency_check" CHECK (currency IS NULL OR currency ~ '^[A-Z]{3}$')
);
--> statement-breakpoint
ALTER TABLE "admin_api_key" ADD CONSTRAINT "admin_api_key_tenant_id_tenant_tenant_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenant"("tenant_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "agent_app" ADD CONSTRAINT "agent_app_tenant_id_tenant_tenant_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenant"("tenant_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "agent_app" ADD CONSTRAINT "fk_agent_app_published_revision" FOREIGN KEY ("tenant_id","app_id","published_revision") REFERENCES "public"."agent_app_revision"("tenant_id","app_id","revision") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "agent_app_revision" ADD CONSTRAINT "fk_agent_app_revision_app" FOREIGN KEY ("tenant_id","app_id") REFERENCES "public"."agent_app"("tenant_id","app_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "agent_app_revision" ADD CONSTRAINT "fk_agent_app_revision_model_profile" FOREIGN KEY ("tenant_id","model_profile_id") REFERENCES "public"."model_profile"("tenant_id","model_profile_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "audit_log" ADD CONSTRAINT "audit_log_tenant_id_tenant_tenant_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenant"("tenant_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "backend_profile" ADD CONSTRAINT "backend_profile_tenant_id_tenant_tenant_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenant"("tenant_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "channel_binding" ADD CONSTRAINT "fk_channel_binding_app" FOREIGN KEY ("tenant_id","app_id") REFERENCES "public"."agent_app"("tenant_id","app_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "channel_binding" ADD CONSTRAINT "fk_channel_binding_secret" FOREIGN KEY ("tenant_id","secret_ref") REFERENCES "public"."secret"("tenant_id","secret_ref") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "dead_letter" ADD CONSTRAINT "fk_dead_letter_event" FOREIGN KEY ("tenant_id","event_id") REFERENCES "public"."message_event"("tenant_id","event_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "dead_letter" ADD CONSTRAINT "fk_dead_letter_segment" FOREIGN KEY ("tenant_id","segment_id") REFERENCES "public"."reply_outbox"("tenant_id","segment_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "dead_letter" ADD CONSTRAINT "fk_dead_letter_invocation" FOREIGN KEY ("tenant_id","invocation_id") REFERENCES "public"."tool_invocation"("tenant_id","invocation_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "memory_entry" ADD CONSTRAINT "fk_memory_entry_session" FOREIGN KEY ("tenant_id","session_id") REFERENCES "public"."session"("tenant_id","session_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "memory_entry" ADD CONSTRAINT "fk_memory_entry_source_event" FOREIGN KEY ("tenant_id","source_event_id") REFERENCES "public"."message_event"("tenant_id","event_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_event" ADD CONSTRAINT "fk_message_event_session" FOREIGN KEY ("tenant_id","session_id") REFERENCES "public"."session"("tenant_id","session_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_event" ADD CONSTRAINT "fk_message_event_binding" FOREIGN KEY ("tenant_id","binding_id") REFERENCES "public"."channel_binding"("tenant_id","binding_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "model_profile" ADD CONSTRAINT "model_profile_tenant_id_tenant_tenant_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenant"("tenant_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "model_profile" ADD CONSTRAINT "fk_model_profile_api_key_secret" FOREIGN KEY ("tenant_id","api_key_secret_ref") REFERENCES "public"."secret"("tenant_id","secret_ref") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "rate_limit_window" ADD CONSTRAINT "rate_limit_window_tenant_id_tenant_tenant_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenant"("tenant_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "reply_cache" ADD CONSTRAINT "fk_reply_cache_event" FOREIGN KEY ("tenant_id","event_id") REFERENCES "public"."message_event"("tenant_id","event_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "reply_outbox" ADD CONSTRAINT "fk_reply_outbox_event" FOREIGN KEY ("tenant_id","event_id") REFERENCES "public"."message_event"("tenant_id","event_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "reply_outbox" ADD CONSTRAINT "fk_reply_outbox_pinned_reply" FOREIGN KEY ("tenant_id","event_id","reply_id","segment_count") REFERENCES "public"."message_event"("tenant_id","event_id","reply_id","segment_count") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "secret" ADD CONSTRAINT "secret_tenant_id_tenant_tenant_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenant"("tenant_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "secret_version" ADD CONSTRAINT "fk_secret_version_secret" FOREIGN KEY ("tenant_id","secret_ref") REFERENCES "public"."secret"("tenant_id","secret_ref") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "session" ADD CONSTRAINT "fk_session_binding" FOREIGN KEY ("tenant_id","binding_id") REFERENCES "public"."channel_binding"("tenant_id","binding_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "session" ADD CONSTRAINT "fk_session_app" FOREIGN KEY ("tenant_id","app_id") REFERENCES "public"."agent_app"("tenant_id","app_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "session_summary" ADD CONSTRAINT "fk_session_summary_session" FOREIGN KEY ("tenant_id","session_id") REFERENCES "public"."session"("tenant_id","session_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tenant" ADD CONSTRAINT "fk_tenant_default_agent" FOREIGN KEY ("tenant_id","default_agent_app_id") REFERENCES "public"."agent_app"("tenant_id","app_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tenant" ADD CONSTRAINT "fk_tenant_default_backend" FOREIGN KEY ("tenant_id","default_backend_profile_id") REFERENCES "public"."backend_profile"("tenant_id","profile_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tenant_status_change_outbox" ADD CONSTRAINT "tenant_status_change_outbox_tenant_id_tenant_tenant_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenant"("tenant_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tool_invocation" ADD CONSTRAINT "fk_tool_invocation_event" FOREIGN KEY ("tenant_id","event_id") REFERENCES "public"."message_event"("tenant_id","event_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tool_invocation" ADD CONSTRAINT "fk_tool_invocation_session" FOREIGN KEY ("tenant_id","session_id") REFERENCES "public"."session"("tenant_id","session_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "usage_event" ADD CONSTRAINT "fk_usage_event_event" FOREIGN KEY ("tenant_id","event_id") REFERENCES "public"."message_event"("tenant_id","event_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "usage_event" ADD CONSTRAINT "fk_usage_event_model_profile" FOREIGN KEY ("tenant_id","model_profile_id") REFERENCES "public"."model_profile"("tenant_id","model_profile_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "audit_log_tenant_occurred_idx" ON "audit_log" USING btree ("tenant_id","occurred_at" DESC NULLS LAST);--> statement-breakpoint
CREATE UNIQUE INDEX "channel_binding_active_account_unique" ON "channel_binding" USING btree ("channel","provider_account_id") WHERE status = 'active';--> statement-breakpoint
CREATE INDEX "dead_letter_tenant_status_created_idx" ON "dead_letter" USING btree ("tenant_id","status","created_at" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "ingress_replay_guard_seen_at_idx" ON "ingress_replay_guard" USING btree ("seen_at");--> statement-breakpoint
CREATE INDEX "ingress_security_event_occurred_idx" ON "ingress_security_event" USING btree ("occurred_at");--> statement-breakpoint
CREATE INDEX "memory_entry_tenant_session_created_idx" ON "memory_entry" USING btree ("tenant_id","session_id","created_at");--> statement-breakpoint
CREATE INDEX "memory_entry_tenant_source_event_idx" ON "memory_entry" USING btree ("tenant_id","source_event_id");--> statement-breakpoint
CREATE INDEX "message_event_tenant_created_idx" ON "message_event" USING btree ("tenant_id","created_at" DESC NULLS LAST,"event_id" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "message_event_tenant_status_created_idx" ON "message_event" USING btree ("tenant_id","status","created_at" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "message_event_unstarted_idx" ON "message_event" USING btree ("created_at") WHERE status = 'received' AND workflow_started_at IS NULL;--> statement-breakpoint
CREATE INDEX "reply_cache_tenant_event_idx" ON "reply_cache" USING btree ("tenant_id","event_id");--> statement-breakpoint
CREATE INDEX "reply_outbox_tenant_event_idx" ON "reply_outbox" USING btree ("tenant_id","event_id","segment_index");--> statement-breakpoint
CREATE INDEX "tscho_tenant_event_idx" ON "tenant_status_change_outbox" USING btree ("tenant_id","event_id");--> statement-breakpoint
CREATE INDEX "tool_invocation_tenant_status_created_idx" ON "tool_invocation" USING btree ("tenant_id","status","created_at" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "usage_event_tenant_occurred_idx" ON "usage_event" USING btree ("tenant_id","occurred_at");