import { ApplicationFailure, CancelledFailure } from '@temporalio/activity';
import type { Sql } from 'postgres';
import type { ModelDecision, RecordedToolCall } from '../agents/messages';
import { storedScriptedConfigSchema } from '../agents/scripted';
import { CHANNEL_LIMITS, segmentText } from '../channels/segment';
import { type ArtifactRow, eventArtifacts, markAttachmentSegments } from '../db/queries/artifacts';
import { messageWorkflowOf } from '../db/queries/execution';
import {
  type ClaimParams,
  type ClaimRow,
  conversationAbsorb,
  executionCommit,
  executionCommitClaim,
  executionStart,
  messageFinish,
  permitAcquire,
} from '../db/queries/steps';
import { withTenantTx } from '../db/tx';
import { sha256Hex } from '../lib/digest';
import { recordFinish, secondsSinceReceived } from '../telemetry/metrics';
import {
  BUSY_REPLY,
  type Channel,
  type ConversationPolicy,
  type ExecutionPlan,
  type MessageStatus,
  MODEL_FAILED_REPLY,
} from '../workflows/shared';
import { claimParams, type SegmentDelivery, sendClaimed } from './delivery';
import type { ActivityDeps } from './deps';
import { FENCED_OUT } from './failures';
import { finishDraft } from './live-drafts';
import { attachmentSpecsOf, captionOf, storeReplyAttachments } from './media-out';
import { parseLimits, scriptedTurn } from './model';
import { attemptOwner, callingWorkflowId, isCurrentRun } from './owner';
import { recordedToolCalls } from './tool-calls/outcome';

export type StartResult =
  /**
   * The reply is committed (now, or before a restart): deliver it; the model never runs again.
   * `firstSend`: the quick attempt at its first segment, made in the same activity — its result,
   * null when it did not settle the segment (the regular attempts take over), absent when not made.
   */
  | { kind: 'committed'; reply: ReplyCommitted; firstSend?: SegmentDelivery | null }
  /** Run the agent loop (a remote model, or tool calls), then commitReply. */
  | {
      kind: 'execute';
      plan: ExecutionPlan;
      /** The tenant caps concurrent executions: freeing this permit should wake a waiter. */
      permitLimited: boolean;
      /** The revision's limits.max_steps (model turns), or the default. */
      maxSteps: number;
      /** The scripted agent's first decision, already taken here (tool calls). */
      firstDecision: ModelDecision | null;
      /**
       * A resumed execution's recorded tool calls (empty for a fresh one): the run continues its
       * turn from them instead of asking the model again. Absent in histories from before 0019.
       */
      recorded?: RecordedToolCall[];
      /** The revision's double-texting policy (absent in histories from before migration 0036). */
      policy?: ConversationPolicy;
      /** Runs of the messages merged into this turn just now: woken, they see it and stop. */
      wake?: string[];
    }
  /**
   * Not yet: an earlier message of the session is unfinished, the tenant has no free permit, or
   * (collect / interrupt with debounce_ms) the session is not quiet yet — ask again after
   * `retryAfterMs`. `interrupt`: the running turn to ask to stop (policy interrupt; a hint).
   */
  | {
      kind: 'wait';
      reason: 'session_order' | 'tenant_concurrency' | 'debounce';
      retryAfterMs?: number;
      interrupt?: string[];
    }
  /** Answered by another message's turn (collect / interrupt): it ends with that message. */
  | { kind: 'merged'; into: string; status: MessageStatus }
  | { kind: 'finished'; status: MessageStatus; outcome: string | null; wake: string[] };

