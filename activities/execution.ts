import { ApplicationFailure } from '@temporalio/activity';
import { replyTargetOf } from '../channels/inbound';
import { CHANNEL_LIMITS, segmentText } from '../channels/segment';
import { appendAudit } from '../db/queries/audit';
import {
  activeBackendProfile,
  claimExecutionFence,
  commitReply as commitReplyRows,
  eventContext,
  insertTurnMemory,
  listSegmentIds,
  lockEventForStart,
  markFailed,
  markReplied,
  markRunning,
  markWorkflowStarted,
  readPinnedReply,
  sessionBlocker,
  sessionSuccessor,
  tenantHasPermit,
  tenantSnapshot,
  tenantWaiters,
} from '../db/queries/execution';
import { withTenantTx } from '../db/tx';
import { sha256Hex } from '../lib/digest';
import type { ExecutionPlan, MessageStatus } from '../workflows/shared';
import type { ActivityDeps } from './deps';
import { FENCED_OUT } from './failures';
import { parseLimits } from './model';
import { attemptOwner } from './owner';

export type StartResult =
  | {
      kind: 'execute';
      plan: ExecutionPlan | null;
      fallback: Fallback | null;
      /** A reply is already committed (completed / reply_pending): deliver it, never re-run the model. */
      committed: boolean;
      /** The tenant caps concurrent executions: freeing this permit should wake a waiter. */
      permitLimited: boolean;
      /** The revision's limits.max_steps (model turns), or the default. */
      maxSteps: number;
    }
  /** Not yet: an earlier message of the session is unfinished, or the tenant has no free permit. */
  | { kind: 'wait'; reason: 'session_order' | 'tenant_concurrency' }
  | { kind: 'finished'; status: MessageStatus; outcome: string | null; wake: string[] };

export interface Fallback {
  text: string;
  outcome: string;
}

export interface ReplyCommitted {
  status: MessageStatus;
  outcome: string | null;
  replyId: string;
  segmentIds: string[];
  /** Workflows to wake now that this execution's concurrency permit is free. */
  wake: string[];
}

const LEASE_SECONDS = 120;
/** Outcomes whose fixed fallback reply is delivered, but whose message still ends `failed`. */
const FAILED_WITH_FALLBACK = new Set(['budget_exhausted', 'model_failed']);

