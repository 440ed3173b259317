import type { PendingQuery, Row, TransactionSql } from 'postgres';
import type { ExecutionPlan } from '../../workflows/shared';
import { jsonb } from '../json';

// tool_invocation: the seeds' per-call state machine. Every transition is a compare-and-set on the
// current status and, once a row has been claimed, on its fencing token: an attempt whose claim
// was superseded changes nothing.

export type ToolInvocationStatus =
  | 'prepared'
  | 'dispatching'
  | 'accepted'
  | 'rejected'
  | 'unknown'
  | 'reconciling'
  | 'manual'
  | 'failed'
  | 'awaiting_approval'
  | 'refused';

export interface ToolInvocationRow {
  invocation_id: string;
  event_id: string;
  session_id: string;
  tool_name: string;
  tool_capability_digest: string;
  idempotency_key: string;
  request_digest: string;
  arguments: Record<string, unknown>;
  status: ToolInvocationStatus;
  attempts: number;
  claim_owner: string | null;
  fencing_token: number;
  /** the provider's answer: the receipt when accepted, the error body when rejected */
  provider_receipt: unknown;
  provider_receipt_ref: string | null;
  last_error: string | null;
  requires_approval: boolean;
  approval_deadline: Date | null;
  /** an operator's resolution: { outcome, reason, provider_receipt? } */
  resolution: Record<string, unknown> | null;
  dispatched_at: Date | null;
  /** computed: a claim's lease is still running */
  lease_live: boolean;
  /** computed: seconds since the last dispatch (null before the first) */
  dispatch_age_s: number | null;
}

