import { z } from '@hono/zod-openapi';
import { newId } from '../../db/ids';
import {
  type BackendProfileRow,
  type BackendProfileStatus,
  getBackendProfile,
  insertBackendProfile,
  isTenantDefaultBackend,
  listBackendProfiles,
  setBackendProfileStatus,
} from '../../db/queries/admin/backend-profiles';
import { ArtifactsConfig, DEFAULT_ARTIFACTS } from '../../lib/artifact-config';
import { contentDigest } from '../../lib/digest';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { scopedTenant } from './auth';
import { adminTx, audit, requireTenant, requireWritableTenant, tenantTx } from './context';
import type { AdminApp } from './env';
import { pageBody, pageParams } from './pagination';
import { adminRoute } from './route';
import {
  ExpectedVersion,
  isoNN,
  JsonObject,
  jsonBody,
  jsonResponse,
  ListQuery,
  pageOf,
  pathId,
  slug,
  TenantParams,
  Timestamp,
} from './schemas';
import { requireSecretPurpose } from './secret-purpose';

const Status = z.enum(['active', 'suspended', 'disabled']);

// lib/ is zod's plain import (no OpenAPI extension): the description goes through zod's own describe().
const ArtifactsSchema = ArtifactsConfig.describe(
  "Object storage of the tenant's artifacts (inbound media, reply attachments). `filesystem` (the " +
    'default): under the data dir of the worker. `s3`: any S3-compatible service; `credentials_secret_ref` ' +
    'names an object_storage secret `{access_key_id, secret_access_key}`. `max_bytes` (default 20 MiB) and ' +
    '`allowed_types` bound what media are accepted.',
);

const CreateBody = z
  .object({
    profile_key: slug('profile_key'),
    provider: z.literal('postgres'),
    config: JsonObject.optional(),
    artifacts: ArtifactsSchema.optional(),
  })
  .strict()
  .openapi('CreateBackendProfile');

const TransitionBody = z
  .object({
    expected_version: ExpectedVersion,
    next_status: Status,
    reason: z.string().trim().min(1).max(1000).optional(),
  })
  .strict()
  .openapi('BackendProfileStatusTransition');

const BackendProfileSchema = z
  .object({
    profile_id: z.string(),
    profile_key: z.string(),
    provider: z.literal('postgres'),
    config: JsonObject,
    artifacts: JsonObject,
    status: Status,
    version: z.number(),
    content_digest: z.string(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('BackendProfile');

const toJson = (r: BackendProfileRow): z.infer<typeof BackendProfileSchema> => ({
  profile_id: r.profile_id,
  profile_key: r.profile_key,
  provider: r.provider,
  config: r.config,
  artifacts: r.artifacts,
  status: r.status,
  version: r.version,
  content_digest: r.content_digest,
  created_at: isoNN(r.created_at),
  updated_at: isoNN(r.updated_at),
});

/** active ⇄ suspended, either → disabled (terminal). */
const FROM: Readonly<Record<BackendProfileStatus, readonly BackendProfileStatus[]>> = {
  active: ['suspended'],
  suspended: ['active'],
  disabled: ['active', 'suspended'],
};

const tags = ['backend profiles'];
const ProfileParams = TenantParams.extend({ profile_id: pathId('profile_id') });

const createProfile = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/backend-profiles',
  tags,
  summary: 'Create a backend profile',
  request: { params: TenantParams, body: jsonBody(CreateBody) },
  errors: [400, 403, 404, 409],
  responses: { 201: jsonResponse(BackendProfileSchema, 'The profile') },
});

const listProfiles = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/backend-profiles',
  tags,
  summary: 'List backend profiles',
  request: { params: TenantParams, query: ListQuery },
  errors: [400, 404],
  responses: { 200: jsonResponse(pageOf(BackendProfileSchema), 'A page') },
});

const getProfile = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/backend-profiles/{profile_id}',
  tags,
  summary: 'One backend profile',
  request: { params: ProfileParams },
  errors: [404],
  responses: { 200: jsonResponse(BackendProfileSchema, 'The profile') },
});

