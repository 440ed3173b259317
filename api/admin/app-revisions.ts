import { z } from '@hono/zod-openapi';
import { scriptedConfigSchema } from '../../agents/scripted';
import { revisionToolsSchema } from '../../agents/tools';
import { getAppStatus, lockAppForRevision } from '../../db/queries/admin/apps';
import { getModelProfile } from '../../db/queries/admin/model-profiles';
import {
  getRevision,
  insertRevision,
  listRevisions,
  type RevisionRow,
} from '../../db/queries/admin/revisions';
import { contentDigest } from '../../lib/digest';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { AppParams } from './apps';
import { scopedTenant } from './auth';
import { adminTx, audit, requireTenant, requireWritableTenant, tenantTx } from './context';
import { type AdminApp, actorOf } from './env';
import { fieldError } from './errors';
import { pageBody, pageParams } from './pagination';
import { adminRoute } from './route';
import { isoNN, JsonObject, jsonBody, jsonResponse, ListQuery, pageOf, pathId, Timestamp } from './schemas';

const Limits = z
  .object({
    max_steps: z.number().int().min(1).max(100).optional(),
    max_tokens: z.number().int().min(1).max(10_000_000).optional(),
    deadline_s: z.number().int().min(1).max(86_400).optional(),
  })
  .strict();

/**
 * The double-texting policy: what a message does while its chat's turn runs (README "How a message
 * runs"). debounce_ms applies to collect and interrupt; busy_reply to reject.
 */
const Conversation = z
  .object({
    policy: z.enum(['enqueue', 'collect', 'interrupt', 'reject']),
    debounce_ms: z.number().int().min(0).max(60_000).optional(),
    busy_reply: z.string().trim().min(1).max(4096).optional(),
  })
  .strict()
  .openapi('Conversation');

const CreateBody = z
  .object({
    model_profile_id: z.string().min(1).max(200),
    system_prompt: z.string().max(100_000),
    tools: revisionToolsSchema.optional(),
    scripted: scriptedConfigSchema.optional(),
    limits: Limits.optional(),
    conversation: Conversation.optional(),
  })
  .strict()
  .superRefine((b, ctx) => {
    // A scripted rule may only call a tool the revision allowlists.
    const names = new Set((b.tools ?? []).map((t) => t.name));
    (b.scripted?.rules ?? []).forEach((rule, i) => {
      if (rule.tool_call && !names.has(rule.tool_call.name)) {
        ctx.addIssue({
          code: 'custom',
          path: ['scripted', 'rules', i, 'tool_call', 'name'],
          message: 'tool_call names a tool that is not in tools',
        });
      }
    });
  })
  .openapi('CreateRevision');

const RevisionSchema = z
  .object({
    app_id: z.string(),
    revision: z.number(),
    model_profile_id: z.string(),
    system_prompt: z.string(),
    tools: z.array(JsonObject),
    scripted: JsonObject.nullable(),
    limits: JsonObject,
    conversation: Conversation,
    content_digest: z.string(),
    created_by: z.string(),
    created_at: Timestamp,
  })
  .openapi('AppRevision');

const toJson = (r: RevisionRow): z.infer<typeof RevisionSchema> => ({
  app_id: r.app_id,
  revision: r.revision,
  model_profile_id: r.model_profile_id,
  system_prompt: r.system_prompt,
  tools: r.tools as Record<string, unknown>[],
  scripted: r.scripted,
  limits: r.limits,
  conversation: r.conversation as z.infer<typeof Conversation>,
  content_digest: r.content_digest,
  created_by: r.created_by,
  created_at: isoNN(r.created_at),
});

const tags = ['apps'];
const RevisionParams = AppParams.extend({ revision: pathId('revision') });

const createRevisionRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/apps/{app_id}/revisions',
  tags,
  summary: 'Create an immutable revision (number = previous max + 1)',
  request: { params: AppParams, body: jsonBody(CreateBody) },
  errors: [400, 403, 404, 409],
  responses: { 201: jsonResponse(RevisionSchema, 'The revision') },
});

const listRevisionsRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/apps/{app_id}/revisions',
  tags,
  summary: 'List revisions, newest first',
  request: { params: AppParams, query: ListQuery },
  errors: [400, 404],
  responses: { 200: jsonResponse(pageOf(RevisionSchema), 'A page') },
});

const getRevisionRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/apps/{app_id}/revisions/{revision}',
  tags,
  summary: 'One revision',
  request: { params: RevisionParams },
  errors: [404],
  responses: { 200: jsonResponse(RevisionSchema, 'The revision') },
});

export function registerAppRevisionRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(createRevisionRoute, async (c) => {
    const { app_id } = c.req.valid('param');
    const body = c.req.valid('json');
    // The normalised content (schema defaults applied): equal content → equal digest.
    const content = {
      model_profile_id: body.model_profile_id,
      system_prompt: body.system_prompt,
      tools: body.tools ?? [],
      scripted: body.scripted ?? null,
      limits: body.limits ?? {},
    };
    // The default policy stays out of the digest, so a revision that does not set one keeps the
    // digest it had before revisions had policies.
    const conversation = body.conversation ?? { policy: 'enqueue' as const };
    const digested =
      conversation.policy === 'enqueue' && Object.keys(conversation).length === 1
        ? content
        : { ...content, conversation };
    const row = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      const app = await lockAppForRevision(tx, tenantId, app_id);
      if (!app) throw new ApiError('not_found', 'No such app.');
      if (app.status !== 'active') throw new ApiError('conflict', 'The app is disabled.');
      const profile = await getModelProfile(tx, tenantId, content.model_profile_id);
      if (!profile) throw fieldError('model_profile_id', 'no such model profile in this tenant');
      if (profile.status !== 'active') throw new ApiError('conflict', 'The model profile is disabled.');
      const created = await insertRevision(tx, {
        tenantId,
        appId: app_id,
        revision: app.next_revision,
        modelProfileId: content.model_profile_id,
        systemPrompt: content.system_prompt,
        tools: content.tools,
        scripted: content.scripted,
        limits: content.limits,
        conversation,
        contentDigest: contentDigest(digested),
        createdBy: actorOf(c.get('principal')).actorId,
      });
      await audit(c, tx, tenantId, {
        action: 'app.revision.create',
        agentAppId: app_id,
        revision: created.revision,
        modelProfileId: created.model_profile_id,
        details: { app_id, revision: created.revision, content_digest: created.content_digest },
      });
      return created;
    });
    return c.json(toJson(row), 201);
  });

  admin.openapi(listRevisionsRoute, async (c) => {
    const { tenant_id, app_id } = c.req.valid('param');
    const tenantId = scopedTenant(c, tenant_id);
    const params = pageParams(c.req.valid('query'), 'seq');
    const page = await adminTx(deps, tenantId, async (tx) => {
      await requireTenant(tx, tenantId);
      if (!(await getAppStatus(tx, tenantId, app_id))) throw new ApiError('not_found', 'No such app.');
      return listRevisions(tx, { tenantId, appId: app_id, ...params });
    });
    return c.json(pageBody(page, toJson), 200);
  });

  admin.openapi(getRevisionRoute, async (c) => {
    const { tenant_id, app_id, revision } = c.req.valid('param');
    const tenantId = scopedTenant(c, tenant_id);
    const n = /^[1-9]\d{0,8}$/.test(revision) ? Number(revision) : null;
    const row =
      n === null
        ? null
        : await adminTx(deps, tenantId, (tx) => getRevision(tx, { tenantId, appId: app_id, revision: n }));
    if (!row) throw new ApiError('not_found', 'No such revision.');
    return c.json(toJson(row), 200);
  });
}
