import { ApplicationFailure } from '@temporalio/activity';
import { runScripted, scriptedConfigSchema } from '../agents/scripted';
import { replyTargetOf } from '../channels/inbound';
import { CHANNEL_LIMITS, segmentText } from '../channels/segment';
import { newId } from '../db/ids';
import {
  activeBackendProfile,
  claimExecutionFence,
  commitReply,
  listSegmentIds,
  loadRevisionForPlan,
  lockEventForStart,
  markFailed,
  markReplied,
  markRunning,
  readPinnedReply,
  tenantSnapshot,
} from '../db/queries/execution';
import { withTenantTx } from '../db/tx';
import { sha256Hex } from '../lib/digest';
import type { ExecutionPlan, MessageStatus } from '../workflows/shared';
import type { ActivityDeps } from './deps';
import { attemptOwner } from './owner';

export type StartResult =
  | { kind: 'execute'; plan: ExecutionPlan | null; fallback: { text: string; outcome: string } | null }
  | { kind: 'finished'; status: MessageStatus; outcome: string | null };

export interface ReplyCommitted {
  status: MessageStatus;
  outcome: string | null;
  replyId: string | null;
  segmentIds: string[];
}

/** Fenced-out writes fail the attempt permanently: the newer owner's result stands. */
export const FENCED_OUT = 'FencedOut';

