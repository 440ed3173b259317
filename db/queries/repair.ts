import type { TransactionSql } from 'postgres';
import type { Channel, MessageStatus } from '../../workflows/shared';

// Repair of messages whose workflow ended abnormally (migration 0020). The sweeper scans across
// tenants through a SECURITY DEFINER function (no tenant is known before the scan); every change
// after that runs in a transaction of the message's own tenant.

export interface RepairCandidate {
  tenant_id: string;
  event_id: string;
  workflow_id: string | null;
  status: MessageStatus;
  channel: Channel;
  created_at: Date;
  /** a workflow run has started for it (workflow_started_at) */
  started: boolean;
  repair_count: number;
  /** seconds since its execution lease expired (negative: still live; null: none) */
  lease_expired_s: number | null;
}

/** Unfinished messages whose workflow may be gone: never started, or a stale head of its session. */
export async function listRepairCandidates(
  tx: TransactionSql,
  p: { unstartedSeconds: number; staleSeconds: number; limit: number; tenantIds: string[] | null },
): Promise<RepairCandidate[]> {
  return tx<RepairCandidate[]>`
    select * from list_repair_candidates(${p.unstartedSeconds}::int, ${p.staleSeconds}::int, ${p.limit}::int,
                                         ${p.tenantIds}::text[])`;
}

/** The sweeper found these messages' workflows alive: checked again only after the stale period. */
export async function markSweepChecked(
  tx: TransactionSql,
  tenantId: string,
  eventIds: string[],
): Promise<void> {
  await tx`
    update message_event set sweep_checked_at = now()
    where tenant_id = ${tenantId} and event_id in ${tx(eventIds)}`;
}

/** An operator's repair or retry is never refused for the number of earlier repairs. */
export const OPERATOR_MAX_REPAIRS = 1_000_000;

export type RepairBegin =
  | { kind: 'not_found' }
  | { kind: 'terminal'; status: MessageStatus }
  | { kind: 'changed'; workflow_id: string | null }
  | { kind: 'later_pending' | 'earlier_pending'; event_id: string; event_seq: number; status: MessageStatus }
  | { kind: 'dead_lettered'; dead_letter_id: string; wake: string[] }
  | { kind: 'repair'; workflow_id: string; repair: number; status: MessageStatus; channel: Channel };

/**
 * Hands a message to a repair run under a new fence and workflow id, or dead-letters it past the
 * repair limit (message_repair_begin); `reopen`: an operator's retry of a failed message.
 */
export async function repairBegin(
  tx: TransactionSql,
  p: {
    tenantId: string;
    eventId: string;
    expectedWorkflowId: string | null;
    reasonClass: string;
    maxRepairs: number;
    reopen: boolean;
  },
): Promise<RepairBegin> {
  const [row] = await tx<{ r: RepairBegin }[]>`
    select message_repair_begin(${p.tenantId}, ${p.eventId}, ${p.expectedWorkflowId}, ${p.reasonClass},
                                ${p.maxRepairs}::int, ${p.reopen}) as r`;
  return row!.r;
}

/** Whom a finished (or failed) message frees: the session's next unfinished message. */
export async function wakeListOf(tx: TransactionSql, tenantId: string, eventId: string): Promise<string[]> {
  const [row] = await tx<{ r: string[] }[]>`select execution_wake_list(${tenantId}, ${eventId}) as r`;
  return row!.r;
}

/**
 * An operator ends a message: failed with outcome `operator_failed` and the operator's reason,
 * under a new fence (a late write of its old run is refused); its permit is released with the
 * status change. Returns the previous status, or null when it was already terminal or missing.
 */
export async function operatorFail(
  tx: TransactionSql,
  p: { tenantId: string; eventId: string; reason: string },
): Promise<MessageStatus | null> {
  const [row] = await tx<{ previous: MessageStatus }[]>`
    update message_event e
    set status = 'failed', outcome = 'operator_failed', failure_reason = ${p.reason},
        execution_fencing_token = e.execution_fencing_token + 1, permit_requested_at = null, updated_at = now()
    from message_event old
    where e.tenant_id = ${p.tenantId} and e.event_id = ${p.eventId}
      and old.tenant_id = e.tenant_id and old.event_id = e.event_id
      and e.status not in ('replied', 'failed')
    returning old.status as previous`;
  return row?.previous ?? null;
}

/** The tenant's permit waiters in arrival order (to wake when a permit frees). */
export async function permitWaiters(tx: TransactionSql, tenantId: string, limit = 2): Promise<string[]> {
  const [row] = await tx<{ r: string[] }[]>`select permit_waiters(${tenantId}, ${limit}) as r`;
  return row!.r;
}

/** Gives an execution's permit back while it parks on an operator; the waiters to wake. */
export async function permitRelease(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<string[]> {
  const [row] = await tx<{ r: string[] }[]>`select permit_release(${tenantId}, ${eventId}) as r`;
  return row!.r;
}