export function executionActivities(deps: ActivityDeps) {
  const asApp = (tenantId: string) => ({ role: 'tenant_app_writer' as const, tenantId });

  return {
    /**
     * received → running, once the message may run: every earlier message of its session has
     * finished (per-session FIFO) and the tenant has a free concurrency permit. Applies the tenant
     * gates and fixes the ExecutionPlan (ids, versions, digests; no secrets). Idempotent.
     */
    async startExecution(input: { tenantId: string; eventId: string }): Promise<StartResult> {
      return withTenantTx(deps.sql, asApp(input.tenantId), async (tx) => {
        const ev = await lockEventForStart(tx, input.tenantId, input.eventId);
        if (!ev) throw ApplicationFailure.nonRetryable(`message ${input.eventId} not found`, 'NotFound');
        // The workflow runs: the start reconciler no longer needs to start this message.
        if (ev.workflow_started_at === null) await markWorkflowStarted(tx, input.tenantId, input.eventId);
        if (ev.status === 'replied' || ev.status === 'failed') {
          return { kind: 'finished', status: ev.status, outcome: ev.outcome, wake: [] };
        }
        if (ev.status !== 'received') {
          return {
            kind: 'execute',
            plan: ev.execution_plan,
            fallback: fallbackFor(ev.outcome, deps),
            committed: ev.status === 'completed' || ev.status === 'reply_pending',
            permitLimited: true,
            maxSteps: maxStepsOf(ev.revision_limits),
          };
        }
        if (await sessionBlocker(tx, input.tenantId, input.eventId))
          return { kind: 'wait', reason: 'session_order' };

        const finish = async (outcome: string, reason: string): Promise<StartResult> => {
          await markFailed(tx, input.tenantId, input.eventId, outcome, reason);
          await auditTerminal(
            tx,
            input.tenantId,
            input.eventId,
            'failed',
            outcome,
            attemptOwner(deps.workerId),
          );
          return {
            kind: 'finished',
            status: 'failed',
            outcome,
            wake: await wakeList(tx, input.tenantId, input.eventId),
          };
        };
        if (ev.kind !== 'text')
          return finish('unsupported_message', 'message type is recorded but not executed');
        const tenant = await tenantSnapshot(tx, input.tenantId);
        if (!tenant || tenant.status === 'disabled') return finish('tenant_disabled', 'tenant is disabled');
        const permitLimited = tenant.max_concurrent_executions !== null;
        if (!(await tenantHasPermit(tx, input.tenantId, tenant.max_concurrent_executions))) {
          return { kind: 'wait', reason: 'tenant_concurrency' };
        }
        const running = {
          tenantId: input.tenantId,
          eventId: input.eventId,
          owner: attemptOwner(deps.workerId),
          leaseSeconds: LEASE_SECONDS,
        };
        if (tenant.status === 'suspended') {
          await markRunning(tx, { ...running, plan: null, outcome: 'tenant_suspended' });
          return {
            kind: 'execute',
            plan: null,
            fallback: fallbackFor('tenant_suspended', deps),
            committed: false,
            permitLimited,
            maxSteps: DEFAULT_MAX_STEPS,
          };
        }
        const plan = await resolvePlan(tx, input.tenantId, ev, tenant);
        if (typeof plan === 'string') return finish('configuration_error', plan);
        await markRunning(tx, { ...running, plan, outcome: null });
        return {
          kind: 'execute',
          plan,
          fallback: null,
          committed: false,
          permitLimited,
          maxSteps: maxStepsOf(ev.revision_limits),
        };
      });
    },

    /**
     * Seeds' commit order, in one transaction under a fence claimed by this attempt: durable memory
     * of the turn → `completed` pinning reply_id / reply_cache_ref / segment_count → every outbox
     * segment with the completed → reply_pending CAS. Idempotent: after a commit it returns the
     * pinned reply, rebuilt from the pinned values, never by running the model again.
     */
    async commitReply(input: {
      tenantId: string;
      eventId: string;
      text: string;
      outcome: string | null;
      /** Wake the tenant's waiting messages (only when the tenant caps concurrency). */
      wakeWaiters?: boolean;
    }): Promise<ReplyCommitted> {
      const owner = attemptOwner(deps.workerId);
      return withTenantTx(deps.sql, asApp(input.tenantId), async (tx) => {
        const fence = await claimExecutionFence(tx, {
          tenantId: input.tenantId,
          eventId: input.eventId,
          owner,
          leaseSeconds: LEASE_SECONDS,
        });
        if (!fence) {
          const pinned = await readPinnedReply(tx, input.tenantId, input.eventId);
          if (!pinned?.reply_id)
            throw ApplicationFailure.nonRetryable(
              `execution is ${pinned?.status ?? 'missing'} without a pinned reply`,
              FENCED_OUT,
            );
          const segmentIds = await listSegmentIds(tx, input.tenantId, pinned.reply_id);
          return {
            status: pinned.status,
            outcome: pinned.outcome,
            replyId: pinned.reply_id,
            segmentIds,
            wake: [],
          };
        }
        const message = fence.payload;
        // Whitespace-only pieces (a long run of blank lines at a cut) carry nothing a user would see.
        const parts = segmentText(input.text, CHANNEL_LIMITS[message.channel]).filter((p) => p.trim() !== '');
        const outcome = input.outcome ?? (parts.length === 0 ? 'empty_reply' : null);
        const key = input.eventId.slice(4);
        const replyId = `rep_${key}`;
        const segments = parts.map((content, i) => ({
          segmentId: `seg_${key}_${i}`,
          idempotencyKey: sha256Hex(`${replyId}/${i}`),
          content,
        }));
        await insertTurnMemory(tx, {
          tenantId: input.tenantId,
          eventId: input.eventId,
          sessionId: fence.session_id,
          userId: message.senderId,
          userText: message.text ?? '',
          replyText: input.text,
        });
        const ok = await commitReplyRows(tx, {
          tenantId: input.tenantId,
          eventId: input.eventId,
          fencingToken: fence.fencing_token,
          replyId,
          content: input.text,
          contentDigest: sha256Hex(input.text),
          outcome,
          channel: message.channel,
          target: replyTargetOf(message),
          segments,
        });
        if (!ok) throw ApplicationFailure.nonRetryable('a newer attempt owns this execution', FENCED_OUT);
        return {
          status: segments.length === 0 ? 'replied' : 'reply_pending',
          outcome,
          replyId,
          segmentIds: segments.map((s) => s.segmentId),
          wake: input.wakeWaiters ? await tenantWaiters(tx, input.tenantId, 3) : [],
        };
      });
    },

    /**
     * Terminal transition: `replied` only when every segment is sent (or `failed` for an outcome
     * whose fallback was delivered), else `failed` with the unsent segments kept. Audited in the same
     * transaction. Returns the workflows to wake: the session's next message.
     */
    async finishMessage(input: {
      tenantId: string;
      eventId: string;
      failure?: { outcome: string; reason: string };
    }): Promise<{ status: MessageStatus; wake: string[] }> {
      return withTenantTx(deps.sql, asApp(input.tenantId), async (tx) => {
        // Idempotent: a retry after the commit (local activities run at least once) finds the
        // terminal state and only recomputes whom to wake; no second transition, no second audit.
        const [current] = await tx<{ status: MessageStatus; outcome: string | null }[]>`
          select status, outcome from message_event
          where tenant_id = ${input.tenantId} and event_id = ${input.eventId} for update`;
        if (!current) throw ApplicationFailure.nonRetryable(`message ${input.eventId} not found`, 'NotFound');
        if (current.status === 'replied' || current.status === 'failed') {
          return { status: current.status, wake: await wakeList(tx, input.tenantId, input.eventId) };
        }
        let status: MessageStatus;
        let outcome = current.outcome;
        if (input.failure) {
          outcome = input.failure.outcome;
          status =
            (await markFailed(
              tx,
              input.tenantId,
              input.eventId,
              input.failure.outcome,
              input.failure.reason,
            )) ?? 'failed';
        } else {
          const marked = await markReplied(tx, input.tenantId, input.eventId);
          if (marked !== 'replied') {
            throw ApplicationFailure.nonRetryable(
              `message ${input.eventId} is ${marked}: not every segment is sent`,
              'NotAllSent',
            );
          }
          status = marked;
          if (outcome && FAILED_WITH_FALLBACK.has(outcome)) {
            await tx`update message_event set status = 'failed', failure_reason = ${'fallback reply delivered'}, updated_at = now()
                     where tenant_id = ${input.tenantId} and event_id = ${input.eventId} and status = 'replied'`;
            status = 'failed';
          }
        }
        await auditTerminal(tx, input.tenantId, input.eventId, status, outcome, attemptOwner(deps.workerId));
        if (status === 'replied') await rebuildSessionSummary(tx, input.tenantId, input.eventId);
        return { status, wake: await wakeList(tx, input.tenantId, input.eventId) };
      });
    },
  };
}

