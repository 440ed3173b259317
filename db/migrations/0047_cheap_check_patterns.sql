-- Generated (drizzle-kit), from db/schema/columns.ts: the CHECKs that matched a counted repetition
-- (`^evt_[0-9A-Za-z_-]{1,100}$`, `^[0-9a-f]{64}$`, …) now match `+` / `*` and test the length,
-- which accepts exactly the same values. PostgreSQL builds a regex's DFA anew on each call and a
-- counted repetition unrolls into that many states: the old forms cost 7-35 µs per checked row,
-- and every UPDATE re-checks all CHECKs of its table (a message writes ~28 such rows).
ALTER TABLE "admin_api_key" DROP CONSTRAINT "admin_api_key_key_id_check";--> statement-breakpoint
ALTER TABLE "admin_api_key" DROP CONSTRAINT "admin_api_key_key_digest_check";--> statement-breakpoint
ALTER TABLE "agent_app" DROP CONSTRAINT "agent_app_app_id_check";--> statement-breakpoint
ALTER TABLE "agent_app" DROP CONSTRAINT "agent_app_app_key_check";--> statement-breakpoint
ALTER TABLE "agent_app_revision" DROP CONSTRAINT "agent_app_revision_content_digest_check";--> statement-breakpoint
ALTER TABLE "artifact" DROP CONSTRAINT "artifact_artifact_id_check";--> statement-breakpoint
ALTER TABLE "artifact" DROP CONSTRAINT "artifact_content_digest_check";--> statement-breakpoint
ALTER TABLE "audit_log" DROP CONSTRAINT "audit_log_audit_id_check";--> statement-breakpoint
ALTER TABLE "audit_log" DROP CONSTRAINT "audit_log_previous_digest_check";--> statement-breakpoint
ALTER TABLE "audit_log" DROP CONSTRAINT "audit_log_digest_check";--> statement-breakpoint
ALTER TABLE "audit_pending" DROP CONSTRAINT "audit_pending_audit_id_check";--> statement-breakpoint
ALTER TABLE "audit_pending" DROP CONSTRAINT "audit_pending_mac_check";--> statement-breakpoint
ALTER TABLE "audit_retention_checkpoint" DROP CONSTRAINT "audit_retention_checkpoint_digest_check";--> statement-breakpoint
ALTER TABLE "audit_retention_checkpoint" DROP CONSTRAINT "audit_retention_checkpoint_signature_check";--> statement-breakpoint
ALTER TABLE "backend_profile" DROP CONSTRAINT "backend_profile_profile_id_check";--> statement-breakpoint
ALTER TABLE "backend_profile" DROP CONSTRAINT "backend_profile_profile_key_check";--> statement-breakpoint
ALTER TABLE "backend_profile" DROP CONSTRAINT "backend_profile_content_digest_check";--> statement-breakpoint
ALTER TABLE "channel_binding" DROP CONSTRAINT "channel_binding_binding_id_check";--> statement-breakpoint
ALTER TABLE "channel_binding" DROP CONSTRAINT "channel_binding_route_key_digest_check";--> statement-breakpoint
ALTER TABLE "channel_binding" DROP CONSTRAINT "channel_binding_config_digest_check";--> statement-breakpoint
ALTER TABLE "dead_letter" DROP CONSTRAINT "dead_letter_id_check";--> statement-breakpoint
ALTER TABLE "dead_letter" DROP CONSTRAINT "dead_letter_reason_class_check";--> statement-breakpoint
ALTER TABLE "ingress_replay_guard" DROP CONSTRAINT "ingress_replay_guard_route_key_digest_check";--> statement-breakpoint
ALTER TABLE "ingress_security_event" DROP CONSTRAINT "ingress_security_event_route_key_digest_check";--> statement-breakpoint
ALTER TABLE "ingress_security_event" DROP CONSTRAINT "ingress_security_event_failure_class_check";--> statement-breakpoint
ALTER TABLE "memory_entry" DROP CONSTRAINT "memory_entry_memory_id_check";--> statement-breakpoint
ALTER TABLE "memory_entry" DROP CONSTRAINT "memory_entry_content_digest_check";--> statement-breakpoint
ALTER TABLE "message_event" DROP CONSTRAINT "message_event_event_id_check";--> statement-breakpoint
ALTER TABLE "message_event" DROP CONSTRAINT "message_event_payload_digest_check";--> statement-breakpoint
ALTER TABLE "message_event" DROP CONSTRAINT "message_event_reply_id_check";--> statement-breakpoint
ALTER TABLE "model_profile" DROP CONSTRAINT "model_profile_id_check";--> statement-breakpoint
ALTER TABLE "model_profile" DROP CONSTRAINT "model_profile_profile_key_check";--> statement-breakpoint
ALTER TABLE "model_profile" DROP CONSTRAINT "model_profile_content_digest_check";--> statement-breakpoint
ALTER TABLE "model_profile_version" DROP CONSTRAINT "model_profile_version_content_digest_check";--> statement-breakpoint
ALTER TABLE "reply_cache" DROP CONSTRAINT "reply_cache_reply_id_check";--> statement-breakpoint
ALTER TABLE "reply_cache" DROP CONSTRAINT "reply_cache_content_digest_check";--> statement-breakpoint
ALTER TABLE "reply_outbox" DROP CONSTRAINT "reply_outbox_segment_id_check";--> statement-breakpoint
ALTER TABLE "secret" DROP CONSTRAINT "secret_secret_ref_check";--> statement-breakpoint
ALTER TABLE "secret" DROP CONSTRAINT "secret_name_check";--> statement-breakpoint
ALTER TABLE "session" DROP CONSTRAINT "session_session_id_check";--> statement-breakpoint
ALTER TABLE "session_summary" DROP CONSTRAINT "session_summary_content_digest_check";--> statement-breakpoint
ALTER TABLE "tenant" DROP CONSTRAINT "tenant_tenant_id_check";--> statement-breakpoint
ALTER TABLE "tenant" DROP CONSTRAINT "tenant_tenant_key_check";--> statement-breakpoint
ALTER TABLE "tool_invocation" DROP CONSTRAINT "tool_invocation_invocation_id_check";--> statement-breakpoint
ALTER TABLE "tool_invocation" DROP CONSTRAINT "tool_invocation_tool_name_check";--> statement-breakpoint
ALTER TABLE "tool_invocation" DROP CONSTRAINT "tool_invocation_capability_digest_check";--> statement-breakpoint
ALTER TABLE "tool_invocation" DROP CONSTRAINT "tool_invocation_request_digest_check";--> statement-breakpoint
ALTER TABLE "usage_event" DROP CONSTRAINT "usage_event_usage_id_check";--> statement-breakpoint
ALTER TABLE "admin_api_key" ADD CONSTRAINT "admin_api_key_key_id_check" CHECK (key_id ~ '^key_[0-7][0-9A-HJKMNP-TV-Z]+$' AND length(key_id) = 30);--> statement-breakpoint
ALTER TABLE "admin_api_key" ADD CONSTRAINT "admin_api_key_key_digest_check" CHECK (key_digest ~ '^[0-9a-f]+$' AND length(key_digest) = 64);--> statement-breakpoint
ALTER TABLE "agent_app" ADD CONSTRAINT "agent_app_app_id_check" CHECK (app_id ~ '^app_[0-7][0-9A-HJKMNP-TV-Z]+$' AND length(app_id) = 30);--> statement-breakpoint
ALTER TABLE "agent_app" ADD CONSTRAINT "agent_app_app_key_check" CHECK (app_key ~ '^[a-z][a-z0-9-]+$' AND length(app_key) BETWEEN 2 AND 64);--> statement-breakpoint
ALTER TABLE "agent_app_revision" ADD CONSTRAINT "agent_app_revision_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]+$' AND length(content_digest) = 64);--> statement-breakpoint
ALTER TABLE "artifact" ADD CONSTRAINT "artifact_artifact_id_check" CHECK (artifact_id ~ '^art_[0-9A-Za-z_-]+$' AND length(artifact_id) BETWEEN 5 AND 104);--> statement-breakpoint
ALTER TABLE "artifact" ADD CONSTRAINT "artifact_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]+$' AND length(content_digest) = 64);--> statement-breakpoint
ALTER TABLE "audit_log" ADD CONSTRAINT "audit_log_audit_id_check" CHECK (audit_id ~ '^aud_[0-9A-Za-z_-]+$' AND length(audit_id) BETWEEN 5 AND 104);--> statement-breakpoint
ALTER TABLE "audit_log" ADD CONSTRAINT "audit_log_previous_digest_check" CHECK (previous_digest ~ '^[0-9a-f]+$' AND length(previous_digest) = 64);--> statement-breakpoint
ALTER TABLE "audit_log" ADD CONSTRAINT "audit_log_digest_check" CHECK (digest ~ '^[0-9a-f]+$' AND length(digest) = 64);--> statement-breakpoint
ALTER TABLE "audit_pending" ADD CONSTRAINT "audit_pending_audit_id_check" CHECK (audit_id ~ '^aud_[0-9A-Za-z_-]+$' AND length(audit_id) BETWEEN 5 AND 104);--> statement-breakpoint
ALTER TABLE "audit_pending" ADD CONSTRAINT "audit_pending_mac_check" CHECK (mac ~ '^[0-9a-f]+$' AND length(mac) = 64);--> statement-breakpoint
ALTER TABLE "audit_retention_checkpoint" ADD CONSTRAINT "audit_retention_checkpoint_digest_check" CHECK (digest ~ '^[0-9a-f]+$' AND length(digest) = 64);--> statement-breakpoint
ALTER TABLE "audit_retention_checkpoint" ADD CONSTRAINT "audit_retention_checkpoint_signature_check" CHECK (signature ~ '^[0-9a-f]+$' AND length(signature) = 64);--> statement-breakpoint
ALTER TABLE "backend_profile" ADD CONSTRAINT "backend_profile_profile_id_check" CHECK (profile_id ~ '^bp_[0-7][0-9A-HJKMNP-TV-Z]+$' AND length(profile_id) = 29);--> statement-breakpoint
ALTER TABLE "backend_profile" ADD CONSTRAINT "backend_profile_profile_key_check" CHECK (profile_key ~ '^[a-z][a-z0-9-]+$' AND length(profile_key) BETWEEN 2 AND 64);--> statement-breakpoint
ALTER TABLE "backend_profile" ADD CONSTRAINT "backend_profile_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]+$' AND length(content_digest) = 64);--> statement-breakpoint
ALTER TABLE "channel_binding" ADD CONSTRAINT "channel_binding_binding_id_check" CHECK (binding_id ~ '^cb_[0-7][0-9A-HJKMNP-TV-Z]+$' AND length(binding_id) = 29);--> statement-breakpoint
ALTER TABLE "channel_binding" ADD CONSTRAINT "channel_binding_route_key_digest_check" CHECK (public_route_key_digest ~ '^[0-9a-f]+$' AND length(public_route_key_digest) = 64);--> statement-breakpoint
ALTER TABLE "channel_binding" ADD CONSTRAINT "channel_binding_config_digest_check" CHECK (config_digest ~ '^[0-9a-f]+$' AND length(config_digest) = 64);--> statement-breakpoint
ALTER TABLE "dead_letter" ADD CONSTRAINT "dead_letter_id_check" CHECK (dead_letter_id ~ '^dl_[0-9A-Za-z_-]+$' AND length(dead_letter_id) BETWEEN 4 AND 103);--> statement-breakpoint
ALTER TABLE "dead_letter" ADD CONSTRAINT "dead_letter_reason_class_check" CHECK (reason_class ~ '^[a-z][a-z0-9_.:-]*$' AND length(reason_class) BETWEEN 1 AND 128);--> statement-breakpoint
ALTER TABLE "ingress_replay_guard" ADD CONSTRAINT "ingress_replay_guard_route_key_digest_check" CHECK (route_key_digest ~ '^[0-9a-f]+$' AND length(route_key_digest) = 64);--> statement-breakpoint
ALTER TABLE "ingress_security_event" ADD CONSTRAINT "ingress_security_event_route_key_digest_check" CHECK (route_key_digest ~ '^[0-9a-f]+$' AND length(route_key_digest) = 64);--> statement-breakpoint
ALTER TABLE "ingress_security_event" ADD CONSTRAINT "ingress_security_event_failure_class_check" CHECK (failure_class ~ '^[a-z][a-z0-9_.:-]*$' AND length(failure_class) BETWEEN 1 AND 128);--> statement-breakpoint
ALTER TABLE "memory_entry" ADD CONSTRAINT "memory_entry_memory_id_check" CHECK (memory_id ~ '^mem_[0-9A-Za-z_-]+$' AND length(memory_id) BETWEEN 5 AND 104);--> statement-breakpoint
ALTER TABLE "memory_entry" ADD CONSTRAINT "memory_entry_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]+$' AND length(content_digest) = 64);--> statement-breakpoint
ALTER TABLE "message_event" ADD CONSTRAINT "message_event_event_id_check" CHECK (event_id ~ '^evt_[0-9A-Za-z_-]+$' AND length(event_id) BETWEEN 5 AND 104);--> statement-breakpoint
ALTER TABLE "message_event" ADD CONSTRAINT "message_event_payload_digest_check" CHECK (payload_digest ~ '^[0-9a-f]+$' AND length(payload_digest) = 64);--> statement-breakpoint
ALTER TABLE "message_event" ADD CONSTRAINT "message_event_reply_id_check" CHECK (reply_id ~ '^rep_[0-9A-Za-z_-]+$' AND length(reply_id) BETWEEN 5 AND 104);--> statement-breakpoint
ALTER TABLE "model_profile" ADD CONSTRAINT "model_profile_id_check" CHECK (model_profile_id ~ '^mp_[0-7][0-9A-HJKMNP-TV-Z]+$' AND length(model_profile_id) = 29);--> statement-breakpoint
ALTER TABLE "model_profile" ADD CONSTRAINT "model_profile_profile_key_check" CHECK (profile_key ~ '^[a-z][a-z0-9-]+$' AND length(profile_key) BETWEEN 2 AND 64);--> statement-breakpoint
ALTER TABLE "model_profile" ADD CONSTRAINT "model_profile_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]+$' AND length(content_digest) = 64);--> statement-breakpoint
ALTER TABLE "model_profile_version" ADD CONSTRAINT "model_profile_version_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]+$' AND length(content_digest) = 64);--> statement-breakpoint
ALTER TABLE "reply_cache" ADD CONSTRAINT "reply_cache_reply_id_check" CHECK (reply_id ~ '^rep_[0-9A-Za-z_-]+$' AND length(reply_id) BETWEEN 5 AND 104);--> statement-breakpoint
ALTER TABLE "reply_cache" ADD CONSTRAINT "reply_cache_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]+$' AND length(content_digest) = 64);--> statement-breakpoint
ALTER TABLE "reply_outbox" ADD CONSTRAINT "reply_outbox_segment_id_check" CHECK (segment_id ~ '^seg_[0-9A-Za-z_-]+$' AND length(segment_id) BETWEEN 5 AND 104);--> statement-breakpoint
ALTER TABLE "secret" ADD CONSTRAINT "secret_secret_ref_check" CHECK (secret_ref ~ '^sec_[0-7][0-9A-HJKMNP-TV-Z]+$' AND length(secret_ref) = 30);--> statement-breakpoint
ALTER TABLE "secret" ADD CONSTRAINT "secret_name_check" CHECK (name ~ '^[a-z][a-z0-9_-]*$' AND length(name) BETWEEN 1 AND 64);--> statement-breakpoint
ALTER TABLE "session" ADD CONSTRAINT "session_session_id_check" CHECK (session_id ~ '^ses_[0-9A-Za-z_-]+$' AND length(session_id) BETWEEN 5 AND 104);--> statement-breakpoint
ALTER TABLE "session_summary" ADD CONSTRAINT "session_summary_content_digest_check" CHECK (content_digest ~ '^[0-9a-f]+$' AND length(content_digest) = 64);--> statement-breakpoint
ALTER TABLE "tenant" ADD CONSTRAINT "tenant_tenant_id_check" CHECK (tenant_id ~ '^t_[0-7][0-9A-HJKMNP-TV-Z]+$' AND length(tenant_id) = 28);--> statement-breakpoint
ALTER TABLE "tenant" ADD CONSTRAINT "tenant_tenant_key_check" CHECK (tenant_key ~ '^[a-z][a-z0-9-]+$' AND length(tenant_key) BETWEEN 2 AND 64);--> statement-breakpoint
ALTER TABLE "tool_invocation" ADD CONSTRAINT "tool_invocation_invocation_id_check" CHECK (invocation_id ~ '^inv_[0-9A-Za-z_-]+$' AND length(invocation_id) BETWEEN 5 AND 104);--> statement-breakpoint
ALTER TABLE "tool_invocation" ADD CONSTRAINT "tool_invocation_tool_name_check" CHECK (tool_name ~ '^[A-Za-z0-9_-]+$' AND length(tool_name) BETWEEN 1 AND 64);--> statement-breakpoint
ALTER TABLE "tool_invocation" ADD CONSTRAINT "tool_invocation_capability_digest_check" CHECK (tool_capability_digest ~ '^[0-9a-f]+$' AND length(tool_capability_digest) = 64);--> statement-breakpoint
ALTER TABLE "tool_invocation" ADD CONSTRAINT "tool_invocation_request_digest_check" CHECK (request_digest ~ '^[0-9a-f]+$' AND length(request_digest) = 64);--> statement-breakpoint
ALTER TABLE "usage_event" ADD CONSTRAINT "usage_event_usage_id_check" CHECK (usage_id ~ '^use_[0-9A-Za-z_-]+$' AND length(usage_id) BETWEEN 5 AND 104);