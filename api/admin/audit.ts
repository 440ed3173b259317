import { timingSafeEqual } from 'node:crypto';
import { z } from '@hono/zod-openapi';
import { listAuditEvents } from '../../db/queries/admin/audit-events';
import {
  type AuditRecord,
  checkPendingAudit,
  quarantinePendingAudit,
  verifyAuditChain,
} from '../../db/queries/audit';
import { sealAudit } from '../../db/queries/audit-seal';
import { retentionCheckpoint } from '../../db/queries/housekeeping';
import { signCheckpoint, signRetentionCheckpoint } from '../../lib/audit-key';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { platformOnly, scopedTenant } from './auth';
import { adminTx, auditEntryOf, requireTenant, tenantTx } from './context';
import type { AdminApp } from './env';
import { pageBody, pageParams } from './pagination';
import { adminRoute } from './route';
import { JsonObject, jsonBody, jsonResponse, ListQuery, pageOf, TenantParams, Timestamp } from './schemas';

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

const CheckpointSchema = z
  .object({
    seq: z.number().int().min(1),
    digest: z.string().regex(/^[0-9a-f]{64}$/),
    signature: z.string().regex(/^[0-9a-f]{64}$/),
  })
  .openapi('AuditCheckpoint', {
    description:
      'The verified head of the chain, signed with the audit key (held outside the database). Pass it back to start a later verification after it.',
  });

const VerificationSchema = z
  .object({
    valid: z.boolean().openapi({
      description:
        "The sealed chain (after the starting point) and every pending entry's mac hold. Pending entries are not part of what this vouches for.",
    }),
    checked: z.number().openapi({ description: 'Sealed entries checked' }),
    pending: z.number().openapi({
      description:
        'Runtime entries not yet sealed into the chain (written after sealing began, or held back because one does not verify): never counted as checked',
    }),
    refused: z.number().openapi({
      description:
        "Pending entries whose mac does not hold (edited, or written without the key): never sealed, each stops the tenant's sealing until the platform quarantines it (…/audit-events/pending/{pending_id}/quarantine)",
    }),
    first_invalid: z.string().optional(),
    checkpoint: CheckpointSchema.optional(),
  })
  .openapi('AuditVerification');

const CheckpointQuery = z.object({
  from_seq: z.coerce
    .number()
    .int()
    .min(1)
    .optional()
    .openapi({ param: { name: 'from_seq', in: 'query' } }),
  from_digest: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional()
    .openapi({ param: { name: 'from_digest', in: 'query' } }),
  from_signature: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional()
    .openapi({ param: { name: 'from_signature', in: 'query' } }),
  seal: z
    .enum(['true', 'false'])
    .default('true')
    .openapi({
      param: { name: 'seal', in: 'query' },
      description:
        "Seal the tenant's pending runtime entries first (default); `false` verifies what is sealed now",
    }),
});

const auditJson = (r: AuditRecord): z.infer<typeof AuditEventSchema> => {
  const { tenant_id: _t, ...rest } = r;
  return rest;
};

const tags = ['audit'];

const listRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/audit-events',
  tags,
  summary: "The tenant's audit chain, newest first (the runtime's pending entries are sealed first)",
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
  errors: [400, 404],
  responses: { 200: jsonResponse(pageOf(AuditEventSchema), 'A page') },
});

const verifyRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/audit-events/verification',
  tags,
  summary:
    'Seal pending entries, then recompute every digest and link of the chain in order (optionally after a signed checkpoint)',
  request: { params: TenantParams, query: CheckpointQuery },
  errors: [400, 404],
  responses: { 200: jsonResponse(VerificationSchema, 'The result') },
});

const QuarantineParams = TenantParams.extend({
  pending_id: z
    .string()
    .regex(/^[1-9][0-9]{0,15}$/, 'a pending entry id')
    .openapi({ param: { name: 'pending_id', in: 'path' } }),
});
const QuarantineBody = z
  .object({ reason: z.string().trim().min(1, 'reason must not be blank').max(1000) })
  .strict()
  .openapi('QuarantineAuditEntry');
const QuarantineResponse = z
  .object({
    entry: AuditEventSchema.openapi({
      description:
        "The `audit.quarantined` entry linked in the refused entry's place; its details carry the refused row's pending_id, claimed_audit_id, mac and content_sha256 (never its content)",
    }),
    sealed_after: z.number().int().openapi({ description: 'Pending entries sealed after it' }),
  })
  .openapi('AuditQuarantine');

const quarantineRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/audit-events/pending/{pending_id}/quarantine',
  tags,
  summary:
    "Replace a refused pending entry (its mac does not hold) by an audit.quarantined entry, so the tenant's sealing continues past it (platform only)",
  description:
    'The entries ahead of it are sealed first, the quarantine entry takes its place in the chain, the ' +
    'pending row is removed and the entries behind it are sealed. An unknown pending_id (or another ' +
    "tenant's) is 404; an entry whose mac holds is 409 conflict (`details.reason: not_refused`) and " +
    "is sealed as it is. `pending_id` is named by the sealer's log and by `audit_pending`.",
  middleware: [platformOnly] as const,
  request: { params: QuarantineParams, body: jsonBody(QuarantineBody) },
  errors: [400, 403, 404, 409],
  responses: { 200: jsonResponse(QuarantineResponse, 'The quarantine entry') },
});

