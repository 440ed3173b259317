import { z } from '@hono/zod-openapi';
import { newId } from '../../db/ids';
import { getAppStatus, lockActiveApp } from '../../db/queries/admin/apps';
import { getBackendProfileStatus } from '../../db/queries/admin/backend-profiles';
import {
  getTenant,
  getTenantState,
  insertTenant,
  listTenants,
  type TenantRow,
  type TenantStatus,
  transitionTenantStatus,
  updateTenantConfiguration,
} from '../../db/queries/admin/tenants';
import { permitWaiters } from '../../db/queries/repair';
import { setTxTenant, type TransactionSql } from '../../db/tx';
import { wakeWorkflows } from '../../lib/workflow-start';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { platformOnly } from './auth';
import { adminTx, audit, requireTenant, tenantTx } from './context';
import { type AdminApp, actorOf } from './env';
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
  slug,
  TenantParams,
  Timestamp,
} from './schemas';

// The limits and policies of the seeds' tenant table, as the API accepts them.
const limitFields = {
  rate_limit_rpm: z.number().int().min(0).nullable(),
  max_concurrent_executions: z.number().int().min(1).nullable(),
  monthly_token_budget: z.number().int().min(0).nullable(),
  monthly_spend_limit_minor: z.number().int().min(0).nullable(),
  billing_currency: z
    .string()
    .regex(/^[A-Z]{3}$/, 'billing_currency must be an ISO 4217 code such as EUR')
    .nullable(),
  audit_retention_days: z.number().int().min(1).max(36_500),
  /** Not a seeds parameter: optional in the configuration PUT (absent: unchanged). */
  artifact_retention_days: z
    .number()
    .int()
    .min(1)
    .max(36_500)
    .openapi({ description: 'Days an artifact (media in, reply attachment) is kept; default 30' }),
  log_masking_level: z.enum(['none', 'basic', 'strict']),
  trace_sampling_rate: z.number().min(0).max(1),
};

function spendNeedsCurrency(
  v: { monthly_spend_limit_minor?: number | null; billing_currency?: string | null },
  ctx: z.RefinementCtx,
) {
  if (v.monthly_spend_limit_minor != null && v.billing_currency == null) {
    ctx.addIssue({
      code: 'custom',
      path: ['billing_currency'],
      message: 'billing_currency is required when monthly_spend_limit_minor is set',
    });
  }
}

const CreateTenantBody = z
  .object({
    // Seeds: the Admin API trims and lower-cases first, then checks the grammar.
    tenant_key: z
      .string()
      .max(200)
      .transform((s) => s.trim().toLowerCase())
      .pipe(slug('tenant_key')),
    display_name: displayName,
    ...z.object(limitFields).partial().shape,
  })
  .strict()
  .superRefine(spendNeedsCurrency)
  .openapi('CreateTenant');

const ConfigurationBody = z
  .object({
    expected_version: ExpectedVersion,
    display_name: displayName,
    ...limitFields,
    artifact_retention_days: limitFields.artifact_retention_days.optional(),
    default_agent_app_id: z.string().min(1).max(200).nullable(),
    default_backend_profile_id: z.string().min(1).max(200).nullable(),
  })
  .strict()
  .superRefine(spendNeedsCurrency)
  .openapi('TenantConfiguration');

const StatusTransitionBody = z
  .object({
    expected_version: ExpectedVersion,
    next_status: z.enum(['active', 'suspended', 'disabled']),
    reason: z.string().trim().min(1, 'reason must not be blank').max(1000),
  })
  .strict()
  .openapi('TenantStatusTransition');

const TenantSchema = z
  .object({
    tenant_id: z.string(),
    tenant_key: z.string(),
    display_name: z.string(),
    status: z.enum(['active', 'suspended', 'disabled']),
    rate_limit_rpm: z.number().nullable(),
    max_concurrent_executions: z.number().nullable(),
    monthly_token_budget: z.number().nullable(),
    monthly_spend_limit_minor: z.number().nullable(),
    billing_currency: z.string().nullable(),
    audit_retention_days: z.number(),
    artifact_retention_days: z.number(),
    log_masking_level: z.enum(['none', 'basic', 'strict']),
    trace_sampling_rate: z.number(),
    default_agent_app_id: z.string().nullable(),
    default_backend_profile_id: z.string().nullable(),
    version: z.number(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('Tenant');

type TenantJson = z.infer<typeof TenantSchema>;

function toJson(r: TenantRow): TenantJson {
  const { sort_ts: _s, created_at, updated_at, ...rest } = r;
  return { ...rest, created_at: isoNN(created_at), updated_at: isoNN(updated_at) };
}

/** The seeds' lifecycle: active ⇄ suspended, either → disabled (terminal). */
const TRANSITIONS: Readonly<Record<TenantStatus, readonly TenantStatus[]>> = {
  active: ['suspended', 'disabled'],
  suspended: ['active', 'disabled'],
  disabled: [],
};
const ACTION: Readonly<Record<TenantStatus, string>> = {
  active: 'tenant.activate',
  suspended: 'tenant.suspend',
  disabled: 'tenant.disable',
};

const CONFIG_FIELDS = [
  'display_name',
  'rate_limit_rpm',
  'max_concurrent_executions',
  'monthly_token_budget',
  'monthly_spend_limit_minor',
  'billing_currency',
  'audit_retention_days',
  'artifact_retention_days',
  'log_masking_level',
  'trace_sampling_rate',
  'default_agent_app_id',
  'default_backend_profile_id',
] as const;

const tags = ['tenants'];

const createTenant = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants',
  tags,
  summary: 'Create a tenant (platform only); its first audit entry starts its chain',
  middleware: [platformOnly] as const,
  request: { body: jsonBody(CreateTenantBody) },
  errors: [400, 403, 409],
  responses: { 201: jsonResponse(TenantSchema, 'The new tenant (status active, version 1)') },
});

const listTenantsRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants',
  tags,
  summary: 'List tenants, newest first (platform only)',
  middleware: [platformOnly] as const,
  request: { query: ListQuery },
  errors: [400, 403],
  responses: { 200: jsonResponse(pageOf(TenantSchema), 'A page of tenants') },
});

const getAdminRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}',
  tags,
  summary: 'One tenant',
  request: { params: TenantParams },
  errors: [404],
  responses: { 200: jsonResponse(TenantSchema, 'The tenant') },
});

/** A new tenant's artifact_retention_days unless it says otherwise (the column's default). */
const DEFAULT_ARTIFACT_RETENTION_DAYS = 30;

/** Waiters woken at most by one configuration change (each re-checks once; the rest by the sweeper). */
const MAX_WAKES_ON_RECONFIGURE = 100;

const putConfiguration = adminRoute({
  method: 'put',
  path: '/v1/admin/tenants/{tenant_id}/configuration',
  tags,
  summary: 'Replace the configuration snapshot (update_tenant_configuration; platform only)',
  description:
    "Every parameter of the seeds' update_tenant_configuration is required (nullable ones may be " +
    'null); artifact_retention_days may be left out (unchanged). Default references must name ACTIVE ' +
    'objects of this tenant: an unknown id (or another tenant’s) is 400 validation_failed, an ' +
    'existing but inactive one is 409 conflict.',
  middleware: [platformOnly] as const,
  request: { params: TenantParams, body: jsonBody(ConfigurationBody) },
  errors: [400, 403, 404, 409],
  responses: { 200: jsonResponse(TenantSchema, 'The updated tenant') },
});

const postStatusTransition = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/status-transitions',
  tags,
  summary: 'Move the tenant along its lifecycle (transition_tenant_status; platform only)',
  middleware: [platformOnly] as const,
  request: { params: TenantParams, body: jsonBody(StatusTransitionBody) },
  errors: [400, 403, 404, 409],
  responses: { 200: jsonResponse(TenantSchema, 'The tenant') },
});

/** Default references: unknown in this tenant → 400; present but not active → 409. */
async function checkDefaults(
  tx: TransactionSql,
  tenantId: string,
  body: { default_agent_app_id: string | null; default_backend_profile_id: string | null },
) {
  if (body.default_backend_profile_id !== null) {
    const status = await getBackendProfileStatus(tx, tenantId, body.default_backend_profile_id);
    if (!status) throw fieldError('default_backend_profile_id', 'no such backend profile in this tenant');
    if (status !== 'active') throw new ApiError('conflict', 'The default backend profile must be active.');
  }
  if (body.default_agent_app_id !== null) {
    const status = await getAppStatus(tx, tenantId, body.default_agent_app_id);
    if (!status) throw fieldError('default_agent_app_id', 'no such app in this tenant');
    if (status !== 'active') throw new ApiError('conflict', 'The default app must be active.');
  }
}

/** Why a seed function refused, read back in the same transaction. */
async function refusal(tx: TransactionSql, tenantId: string, expectedVersion: number): Promise<ApiError> {
  const now = await getTenantState(tx, tenantId);
  if (!now) return new ApiError('not_found', 'No such tenant.');
  if (now.status === 'disabled') return new ApiError('tenant_disabled', 'The tenant is disabled.');
  if (now.version !== expectedVersion) {
    return new ApiError('optimistic_conflict', 'The tenant has changed; re-read it and retry.', {
      current_version: now.version,
    });
  }
  return new ApiError('conflict', 'The default backend profile is no longer active.');
}