const transition = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/backend-profiles/{profile_id}/status-transitions',
  tags,
  summary: 'Suspend, re-activate or disable (refused with 409 conflict while it is the tenant default)',
  request: { params: ProfileParams, body: jsonBody(TransitionBody) },
  errors: [400, 403, 404, 409],
  responses: { 200: jsonResponse(BackendProfileSchema, 'The profile') },
});

export function registerBackendProfileRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(createProfile, async (c) => {
    const body = c.req.valid('json');
    const artifacts = body.artifacts ?? DEFAULT_ARTIFACTS;
    // Digest over what it was before artifacts existed when none is given (same content, same digest).
    const content = {
      provider: body.provider,
      config: body.config ?? {},
      ...(body.artifacts ? { artifacts } : {}),
    };
    const row = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      if (artifacts.credentials_secret_ref) {
        const status = await requireSecretPurpose(tx, tenantId, {
          field: 'artifacts.credentials_secret_ref',
          secretRef: artifacts.credentials_secret_ref,
          expected: 'object_storage',
        });
        if (status !== 'active')
          throw new ApiError('conflict', 'The artifacts credentials secret is disabled.');
      }
      const created = await insertBackendProfile(tx, {
        tenantId,
        profileId: newId('bp'),
        profileKey: body.profile_key,
        provider: content.provider,
        config: content.config,
        artifacts,
        contentDigest: contentDigest(content),
      });
      await audit(c, tx, tenantId, {
        action: 'backend_profile.create',
        afterVersion: created.version,
        details: { profile_id: created.profile_id, content_digest: created.content_digest },
      });
      return created;
    });
    return c.json(toJson(row), 201);
  });

  admin.openapi(listProfiles, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const params = pageParams(c.req.valid('query'));
    const page = await adminTx(deps, tenantId, async (tx) => {
      await requireTenant(tx, tenantId);
      return listBackendProfiles(tx, { tenantId, ...params });
    });
    return c.json(pageBody(page, toJson), 200);
  });

  admin.openapi(getProfile, async (c) => {
    const { profile_id } = c.req.valid('param');
    const row = await tenantTx(c, deps, (tx, tenantId) => getBackendProfile(tx, tenantId, profile_id));
    if (!row) throw new ApiError('not_found', 'No such backend profile.');
    return c.json(toJson(row), 200);
  });

  admin.openapi(transition, async (c) => {
    const { profile_id } = c.req.valid('param');
    const body = c.req.valid('json');
    const row = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      const before = await getBackendProfile(tx, tenantId, profile_id);
      if (!before) throw new ApiError('not_found', 'No such backend profile.');
      if (!FROM[body.next_status].includes(before.status)) {
        throw new ApiError(
          'invalid_transition',
          `A backend profile cannot go from ${before.status} to ${body.next_status}.`,
        );
      }
      const updated = await setBackendProfileStatus(tx, {
        tenantId,
        profileId: profile_id,
        status: body.next_status,
        from: FROM[body.next_status],
        expectedVersion: body.expected_version,
      });
      if (!updated)
        throw new ApiError('optimistic_conflict', 'The backend profile has changed; re-read it and retry.');
      // Checked after the UPDATE holds the row lock: update_tenant_configuration locks this row
      // too before naming it the default, so either it sees `disabled` or this sees the default.
      if (body.next_status !== 'active' && (await isTenantDefaultBackend(tx, tenantId, profile_id))) {
        throw new ApiError('conflict', 'The profile is the tenant default; switch the default first.');
      }
      await audit(c, tx, tenantId, {
        action: `backend_profile.${body.next_status === 'active' ? 'activate' : body.next_status === 'suspended' ? 'suspend' : 'disable'}`,
        reason: body.reason ?? null,
        beforeVersion: before.version,
        afterVersion: updated.version,
        details: { profile_id, previous_status: before.status, next_status: body.next_status },
      });
      return updated;
    });
    return c.json(toJson(row), 200);
  });
}
