// "Create a demo agent": everything a first chat needs, through the admin API as an operator
// would do it (the same steps as bin/demo.ts, with a console binding instead of Telegram).
import { call, tenantPath } from './api.js';

export const DEMO_SCRIPTED = {
  rules: [{ match: '^(hello|hi)\\b', flags: 'i', reply: 'Hello! Switchyard received: "{{text}}"' }],
  default_reply: 'Switchyard received: "{{text}}"',
};

const suffix = () => Math.random().toString(36).slice(2, 8);

/** Runs each step, telling `progress(label)` before it; resolves to `{ tenantId, bindingId }`. */
export async function createDemoAgent(progress) {
  progress('tenant');
  const tenant = await call('POST', '/v1/admin/tenants', {
    tenant_key: `demo-${suffix()}`,
    display_name: 'Demo tenant',
  });
  const t = (...segments) => tenantPath(tenant.tenant_id, ...segments);
  progress('scripted model and backend profiles');
  const model = await call('POST', t('model-profiles'), {
    profile_key: 'scripted',
    provider: 'scripted',
    model: 'rules',
  });
  const backend = await call('POST', t('backend-profiles'), { profile_key: 'main', provider: 'postgres' });
  progress('app and its first revision');
  const app = await call('POST', t('apps'), { app_key: 'assistant', display_name: 'Demo assistant' });
  const rev = await call('POST', t('apps', app.app_id, 'revisions'), {
    model_profile_id: model.model_profile_id,
    system_prompt: 'You are a friendly demo assistant.',
    scripted: DEMO_SCRIPTED,
  });
  progress('publish');
  await call('POST', t('apps', app.app_id, 'publish'), {
    revision: rev.revision,
    expected_version: app.version,
  });
  progress('tenant defaults');
  await call('PUT', t('configuration'), {
    expected_version: tenant.version,
    display_name: tenant.display_name,
    rate_limit_rpm: null,
    max_concurrent_executions: null,
    monthly_token_budget: null,
    monthly_spend_limit_minor: null,
    billing_currency: null,
    audit_retention_days: tenant.audit_retention_days,
    log_masking_level: tenant.log_masking_level,
    trace_sampling_rate: tenant.trace_sampling_rate,
    default_agent_app_id: app.app_id,
    default_backend_profile_id: backend.profile_id,
  });
  progress('console binding');
  const binding = await createConsoleBinding(tenant.tenant_id, app.app_id);
  return { tenantId: tenant.tenant_id, bindingId: binding.binding_id };
}

/** A console binding (no secret: its messages come from signed-in console users), activated. */
export async function createConsoleBinding(tenantId, appId) {
  const created = await call('POST', tenantPath(tenantId, 'bindings'), {
    channel: 'console',
    app_id: appId,
  });
  if (created.status === 'active') return created;
  return call('POST', tenantPath(tenantId, 'bindings', created.binding_id, 'status-transitions'), {
    expected_version: created.version,
    next_status: 'active',
  });
}
