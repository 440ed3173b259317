import type { TransactionSql } from 'postgres';
import { enqueueAudit, type PendingAuditRecord } from '../db/queries/audit';
import { activeTraceId } from '../telemetry/trace-id';
import type { Channel, ExecutionPlan } from '../workflows/shared';

// Runtime decisions (model turns, tool decisions, budget refusals) are recorded for the tenant's
// audit hash chain in the same transaction as the state change they describe, so a fenced-out or
// rolled-back write leaves no audit entry behind. They are enqueued (audit_pending), not appended:
// the transaction never takes the chain's lock, and the sealer links them into the chain after
// commit (runtime/audit-sealer.ts). Ids, classes and numbers only: never bodies or secrets.

/** Who and where: fixed for one execution. */
export interface RuntimeAuditContext {
  tenantId: string;
  /** the worker attempt that decided (activities/owner.ts) */
  actorId: string;
  sessionId: string;
  bindingId: string;
  channel: Channel;
  eventSeq: number;
  agentAppId: string;
  revision: number;
  modelProfileId: string;
  /** the message's trace, or else the activity's (null when neither is traced) */
  traceId: string | null;
}

/** The context of one execution's message under its plan. */
export function runtimeAuditContext(
  tenantId: string,
  actorId: string,
  event: {
    session_id: string;
    binding_id: string;
    channel: Channel;
    event_seq: number;
    trace_id: string | null;
  },
  plan: Pick<ExecutionPlan, 'app' | 'modelProfile'>,
): RuntimeAuditContext {
  return {
    // The webhook's trace continues into the workflow, so both agree when both sides trace; the
    // message's wins so that a repair run's entries join the message's trace, not the sweeper's.
    traceId: event.trace_id ?? activeTraceId(),
    tenantId,
    actorId,
    sessionId: event.session_id,
    bindingId: event.binding_id,
    channel: event.channel,
    eventSeq: event.event_seq,
    agentAppId: plan.app.id,
    revision: plan.app.revision,
    modelProfileId: plan.modelProfile.id,
  };
}

export interface RuntimeAuditEntry {
  /** e.g. 'model.turn', 'tool.invocation' */
  action: string;
  decision: string;
  toolName?: string | null;
  latencyMs?: number | null;
  costMinor?: number | null;
  errorType?: string | null;
  reason?: string | null;
  details?: Record<string, unknown>;
}

export function appendRuntimeAudit(
  tx: TransactionSql,
  ctx: RuntimeAuditContext,
  entry: RuntimeAuditEntry,
): Promise<PendingAuditRecord> {
  return enqueueAudit(tx, {
    tenantId: ctx.tenantId,
    actorType: 'worker',
    actorId: ctx.actorId,
    action: entry.action,
    decision: entry.decision,
    reason: entry.reason ?? null,
    sessionId: ctx.sessionId,
    bindingId: ctx.bindingId,
    channel: ctx.channel,
    eventSeq: ctx.eventSeq,
    agentAppId: ctx.agentAppId,
    revision: ctx.revision,
    modelProfileId: ctx.modelProfileId,
    traceId: ctx.traceId,
    toolName: entry.toolName ?? null,
    latencyMs: entry.latencyMs === undefined || entry.latencyMs === null ? null : Math.round(entry.latencyMs),
    costMinor: entry.costMinor ?? null,
    errorType: entry.errorType ?? null,
    details: entry.details ?? {},
  });
}
