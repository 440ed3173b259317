import { z } from '@hono/zod-openapi';
import { listToolInvocations, type ToolInvocationRow } from '../../db/queries/admin/tool-invocations';
import type { AppDeps } from '../deps';
import { scopedTenant } from './auth';
import { adminTx, requireTenant } from './context';
import type { AdminApp } from './env';
import { pageBody, pageParams } from './pagination';
import { adminRoute } from './route';
import { iso, isoNN, JsonObject, jsonResponse, ListQuery, pageOf, TenantParams, Timestamp } from './schemas';

export const InvocationStatus = z.enum([
  'prepared',
  'dispatching',
  'accepted',
  'rejected',
  'unknown',
  'reconciling',
  'manual',
  'failed',
  'awaiting_approval',
  'refused',
]);

export const ToolInvocationSchema = z
  .object({
    invocation_id: z.string(),
    event_id: z.string(),
    session_id: z.string(),
    tool_name: z.string(),
    status: z.string(),
    attempts: z.number(),
    idempotency_key: z.string(),
    requires_approval: z.boolean(),
    approval_deadline: Timestamp.nullable(),
    last_error: z.string().nullable(),
    resolution: JsonObject.nullable().openapi({
      description: "An operator's decision: { outcome, reason, provider_receipt } or { decision, reason }",
    }),
    created_at: Timestamp,
    dispatched_at: Timestamp.nullable(),
    resolved_at: Timestamp.nullable(),
  })
  .openapi('ToolInvocation');

export function toolInvocationJson(r: ToolInvocationRow): z.infer<typeof ToolInvocationSchema> {
  return {
    invocation_id: r.invocation_id,
    event_id: r.event_id,
    session_id: r.session_id,
    tool_name: r.tool_name,
    status: r.status,
    attempts: r.attempts,
    idempotency_key: r.idempotency_key,
    requires_approval: r.requires_approval,
    approval_deadline: iso(r.approval_deadline),
    last_error: r.last_error,
    resolution: r.resolution,
    created_at: isoNN(r.created_at),
    dispatched_at: iso(r.dispatched_at),
    resolved_at: iso(r.resolved_at),
  };
}

const listRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/tool-invocations',
  tags: ['tool invocations'],
  summary: 'Tool invocations, newest first (e.g. ?status=manual for those awaiting an operator)',
  request: {
    params: TenantParams,
    query: ListQuery.extend({
      status: InvocationStatus.optional().openapi({ param: { name: 'status', in: 'query' } }),
    }),
  },
  errors: [400, 404],
  responses: { 200: jsonResponse(pageOf(ToolInvocationSchema), 'A page') },
});

export function registerToolInvocationRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(listRoute, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const q = c.req.valid('query');
    const params = pageParams(q);
    const page = await adminTx(deps, tenantId, async (tx) => {
      await requireTenant(tx, tenantId);
      return listToolInvocations(tx, { tenantId, status: q.status, ...params });
    });
    return c.json(pageBody(page, toolInvocationJson), 200);
  });
}
