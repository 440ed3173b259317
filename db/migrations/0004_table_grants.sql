-- Hand-written: least-privilege table grants for the two runtime roles (the tenant root table and
-- its outbox are granted in 0002). Row visibility is further limited by RLS (0005). Nothing is
-- granted DELETE on audit_log, usage_event, agent_app_revision or secret_version, and those tables
-- also reject UPDATE/DELETE by trigger (0006). Identity columns need no sequence grant.
-- IDEMPOTENT: GRANT/REVOKE are repeatable.
REVOKE ALL PRIVILEGES ON
    agent_app, agent_app_revision, model_profile, backend_profile, channel_binding, secret,
    secret_version, admin_api_key, session, message_event, reply_cache, tool_invocation,
    reply_outbox, memory_entry, session_summary, usage_event, audit_log, dead_letter,
    ingress_security_event, ingress_replay_guard, rate_limit_window
FROM PUBLIC;
--> statement-breakpoint
-- Admin API (control plane): manages configuration objects and keys…
GRANT SELECT, INSERT, UPDATE ON
    agent_app, model_profile, backend_profile, channel_binding, secret, admin_api_key, dead_letter
TO tenant_admin_writer;
--> statement-breakpoint
-- …appends immutable facts (revisions, secret versions, audit entries, usage)…
GRANT SELECT, INSERT ON agent_app_revision, secret_version, audit_log, usage_event TO tenant_admin_writer;
--> statement-breakpoint
-- …reads runtime state for inspection…
GRANT SELECT ON
    session, message_event, tool_invocation, reply_outbox, reply_cache, memory_entry, session_summary
TO tenant_admin_writer;
--> statement-breakpoint
-- …and performs operator actions (resolve a manual tool call, retry/discard dead letters, repair).
GRANT UPDATE ON tool_invocation, reply_outbox, message_event TO tenant_admin_writer;
--> statement-breakpoint
-- Worker and ingress (data plane): read the published configuration…
GRANT SELECT ON
    agent_app, agent_app_revision, model_profile, backend_profile, channel_binding, secret, secret_version
TO tenant_app_writer;
--> statement-breakpoint
-- …own the execution state machine…
GRANT SELECT, INSERT, UPDATE ON
    session, message_event, tool_invocation, reply_outbox, memory_entry, session_summary, dead_letter,
    rate_limit_window
TO tenant_app_writer;
--> statement-breakpoint
-- …append immutable facts…
GRANT SELECT, INSERT ON reply_cache, usage_event, audit_log TO tenant_app_writer;
--> statement-breakpoint
-- …and use the tenant-less ingress tables: the security sink is write-only for it; the replay guard
-- is checked and pruned (rows past the ±300 s window). Rate-limit windows are pruned per tenant.
GRANT INSERT ON ingress_security_event TO tenant_app_writer;
--> statement-breakpoint
GRANT SELECT, INSERT, DELETE ON ingress_replay_guard TO tenant_app_writer;
--> statement-breakpoint
GRANT DELETE ON rate_limit_window TO tenant_app_writer;