export function executionActivities(deps: ActivityDeps) {
  const app = (tenantId: string) => ({ role: 'tenant_app_writer' as const, tenantId });

  return {
    /**
     * received → running: applies the tenant gates and fixes the ExecutionPlan (ids, versions,
     * digests; no secrets). Re-running after a crash returns the plan already fixed.
     */
    async startExecution(input: { tenantId: string; eventId: string }): Promise<StartResult> {
      return withTenantTx(deps.sql, app(input.tenantId), async (tx) => {
        const ev = await lockEventForStart(tx, input.tenantId, input.eventId);
        if (!ev) throw ApplicationFailure.nonRetryable(`message ${input.eventId} not found`, 'NotFound');
        if (ev.status === 'replied' || ev.status === 'failed')
          return { kind: 'finished', status: ev.status, outcome: ev.outcome };
        if (ev.status !== 'received')
          return { kind: 'execute', plan: ev.execution_plan, fallback: fallbackFor(ev.outcome, deps) };

        const running = {
          tenantId: input.tenantId,
          eventId: input.eventId,
          owner: attemptOwner(deps.workerId),
          leaseSeconds: 120,
        };
        const fail = async (outcome: string, reason: string): Promise<StartResult> => {
          await markFailed(tx, input.tenantId, input.eventId, outcome, reason);
          return { kind: 'finished', status: 'failed', outcome };
        };
        if (ev.kind !== 'text')
          return fail('unsupported_message', 'message type is recorded but not executed');
        const tenant = await tenantSnapshot(tx, input.tenantId);
        if (!tenant || tenant.status === 'disabled') return fail('tenant_disabled', 'tenant is disabled');
        if (tenant.status === 'suspended') {
          await markRunning(tx, { ...running, plan: null, outcome: 'tenant_suspended' });
          return { kind: 'execute', plan: null, fallback: fallbackFor('tenant_suspended', deps) };
        }
        const plan = await resolvePlan(tx, input.tenantId, ev, tenant);
        if (typeof plan === 'string') return fail('configuration_error', plan);
        await markRunning(tx, { ...running, plan, outcome: null });
        return { kind: 'execute', plan, fallback: null };
      });
    },

    /**
     * Runs the agent and commits the pinned reply with its outbox segments in one transaction, under
     * a fencing token claimed by this attempt. Idempotent: after a commit it returns the pinned reply.
     */
    async executeAndCommitReply(input: {
      tenantId: string;
      eventId: string;
      plan: ExecutionPlan | null;
      fallback: { text: string; outcome: string } | null;
    }): Promise<ReplyCommitted> {
      const owner = attemptOwner(deps.workerId);
      const claim = await withTenantTx(deps.sql, app(input.tenantId), async (tx) => {
        const fence = await claimExecutionFence(tx, {
          tenantId: input.tenantId,
          eventId: input.eventId,
          owner,
          leaseSeconds: 120,
        });
        if (fence)
          return {
            fence,
            pinned: null,
            revision: input.plan ? await loadRevisionForPlan(tx, input.tenantId, input.plan) : null,
          };
        return {
          fence: null,
          pinned: await readPinnedReply(tx, input.tenantId, input.eventId),
          revision: null,
        };
      });
      if (!claim.fence) return alreadyCommitted(deps, input.tenantId, claim.pinned);

      const message = claim.fence.payload;
      let text: string;
      let outcome: string | null = null;
      if (input.fallback) {
        text = input.fallback.text;
        outcome = input.fallback.outcome;
      } else {
        if (!claim.revision)
          throw ApplicationFailure.nonRetryable('pinned revision is missing', 'ConfigurationError');
        const config = scriptedConfigSchema.parse(claim.revision.scripted ?? {});
        const step = runScripted(config, message.text ?? '');
        text = step.kind === 'reply' ? step.text : '';
      }
      // Whitespace-only pieces (a long run of blank lines at a cut) carry nothing a user would see.
      const parts = segmentText(text, CHANNEL_LIMITS[message.channel]).filter((p) => p.trim() !== '');
      if (parts.length === 0) outcome ??= 'empty_reply';
      const replyId = `rep_${input.eventId.slice(4)}`;
      const ok = await withTenantTx(deps.sql, app(input.tenantId), (tx) =>
        commitReply(tx, {
          tenantId: input.tenantId,
          eventId: input.eventId,
          fencingToken: claim.fence!.fencing_token,
          replyId,
          content: text,
          contentDigest: sha256Hex(text),
          outcome,
          channel: message.channel,
          target: replyTargetOf(message),
          segments: parts.map((content, i) => ({
            segmentId: `seg_${input.eventId.slice(4)}_${i}`,
            idempotencyKey: sha256Hex(`${replyId}/${i}`),
            content,
          })),
        }),
      );
      if (!ok) throw ApplicationFailure.nonRetryable('a newer attempt owns this execution', FENCED_OUT);
      return {
        status: parts.length === 0 ? 'replied' : 'reply_pending',
        outcome,
        replyId,
        segmentIds: parts.map((_, i) => `seg_${input.eventId.slice(4)}_${i}`),
      };
    },

    async completeReply(input: { tenantId: string; eventId: string }): Promise<{ status: MessageStatus }> {
      const status = await withTenantTx(deps.sql, app(input.tenantId), (tx) =>
        markReplied(tx, input.tenantId, input.eventId),
      );
      if (status !== 'replied')
        throw new Error(`message ${input.eventId} is ${status}, not all segments are sent`);
      return { status };
    },

    async failMessage(input: {
      tenantId: string;
      eventId: string;
      reason: string;
    }): Promise<{ status: MessageStatus; outcome: string }> {
      await withTenantTx(deps.sql, app(input.tenantId), (tx) =>
        markFailed(tx, input.tenantId, input.eventId, 'delivery_failed', input.reason),
      );
      return { status: 'failed', outcome: 'delivery_failed' };
    },
  };
}

function fallbackFor(outcome: string | null, deps: ActivityDeps) {
  return outcome === 'tenant_suspended' ? { text: deps.suspendedReply, outcome } : null;
}

async function resolvePlan(
  tx: Parameters<typeof activeBackendProfile>[0],
  tenantId: string,
  ev: Awaited<ReturnType<typeof lockEventForStart>> & object,
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

async function alreadyCommitted(
  deps: ActivityDeps,
  tenantId: string,
  pinned: Awaited<ReturnType<typeof readPinnedReply>>,
): Promise<ReplyCommitted> {
  if (!pinned || !pinned.reply_id) {
    throw ApplicationFailure.nonRetryable(
      `execution is ${pinned?.status ?? 'missing'} without a pinned reply`,
      FENCED_OUT,
    );
  }
  const segmentIds = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, (tx) =>
    listSegmentIds(tx, tenantId, pinned.reply_id!),
  );
  return { status: pinned.status, outcome: pinned.outcome, replyId: pinned.reply_id, segmentIds };
}
