import type { Client } from '@temporalio/client';
import type { Sql } from 'postgres';
import type { InboundMessage } from '../../channels/inbound';
import { sessionIdentityOf } from '../../channels/inbound';
import { newId } from '../../db/ids';
import { findEventByExternalId, insertReceivedEvent } from '../../db/queries/ingress';
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
  /** Recorded (now or earlier) but the workflow could not be started: answer 503 so the provider retries. */
  | { kind: 'start_failed'; eventId: string; workflowId: string; error: unknown };

/** Seeds: idempotency key = hash of the length-prefixed (tenant, binding, channel, external message id). */
export function idempotencyKeyOf(ctx: TrustedContext, externalMessageId: string): string {
  return sha256Hex(encodeTuple([ctx.tenantId, ctx.bindingId, ctx.channel, externalMessageId]));
}

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
  const idempotencyKey = idempotencyKeyOf(ctx, msg.externalMessageId);
  const workflowId = messageWorkflowId(idempotencyKey);
  const identity = sessionIdentityOf(msg);
  const result = await withTenantTx(
    deps.sql,
    { role: 'tenant_app_writer', tenantId: ctx.tenantId },
    async (tx) => {
      const existing = await findEventByExternalId(tx, {
        tenantId: ctx.tenantId,
        bindingId: ctx.bindingId,
        externalMessageId: msg.externalMessageId,
      });
      if (existing)
        return { kind: 'duplicate' as const, eventId: existing.event_id, status: existing.status };
      const inserted = await insertReceivedEvent(tx, {
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
      });
      // A concurrent delivery won the race: roll back so this transaction's event_seq is not consumed.
      if (!inserted) throw new DuplicateRace();
      return { kind: 'recorded' as const, eventId: inserted.event_id, status: 'received' };
    },
  ).catch(async (err: unknown) => {
    if (!(err instanceof DuplicateRace)) throw err;
    const again = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId: ctx.tenantId }, (tx) =>
      findEventByExternalId(tx, {
        tenantId: ctx.tenantId,
        bindingId: ctx.bindingId,
        externalMessageId: msg.externalMessageId,
      }),
    );
    if (!again) throw new Error('duplicate race without a winner');
    return { kind: 'duplicate' as const, eventId: again.event_id, status: again.status };
  });

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
