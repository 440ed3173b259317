import { z } from '@hono/zod-openapi';
import {
  type DeadLetterRow,
  discardDeadLetter,
  getDeadLetter,
  listDeadLetters,
} from '../../db/queries/admin/dead-letters';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { scopedTenant } from './auth';
import { adminTx, audit, requireTenant, requireWritableTenant, tenantTx } from './context';
import { type AdminApp, actorOf } from './env';
import { pageBody, pageParams } from './pagination';
import { adminRoute } from './route';
import {
  iso,
  isoNN,
  JsonObject,
  jsonBody,
  jsonResponse,
  ListQuery,
  pageOf,
  pathId,
  TenantParams,
  Timestamp,
} from './schemas';

const Status = z.enum(['open', 'retried', 'discarded']);
const Kind = z.enum(['execution', 'segment', 'tool']);

export const DeadLetterSchema = z
  .object({
    dead_letter_id: z.string(),
    event_id: z.string(),
    kind: Kind,
    segment_id: z.string().nullable(),
    invocation_id: z.string().nullable(),
    reason_class: z.string(),
    detail: JsonObject,
    status: Status,
    created_at: Timestamp,
    resolved_at: Timestamp.nullable(),
    resolved_by: z.string().nullable(),
    resolution_reason: z.string().nullable(),
  })
  .openapi('DeadLetter');

export const deadLetterJson = (r: DeadLetterRow): z.infer<typeof DeadLetterSchema> => ({
  dead_letter_id: r.dead_letter_id,
  event_id: r.event_id,
  kind: r.kind,
  segment_id: r.segment_id,
  invocation_id: r.invocation_id,
  reason_class: r.reason_class,
  detail: r.detail,
  status: r.status,
  created_at: isoNN(r.created_at),
  resolved_at: iso(r.resolved_at),
  resolved_by: r.resolved_by,
  resolution_reason: r.resolution_reason,
});

const DiscardBody = z
  .object({ reason: z.string().trim().min(1, 'reason must not be blank').max(1000) })
  .strict()
  .openapi('DiscardDeadLetter');

const tags = ['dead letters'];
export const DeadLetterParams = TenantParams.extend({ dead_letter_id: pathId('dead_letter_id') });

const listRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/dead-letters',
  tags,
  summary: 'Dead letters, newest first',
  request: {
    params: TenantParams,
    query: ListQuery.extend({
      status: Status.optional().openapi({ param: { name: 'status', in: 'query' } }),
      kind: Kind.optional().openapi({ param: { name: 'kind', in: 'query' } }),
    }),
  },
  errors: [400, 404],
  responses: { 200: jsonResponse(pageOf(DeadLetterSchema), 'A page') },
});

const getRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/dead-letters/{dead_letter_id}',
  tags,
  summary: 'One dead letter',
  request: { params: DeadLetterParams },
  errors: [404],
  responses: { 200: jsonResponse(DeadLetterSchema, 'The dead letter') },
});

const discardRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/dead-letters/{dead_letter_id}/discard',
  tags,
  summary: 'Discard an open dead letter (anything but open is 409 invalid_transition)',
  request: { params: DeadLetterParams, body: jsonBody(DiscardBody) },
  errors: [400, 403, 404, 409],
  responses: { 200: jsonResponse(DeadLetterSchema, 'The dead letter') },
});

export function registerDeadLetterRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(listRoute, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const q = c.req.valid('query');
    const params = pageParams(q);
    const page = await adminTx(deps, tenantId, async (tx) => {
      await requireTenant(tx, tenantId);
      return listDeadLetters(tx, { tenantId, status: q.status, kind: q.kind, ...params });
    });
    return c.json(pageBody(page, deadLetterJson), 200);
  });

  admin.openapi(getRoute, async (c) => {
    const { dead_letter_id } = c.req.valid('param');
    const row = await tenantTx(c, deps, (tx, tenantId) => getDeadLetter(tx, tenantId, dead_letter_id));
    if (!row) throw new ApiError('not_found', 'No such dead letter.');
    return c.json(deadLetterJson(row), 200);
  });

  admin.openapi(discardRoute, async (c) => {
    const { dead_letter_id } = c.req.valid('param');
    const { reason } = c.req.valid('json');
    const row = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      // A tool letter stands for an invocation that waits for an operator; discarding the letter
      // alone would leave its message waiting forever. The resolution settles both.
      const [waiting] = await tx<{ invocation_id: string }[]>`
        select i.invocation_id from dead_letter d
        join tool_invocation i on i.tenant_id = d.tenant_id and i.invocation_id = d.invocation_id
        where d.tenant_id = ${tenantId} and d.dead_letter_id = ${dead_letter_id} and d.kind = 'tool'
          and i.status in ('manual', 'awaiting_approval')`;
      if (waiting) {
        throw new ApiError(
          'invalid_transition',
          `Tool invocation ${waiting.invocation_id} still waits for a decision: resolve it through …/tool-invocations/${waiting.invocation_id}/resolution.`,
        );
      }
      const discarded = await discardDeadLetter(tx, {
        tenantId,
        deadLetterId: dead_letter_id,
        resolvedBy: actorOf(c.get('principal')).actorId,
        reason,
      });
      if (!discarded) {
        const current = await getDeadLetter(tx, tenantId, dead_letter_id);
        if (!current) throw new ApiError('not_found', 'No such dead letter.');
        throw new ApiError('invalid_transition', `The dead letter is ${current.status}, not open.`);
      }
      await audit(c, tx, tenantId, {
        action: 'dead_letter.discard',
        reason,
        details: { dead_letter_id, event_id: discarded.event_id, kind: discarded.kind },
      });
      return discarded;
    });
    return c.json(deadLetterJson(row), 200);
  });
}
