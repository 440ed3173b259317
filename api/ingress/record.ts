import { context, trace } from '@opentelemetry/api';
import type { Client } from '@temporalio/client';
import type { Sql } from 'postgres';
import type { InboundMessage } from '../../channels/inbound';
import { sessionIdentityOf } from '../../channels/inbound';
import { isLockTimeout } from '../../db/errors';
import { newId } from '../../db/ids';
import {
  type RecordedMessage,
  type RecordMessageParams,
  recordInboundMessage,
} from '../../db/queries/ingress';
import { canonicalJson, encodeTuple, sha256Hex } from '../../lib/digest';
import type { Logger } from '../../lib/log';
import { maskerFor } from '../../lib/masking';
import { startMessageWorkflow } from '../../lib/workflow-start';
import { decideTenantSampling } from '../../telemetry/sampling';
import { messageWorkflowId } from '../../workflows/shared';
import { ApiError } from '../errors';
import type { LateRecorder } from './late-record';
import type { RecordBatcher } from './record-batcher';
import type { TrustedContext } from './trusted';

export interface IngressDeps {
  sql: Sql;
  temporal: Client;
  taskQueue: string;
  log: Logger;
  /** keys the pseudonyms of masked external ids (lib/masking.ts) */
  auditKey: string;
  /** The process's group commit for records (record-batcher.ts); absent: one statement per record. */
  recorder?: RecordBatcher;
  /** Finishes records that ran out of their lock bound, in the background (late-record.ts). */
  lateRecorder?: LateRecorder;
}

export type RecordOutcome =
  | { kind: 'recorded'; eventId: string; workflowId: string }
  | { kind: 'duplicate'; eventId: string; workflowId: string }
  /** Over the tenant's rate_limit_rpm: recorded as failed / rate_limited, never executed. */
  | { kind: 'rate_limited'; eventId: string }
  /** The tenant is disabled: not routed at all (the webhook answers the fixed 401). */
  | { kind: 'not_routed' }
  /**
   * Recorded (now or earlier) but the workflow could not be started (Temporal unreachable): still
   * acknowledged — the message is durable and the repair sweeper starts it once Temporal answers;
   * a 503 would make Telegram stall the bot's whole update stream behind it.
   */
  | { kind: 'start_failed'; eventId: string; workflowId: string; error: unknown; duplicate: boolean };

/** Seeds: idempotency key = hash of the length-prefixed (tenant, binding, channel, external message id). */
export function idempotencyKeyOf(
  ctx: Pick<TrustedContext, 'tenantId' | 'bindingId' | 'channel'>,
  externalMessageId: string,
): string {
  return sha256Hex(encodeTuple([ctx.tenantId, ctx.bindingId, ctx.channel, externalMessageId]));
}

/**
 * Record once, start once: one statement records the session, event_seq and message (or finds the
 * duplicate); then the workflow is started under the idempotency key. A duplicate whose workflow may
 * never have started (status still `received`) gets its start retried, which is harmless when it
 * already runs.
 */
