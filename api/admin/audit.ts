import { createRoute, z } from '@hono/zod-openapi';
import { listAuditEvents } from '../../db/queries/admin/audit-events';
import { type AuditRecord, verifyAuditChain } from '../../db/queries/audit';
import type { AppDeps } from '../deps';
import { scopedTenant } from './auth';
import { adminTx, requireTenant } from './context';
import type { AdminApp } from './env';
import { pageBody, pageParams } from './pagination';
import {
  errorResponses,
  JsonObject,
  jsonResponse,
  ListQuery,
  pageOf,
  TenantParams,
  Timestamp,
} from './schemas';

const AuditEventSchema = z
  .object({
    audit_id: z.string(),
    seq: z.number(),
    occurred_at: Timestamp.openapi({ description: 'UTC with microseconds, exactly as hashed' }),
    actor_type: z.string(),
    actor_id: z.string(),
    action: z.string(),
    reason: z.string().nullable(),
    binding_id: z.string().nullable(),
    channel: z.string().nullable(),
    user_id: z.string().nullable(),
    session_id: z.string().nullable(),
    agent_app_id: z.string().nullable(),
    revision: z.number().nullable(),
    model_profile_id: z.string().nullable(),
    tool_name: z.string().nullable(),
    decision: z.string().nullable(),
    event_seq: z.number().nullable(),
    latency_ms: z.number().nullable(),
    error_type: z.string().nullable(),
    cost_minor: z.number().nullable(),
    request_id: z.string().nullable(),
    trace_id: z.string().nullable(),
    before_version: z.number().nullable(),
    after_version: z.number().nullable(),
    details: JsonObject,
    previous_digest: z.string().nullable(),
    digest: z.string(),
  })
  .openapi('AuditEvent');

const VerificationSchema = z
  .object({ valid: z.boolean(), checked: z.number(), first_invalid: z.string().optional() })
  .openapi('AuditVerification');

const auditJson = (r: AuditRecord): z.infer<typeof AuditEventSchema> => {
  const { tenant_id: _t, ...rest } = r;
  return rest;
};

const tags = ['audit'];
const security = [{ bearerAuth: [] }];

const listRoute = createRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/audit-events',
  tags,
  security,
  summary: "The tenant's audit chain, newest first",
  request: {
    params: TenantParams,
    query: ListQuery.extend({
      action: z
        .string()
        .max(200)
        .optional()
        .openapi({ param: { name: 'action', in: 'query' } }),
    }),
  },
  responses: { 200: jsonResponse(pageOf(AuditEventSchema), 'A page'), ...errorResponses(400, 401, 404) },
});

const verifyRoute = createRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/audit-events/verification',
  tags,
  security,
  summary: 'Recompute every digest and link of the chain in order',
  request: { params: TenantParams },
  responses: { 200: jsonResponse(VerificationSchema, 'The result'), ...errorResponses(401, 404) },
});

export function registerAuditRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(listRoute, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const q = c.req.valid('query');
    const params = pageParams(q, 'seq');
    const page = await adminTx(deps, tenantId, async (tx) => {
      await requireTenant(tx, tenantId);
      return listAuditEvents(tx, { tenantId, action: q.action, ...params });
    });
    return c.json(pageBody(page, auditJson), 200);
  });

  admin.openapi(verifyRoute, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const result = await adminTx(deps, tenantId, async (tx) => {
      await requireTenant(tx, tenantId);
      return verifyAuditChain(tx, tenantId);
    });
    return c.json(result, 200);
  });
}
