import { trace } from '@opentelemetry/api';
import type { Client } from '@temporalio/client';
import type { Sql, TransactionSql } from 'postgres';
import type { InboundMessage } from '../../channels/inbound';
import { sessionIdentityOf } from '../../channels/inbound';
import { newId } from '../../db/ids';
import { countInRateWindow, findEventByExternalId, insertReceivedEvent } from '../../db/queries/ingress';
import { withTenantTx } from '../../db/tx';
import { canonicalJson, encodeTuple, sha256Hex } from '../../lib/digest';
import { messageWorkflowId } from '../../workflows/shared';
import { startMessageWorkflow } from './start';
import type { TrustedContext } from './trusted';

export interface IngressDeps {
  sql: Sql;
  temporal: Client;
  taskQueue: string;
}

export type RecordOutcome =
  | { kind: 'recorded'; eventId: string; workflowId: string }
  | { kind: 'duplicate'; eventId: string; workflowId: string }
  /** Over the tenant's rate_limit_rpm: recorded as failed / rate_limited, never executed. */
  | { kind: 'rate_limited'; eventId: string }
  /** The tenant is disabled: not routed at all (the webhook answers the fixed 401). */
  | { kind: 'not_routed' }
  /** Recorded (now or earlier) but the workflow could not be started: answer 503 so the provider retries. */
  | { kind: 'start_failed'; eventId: string; workflowId: string; error: unknown };

/** Seeds: idempotency key = hash of the length-prefixed (tenant, binding, channel, external message id). */
export function idempotencyKeyOf(ctx: TrustedContext, externalMessageId: string): string {
  return sha256Hex(encodeTuple([ctx.tenantId, ctx.bindingId, ctx.channel, externalMessageId]));
}

type Recorded = { kind: 'recorded' | 'duplicate' | 'rate_limited'; eventId: string; status: string };

/**
 * Record once, start once: one transaction records the session, event_seq and message; then the
 * workflow is started under the idempotency key. A duplicate whose workflow may never have started
 * (status still `received`) gets its start retried, which is harmless when it already runs.
 */
export async function recordAndStart(
  deps: IngressDeps,
  ctx: TrustedContext,
  msg: InboundMessage,
  meta: { requestId: string; traceId: string | null },
): Promise<RecordOutcome> {
  trace.getActiveSpan()?.setAttribute('tenant.id', ctx.tenantId);
  if (ctx.tenantStatus === 'disabled') return { kind: 'not_routed' };
  const idempotencyKey = idempotencyKeyOf(ctx, msg.externalMessageId);
  const workflowId = messageWorkflowId(idempotencyKey);
  const asApp = { role: 'tenant_app_writer' as const, tenantId: ctx.tenantId };
  const key = { tenantId: ctx.tenantId, bindingId: ctx.bindingId, externalMessageId: msg.externalMessageId };

  // The common case is a new message, so insert first and let the unique constraint find the
  // duplicates (they roll back and are looked up): fewer round trips on the webhook path.
  const record = async (tx: TransactionSql): Promise<Recorded> => {
    const limited =
      ctx.rateLimitRpm !== null && (await countInRateWindow(tx, ctx.tenantId)) > ctx.rateLimitRpm;
    const inserted = await insertReceivedEvent(tx, {
      tenantId: ctx.tenantId,
      bindingId: ctx.bindingId,
      appId: ctx.appId,
      sessionId: newId('ses'),
      identity: sessionIdentityOf(msg),
      eventId: newId('evt'),
      idempotencyKey,
      workflowId,
      message: msg,
      payloadDigest: sha256Hex(canonicalJson(msg)),
      requestId: meta.requestId,
      traceId: meta.traceId,
      status: limited ? 'failed' : 'received',
      outcome: limited ? 'rate_limited' : msg.kind === 'text' ? null : 'unsupported_message',
    });
    // A concurrent delivery won the race: roll back so this transaction's event_seq is not consumed.
    if (!inserted) throw new DuplicateRace();
    return {
      kind: limited ? 'rate_limited' : 'recorded',
      eventId: inserted.event_id,
      status: limited ? 'failed' : 'received',
    };
  };

  const result = await withTenantTx(deps.sql, asApp, record).catch(
    async (err: unknown): Promise<Recorded> => {
      if (!(err instanceof DuplicateRace)) throw err;
      const winner = await withTenantTx(deps.sql, asApp, (tx) => findEventByExternalId(tx, key));
      if (!winner) throw new Error('duplicate race without a winner');
      return { kind: 'duplicate', eventId: winner.event_id, status: winner.status };
    },
  );

  if (result.kind === 'rate_limited') return { kind: 'rate_limited', eventId: result.eventId };
  if (result.kind === 'duplicate' && result.status !== 'received') {
    return { kind: 'duplicate', eventId: result.eventId, workflowId };
  }
  try {
    await startMessageWorkflow(deps.temporal, {
      workflowId,
      taskQueue: deps.taskQueue,
      channel: ctx.channel,
      input: { tenantId: ctx.tenantId, eventId: result.eventId, channel: ctx.channel },
    });
  } catch (error) {
    return { kind: 'start_failed', eventId: result.eventId, workflowId, error };
  }
  return { kind: result.kind, eventId: result.eventId, workflowId };
}

class DuplicateRace extends Error {}
