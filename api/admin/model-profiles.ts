import { z } from '@hono/zod-openapi';
import { newId } from '../../db/ids';
import {
  getModelProfile,
  insertModelProfile,
  listModelProfiles,
  type ModelProfileContent,
  type ModelProfileRow,
  updateModelProfile,
} from '../../db/queries/admin/model-profiles';
import type { TransactionSql } from '../../db/tx';
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

const Provider = z.enum(['scripted', 'openai_compatible']);
const Pricing = z
  .object({
    input_per_mtok_minor: z.number().int().min(0),
    output_per_mtok_minor: z.number().int().min(0),
  })
  .strict();

const contentFields = {
  provider: Provider,
  model: z.string().trim().min(1).max(200),
  base_url: z
    .url({ protocol: /^https?$/, error: 'base_url must be an http(s) URL' })
    .max(2000)
    .nullable()
    .optional(),
  api_key_secret_ref: z
    .string()
    .min(1)
    .max(200)
    .nullable()
    .optional()
    .openapi({ description: 'A secret of purpose model_api_key in this tenant.' }),
  parameters: JsonObject.optional(),
  pricing: Pricing.nullable().optional(),
  vision: z.boolean().optional().openapi({
    description: 'The model takes images: inbound pictures are sent as image parts (default false).',
  }),
  stream: z
    .boolean()
    .optional()
    .openapi({
      description:
        'Call the model with streaming (default false). Usage and budgets are counted as for other ' +
        'calls; a Telegram binding with config.live_drafts shows the reply while it is written.',
    }),
};

function needsBaseUrl(v: { provider: string; base_url?: string | null }, ctx: z.RefinementCtx) {
  if (v.provider === 'openai_compatible' && !v.base_url) {
    ctx.addIssue({ code: 'custom', path: ['base_url'], message: 'openai_compatible requires base_url' });
  }
}

const CreateBody = z
  .object({ profile_key: slug('profile_key'), ...contentFields })
  .strict()
  .superRefine(needsBaseUrl)
  .openapi('CreateModelProfile');

const UpdateBody = z
  .object({ expected_version: ExpectedVersion, ...contentFields })
  .strict()
  .superRefine(needsBaseUrl)
  .openapi('UpdateModelProfile');

const ModelProfileSchema = z
  .object({
    model_profile_id: z.string(),
    profile_key: z.string(),
    provider: Provider,
    model: z.string(),
    base_url: z.string().nullable(),
    api_key_secret_ref: z.string().nullable(),
    parameters: JsonObject,
    pricing: Pricing.nullable(),
    vision: z.boolean(),
    stream: z.boolean(),
    status: z.enum(['active', 'disabled']),
    version: z.number(),
    content_digest: z.string(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('ModelProfile');

function toJson(r: ModelProfileRow): z.infer<typeof ModelProfileSchema> {
  const pricing =
    r.input_per_mtok_minor === null || r.output_per_mtok_minor === null
      ? null
      : { input_per_mtok_minor: r.input_per_mtok_minor, output_per_mtok_minor: r.output_per_mtok_minor };
  return {
    model_profile_id: r.model_profile_id,
    profile_key: r.profile_key,
    provider: r.provider,
    model: r.model,
    base_url: r.base_url,
    api_key_secret_ref: r.api_key_secret_ref,
    parameters: r.parameters,
    pricing,
    vision: r.vision,
    stream: r.stream,
    status: r.status,
    version: r.version,
    content_digest: r.content_digest,
    created_at: isoNN(r.created_at),
    updated_at: isoNN(r.updated_at),
  };
}

type ContentInput = z.infer<typeof CreateBody> | z.infer<typeof UpdateBody>;

/** The normalised content; equal content gives an equal digest whatever the key order. */
function contentOf(b: ContentInput): ModelProfileContent {
  return {
    provider: b.provider,
    model: b.model,
    base_url: b.base_url ?? null,
    api_key_secret_ref: b.api_key_secret_ref ?? null,
    parameters: b.parameters ?? {},
    input_per_mtok_minor: b.pricing?.input_per_mtok_minor ?? null,
    output_per_mtok_minor: b.pricing?.output_per_mtok_minor ?? null,
    vision: b.vision ?? false,
    stream: b.stream ?? false,
  };
}

/** The key must be an active secret of this tenant whose purpose is model_api_key. */
async function checkSecretRef(tx: TransactionSql, tenantId: string, ref: string | null) {
  if (ref === null) return;
  const status = await requireSecretPurpose(tx, tenantId, {
    field: 'api_key_secret_ref',
    secretRef: ref,
    expected: 'model_api_key',
  });
  if (status !== 'active') throw new ApiError('conflict', 'The api_key secret is disabled.');
}

const tags = ['model profiles'];
const ProfileParams = TenantParams.extend({ model_profile_id: pathId('model_profile_id') });

const createProfile = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/model-profiles',
  tags,
  summary: 'Create a model profile',
  request: { params: TenantParams, body: jsonBody(CreateBody) },
  errors: [400, 403, 404, 409],
  responses: { 201: jsonResponse(ModelProfileSchema, 'The profile') },
});

const listProfiles = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/model-profiles',
  tags,
  summary: 'List model profiles',
  request: { params: TenantParams, query: ListQuery },
  errors: [400, 404],
  responses: { 200: jsonResponse(pageOf(ModelProfileSchema), 'A page') },
});