/** An execution's recorded tool calls in transcript order (model turn, position in it). */
export async function invocationsOfEvent(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<
  (ToolInvocationRow & { step: number | null; call_ordinal: number | null; model_call_id: string | null })[]
> {
  return tx`
    select ${columns(tx)}, step, call_ordinal, model_call_id from tool_invocation
    where tenant_id = ${tenantId} and event_id = ${eventId}
    order by step, call_ordinal, created_at`;
}

function columns(tx: TransactionSql) {
  return tx`
    invocation_id, event_id, session_id, tool_name, tool_capability_digest, idempotency_key,
    request_digest, arguments, status, attempts, claim_owner, fencing_token, provider_receipt,
    provider_receipt_ref, last_error, requires_approval, approval_deadline, resolution, dispatched_at,
    coalesce(lease_expires_at > now(), false) as lease_live,
    extract(epoch from now() - dispatched_at)::float8 as dispatch_age_s`;
}

export interface PinnedRevision {
  content_digest: string;
  model_profile_id: string;
  system_prompt: string;
  tools: unknown;
  scripted: unknown;
  limits: Record<string, unknown>;
}

/** The revision an execution plan pins (revisions are immutable). */
export async function loadPinnedRevision(
  tx: TransactionSql,
  tenantId: string,
  plan: Pick<ExecutionPlan, 'app'>,
): Promise<PinnedRevision | null> {
  const rows = await tx<PinnedRevision[]>`
    select content_digest, model_profile_id, system_prompt, tools, scripted, limits
    from agent_app_revision
    where tenant_id = ${tenantId} and app_id = ${plan.app.id} and revision = ${plan.app.revision}`;
  return rows[0] ?? null;
}

export interface NewInvocation {
  tenantId: string;
  invocationId: string;
  eventId: string;
  /** the model turn and the call's position in it; the model's own id of the call */
  step: number;
  callOrdinal: number;
  modelCallId: string | null;
  toolName: string;
  capabilityDigest: string;
  idempotencyKey: string;
  requestDigest: string;
  arguments: Record<string, unknown>;
  status: 'prepared' | 'awaiting_approval' | 'refused';
  requiresApproval: boolean;
  approvalTimeoutS: number | null;
  lastError: string | null;
  providerReceipt: unknown;
}

/**
 * Records a tool call once per (event, idempotency key), only while its message is running.
 * Returns the row and whether this call created it; null when there is no row and the message is
 * not running (the execution moved on: nothing may be prepared for it any more).
 */
export async function insertInvocation(
  tx: TransactionSql,
  p: NewInvocation,
): Promise<{ row: ToolInvocationRow; created: boolean } | null> {
  const deadline =
    p.status === 'awaiting_approval'
      ? tx`now() + make_interval(secs => ${p.approvalTimeoutS ?? 3600})`
      : null;
  const created = await tx<ToolInvocationRow[]>`
    insert into tool_invocation (tenant_id, invocation_id, event_id, session_id, tool_name,
                                 tool_capability_digest, idempotency_key, request_digest, arguments,
                                 status, requires_approval, approval_deadline, last_error,
                                 provider_receipt, resolved_at, step, call_ordinal, model_call_id)
    select ${p.tenantId}, ${p.invocationId}, e.event_id, e.session_id, ${p.toolName}, ${p.capabilityDigest},
           ${p.idempotencyKey}, ${p.requestDigest}, ${jsonb(tx, p.arguments)}, ${p.status},
           ${p.requiresApproval}, ${deadline}, ${p.lastError},
           ${p.providerReceipt === undefined ? null : jsonb(tx, p.providerReceipt)},
           ${p.status === 'refused' ? tx`now()` : null}, ${p.step}, ${p.callOrdinal}, ${p.modelCallId}
    from message_event e
    where e.tenant_id = ${p.tenantId} and e.event_id = ${p.eventId} and e.status = 'running'
    on conflict (tenant_id, event_id, idempotency_key) do nothing
    returning ${columns(tx)}`;
  if (created[0]) return { row: created[0], created: true };
  const existing = await invocationByKey(tx, p.tenantId, p.eventId, p.idempotencyKey);
  return existing ? { row: existing, created: false } : null;
}

export async function invocationByKey(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
  idempotencyKey: string,
): Promise<ToolInvocationRow | null> {
  const rows = await tx<ToolInvocationRow[]>`
    select ${columns(tx)} from tool_invocation
    where tenant_id = ${tenantId} and event_id = ${eventId} and idempotency_key = ${idempotencyKey}`;
  return rows[0] ?? null;
}

export async function invocationById(
  tx: TransactionSql,
  tenantId: string,
  invocationId: string,
): Promise<ToolInvocationRow | null> {
  const rows = await tx<ToolInvocationRow[]>`
    select ${columns(tx)} from tool_invocation
    where tenant_id = ${tenantId} and invocation_id = ${invocationId}`;
  return rows[0] ?? null;
}

/**
 * prepared → dispatching under a new fence (owner, claim token, lease, fencing token + 1).
 * Returns null when the row is not prepared (another attempt claimed it first).
 */
export async function claimDispatch(
  tx: TransactionSql,
  p: { tenantId: string; invocationId: string; owner: string; leaseSeconds: number },
): Promise<ToolInvocationRow | null> {
  const rows = await tx<ToolInvocationRow[]>`
    update tool_invocation
    set status = 'dispatching', fencing_token = fencing_token + 1, attempts = attempts + 1,
        claim_owner = ${p.owner}, claim_token = gen_random_uuid()::text,
        lease_expires_at = now() + make_interval(secs => ${p.leaseSeconds}),
        dispatched_at = now(), updated_at = now()
    where tenant_id = ${p.tenantId} and invocation_id = ${p.invocationId} and status = 'prepared'
    returning ${columns(tx)}`;
  return rows[0] ?? null;
}

/**
 * Takes over an unresolved outcome for reconciliation under a new fence: `unknown`, or a
 * `dispatching`/`reconciling` row whose holder's lease expired (it crashed or hung).
 */
export async function claimReconcile(
  tx: TransactionSql,
  p: { tenantId: string; invocationId: string; owner: string; leaseSeconds: number },
): Promise<ToolInvocationRow | null> {
  const rows = await tx<ToolInvocationRow[]>`
    update tool_invocation
    set status = 'reconciling', fencing_token = fencing_token + 1,
        claim_owner = ${p.owner}, claim_token = gen_random_uuid()::text,
        lease_expires_at = now() + make_interval(secs => ${p.leaseSeconds}),
        last_error = case when status = 'dispatching' then coalesce(last_error, 'dispatch_lease_expired')
                          else last_error end,
        updated_at = now()
    where tenant_id = ${p.tenantId} and invocation_id = ${p.invocationId}
      and (status = 'unknown'
           or (status in ('dispatching', 'reconciling')
               and (lease_expires_at is null or lease_expires_at <= now())))
    returning ${columns(tx)}`;
  return rows[0] ?? null;
}

export interface InvocationChange {
  to: ToolInvocationStatus;
  /** undefined leaves the column unchanged */
  lastError?: string | null;
  providerReceipt?: unknown;
  providerReceiptRef?: string | null;
  /** sets resolved_at = now() */
  resolved?: boolean;
  /** sets reconciled_at = now() */
  reconciled?: boolean;
  /** ends the claim: lease and owner cleared (a later attempt may claim at once) */
  release?: boolean;
}

/**
 * Compare-and-set on (status ∈ from, fencing_token): the one way an attempt that holds a claim
 * moves its row. Returns the new row, or null when the fence or status no longer match.
 */
export async function transitionInvocation(
  tx: TransactionSql,
  p: {
    tenantId: string;
    invocationId: string;
    from: readonly ToolInvocationStatus[];
    fencingToken: number;
    change: InvocationChange;
  },
): Promise<ToolInvocationRow | null> {
  const c = p.change;
  const sets: PendingQuery<Row[]>[] = [tx`status = ${c.to}`, tx`updated_at = now()`];
  if (c.lastError !== undefined) sets.push(tx`last_error = ${c.lastError}`);
  if (c.providerReceipt !== undefined) {
    sets.push(tx`provider_receipt = ${c.providerReceipt === null ? null : jsonb(tx, c.providerReceipt)}`);
  }
  if (c.providerReceiptRef !== undefined) sets.push(tx`provider_receipt_ref = ${c.providerReceiptRef}`);
  if (c.resolved) sets.push(tx`resolved_at = now()`);
  if (c.reconciled) sets.push(tx`reconciled_at = now()`);
  if (c.release) sets.push(tx`lease_expires_at = null`, tx`claim_owner = null`, tx`claim_token = null`);
  const set = sets.reduce((a, b) => tx`${a}, ${b}`);
  const rows = await tx<ToolInvocationRow[]>`
    update tool_invocation set ${set}
    where tenant_id = ${p.tenantId} and invocation_id = ${p.invocationId}
      and status in ${tx(p.from as ToolInvocationStatus[])} and fencing_token = ${p.fencingToken}
    returning ${columns(tx)}`;
  return rows[0] ?? null;
}

/**
 * awaiting_approval → failed ('approval_timeout'). Not fenced by token: the operator's decision
 * and the workflow's timer race only on the status, and whichever lands first wins.
 */
export async function expireAwaitingApproval(
  tx: TransactionSql,
  tenantId: string,
  invocationId: string,
): Promise<ToolInvocationRow | null> {
  const rows = await tx<ToolInvocationRow[]>`
    update tool_invocation
    set status = 'failed', last_error = 'approval_timeout', resolved_at = now(), updated_at = now()
    where tenant_id = ${tenantId} and invocation_id = ${invocationId} and status = 'awaiting_approval'
    returning ${columns(tx)}`;
  return rows[0] ?? null;
}