export function registerAuditRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(quarantineRoute, async (c) => {
    const { pending_id } = c.req.valid('param');
    const { reason } = c.req.valid('json');
    const r = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireTenant(tx, tenantId);
      const out = await quarantinePendingAudit(
        tx,
        Number(pending_id),
        auditEntryOf(c, tenantId, { action: 'audit.quarantined', reason }),
      );
      // Nothing was removed then: the refusal rolls the transaction back.
      if (out.outcome === 'quarantined') return out;
      if (out.outcome === 'not_found') throw new ApiError('not_found', 'No such pending audit entry.');
      throw new ApiError('conflict', "The entry's mac holds: it is sealed as it is.", {
        reason: 'not_refused',
      });
    });
    return c.json({ entry: auditJson(r.entry), sealed_after: r.sealedAfter }, 200);
  });

  admin.openapi(listRoute, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const q = c.req.valid('query');
    const params = pageParams(q, 'seq');
    await sealFirst(deps, tenantId);
    const page = await adminTx(deps, tenantId, async (tx) => {
      await requireTenant(tx, tenantId);
      return listAuditEvents(tx, { tenantId, action: q.action, ...params });
    });
    return c.json(pageBody(page, auditJson), 200);
  });

  admin.openapi(verifyRoute, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const q = c.req.valid('query');
    const given = [q.from_seq, q.from_digest, q.from_signature].filter((v) => v !== undefined).length;
    if (given !== 0 && given !== 3) {
      throw new ApiError('validation_failed', 'from_seq, from_digest and from_signature go together');
    }
    const from =
      q.from_seq !== undefined && q.from_digest && q.from_signature
        ? { seq: q.from_seq, digest: q.from_digest, signature: q.from_signature }
        : undefined;
    if (from && !checkpointHolds(deps.auditKey, tenantId, from)) {
      throw new ApiError('validation_failed', 'the checkpoint signature does not verify');
    }
    // What is still pending after this came later, or was refused (then it fails verification).
    if (q.seal === 'true') await sealFirst(deps, tenantId);
    const { head, ...result } = await adminTx(
      deps,
      tenantId,
      async (tx) => {
        await requireTenant(tx, tenantId);
        // Retention removed the rows up to its checkpoint (migration 0025): the chain starts after it,
        // and so does any older checkpoint a caller holds.
        const retained = await retentionCheckpoint(tx, tenantId);
        if (retained && !checkpointHolds(deps.auditKey, tenantId, retained, signRetentionCheckpoint)) {
          const { pending, refused } = await checkPendingAudit(tx, tenantId, deps.auditKey);
          return {
            valid: false,
            checked: 0,
            pending,
            refused,
            first_invalid: `retention_checkpoint:${retained.seq}`,
          };
        }
        const start = retained && (!from || from.seq <= retained.seq) ? { ...retained, removed: true } : from;
        return verifyAuditChain(tx, tenantId, deps.auditKey, start);
        // One snapshot (read only): a retention run committing midway cannot fake a break.
      },
      { isolation: 'repeatable read' },
    );
    const last = head ?? (result.valid ? from : undefined);
    const checkpoint = last
      ? {
          seq: last.seq,
          digest: last.digest,
          signature: signCheckpoint(deps.auditKey, { tenantId, ...last }),
        }
      : undefined;
    return c.json(checkpoint ? { ...result, checkpoint } : result, 200);
  });
}

/**
 * Seals the tenant's pending runtime entries (audit_pending, migration 0030) before a read of its
 * chain, so an operator sees every entry committed so far: the worker's sealer would link them
 * within its interval anyway. Each batch is its own short transaction; waits for a sealer or an
 * admin append holding the chain. Best effort: a failure to seal is logged and the read goes on
 * (what stays pending is reported as pending, or refused).
 */
async function sealFirst(deps: AppDeps, tenantId: string): Promise<void> {
  try {
    await sealAudit(deps.sql, tenantId, { role: 'tenant_admin_writer', wait: true });
  } catch (err) {
    deps.log.warn(
      { tenant_id: tenantId, err: String(err) },
      'audit sealing before a read failed; reading what is sealed',
    );
  }
}

function checkpointHolds(
  auditKey: string,
  tenantId: string,
  c: { seq: number; digest: string; signature: string },
  sign: typeof signCheckpoint = signCheckpoint,
): boolean {
  const expected = Buffer.from(sign(auditKey, { tenantId, ...c }), 'hex');
  const given = Buffer.from(c.signature, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