const getProfile = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/model-profiles/{model_profile_id}',
  tags,
  summary: 'One model profile',
  request: { params: ProfileParams },
  errors: [404],
  responses: { 200: jsonResponse(ModelProfileSchema, 'The profile') },
});

const putProfile = adminRoute({
  method: 'put',
  path: '/v1/admin/tenants/{tenant_id}/model-profiles/{model_profile_id}',
  tags,
  summary: 'Replace the content (new version and digest; running executions keep theirs)',
  request: { params: ProfileParams, body: jsonBody(UpdateBody) },
  errors: [400, 403, 404, 409],
  responses: { 200: jsonResponse(ModelProfileSchema, 'The profile') },
});

export function registerModelProfileRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(createProfile, async (c) => {
    const body = c.req.valid('json');
    const content = contentOf(body);
    const row = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      await checkSecretRef(tx, tenantId, content.api_key_secret_ref);
      const created = await insertModelProfile(tx, {
        tenantId,
        modelProfileId: newId('mp'),
        profileKey: body.profile_key,
        content,
        digest: contentDigest(content),
      });
      await audit(c, tx, tenantId, {
        action: 'model_profile.create',
        modelProfileId: created.model_profile_id,
        afterVersion: created.version,
        details: { model_profile_id: created.model_profile_id, content_digest: created.content_digest },
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
      return listModelProfiles(tx, { tenantId, ...params });
    });
    return c.json(pageBody(page, toJson), 200);
  });

  admin.openapi(getProfile, async (c) => {
    const { model_profile_id } = c.req.valid('param');
    const row = await tenantTx(c, deps, (tx, tenantId) => getModelProfile(tx, tenantId, model_profile_id));
    if (!row) throw new ApiError('not_found', 'No such model profile.');
    return c.json(toJson(row), 200);
  });

  admin.openapi(putProfile, async (c) => {
    const { model_profile_id } = c.req.valid('param');
    const body = c.req.valid('json');
    const content = contentOf(body);
    const row = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      const before = await getModelProfile(tx, tenantId, model_profile_id);
      if (!before) throw new ApiError('not_found', 'No such model profile.');
      await checkSecretRef(tx, tenantId, content.api_key_secret_ref);
      const updated = await updateModelProfile(tx, {
        tenantId,
        modelProfileId: model_profile_id,
        expectedVersion: body.expected_version,
        content,
        digest: contentDigest(content),
      });
      if (!updated)
        throw new ApiError('optimistic_conflict', 'The model profile has changed; re-read it and retry.');
      await audit(c, tx, tenantId, {
        action: 'model_profile.update',
        modelProfileId: model_profile_id,
        beforeVersion: before.version,
        afterVersion: updated.version,
        details: { model_profile_id, content_digest: updated.content_digest },
      });
      return updated;
    });
    return c.json(toJson(row), 200);
  });
}