/**
 * Rebuilds the session summary from durable memory once the reply is out (seeds: after memory,
 * never before). The base_event_seq CAS keeps an older rebuild from overwriting a newer one.
 */
async function rebuildSessionSummary(
  tx: Parameters<typeof eventContext>[0],
  tenantId: string,
  eventId: string,
) {
  const ctx = await eventContext(tx, tenantId, eventId);
  if (!ctx) return;
  const turns = await tx<{ role: string; content: string }[]>`
    select m.role, m.content from memory_entry m
    join message_event e on e.tenant_id = m.tenant_id and e.event_id = m.source_event_id
    where m.tenant_id = ${tenantId} and m.session_id = ${ctx.session_id} and e.event_seq <= ${ctx.event_seq}
    order by e.event_seq desc, m.role desc limit 40`;
  const content = summarize(turns.reverse());
  await tx`
    insert into session_summary (tenant_id, session_id, base_event_seq, content, content_digest)
    values (${tenantId}, ${ctx.session_id}, ${ctx.event_seq}, ${content}, ${sha256Hex(content)})
    on conflict (tenant_id, session_id) do update
      set content = excluded.content, content_digest = excluded.content_digest, base_event_seq = excluded.base_event_seq,
          summary_version = session_summary.summary_version + 1, updated_at = now()
      where session_summary.base_event_seq < excluded.base_event_seq`;
}

