import { z } from '@hono/zod-openapi';
import { newId } from '../../db/ids';
import {
  type AppRow,
  getApp,
  insertApp,
  isTenantDefaultApp,
  listApps,
  publishApp,
  setAppStatus,
} from '../../db/queries/admin/apps';
import { getRevision } from '../../db/queries/admin/revisions';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { scopedTenant } from './auth';
import { adminTx, audit, requireTenant, requireWritableTenant, tenantTx } from './context';
import type { AdminApp } from './env';
import { fieldError } from './errors';
import { pageBody, pageParams } from './pagination';
import { adminRoute } from './route';
import {
  displayName,
  ExpectedVersion,
  isoNN,
  jsonBody,
  jsonResponse,
  ListQuery,
  pageOf,
  pathId,
  slug,
  TenantParams,
  Timestamp,
} from './schemas';

const Status = z.enum(['active', 'disabled']);

const CreateBody = z
  .object({ app_key: slug('app_key'), display_name: displayName })
  .strict()
  .openapi('CreateApp');

const PublishBody = z
  .object({ revision: z.number().int().min(1), expected_version: ExpectedVersion })
  .strict()
  .openapi('PublishApp');

const TransitionBody = z
  .object({
    expected_version: ExpectedVersion,
    next_status: Status,
    reason: z.string().trim().min(1).max(1000).optional(),
  })
  .strict()
  .openapi('AppStatusTransition');

export const AppSchema = z
  .object({
    app_id: z.string(),
    app_key: z.string(),
    display_name: z.string(),
    status: Status,
    published_revision: z.number().nullable(),
    version: z.number(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('App');

const toJson = (r: AppRow): z.infer<typeof AppSchema> => ({
  app_id: r.app_id,
  app_key: r.app_key,
  display_name: r.display_name,
  status: r.status,
  published_revision: r.published_revision,
  version: r.version,
  created_at: isoNN(r.created_at),
  updated_at: isoNN(r.updated_at),
});

const tags = ['apps'];
export const AppParams = TenantParams.extend({ app_id: pathId('app_id') });

const createAppRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/apps',
  tags,
  summary: 'Create an agent app (no revision is published yet)',
  request: { params: TenantParams, body: jsonBody(CreateBody) },
  errors: [400, 403, 404, 409],
  responses: { 201: jsonResponse(AppSchema, 'The app') },
});

const listAppsRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/apps',
  tags,
  summary: 'List apps',
  request: { params: TenantParams, query: ListQuery },
  errors: [400, 404],
  responses: { 200: jsonResponse(pageOf(AppSchema), 'A page') },
});

const getAppRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/apps/{app_id}',
  tags,
  summary: 'One app',
  request: { params: AppParams },
  errors: [404],
  responses: { 200: jsonResponse(AppSchema, 'The app') },
});

const publishRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/apps/{app_id}/publish',
  tags,
  summary: 'Point the app at an existing revision (optimistic lock on the app version)',
  description:
    'A revision that does not exist is 400 validation_failed; new executions use it, running ones keep theirs.',
  request: { params: AppParams, body: jsonBody(PublishBody) },
  errors: [400, 403, 404, 409],
  responses: { 200: jsonResponse(AppSchema, 'The app') },
});

const transitionRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/apps/{app_id}/status-transitions',
  tags,
  summary: 'Disable or re-enable an app (disabling the tenant default is 409 conflict)',
  request: { params: AppParams, body: jsonBody(TransitionBody) },
  errors: [400, 403, 404, 409],
  responses: { 200: jsonResponse(AppSchema, 'The app') },
});

export function registerAppRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(createAppRoute, async (c) => {
    const body = c.req.valid('json');
    const row = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      const created = await insertApp(tx, {
        tenantId,
        appId: newId('app'),
        appKey: body.app_key,
        displayName: body.display_name,
      });
      await audit(c, tx, tenantId, {
        action: 'app.create',
        agentAppId: created.app_id,
        afterVersion: created.version,
        details: { app_id: created.app_id },
      });
      return created;
    });
    return c.json(toJson(row), 201);
  });

  admin.openapi(listAppsRoute, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const params = pageParams(c.req.valid('query'));
    const page = await adminTx(deps, tenantId, async (tx) => {
      await requireTenant(tx, tenantId);
      return listApps(tx, { tenantId, ...params });
    });
    return c.json(pageBody(page, toJson), 200);
  });

  admin.openapi(getAppRoute, async (c) => {
    const { app_id } = c.req.valid('param');
    const row = await tenantTx(c, deps, (tx, tenantId) => getApp(tx, tenantId, app_id));
    if (!row) throw new ApiError('not_found', 'No such app.');
    return c.json(toJson(row), 200);
  });

  admin.openapi(publishRoute, async (c) => {
    const { app_id } = c.req.valid('param');
    const body = c.req.valid('json');
    const row = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      const before = await getApp(tx, tenantId, app_id);
      if (!before) throw new ApiError('not_found', 'No such app.');
      if (before.status !== 'active') throw new ApiError('conflict', 'A disabled app cannot be published.');
      // Revisions are immutable and never deleted, so existence checked here still holds at commit.
      if (!(await getRevision(tx, { tenantId, appId: app_id, revision: body.revision }))) {
        throw fieldError('revision', 'no such revision of this app');
      }
      const published = await publishApp(tx, {
        tenantId,
        appId: app_id,
        revision: body.revision,
        expectedVersion: body.expected_version,
      });
      if (!published) throw new ApiError('optimistic_conflict', 'The app has changed; re-read it and retry.');
      await audit(c, tx, tenantId, {
        action: 'app.publish',
        agentAppId: app_id,
        revision: body.revision,
        beforeVersion: before.version,
        afterVersion: published.version,
        details: { app_id, previous_revision: before.published_revision, revision: body.revision },
      });
      return published;
    });
    return c.json(toJson(row), 200);
  });

  admin.openapi(transitionRoute, async (c) => {
    const { app_id } = c.req.valid('param');
    const body = c.req.valid('json');
    const row = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      const before = await getApp(tx, tenantId, app_id);
      if (!before) throw new ApiError('not_found', 'No such app.');
      if (before.status === body.next_status) {
        throw new ApiError('invalid_transition', `The app is already ${before.status}.`);
      }
      const updated = await setAppStatus(tx, {
        tenantId,
        appId: app_id,
        status: body.next_status,
        expectedVersion: body.expected_version,
      });
      if (!updated) throw new ApiError('optimistic_conflict', 'The app has changed; re-read it and retry.');
      // After the UPDATE's row lock: a concurrent configuration PUT share-locks the app before
      // committing it as default, so one of the two always sees the other.
      if (body.next_status === 'disabled' && (await isTenantDefaultApp(tx, tenantId, app_id))) {
        throw new ApiError('conflict', 'The app is the tenant default; switch the default first.');
      }
      await audit(c, tx, tenantId, {
        action: body.next_status === 'disabled' ? 'app.disable' : 'app.enable',
        agentAppId: app_id,
        reason: body.reason ?? null,
        beforeVersion: before.version,
        afterVersion: updated.version,
        details: { app_id, previous_status: before.status, next_status: body.next_status },
      });
      return updated;
    });
    return c.json(toJson(row), 200);
  });
}
