import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AdminTenant,
  api,
  configurationOf,
  createTenant,
  ok,
  setupTwoTenants,
  tenantPath,
  uniqueKey,
} from '../helpers/admin';
import { createHarness, type Harness } from '../helpers/harness';

// Tenant lifecycle and configuration through the admin API, on real PostgreSQL: the seeds'
// SECURITY DEFINER functions do the writes, the API maps their refusals to stable codes.
describe('admin API: tenants', () => {
  let h: Harness;
  let a: AdminTenant;
  let b: AdminTenant;

  beforeAll(async () => {
    h = await createHarness();
    ({ a, b } = await setupTwoTenants(h.app));
  });
  afterAll(async () => {
    await h?.close();
  });

  const tenantRow = async (tenantId: string) => {
    const [row] = await h.sql`select * from tenant where tenant_id = ${tenantId}`;
    return row!;
  };

  it('creates a tenant with a normalised key, lists it and reads it back', async () => {
    const key = uniqueKey('MixedCase');
    const created = await ok(
      api(h.app, 'POST', '/v1/admin/tenants', {
        body: { tenant_key: `  ${key.toUpperCase()}  `, display_name: ' Acme ', rate_limit_rpm: 0 },
      }),
      201,
    );
    expect(created).toMatchObject({
      tenant_key: key.toLowerCase(),
      display_name: 'Acme',
      status: 'active',
      version: 1,
      rate_limit_rpm: 0,
      audit_retention_days: 90,
      log_masking_level: 'basic',
      trace_sampling_rate: 1,
      default_agent_app_id: null,
    });
    expect(created.tenant_id).toMatch(/^t_[0-7][0-9A-HJKMNP-TV-Z]{25}$/);

    expect(await ok(api(h.app, 'GET', tenantPath(created.tenant_id)))).toEqual(created);

    // Paging newest first with a tiny limit reaches the new tenant and then continues past it.
    const first = await ok(api(h.app, 'GET', '/v1/admin/tenants?limit=1'));
    expect(first.items).toHaveLength(1);
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = await ok(api(h.app, 'GET', `/v1/admin/tenants?limit=1&cursor=${first.next_cursor}`));
    expect(second.items[0].tenant_id).not.toBe(first.items[0].tenant_id);
    const all = await ok(api(h.app, 'GET', '/v1/admin/tenants?limit=100000'));
    expect(all.items.length).toBeLessThanOrEqual(200);
    expect((await api(h.app, 'GET', '/v1/admin/tenants?cursor=not-a-cursor')).status).toBe(400);

    // Its audit chain starts with its creation.
    const audit = await ok(api(h.app, 'GET', tenantPath(created.tenant_id, '/audit-events')));
    expect(audit.items).toHaveLength(1);
    expect(audit.items[0]).toMatchObject({
      seq: 1,
      action: 'tenant.create',
      actor_type: 'platform',
      actor_id: 'platform',
      previous_digest: null,
      after_version: 1,
    });
  });

  it('refuses a duplicate or malformed tenant_key and unknown or server-owned fields', async () => {
    const key = uniqueKey('dup');
    await createTenant(h.app, { tenant_key: key });
    const dup = await api(h.app, 'POST', '/v1/admin/tenants', {
      body: { tenant_key: key, display_name: 'x' },
    });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe('conflict');

    const bad = await api(h.app, 'POST', '/v1/admin/tenants', {
      body: { tenant_key: '9lives', display_name: 'x' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('validation_failed');
    expect(bad.body.error.details.fields.map((f: { path: string }) => f.path)).toContain('tenant_key');

    for (const extra of [
      { tenant_id: 't_01H00000000000000000000000' },
      { status: 'suspended' },
      { version: 7 },
      { foo: 1 },
    ]) {
      const key2 = uniqueKey('mass');
      const res = await api(h.app, 'POST', '/v1/admin/tenants', {
        body: { tenant_key: key2, display_name: 'x', ...extra },
      });
      expect(res.status, JSON.stringify(extra)).toBe(400);
      expect(await h.sql`select 1 from tenant where tenant_key = ${key2}`).toHaveLength(0);
    }

    const spend = await api(h.app, 'POST', '/v1/admin/tenants', {
      body: { tenant_key: uniqueKey('spend'), display_name: 'x', monthly_spend_limit_minor: 100 },
    });
    expect(spend.status).toBe(400);
    expect(spend.body.error.details.fields[0].path).toBe('billing_currency');
  });

  it('replaces the configuration snapshot; missing, unknown and stale requests change nothing', async () => {
    const t = await createTenant(h.app);
    const path = tenantPath(t.tenant_id, '/configuration');
    const updated = await ok(
      api(h.app, 'PUT', path, {
        body: configurationOf(t, {
          display_name: 'Renamed',
          max_concurrent_executions: 4,
          monthly_spend_limit_minor: 5000,
          billing_currency: 'EUR',
          log_masking_level: 'strict',
          trace_sampling_rate: 0.25,
        }),
      }),
    );
    expect(updated).toMatchObject({
      display_name: 'Renamed',
      max_concurrent_executions: 4,
      monthly_spend_limit_minor: 5000,
      billing_currency: 'EUR',
      log_masking_level: 'strict',
      trace_sampling_rate: 0.25,
      version: 2,
    });
    const before = await tenantRow(t.tenant_id);

    const { rate_limit_rpm: _omitted, ...missing } = configurationOf(updated);
    const res1 = await api(h.app, 'PUT', path, { body: missing });
    expect(res1.status).toBe(400);
    expect(res1.body.error.details.fields.map((f: { path: string }) => f.path)).toContain('rate_limit_rpm');

    const res2 = await api(h.app, 'PUT', path, { body: configurationOf(updated, { surprise: true }) });
    expect(res2.status).toBe(400);
    const res3 = await api(h.app, 'PUT', path, { body: configurationOf(updated, { status: 'disabled' }) });
    expect(res3.status).toBe(400);

    const stale = await api(h.app, 'PUT', path, {
      body: configurationOf(updated, { expected_version: 1, display_name: 'Lost' }),
    });
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe('optimistic_conflict');

    expect(await tenantRow(t.tenant_id)).toEqual(before);
  });

  it('moves along the lifecycle, writes the outbox, and refuses what the seeds forbid', async () => {
    const t = await createTenant(h.app);
    const path = tenantPath(t.tenant_id, '/status-transitions');
    const suspended = await ok(
      api(h.app, 'POST', path, {
        body: { expected_version: 1, next_status: 'suspended', reason: 'unpaid invoice' },
      }),
    );
    expect(suspended).toMatchObject({ status: 'suspended', version: 2 });
    const outbox = await h.sql`select * from tenant_status_change_outbox where tenant_id = ${t.tenant_id}`;
    expect(outbox).toHaveLength(1);
    expect(outbox[0]).toMatchObject({
      previous_status: 'active',
      next_status: 'suspended',
      actor_type: 'platform',
      reason: 'unpaid invoice',
      previous_version: 1,
      next_version: 2,
    });

    const again = await api(h.app, 'POST', path, {
      body: { expected_version: 2, next_status: 'suspended', reason: 'x' },
    });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('invalid_transition');
    const stale = await api(h.app, 'POST', path, {
      body: { expected_version: 1, next_status: 'active', reason: 'x' },
    });
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe('optimistic_conflict');
    const blank = await api(h.app, 'POST', path, {
      body: { expected_version: 2, next_status: 'active', reason: ' ' },
    });
    expect(blank.status).toBe(400);

    await ok(
      api(h.app, 'POST', path, { body: { expected_version: 2, next_status: 'disabled', reason: 'closed' } }),
    );
    const revive = await api(h.app, 'POST', path, {
      body: { expected_version: 3, next_status: 'active', reason: 'x' },
    });
    expect(revive.status).toBe(409);
    expect(revive.body.error.code).toBe('invalid_transition');

    const before = await tenantRow(t.tenant_id);
    const put = await api(h.app, 'PUT', tenantPath(t.tenant_id, '/configuration'), {
      body: configurationOf({ ...t, version: 3 }, { display_name: 'After death' }),
    });
    expect(put.status).toBe(409);
    expect(put.body.error.code).toBe('tenant_disabled');
    const secret = await api(h.app, 'POST', tenantPath(t.tenant_id, '/secrets'), {
      body: { name: 'x', purpose: 'tool_credential', value: 'y' },
    });
    expect(secret.body.error.code).toBe('tenant_disabled');
    expect(await tenantRow(t.tenant_id)).toEqual(before);
    expect(
      await h.sql`select 1 from tenant_status_change_outbox where tenant_id = ${t.tenant_id}`,
    ).toHaveLength(2);

    const actions = (await ok(api(h.app, 'GET', tenantPath(t.tenant_id, '/audit-events')))).items.map(
      (e: { action: string }) => e.action,
    );
    expect(actions).toEqual(['tenant.disable', 'tenant.suspend', 'tenant.create']);
  });

  it("refuses another tenant's objects as defaults, and inactive ones", async () => {
    const tenant = await ok(api(h.app, 'GET', tenantPath(a.tenantId)));
    const path = tenantPath(a.tenantId, '/configuration');
    const foreignApp = await api(h.app, 'PUT', path, {
      body: configurationOf(tenant, { default_agent_app_id: b.appId }),
    });
    expect(foreignApp.status).toBe(400);
    expect(foreignApp.body.error.details.fields[0].path).toBe('default_agent_app_id');
    const foreignBackend = await api(h.app, 'PUT', path, {
      body: configurationOf(tenant, { default_backend_profile_id: b.backendProfileId }),
    });
    expect(foreignBackend.status).toBe(400);
    expect(foreignBackend.body.error.details.fields[0].path).toBe('default_backend_profile_id');

    // A suspended backend profile cannot become the default.
    const as = { token: a.adminKey };
    const spare = await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, '/backend-profiles'), {
        ...as,
        body: { profile_key: 'spare', provider: 'postgres' },
      }),
      201,
    );
    await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, `/backend-profiles/${spare.profile_id}/status-transitions`), {
        ...as,
        body: { expected_version: 1, next_status: 'suspended' },
      }),
    );
    const inactive = await api(h.app, 'PUT', path, {
      body: configurationOf(tenant, { default_backend_profile_id: spare.profile_id }),
    });
    expect(inactive.status).toBe(409);
    expect(inactive.body.error.code).toBe('conflict');
    expect(await ok(api(h.app, 'GET', tenantPath(a.tenantId)))).toEqual(tenant);
  });

  it('refuses to disable the default backend profile or the default app until the default moves', async () => {
    const as = { token: b.adminKey };
    const bp = await ok(
      api(h.app, 'GET', tenantPath(b.tenantId, `/backend-profiles/${b.backendProfileId}`), as),
    );
    const disableBp = await api(
      h.app,
      'POST',
      tenantPath(b.tenantId, `/backend-profiles/${b.backendProfileId}/status-transitions`),
      { ...as, body: { expected_version: bp.version, next_status: 'disabled' } },
    );
    expect(disableBp.status).toBe(409);
    expect(disableBp.body.error.code).toBe('conflict');
    expect(
      (await ok(api(h.app, 'GET', tenantPath(b.tenantId, `/backend-profiles/${b.backendProfileId}`), as)))
        .status,
    ).toBe('active');

    const agent = await ok(api(h.app, 'GET', tenantPath(b.tenantId, `/apps/${b.appId}`), as));
    const disableApp = await api(
      h.app,
      'POST',
      tenantPath(b.tenantId, `/apps/${b.appId}/status-transitions`),
      {
        ...as,
        body: { expected_version: agent.version, next_status: 'disabled' },
      },
    );
    expect(disableApp.status).toBe(409);
    expect(disableApp.body.error.code).toBe('conflict');

    // Once the default moves away, both may be disabled.
    const tenant = await ok(api(h.app, 'GET', tenantPath(b.tenantId)));
    await ok(
      api(h.app, 'PUT', tenantPath(b.tenantId, '/configuration'), {
        body: configurationOf(tenant, { default_backend_profile_id: null, default_agent_app_id: null }),
      }),
    );
    await ok(
      api(
        h.app,
        'POST',
        tenantPath(b.tenantId, `/backend-profiles/${b.backendProfileId}/status-transitions`),
        {
          ...as,
          body: { expected_version: bp.version, next_status: 'disabled' },
        },
      ),
    );
    const back = await api(
      h.app,
      'POST',
      tenantPath(b.tenantId, `/backend-profiles/${b.backendProfileId}/status-transitions`),
      { ...as, body: { expected_version: bp.version + 1, next_status: 'active' } },
    );
    expect(back.status).toBe(409);
    expect(back.body.error.code).toBe('invalid_transition');
  });

  it('enforces roles: platform-only routes, read-only viewers, and no token at all', async () => {
    const admin = { token: a.adminKey };
    const viewer = { token: a.viewerKey };
    const tenant = await ok(api(h.app, 'GET', tenantPath(a.tenantId), admin));
    const forbidden = [
      api(h.app, 'POST', '/v1/admin/tenants', {
        ...admin,
        body: { tenant_key: uniqueKey('x'), display_name: 'x' },
      }),
      api(h.app, 'GET', '/v1/admin/tenants', admin),
      api(h.app, 'PUT', tenantPath(a.tenantId, '/configuration'), {
        ...admin,
        body: configurationOf(tenant),
      }),
      api(h.app, 'POST', tenantPath(a.tenantId, '/status-transitions'), {
        ...admin,
        body: { expected_version: tenant.version, next_status: 'suspended', reason: 'x' },
      }),
      api(h.app, 'POST', tenantPath(a.tenantId, '/secrets'), {
        ...viewer,
        body: { name: 'nope', purpose: 'tool_credential', value: 'x' },
      }),
      api(h.app, 'POST', tenantPath(a.tenantId, '/api-keys'), { ...viewer, body: { role: 'tenant_admin' } }),
      api(h.app, 'POST', tenantPath(a.tenantId, '/apps'), {
        ...viewer,
        body: { app_key: 'nope', display_name: 'x' },
      }),
      api(h.app, 'GET', '/v1/admin/tenants', viewer),
    ];
    for (const res of await Promise.all(forbidden)) {
      expect(res.status, res.text).toBe(403);
      expect(res.body.error.code).toBe('forbidden');
    }
    expect(await ok(api(h.app, 'GET', tenantPath(a.tenantId), viewer))).toEqual(tenant);
    expect((await ok(api(h.app, 'GET', tenantPath(a.tenantId, '/secrets'), viewer))).items).toHaveLength(1);

    for (const token of [null, 'wrong', `${a.adminKey}x`, '']) {
      const res = await api(h.app, 'GET', tenantPath(a.tenantId), { token });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthenticated');
    }

    // A revoked key stops working at once.
    const spare = await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, '/api-keys'), { ...admin, body: { role: 'tenant_viewer' } }),
      201,
    );
    expect(spare.key).toMatch(/^sy_[A-Za-z0-9_-]{43}$/);
    expect((await api(h.app, 'GET', tenantPath(a.tenantId), { token: spare.key })).status).toBe(200);
    await ok(api(h.app, 'POST', tenantPath(a.tenantId, `/api-keys/${spare.key_id}/revoke`), admin));
    expect((await api(h.app, 'GET', tenantPath(a.tenantId), { token: spare.key })).status).toBe(401);
    const keys = await h.sql`select key_digest from admin_api_key where key_id = ${spare.key_id}`;
    expect(keys[0]!.key_digest).not.toContain(spare.key);
  });
});