export const DEFAULT_MAX_STEPS = 8;

function maxStepsOf(limits: unknown): number {
  return parseLimits(limits).max_steps ?? DEFAULT_MAX_STEPS;
}

/** A bounded, deterministic digest of recent turns (the model's context is this plus recent events). */
function summarize(turns: { role: string; content: string }[]): string {
  const lines = turns.map((t) => `${t.role}: ${t.content.replace(/\s+/g, ' ').slice(0, 300)}`);
  let out = lines.join('\n');
  while (out.length > 4000 && lines.length > 1) {
    lines.shift();
    out = lines.join('\n');
  }
  return out;
}

async function wakeList(tx: Parameters<typeof sessionSuccessor>[0], tenantId: string, eventId: string) {
  const next = await sessionSuccessor(tx, tenantId, eventId);
  return next ? [next] : [];
}

async function auditTerminal(
  tx: Parameters<typeof eventContext>[0],
  tenantId: string,
  eventId: string,
  status: MessageStatus,
  outcome: string | null,
  actorId: string,
) {
  const ctx = await eventContext(tx, tenantId, eventId);
  await appendAudit(tx, {
    tenantId,
    action: 'message.finished',
    actorType: 'worker',
    actorId,
    decision: status,
    reason: outcome,
    bindingId: ctx?.binding_id ?? null,
    channel: ctx?.channel ?? null,
    userId: ctx?.payload.senderId ?? null,
    sessionId: ctx?.session_id ?? null,
    agentAppId: ctx?.execution_plan?.app.id ?? null,
    revision: ctx?.execution_plan?.app.revision ?? null,
    modelProfileId: ctx?.execution_plan?.modelProfile.id ?? null,
    eventSeq: ctx?.event_seq ?? null,
    errorType: status === 'failed' ? outcome : null,
    details: { event_id: eventId },
  });
}

function fallbackFor(outcome: string | null, deps: ActivityDeps): Fallback | null {
  return outcome === 'tenant_suspended' ? { text: deps.suspendedReply, outcome } : null;
}

async function resolvePlan(
  tx: Parameters<typeof activeBackendProfile>[0],
  tenantId: string,
  ev: NonNullable<Awaited<ReturnType<typeof lockEventForStart>>>,
  tenant: { version: number; default_backend_profile_id: string | null },
): Promise<ExecutionPlan | string> {
  if (ev.published_revision === null || !ev.revision_digest) return 'the app has no published revision';
  if (!ev.model_profile_id || ev.model_profile_status !== 'active' || !ev.model_profile_provider) {
    return 'the revision’s model profile is not active';
  }
  if (!tenant.default_backend_profile_id) return 'the tenant has no default backend profile';
  const backend = await activeBackendProfile(tx, tenantId, tenant.default_backend_profile_id);
  if (!backend) return 'the tenant’s default backend profile is not active';
  return {
    tenant: { id: tenantId, version: tenant.version },
    app: { id: ev.app_id, revision: ev.published_revision, digest: ev.revision_digest },
    modelProfile: {
      id: ev.model_profile_id,
      version: ev.model_profile_version ?? 1,
      digest: ev.model_profile_digest ?? '',
      provider: ev.model_profile_provider,
    },
    backendProfile: { id: backend.profile_id, version: backend.version, digest: backend.content_digest },
  };
}