export async function recordAndStart(
  deps: IngressDeps,
  ctx: TrustedContext,
  msg: InboundMessage,
  /** traceId: the webhook span's (telemetry/trace-id.ts), null when tracing is off */
  meta: { requestId: string; traceId: string | null },
): Promise<RecordOutcome> {
  trace.getActiveSpan()?.setAttribute('tenant.id', ctx.tenantId);
  // Trusted from here: the tenant's sampling decides whether this request and its workflow are
  // traced (telemetry/sampling.ts), its masking level what they show of the message.
  const traced = decideTenantSampling(ctx.traceSamplingRate);
  if (ctx.tenantStatus === 'disabled') return { kind: 'not_routed' };
  const idempotencyKey = idempotencyKeyOf(ctx, msg.externalMessageId);
  const workflowId = messageWorkflowId(idempotencyKey);

  // One round trip, in autocommit, under tenant_app_writer and RLS (0014, 0042): alone, or shared
  // with the webhooks that arrived meanwhile (the app's recorder, record-batcher.ts).
  const identity = sessionIdentityOf(msg);
  const params: RecordMessageParams = {
    tenantId: ctx.tenantId,
    bindingId: ctx.bindingId,
    appId: ctx.appId,
    sessionId: newId('ses'),
    identity,
    eventId: newId('evt'),
    idempotencyKey,
    workflowId,
    message: msg,
    payloadDigest: sha256Hex(canonicalJson(msg)),
    requestId: meta.requestId,
    traceId: meta.traceId,
    outcome: msg.kind === 'unsupported' ? 'unsupported_message' : null,
    rateLimitRpm: ctx.rateLimitRpm,
  };
  const start = (eventId: string) =>
    context.with(traced, () =>
      startMessageWorkflow(deps.temporal, {
        workflowId,
        taskQueue: deps.taskQueue,
        input: { tenantId: ctx.tenantId, eventId, channel: ctx.channel },
        // The candidate lookup yields neither the tenant key nor the app's revision (the summary falls
        // back to the tenant id); the plan, pinned later, is in the workflow's history.
        facts: { sessionKind: identity.kind, appId: ctx.appId },
      }),
    );
  const result = await (deps.recorder
    ? deps.recorder.record(params)
    : recordInboundMessage(deps.sql, params)
  ).catch((err: unknown) => {
    // The record waited too long for a lock (record-batcher.ts INGRESS_LOCK_TIMEOUT_MS): nothing was
    // recorded; 503 tells the provider to deliver it again, and the record goes on in the
    // background (late-record.ts) in case no redelivery outlasts the lock.
    if (!isLockTimeout(err)) throw err;
    const late =
      deps.lateRecorder?.submit(params, async (r) => {
        describeMessage(deps, ctx, msg, { eventId: r.event_id, kind: r.kind });
        // A start that fails is logged by the late recorder; the repair sweeper starts it then.
        if (needsStart(r)) await start(r.event_id);
      }) ?? false;
    deps.log.warn({ requestId: meta.requestId, late }, 'record timed out waiting for a lock; answered 503');
    throw new ApiError('unavailable', 'The message could not be recorded in time; deliver it again.');
  });
  const eventId = result.event_id;
  describeMessage(deps, ctx, msg, { eventId, kind: result.kind });

  if (result.kind === 'rate_limited') return { kind: 'rate_limited', eventId };
  if (!needsStart(result)) return { kind: 'duplicate', eventId, workflowId };
  try {
    await start(eventId);
  } catch (error) {
    // Recorded means acknowledged: the repair sweeper starts it once Temporal answers again.
    deps.log.warn(
      { requestId: meta.requestId, eventId, err: (error as Error)?.message },
      'workflow start failed; recorded, the sweeper will start it',
    );
    // duplicate: a retry of a message recorded earlier whose workflow start is retried here
    return { kind: 'start_failed', eventId, workflowId, error, duplicate: result.kind === 'duplicate' };
  }
  return { kind: result.kind, eventId, workflowId };
}

/** Recorded now, or a duplicate whose workflow may never have started (still `received`). */
const needsStart = (r: RecordedMessage) =>
  r.kind === 'recorded' || (r.kind === 'duplicate' && r.status === 'received');

/**
 * The one line and the span attributes that show what a message was: its text and external ids as
 * the tenant's log_masking_level allows (lib/masking.ts), everything else ids and classes.
 */
function describeMessage(
  deps: IngressDeps,
  ctx: TrustedContext,
  msg: InboundMessage,
  r: { eventId: string; kind: string },
): void {
  const span = trace.getActiveSpan();
  const traced = span?.isRecording() === true;
  const logged = deps.log.isLevelEnabled('info');
  // Masking costs an HMAC per id: only when a line or a span will carry the result.
  if (!traced && !logged) return;
  const mask = maskerFor(ctx.logMaskingLevel, deps.auditKey, ctx.tenantId);
  const shown = {
    sender_id: mask.externalId(msg.senderId),
    chat_id: mask.externalId(msg.chatId),
    external_message_id: mask.externalId(msg.externalMessageId),
    ...(msg.threadId !== null ? { thread_id: mask.externalId(msg.threadId) } : {}),
    ...(msg.text !== null ? { text: mask.text(msg.text) } : {}),
  };
  if (traced) {
    for (const [k, v] of Object.entries(shown)) span!.setAttribute(`switchyard.message.${k}`, v);
  }
  if (!logged) return;
  deps.log.info(
    {
      event_id: r.eventId,
      channel: msg.channel,
      kind: msg.kind,
      outcome: r.kind,
      masking: mask.level,
      ...shown,
    },
    'message recorded',
  );
}