/** Policy interrupt: messages that arrived during the turn joined it and nothing was committed. */
export interface CommitInterrupted {
  interrupted: true;
  /** runs of the messages that joined (they stop) */
  wake: string[];
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
const DEFAULT_MAX_STEPS = 8;

/** The calling run is not the message's workflow any more: it stops, the repair run goes on. */
function superseded(eventId: string, current: string | null) {
  return ApplicationFailure.nonRetryable(
    `message ${eventId} is now worked by ${current ?? 'another run'}; this run stops`,
    FENCED_OUT,
  );
}

export function executionActivities(deps: ActivityDeps) {
  /** Webhook received → running: the session lane, and the tenant's permit when it caps concurrency. */
  const observeWait = (eventId: string, permitLimited: boolean) => {
    const seconds = secondsSinceReceived(eventId);
    if (seconds !== null)
      deps.metrics?.executionWait.observe({ permit_limited: String(permitLimited) }, seconds);
  };

  /**
   * Seeds' commit order in one statement holding the message's row lock (execution_commit): durable
   * memory of the turn → the pinned reply_id / reply_cache_ref / segment_count → every outbox
   * segment, running → reply_pending, with a new fencing token. Idempotent: after a commit it
   * returns the pinned reply, never a second one, and the model never runs again. With `claim`,
   * the quick attempt's claim of the reply's first segment goes in the same statement
   * (execution_commit_claim) when the reply is to be sent now; `first` is that claim's row
   * (claimed, or declined because the chat is paced), null when none was attempted.
   */
  async function commit(
    input: {
      tenantId: string;
      eventId: string;
      channel: Channel;
      text: string;
      outcome: string | null;
      wakeWaiters: boolean;
      /** outbound artifacts (activities/media-out.ts): one segment each, after the text */
      attachments?: ArtifactRow[];
    },
    claim: ClaimParams | null,
  ): Promise<{ reply: ReplyCommitted; first: ClaimRow | null } | CommitInterrupted> {
    // Whitespace-only pieces (a long run of blank lines at a cut) carry nothing a user would see.
    const parts = segmentText(input.text, CHANNEL_LIMITS[input.channel]).filter((p) => p.trim() !== '');
    const attachments = input.attachments ?? [];
    const key = input.eventId.slice(4);
    const replyId = `rep_${key}`;
    const params = {
      tenantId: input.tenantId,
      eventId: input.eventId,
      owner: attemptOwner(deps.workerId),
      leaseSeconds: LEASE_SECONDS,
      replyId,
      text: input.text,
      contentDigest: sha256Hex(input.text),
      outcome: input.outcome ?? (parts.length === 0 && attachments.length === 0 ? 'empty_reply' : null),
      segments: [
        ...parts.map((content, i) => ({
          segment_id: `seg_${key}_${i}`,
          idempotency_key: sha256Hex(`${replyId}/${i}`),
          content,
        })),
        ...attachments.map((a, j) => ({
          segment_id: `seg_${key}_${parts.length + j}_att`,
          idempotency_key: sha256Hex(`${replyId}/${parts.length + j}`),
          content: captionOf(a),
        })),
      ],
      wakeWaiters: input.wakeWaiters,
    };
    // A reply with attachments: the commit and its segments' kinds in one transaction (and no
    // quick claim), so no attachment segment is ever visible as a text one.
    const { commit: row, claim: first } =
      attachments.length > 0
        ? {
            commit: await deps.sql.begin(async (tx) => {
              const r = await executionCommit(tx as unknown as Sql, params);
              if (r.kind === 'committed') {
                await markAttachmentSegments(tx, {
                  tenantId: input.tenantId,
                  segments: attachments.map((a, j) => ({
                    segmentId: `seg_${key}_${parts.length + j}_att`,
                    kind: a.kind === 'image' ? 'image' : 'file',
                    artifactId: a.artifact_id,
                  })),
                });
              }
              return r;
            }),
            claim: null,
          }
        : claim
          ? await executionCommitClaim(deps.sql, { ...params, claim })
          : { commit: await executionCommit(deps.sql, params), claim: null };
    if (row.kind === 'fenced_out') {
      throw ApplicationFailure.nonRetryable(
        `execution is ${row.status ?? 'missing'} without a pinned reply`,
        FENCED_OUT,
      );
    }
    if (row.kind === 'interrupted') return { interrupted: true, wake: row.wake };
    return {
      reply: {
        status: row.status,
        outcome: row.outcome,
        replyId: row.reply_id,
        segmentIds: row.segment_ids,
        wake: row.wake,
      },
      first,
    };
  }

  /**
   * The quick attempt at a reply's first segment, claimed with its commit: one local activity (one
   * marker, one activation) and one statement fewer for the common message. Anything it does not
   * settle — a paced chat (declined, nothing claimed), a provider error, a busy segment, a database
   * error — is left to the workflow's regular attempts, as after the workflow's own quick attempt;
   * it never fails the commit.
   */
  async function sendFirst(
    tenantId: string,
    reply: ReplyCommitted,
    first: ClaimRow,
    claimedAt: number,
  ): Promise<SegmentDelivery | null> {
    try {
      const finish = reply.segmentIds.length === 1;
      return await sendClaimed(
        deps,
        { tenantId, finish, quick: true, claimedAt, outcome: reply.outcome },
        first,
      );
    } catch (err) {
      if (err instanceof CancelledFailure) throw err;
      // Expected for a paced chat or a provider's retryable answer (what the attempt recorded
      // stands); the regular attempts continue either way.
      deps.log.info(
        { tenantId, segmentId: first.segment_id, err: err instanceof Error ? err.message : String(err) },
        'quick first send did not settle the segment; regular attempts continue',
      );
      return null;
    }
  }

  return {
    /**
     * received → running, once the message may run: every earlier message of its session has
     * finished (per-session FIFO) and the tenant has a free concurrency permit; applies the tenant
     * gates and fixes the ExecutionPlan (ids, versions, digests; no secrets). When the reply needs
     * no remote call — a fallback, a reply committed before a restart, or a scripted agent that
     * answers at once — it is committed here too, and its first segment claimed with the commit and
     * sent (sendFirst), so the common message costs one local activity in all. Idempotent.
     */
    async startExecution(input: {
      tenantId: string;
      eventId: string;
      channel: Channel;
    }): Promise<StartResult> {
      const { tenantId, eventId, channel } = input;
      const start = await executionStart(deps.sql, {
        tenantId,
        eventId,
        owner: attemptOwner(deps.workerId),
        leaseSeconds: LEASE_SECONDS,
        workflowId: callingWorkflowId(),
      });
      if (start.kind === 'not_found')
        throw ApplicationFailure.nonRetryable(`message ${eventId} not found`, 'NotFound');
      if (start.kind === 'superseded') throw superseded(eventId, start.workflow_id);
      if (start.kind === 'wait') {
        deps.metrics?.executionWaits.inc({ reason: start.reason });
        const { retry_after_ms, interrupt, ...wait } = start;
        return {
          ...wait,
          ...(retry_after_ms !== undefined ? { retryAfterMs: retry_after_ms } : {}),
          ...(interrupt?.length ? { interrupt } : {}),
        };
      }
      // Failed here (unsupported, misconfigured), or found finished by an earlier attempt that
      // died before its workflow task completed (then counted twice: rare, and only after a crash).
      if (start.kind === 'finished') recordFinish(deps.metrics, { ...start, eventId });
      if (start.kind !== 'execute') return start;
      if (start.started) observeWait(eventId, start.permit_limited);
      // The first segment's quick claim goes with the commit; not when the commit frees a tenant
      // concurrency permit (its waiters are woken first, by the workflow).
      const commitNow = async (
        text: string,
        outcome: string | null,
        attachments: ArtifactRow[] = [],
      ): Promise<StartResult> => {
        const wakeWaiters = start.permit_limited;
        const claim = wakeWaiters ? null : claimParams(attemptOwner(deps.workerId), true);
        const claimedAt = performance.now();
        const done = await commit(
          { tenantId, eventId, channel, text, outcome, wakeWaiters, attachments },
          claim,
        );
        // Runs of the messages merged into this turn (by execution_start, or just now by the
        // commit) are woken with whatever else the workflow wakes: they see the merge and stop.
        const merged = [...(start.wake ?? []), ...('interrupted' in done ? done.wake : [])];
        // Interrupted (a message arrived meanwhile and joined the turn): the workflow runs the
        // turn again, with it, through the regular model turn.
        if ('interrupted' in done) return { ...(await execute(null)), wake: merged };
        const reply =
          merged.length > 0 ? { ...done.reply, wake: [...done.reply.wake, ...merged] } : done.reply;
        const { first } = done;
        if (!first) return { kind: 'committed', reply };
        return { kind: 'committed', reply, firstSend: await sendFirst(tenantId, reply, first, claimedAt) };
      };
      const execute = async (
        firstDecision: ModelDecision | null,
      ): Promise<Extract<StartResult, { kind: 'execute' }>> => ({
        kind: 'execute',
        plan: start.plan!,
        permitLimited: start.permit_limited,
        maxSteps: parseLimits(start.limits).max_steps ?? DEFAULT_MAX_STEPS,
        firstDecision,
        // Resumed (a restart, a reset, a repair, a continue-as-new): what its turn already did.
        recorded: start.started ? [] : await recordedToolCalls(deps, tenantId, eventId),
        policy: start.conversation?.policy ?? 'enqueue',
        ...(start.wake?.length ? { wake: start.wake } : {}),
      });
      // Committed before a restart: the pinned reply, rebuilt from the pinned values.
      if (start.committed) return commitNow('', null);
      if (start.outcome === 'tenant_suspended') return commitNow(deps.suspendedReply, 'tenant_suspended');
      // Policy reject, decided by execution_start once: the fixed busy reply (never the model).
      if (start.outcome === 'busy_rejected')
        return commitNow(start.busy_reply || BUSY_REPLY, 'busy_rejected');
      if (!start.plan) return commitNow(MODEL_FAILED_REPLY, 'configuration_error');
      // The scripted agent is pure and local: its first turn runs here when the plan was fixed by
      // this very call (nothing can have drifted) and no monthly budget needs checking (the model
      // turn activity checks and audits budgets). Anything else takes the regular model turn.
      // A message without text carries media (ingress records no other executable kind): its
      // attachments are fetched and stored by the model turn, never here.
      if (
        !start.started ||
        start.budgeted ||
        start.plan.modelProfile.provider !== 'scripted' ||
        start.text === null
      )
        return execute(null);
      const config = storedScriptedConfigSchema.safeParse(start.scripted ?? {});
      if (!config.success) return execute(null);
      const decision = scriptedTurn(config.data, start.text ?? '', []);
      if (decision.kind === 'reply' && decision.attachments?.length) {
        // Fetched and stored now (a store that refuses fails this attempt; the retry finds what was stored).
        const rows = await storeReplyAttachments(deps, {
          tenantId,
          eventId,
          backendProfileId: start.plan.backendProfile.id,
          specs: attachmentSpecsOf(decision, []),
        });
        return commitNow(decision.text, null, rows);
      }
      if (decision.kind === 'reply') return commitNow(decision.text, null);
      return execute(decision);
    },

    /**
     * A running execution resuming after an operator's decision takes a tenant concurrency permit
     * again (it gave its own back while parked), in arrival order; false: wait and ask again.
     */
    async acquirePermit(input: { tenantId: string; eventId: string }): Promise<{ granted: boolean }> {
      return { granted: await permitAcquire(deps.sql, input) };
    },

    /** Commits the agent's reply (or a fixed fallback); see commit above. */
    async commitReply(input: {
      tenantId: string;
      eventId: string;
      channel: Channel;
      text: string;
      outcome: string | null;
      /** Wake the tenant's waiting messages (only when the tenant caps concurrency). */
      wakeWaiters?: boolean;
    }): Promise<ReplyCommitted | CommitInterrupted> {
      // A run replaced by a repair run never commits beside it (the repair's own commit stands).
      // In one read: the run check, and what the turn that decided this reply stored to send with
      // it (a fallback sends none).
      const { current, attachments } = await withTenantTx(
        deps.sql,
        { role: 'tenant_app_writer', tenantId: input.tenantId },
        async (tx) => ({
          current: await messageWorkflowOf(tx, input.tenantId, input.eventId),
          attachments:
            input.outcome === null
              ? (await eventArtifacts(tx, input.tenantId, input.eventId)).filter(
                  // A row marked by retention is as good as gone (db/schema/artifact.ts).
                  (r) => r.direction === 'outbound' && !r.deleting,
                )
              : [],
        }),
      );
      if (!isCurrentRun(current)) throw superseded(input.eventId, current);
      const done = await commit({ ...input, wakeWaiters: input.wakeWaiters ?? false, attachments }, null);
      return 'interrupted' in done ? done : done.reply;
    },

    /**
     * Policy interrupt, when a newer message asked the running turn to stop: the session's waiting
     * messages join the turn when the database allows it (conversation_absorb). Returns how many
     * joined (none: the turn goes on, its model call is not cancelled) and the runs of the messages
     * that joined (to wake: they stop).
     */
    async absorbMessages(input: {
      tenantId: string;
      eventId: string;
    }): Promise<{ merged: number; wake: string[] }> {
      const { merged, wake } = await conversationAbsorb(deps.sql, input);
      return { merged, wake };
    },

    /**
     * Terminal transition (message_finish): `replied` only when every segment is sent (or `failed`
     * for an outcome whose fallback was delivered), else `failed` with the unsent segments kept;
     * audited, and the session summary rebuilt, in the same transaction. Idempotent: run again it
     * only recomputes whom to wake. Returns the workflows to wake: the session's next message.
     * A live draft still open then (no segment went through it: a reply with no segments, a
     * delivery that failed first) is deleted, best effort (activities/live-drafts.ts finishDraft).
     */
    async finishMessage(input: {
      tenantId: string;
      eventId: string;
      failure?: { outcome: string; reason: string };
    }): Promise<{ status: MessageStatus; wake: string[] }> {
      const done = await messageFinish(deps.sql, {
        tenantId: input.tenantId,
        eventId: input.eventId,
        failure: input.failure ?? null,
        actor: attemptOwner(deps.workerId),
      });
      if (done.status === null)
        throw ApplicationFailure.nonRetryable(`message ${input.eventId} not found`, 'NotFound');
      if (done.not_all_sent) {
        throw ApplicationFailure.nonRetryable(
          `message ${input.eventId} is ${done.status}: not every segment is sent`,
          'NotAllSent',
        );
      }
      await finishDraft(deps, { tenantId: input.tenantId, eventId: input.eventId });
      // A retry of this local activity after its commit counts again (rare). Without a failure the
      // outcome is what message_finish reports (migration 0025; `unreported` only for an empty
      // reply, or a receipt that could not finish the message).
      recordFinish(deps.metrics, {
        status: done.status,
        outcome: input.failure ? input.failure.outcome : done.outcome,
        eventId: input.eventId,
      });
      return { status: done.status, wake: done.wake };
    },
  };
}
