import { randomBytes } from 'node:crypto';
import { z } from '@hono/zod-openapi';
import { newId } from '../../db/ids';
import { type ApiKeyRow, insertApiKey, listApiKeys, revokeApiKey } from '../../db/queries/admin/api-keys';
import { sha256Hex } from '../../lib/digest';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { scopedTenant } from './auth';
import { adminTx, audit, requireTenant, requireWritableTenant, tenantTx } from './context';
import type { AdminApp } from './env';
import { pageBody, pageParams } from './pagination';
import { adminRoute } from './route';
import {
  iso,
  isoNN,
  jsonBody,
  jsonResponse,
  ListQuery,
  pageOf,
  pathId,
  TenantParams,
  Timestamp,
} from './schemas';

const Role = z.enum(['tenant_admin', 'tenant_viewer']);
const CreateKeyBody = z.object({ role: Role }).strict().openapi('CreateApiKey');

const ApiKeySchema = z
  .object({
    key_id: z.string(),
    role: Role,
    status: z.enum(['active', 'revoked']),
    created_at: Timestamp,
    revoked_at: Timestamp.nullable(),
  })
  .openapi('ApiKey');

const NewKeySchema = ApiKeySchema.extend({
  key: z.string().openapi({ description: 'The bearer token. Shown once: only its digest is stored.' }),
}).openapi('NewApiKey');

const toJson = (r: ApiKeyRow): z.infer<typeof ApiKeySchema> => ({
  key_id: r.key_id,
  role: r.role,
  status: r.status,
  created_at: isoNN(r.created_at),
  revoked_at: iso(r.revoked_at),
});

const tags = ['api keys'];
const KeyParams = TenantParams.extend({ key_id: pathId('key_id') });

const createKey = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/api-keys',
  tags,
  summary: 'Mint a tenant-scoped API key (the key is returned once)',
  request: { params: TenantParams, body: jsonBody(CreateKeyBody) },
  errors: [400, 403, 404, 409],
  responses: { 201: jsonResponse(NewKeySchema, 'The key') },
});

const listKeys = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/api-keys',
  tags,
  summary: "The tenant's API keys (metadata only)",
  request: { params: TenantParams, query: ListQuery },
  errors: [400, 404],
  responses: { 200: jsonResponse(pageOf(ApiKeySchema), 'A page of keys') },
});

const revokeKey = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/api-keys/{key_id}/revoke',
  tags,
  summary: 'Revoke a key (terminal)',
  request: { params: KeyParams },
  errors: [403, 404, 409],
  responses: { 200: jsonResponse(ApiKeySchema, 'The revoked key') },
});

export function registerApiKeyRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(createKey, async (c) => {
    const { role } = c.req.valid('json');
    // 256 random bits; the `sy_` prefix makes leaked keys easy to recognise and scan for.
    const key = `sy_${randomBytes(32).toString('base64url')}`;
    const row = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      const created = await insertApiKey(tx, {
        tenantId,
        keyId: newId('key'),
        role,
        keyDigest: sha256Hex(key),
      });
      await audit(c, tx, tenantId, {
        action: 'api_key.create',
        details: { key_id: created.key_id, role },
      });
      return created;
    });
    return c.json({ ...toJson(row), key }, 201);
  });

  admin.openapi(listKeys, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const params = pageParams(c.req.valid('query'));
    const page = await adminTx(deps, tenantId, async (tx) => {
      await requireTenant(tx, tenantId);
      return listApiKeys(tx, { tenantId, ...params });
    });
    return c.json(pageBody(page, toJson), 200);
  });

  admin.openapi(revokeKey, async (c) => {
    const { key_id } = c.req.valid('param');
    const row = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      const revoked = await revokeApiKey(tx, { tenantId, keyId: key_id });
      if (revoked === null) throw new ApiError('not_found', 'No such API key.');
      if (revoked === false) throw new ApiError('invalid_transition', 'The key is already revoked.');
      await audit(c, tx, tenantId, { action: 'api_key.revoke', details: { key_id } });
      return revoked;
    });
    return c.json(toJson(row), 200);
  });
}