export function registerTenantRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(createTenant, async (c) => {
    const body = c.req.valid('json');
    const tenantId = newId('t');
    const row = await adminTx(deps, null, async (tx) => {
      const created = await insertTenant(tx, {
        tenant_id: tenantId,
        tenant_key: body.tenant_key,
        display_name: body.display_name,
        rate_limit_rpm: body.rate_limit_rpm ?? null,
        max_concurrent_executions: body.max_concurrent_executions ?? null,
        monthly_token_budget: body.monthly_token_budget ?? null,
        monthly_spend_limit_minor: body.monthly_spend_limit_minor ?? null,
        billing_currency: body.billing_currency ?? null,
        audit_retention_days: body.audit_retention_days ?? 90,
        artifact_retention_days: body.artifact_retention_days ?? DEFAULT_ARTIFACT_RETENTION_DAYS,
        log_masking_level: body.log_masking_level ?? 'basic',
        trace_sampling_rate: body.trace_sampling_rate ?? 1,
      });
      // The tenant is learnt midway: switch the RLS context to it for its first audit entry.
      await setTxTenant(tx, tenantId);
      await audit(c, tx, tenantId, {
        action: 'tenant.create',
        afterVersion: created.version,
        details: { tenant_id: tenantId },
      });
      return created;
    });
    return c.json(toJson(row), 201);
  });

  admin.openapi(listTenantsRoute, async (c) => {
    const params = pageParams(c.req.valid('query'));
    const page = await adminTx(deps, null, (tx) => listTenants(tx, params));
    return c.json(pageBody(page, toJson), 200);
  });

  admin.openapi(getAdminRoute, async (c) => {
    const row = await tenantTx(c, deps, (tx, tenantId) => getTenant(tx, tenantId));
    if (!row) throw new ApiError('not_found', 'No such tenant.');
    return c.json(toJson(row), 200);
  });

  admin.openapi(putConfiguration, async (c) => {
    const { expected_version, ...config } = c.req.valid('json');
    const { row, waiters } = await tenantTx(c, deps, async (tx, tenantId) => {
      const before = await getTenant(tx, tenantId);
      if (!before) throw new ApiError('not_found', 'No such tenant.');
      if (before.status === 'disabled') throw new ApiError('tenant_disabled', 'The tenant is disabled.');
      if (before.version !== expected_version) throw await refusal(tx, tenantId, expected_version);
      await checkDefaults(tx, tenantId, config);
      const version = await updateTenantConfiguration(tx, {
        tenantId,
        expectedVersion: expected_version,
        // Left out: the current value (the expected_version check makes it the one the caller saw).
        config: {
          ...config,
          artifact_retention_days: config.artifact_retention_days ?? before.artifact_retention_days,
        },
      });
      if (version === null) throw await refusal(tx, tenantId, expected_version);
      // The function locks the tenant (then the backend profile); the app is checked after it,
      // under a share lock, keeping the seeds' lock order Tenant → referenced object.
      if (
        config.default_agent_app_id !== null &&
        !(await lockActiveApp(tx, tenantId, config.default_agent_app_id))
      ) {
        throw new ApiError('conflict', 'The default app must be active.');
      }
      const changed = CONFIG_FIELDS.filter((f) => config[f] !== undefined && before[f] !== config[f]);
      await audit(c, tx, tenantId, {
        action: 'tenant.configure',
        beforeVersion: before.version,
        afterVersion: version,
        agentAppId: config.default_agent_app_id,
        details: {
          changed,
          default_agent_app_id: config.default_agent_app_id,
          default_backend_profile_id: config.default_backend_profile_id,
        },
      });
      // A raised (or removed) concurrency limit frees permits no finishing message announces:
      // the waiters it may admit are woken (they wait for a wake, not polling).
      const admits = config.max_concurrent_executions ?? MAX_WAKES_ON_RECONFIGURE;
      return {
        row: await getTenant(tx, tenantId),
        waiters: changed.includes('max_concurrent_executions')
          ? await permitWaiters(tx, tenantId, Math.min(admits, MAX_WAKES_ON_RECONFIGURE))
          : [],
      };
    });
    await wakeWorkflows(deps.temporal, waiters);
    return c.json(toJson(row!), 200);
  });

  admin.openapi(postStatusTransition, async (c) => {
    const body = c.req.valid('json');
    const row = await tenantTx(c, deps, async (tx, tenantId) => {
      const before = await requireTenant(tx, tenantId);
      if (!TRANSITIONS[before.status].includes(body.next_status)) {
        throw new ApiError(
          'invalid_transition',
          `A tenant cannot go from ${before.status} to ${body.next_status}.`,
          { from: before.status, to: body.next_status },
        );
      }
      if (before.version !== body.expected_version) {
        throw new ApiError('optimistic_conflict', 'The tenant has changed; re-read it and retry.', {
          current_version: before.version,
        });
      }
      const actor = actorOf(c.get('principal'));
      const done = await transitionTenantStatus(tx, {
        tenantId,
        expectedVersion: body.expected_version,
        nextStatus: body.next_status,
        ...actor,
        reason: body.reason,
        correlationId: c.get('requestId'),
      });
      if (!done) {
        const now = await requireTenant(tx, tenantId);
        if (!TRANSITIONS[now.status].includes(body.next_status)) {
          throw new ApiError(
            'invalid_transition',
            `A tenant cannot go from ${now.status} to ${body.next_status}.`,
          );
        }
        throw new ApiError('optimistic_conflict', 'The tenant has changed; re-read it and retry.');
      }
      await audit(c, tx, tenantId, {
        action: ACTION[body.next_status],
        reason: body.reason,
        beforeVersion: before.version,
        afterVersion: before.version + 1,
        details: { previous_status: before.status, next_status: body.next_status },
      });
      return getTenant(tx, tenantId);
    });
    return c.json(toJson(row!), 200);
  });
}
