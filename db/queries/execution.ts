import type { TransactionSql } from 'postgres';
import type { InboundMessage } from '../../channels/inbound';
import type { Channel, ExecutionPlan, MessageStatus } from '../../workflows/shared';

// Execution reads and writes used inside the application's own transactions (model turns, tool
// steps, the reconciler). The hot-path steps (start, commit, finish) are single statements in
// steps.ts.

export interface TenantSnapshot {
  tenant_id: string;
  status: 'active' | 'suspended' | 'disabled';
  version: number;
  max_concurrent_executions: number | null;
  monthly_token_budget: number | null;
  monthly_spend_limit_minor: number | null;
  billing_currency: string | null;
  default_backend_profile_id: string | null;
}

/** The worker has no read access to `tenant`; this control-plane function returns one tenant's snapshot. */
export async function tenantSnapshot(tx: TransactionSql, tenantId: string): Promise<TenantSnapshot | null> {
  const rows = await tx<TenantSnapshot[]>`select * from tenant_runtime_snapshot(${tenantId})`;
  return rows[0] ?? null;
}

export async function markFailed(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
  outcome: string,
  reason: string,
): Promise<MessageStatus | null> {
  const rows = await tx<{ status: MessageStatus }[]>`
    update message_event
    set status = 'failed', outcome = coalesce(outcome, ${outcome}), failure_reason = ${reason}, updated_at = now()
    where tenant_id = ${tenantId} and event_id = ${eventId} and status not in ('replied', 'failed')
    returning status`;
  return rows[0]?.status ?? null;
}

/**
 * Claims the execution for one activity attempt: a new, higher fencing token. Every later write of
 * this attempt is conditioned on it, so an older attempt still running (a zombie after a
 * StartToClose timeout) can no longer write.
 */
export async function claimExecutionFence(
  tx: TransactionSql,
  p: { tenantId: string; eventId: string; owner: string; leaseSeconds: number },
): Promise<{
  fencing_token: number;
  status: MessageStatus;
  payload: InboundMessage;
  session_id: string;
} | null> {
  const rows = await tx<
    { fencing_token: number; status: MessageStatus; payload: InboundMessage; session_id: string }[]
  >`
    update message_event
    set execution_fencing_token = execution_fencing_token + 1,
        execution_owner = ${p.owner},
        execution_claim_token = gen_random_uuid()::text,
        execution_lease_expires_at = now() + make_interval(secs => ${p.leaseSeconds}),
        execution_heartbeat_at = now(),
        execution_attempts = execution_attempts + 1,
        updated_at = now()
    where tenant_id = ${p.tenantId} and event_id = ${p.eventId} and status = 'running'
    returning execution_fencing_token as fencing_token, status, payload, session_id`;
  return rows[0] ?? null;
}

/** What a step of an execution (model turn, tool call, commit, audit) needs to know about its message. */
export interface EventContext {
  status: MessageStatus;
  session_id: string;
  binding_id: string;
  event_seq: number;
  channel: Channel;
  payload: InboundMessage;
  execution_plan: ExecutionPlan | null;
  /** the run that works the message now (a repair run's after a repair) */
  workflow_id: string | null;
  /** the webhook's trace (null when ingress traced nothing): the message's audit entries carry it */
  trace_id: string | null;
}

export async function eventContext(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<EventContext | null> {
  const rows = await tx<EventContext[]>`
    select e.status, e.session_id, e.binding_id, e.event_seq, b.channel, e.payload, e.execution_plan,
           e.workflow_id, e.trace_id
    from message_event e join channel_binding b on b.tenant_id = e.tenant_id and b.binding_id = e.binding_id
    where e.tenant_id = ${tenantId} and e.event_id = ${eventId}`;
  return rows[0] ?? null;
}

/**
 * Extends a running execution's lease (never shortens it): the execution still holds its
 * concurrency permit while it works or waits for an operator.
 */
export async function extendExecutionLease(
  tx: TransactionSql,
  p: { tenantId: string; eventId: string; seconds: number },
) {
  await tx`
    update message_event
    set execution_lease_expires_at = greatest(execution_lease_expires_at, now() + make_interval(secs => ${p.seconds})),
        execution_heartbeat_at = now()
    where tenant_id = ${p.tenantId} and event_id = ${p.eventId} and status = 'running'`;
}

/** The workflow that works the message now (message_event.workflow_id; a repair run's after a repair). */
export async function messageWorkflowOf(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<string | null> {
  const [row] = await tx<{ workflow_id: string | null }[]>`
    select workflow_id from message_event where tenant_id = ${tenantId} and event_id = ${eventId}`;
  return row?.workflow_id ?? null;
}
