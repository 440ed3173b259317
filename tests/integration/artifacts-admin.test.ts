import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITY_VERSION, CHANNEL_CAPABILITIES } from '../../channels/capabilities';
import { type AdminTenant, api, ok, setupTwoTenants, tenantPath, uniqueKey } from '../helpers/admin';
import { createHarness, type Harness } from '../helpers/harness';

// Issue #15 items 4 and 7 through the admin API: a backend profile's `artifacts`, the
// object_storage secret purpose, a model profile's `vision`, a binding's capabilities.
describe('admin API: artifacts, vision, capabilities', () => {
  let h: Harness;
  let a: AdminTenant;
  let as: { token: string };
  const at = (rest: string) => tenantPath(a.tenantId, rest);

  beforeAll(async () => {
    h = await createHarness();
    ({ a } = await setupTwoTenants(h.app));
    as = { token: a.adminKey };
  });
  afterAll(async () => {
    await h?.close();
  });

  const secret = (purpose: string, value: unknown) =>
    ok(api(h.app, 'POST', at('/secrets'), { ...as, body: { name: uniqueKey('s'), purpose, value } }), 201);
  const profile = (artifacts: unknown) =>
    api(h.app, 'POST', at('/backend-profiles'), {
      ...as,
      body: { profile_key: uniqueKey('bp'), provider: 'postgres', artifacts },
    });

  it('stores an s3 artifacts config whose credentials are an object_storage secret', async () => {
    const s = await secret('object_storage', { access_key_id: 'AKIA', secret_access_key: 'shh' });
    const artifacts = {
      provider: 's3',
      endpoint: 'https://s3.example.test',
      bucket: 'tenant-media',
      region: 'eu-west-1',
      force_path_style: true,
      credentials_secret_ref: s.secret_ref,
      max_bytes: 5 * 1024 * 1024,
      allowed_types: ['image/*', 'application/pdf'],
    };
    const bp = await ok(profile(artifacts), 201);
    expect(bp.artifacts).toEqual(artifacts);
    expect(JSON.stringify(bp)).not.toContain('shh');
    // Without artifacts: the embedded filesystem store.
    const plain = await ok(profile(undefined), 201);
    expect(plain.artifacts).toEqual({ provider: 'filesystem' });
  });

  it.each([
    ['an unknown provider', { provider: 'ftp' }],
    ['s3 without a bucket', { provider: 's3', endpoint: 'https://s3.example.test' }],
    [
      'an endpoint with credentials in it',
      { provider: 's3', bucket: 'b-1', endpoint: 'https://k:s@s3.example.test' },
    ],
    ['a non-http endpoint', { provider: 's3', bucket: 'b-1', endpoint: 'file:///etc' }],
    ['a bad bucket name', { provider: 's3', bucket: 'No_Such' }],
    ['s3 fields on filesystem', { provider: 'filesystem', bucket: 'b-1' }],
    ['a max_bytes over 50 MiB', { provider: 'filesystem', max_bytes: 51 * 1024 * 1024 }],
    ['a malformed type', { provider: 'filesystem', allowed_types: ['images'] }],
    ['an unknown field', { provider: 'filesystem', path: '/etc' }],
  ])('refuses %s with 400', async (_name, artifacts) => {
    const res = await profile(artifacts);
    expect(res.status, res.text).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
  });

  it('refuses credentials that are not an object_storage secret', async () => {
    const key = await secret('model_api_key', 'sk-x');
    const res = await profile({ provider: 's3', bucket: 'b-1', credentials_secret_ref: key.secret_ref });
    expect(res.status).toBe(400);
    expect(res.body.error.details.fields[0].path).toBe('artifacts.credentials_secret_ref');
    const missing = await profile({ provider: 's3', bucket: 'b-1', credentials_secret_ref: 'sec_nope' });
    expect(missing.status).toBe(400);
    // The database refuses it for any other writer too (migration 0035).
    await expect(
      h.sql`update backend_profile set artifacts = ${h.sql.json({ provider: 's3', bucket: 'b-1', credentials_secret_ref: key.secret_ref })}
            where tenant_id = ${a.tenantId}`,
    ).rejects.toMatchObject({ constraint_name: 'backend_profile_artifacts_secret_purpose_check' });
  });

  it('an object_storage secret must have the S3 credential shape', async () => {
    const res = await api(h.app, 'POST', at('/secrets'), {
      ...as,
      body: { name: uniqueKey('s'), purpose: 'object_storage', value: { access_key_id: 'AKIA' } },
    });
    expect(res.status).toBe(400);
  });

  it('a model profile declares vision (default false)', async () => {
    const base = { provider: 'openai_compatible', model: 'gpt-4o', base_url: 'https://llm.example.test/v1' };
    const off = await ok(
      api(h.app, 'POST', at('/model-profiles'), { ...as, body: { profile_key: uniqueKey('m'), ...base } }),
      201,
    );
    expect(off.vision).toBe(false);
    const on = await ok(
      api(h.app, 'POST', at('/model-profiles'), {
        ...as,
        body: { profile_key: uniqueKey('m'), ...base, vision: true },
      }),
      201,
    );
    expect(on.vision).toBe(true);
    expect(on.content_digest).not.toBe(off.content_digest);
    const bad = await api(h.app, 'POST', at('/model-profiles'), {
      ...as,
      body: { profile_key: uniqueKey('m'), ...base, vision: 'yes' },
    });
    expect(bad.status).toBe(400);
  });

  it('a binding records and shows its channel capabilities', async () => {
    const created = await ok(
      api(h.app, 'POST', at('/bindings'), { ...as, body: { channel: 'console', app_id: a.appId } }),
      201,
    );
    expect(created.capability_version).toBe(CAPABILITY_VERSION);
    expect(created.capabilities).toEqual(CHANNEL_CAPABILITIES.console);
    const read = await ok(api(h.app, 'GET', at(`/bindings/${created.binding_id}`), as));
    expect(read).toMatchObject({
      capability_version: CAPABILITY_VERSION,
      capabilities: CHANNEL_CAPABILITIES.console,
    });
    expect(CHANNEL_CAPABILITIES.telegram).toMatchObject({
      media_in: ['image', 'audio', 'video', 'file'],
      media_out: ['image', 'file'],
    });
  });
});
