import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AdminTenant,
  api,
  configurationOf,
  type Json,
  ok,
  type RuntimeRows,
  SCRIPTED,
  seedRuntimeRows,
  setupTwoTenants,
  snapshotTenant,
  tenantPath,
} from '../helpers/admin';
import { createHarness, type Harness } from '../helpers/harness';

// Cross-tenant isolation, generated from the OpenAPI document so that every route — including
// ones added later — is covered: a tenant key naming another tenant (or another tenant's
// objects) gets 404 and changes nothing, byte for byte.
describe('admin API: tenant isolation', () => {
  let h: Harness;
  let a: AdminTenant;
  let b: AdminTenant;
  let rowsB: RuntimeRows;
  let routes: { method: string; path: string; platformOnly: boolean }[];

  beforeAll(async () => {
    h = await createHarness();
    ({ a, b } = await setupTwoTenants(h.app));
    rowsB = await seedRuntimeRows(h.sql, b);
    await seedRuntimeRows(h.sql, a);
    const doc = (await ok(api(h.app, 'GET', '/openapi.json', { token: null }))) as {
      paths: Record<string, Record<string, unknown>>;
    };
    routes = Object.entries(doc.paths)
      .filter(([path]) => path.includes('{tenant_id}'))
      .flatMap(([path, ops]) =>
        Object.entries(ops as Record<string, { summary?: string }>)
          .filter(([m]) => ['get', 'post', 'put', 'patch', 'delete'].includes(m))
          .map(([method, op]) => ({
            method: method.toUpperCase(),
            path,
            platformOnly: /platform only/i.test(op.summary ?? ''),
          })),
      );
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Plausible, valid bodies, so that a 404 is about the tenant and not about the body. */
  function bodyFor(method: string, path: string, t: AdminTenant): Json {
    const key = `${method} ${path.replace('/v1/admin/tenants/{tenant_id}', '')}`;
    const bodies: Record<string, Json> = {
      'PUT /configuration': {
        expected_version: 3,
        display_name: 'Hijacked',
        rate_limit_rpm: null,
        max_concurrent_executions: null,
        monthly_token_budget: null,
        monthly_spend_limit_minor: null,
        billing_currency: null,
        audit_retention_days: 1,
        log_masking_level: 'none',
        trace_sampling_rate: 0,
        default_agent_app_id: null,
        default_backend_profile_id: null,
      },
      'POST /status-transitions': { expected_version: 3, next_status: 'disabled', reason: 'hijack' },
      'POST /api-keys': { role: 'tenant_admin' },
      'POST /secrets': { name: 'hijack', purpose: 'tool_credential', value: 'x' },
      'PUT /secrets/{name}': { value: { bot_token: '1:x', webhook_secret_token: 'y' } },
      'POST /model-profiles': { profile_key: 'hijack', provider: 'scripted', model: 'rules' },
      'PUT /model-profiles/{model_profile_id}': { expected_version: 1, provider: 'scripted', model: 'other' },
      'POST /backend-profiles': { profile_key: 'hijack', provider: 'postgres' },
      'POST /backend-profiles/{profile_id}/status-transitions': {
        expected_version: 1,
        next_status: 'disabled',
      },
      'POST /apps': { app_key: 'hijack', display_name: 'Hijack' },
      'POST /apps/{app_id}/revisions': {
        model_profile_id: t.modelProfileId,
        system_prompt: 'x',
        scripted: SCRIPTED,
      },
      'POST /apps/{app_id}/publish': { revision: 1, expected_version: 2 },
      'POST /apps/{app_id}/status-transitions': { expected_version: 2, next_status: 'disabled' },
      'POST /bindings': {
        channel: 'telegram',
        provider_account_id: t.bot.botId,
        app_id: t.appId,
        secret_ref: t.secretRef,
      },
      'POST /bindings/{binding_id}/status-transitions': { expected_version: 1, next_status: 'disabled' },
      'POST /dead-letters/{dead_letter_id}/discard': { reason: 'hijack' },
      'POST /dead-letters/{dead_letter_id}/retry': { reason: 'hijack' },
      'POST /tool-invocations/{invocation_id}/resolution': { outcome: 'rejected', reason: 'hijack' },
      'POST /tool-invocations/{invocation_id}/approval': { decision: 'deny', reason: 'hijack' },
      'POST /messages/{event_id}/repair': { reason: 'hijack' },
      'POST /messages/{event_id}/fail': { reason: 'hijack' },
      'POST /bindings/{binding_id}/console/messages': { conversation_id: 'hijack', text: 'hijack' },
    };
    return bodies[key] ?? (method === 'GET' ? undefined : {});
  }

  /** Path parameters naming B's objects; unknown parameters get a placeholder (still 404). */
  function fill(path: string, tenantId: string): string {
    const ids: Record<string, string> = {
      tenant_id: tenantId,
      app_id: b.appId,
      binding_id: b.bindingId,
      profile_id: b.backendProfileId,
      model_profile_id: b.modelProfileId,
      name: b.secretName,
      key_id: b.adminKeyId,
      revision: '1',
      event_id: rowsB.eventId,
      dead_letter_id: rowsB.deadLetterId,
      id: rowsB.deadLetterId,
      invocation_id: rowsB.invocationId,
    };
    return path.replace(/\{([a-z_]+)\}/g, (_m, name: string) => ids[name] ?? 'unknown_placeholder');
  }

  it('whoami tells each token who it is, a tenant key its own tenant only; anything else is 401', async () => {
    expect(await ok(api(h.app, 'GET', '/v1/admin/whoami'))).toEqual({ kind: 'platform' });
    for (const [t, token, keyId, role] of [
      [a, a.adminKey, a.adminKeyId, 'tenant_admin'],
      [a, a.viewerKey, a.viewerKeyId, 'tenant_viewer'],
      [b, b.viewerKey, b.viewerKeyId, 'tenant_viewer'],
    ] as const) {
      expect(await ok(api(h.app, 'GET', '/v1/admin/whoami', { token }))).toEqual({
        kind: 'api_key',
        tenant_id: t.tenantId,
        key_id: keyId,
        role,
      });
    }
    for (const token of [null, 'nope', `sy_${'A'.repeat(43)}`]) {
      const res = await api(h.app, 'GET', '/v1/admin/whoami', { token });
      expect(res.status, String(token)).toBe(401);
      expect(res.body.error.code).toBe('unauthenticated');
    }
  });

  it('covers the routes of the contract', () => {
    const listed = new Set(routes.map((r) => `${r.method} ${r.path}`));
    for (const expected of [
      'GET /v1/admin/tenants/{tenant_id}',
      'PUT /v1/admin/tenants/{tenant_id}/configuration',
      'POST /v1/admin/tenants/{tenant_id}/status-transitions',
      'POST /v1/admin/tenants/{tenant_id}/api-keys',
      'POST /v1/admin/tenants/{tenant_id}/secrets',
      'PUT /v1/admin/tenants/{tenant_id}/secrets/{name}',
      'POST /v1/admin/tenants/{tenant_id}/model-profiles',
      'POST /v1/admin/tenants/{tenant_id}/backend-profiles',
      'POST /v1/admin/tenants/{tenant_id}/apps',
      'POST /v1/admin/tenants/{tenant_id}/apps/{app_id}/revisions',
      'POST /v1/admin/tenants/{tenant_id}/apps/{app_id}/publish',
      'POST /v1/admin/tenants/{tenant_id}/bindings',
      'POST /v1/admin/tenants/{tenant_id}/bindings/{binding_id}/status-transitions',
      'GET /v1/admin/tenants/{tenant_id}/messages',
      'GET /v1/admin/tenants/{tenant_id}/messages/{event_id}',
      'GET /v1/admin/tenants/{tenant_id}/tool-invocations',
      'POST /v1/admin/tenants/{tenant_id}/tool-invocations/{invocation_id}/resolution',
      'POST /v1/admin/tenants/{tenant_id}/tool-invocations/{invocation_id}/approval',
      'GET /v1/admin/tenants/{tenant_id}/dead-letters',
      'POST /v1/admin/tenants/{tenant_id}/dead-letters/{dead_letter_id}/retry',
      'POST /v1/admin/tenants/{tenant_id}/dead-letters/{dead_letter_id}/discard',
      'GET /v1/admin/tenants/{tenant_id}/audit-events',
      'GET /v1/admin/tenants/{tenant_id}/audit-events/verification',
      'GET /v1/admin/tenants/{tenant_id}/usage',
    ]) {
      expect(listed, expected).toContain(expected);
    }
  });

  it("A's keys get 404 on every route of B, and B's rows stay byte-identical", async () => {
    const before = await snapshotTenant(h.sql, b.tenantId);
    const failures: string[] = [];
    for (const { method, path } of routes) {
      for (const token of [a.adminKey, a.viewerKey]) {
        const url = fill(path, b.tenantId);
        const res = await api(h.app, method, url, { token, body: bodyFor(method, path, b) });
        if (res.status !== 404 || res.body?.error?.code !== 'not_found') {
          failures.push(`${method} ${url} → ${res.status} ${res.text.slice(0, 200)}`);
        }
      }
    }
    expect(failures).toEqual([]);
    expect(await snapshotTenant(h.sql, b.tenantId)).toEqual(before);
  });

  it("A's key with its own tenant id but B's object ids gets 404 and changes nothing", async () => {
    const beforeA = await snapshotTenant(h.sql, a.tenantId);
    const beforeB = await snapshotTenant(h.sql, b.tenantId);
    const failures: string[] = [];
    let checked = 0;
    for (const { method, path, platformOnly } of routes) {
      // A tenant key is refused a platform-only route (403) before any id is looked at.
      if (platformOnly) continue;
      const params = [...path.matchAll(/\{([a-z_]+)\}/g)].map((m) => m[1]).filter((p) => p !== 'tenant_id');
      // Secret names and revision numbers are per-tenant, not ids: A has its own of each.
      if (params.length === 0 || params.includes('name') || params.every((p) => p === 'revision')) continue;
      // A valid query where the route requires one, so only the object's tenant can refuse it.
      const query = method === 'GET' && path.endsWith('/console/messages') ? '?conversation_id=hijack' : '';
      const url = fill(path, a.tenantId) + query;
      const res = await api(h.app, method, url, { token: a.adminKey, body: bodyFor(method, path, a) });
      checked += 1;
      if (res.status !== 404) failures.push(`${method} ${url} → ${res.status} ${res.text.slice(0, 200)}`);
    }
    expect(checked).toBeGreaterThan(10);
    expect(failures).toEqual([]);
    expect(await snapshotTenant(h.sql, a.tenantId)).toEqual(beforeA);
    expect(await snapshotTenant(h.sql, b.tenantId)).toEqual(beforeB);
  });

  it('refuses unknown fields and mass-assignment with 400, writing nothing', async () => {
    const as = { token: a.adminKey };
    const at = (rest: string) => tenantPath(a.tenantId, rest);
    const tenant = await ok(api(h.app, 'GET', at(''), as));
    const agent = await ok(api(h.app, 'GET', at(`/apps/${a.appId}`), as));
    const attempts: [string, string, Json][] = [
      [
        'POST',
        at('/secrets'),
        { name: 'mass', purpose: 'tool_credential', value: 'x', tenant_id: b.tenantId },
      ],
      ['POST', at('/api-keys'), { role: 'tenant_admin', key_digest: '0'.repeat(64) }],
      ['POST', at('/api-keys'), { role: 'tenant_admin', tenant_id: b.tenantId }],
      [
        'POST',
        at('/model-profiles'),
        { profile_key: 'mass', provider: 'scripted', model: 'm', content_digest: '0'.repeat(64) },
      ],
      ['POST', at('/model-profiles'), { profile_key: 'mass', provider: 'scripted', model: 'm', version: 9 }],
      [
        'PUT',
        at(`/model-profiles/${a.modelProfileId}`),
        { expected_version: 1, provider: 'scripted', model: 'm', status: 'disabled' },
      ],
      ['POST', at('/backend-profiles'), { profile_key: 'mass', provider: 'postgres', status: 'disabled' }],
      ['POST', at('/backend-profiles'), { profile_key: 'mass', provider: 'postgres', tenant_id: b.tenantId }],
      ['POST', at('/apps'), { app_key: 'mass', display_name: 'x', published_revision: 1 }],
      ['POST', at('/apps'), { app_key: 'mass', display_name: 'x', version: 5 }],
      [
        'POST',
        at(`/apps/${a.appId}/revisions`),
        {
          model_profile_id: a.modelProfileId,
          system_prompt: 'x',
          revision: 7,
          content_digest: '0'.repeat(64),
        },
      ],
      [
        'POST',
        at(`/apps/${a.appId}/revisions`),
        { model_profile_id: a.modelProfileId, system_prompt: 'x', created_by: 'me' },
      ],
      [
        'POST',
        at(`/apps/${a.appId}/publish`),
        { revision: 1, expected_version: agent.version, tenant_id: b.tenantId },
      ],
      [
        'POST',
        at('/bindings'),
        {
          channel: 'telegram',
          provider_account_id: '123',
          app_id: a.appId,
          secret_ref: a.secretRef,
          status: 'active',
        },
      ],
      [
        'POST',
        at('/bindings'),
        {
          channel: 'telegram',
          provider_account_id: '123',
          app_id: a.appId,
          secret_ref: a.secretRef,
          route_key: 'A'.repeat(32),
        },
      ],
      [
        'POST',
        at('/bindings'),
        {
          channel: 'telegram',
          provider_account_id: '123',
          app_id: a.appId,
          secret_ref: a.secretRef,
          config: { token: 'x' },
        },
      ],
      [
        'POST',
        at(`/bindings/${a.bindingId}/status-transitions`),
        { expected_version: 1, next_status: 'suspended', version: 1 },
      ],
      ['PUT', at('/secrets/telegram-bot'), { value: 'x', version: 3 }],
      ['PUT', at('/configuration'), { ...configurationOf(tenant), status: 'suspended' }],
      ['PUT', at('/configuration'), { ...configurationOf(tenant), tenant_id: b.tenantId }],
    ];
    const platformOnly = (p: string) => p.endsWith('/configuration');
    const before = await snapshotTenant(h.sql, a.tenantId);
    for (const [method, path, body] of attempts) {
      const res = await api(h.app, method, path, { token: platformOnly(path) ? undefined : as.token, body });
      expect(res.status, `${method} ${path} ${JSON.stringify(body)} → ${res.text}`).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.details.fields.length).toBeGreaterThan(0);
    }
    expect(await snapshotTenant(h.sql, a.tenantId)).toEqual(before);
  });
});
