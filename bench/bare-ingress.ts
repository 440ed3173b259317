import { createHash } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { Hono } from 'hono';
import type { Sql } from 'postgres';
import { ulid } from 'ulidx';
import type { messageWorkflow } from '../workflows/message';
import { SA_CHANNEL, SA_STATUS, SA_TENANT } from '../workflows/shared';

/**
 * The baseline for bench/ingress.ts: the same route and the same unavoidable work as our Telegram
 * ingress, without any of our layers. Per request it
 *   1. parses the JSON body,
 *   2. runs ONE autocommit INSERT of a message_event row (same table, same columns, same indexes,
 *      constraints and foreign keys as the product writes) into a session the bench created
 *      beforehand, as the connection's user (the schema owner: no role switch, no RLS, no
 *      transaction, no session upsert, no duplicate lookup; event_seq is an in-process counter),
 *   3. calls client.workflow.start('messageWorkflow', …) with the same options as the product
 *      (task queue, id policy, search attributes, 3 s deadline),
 * and answers `{}`. No middleware, no route-key lookup, no secret check, no schema validation.
 */

export interface BareTarget {
  tenantId: string;
  bindingId: string;
  sessionId: string;
}

export interface BareDeps {
  sql: Sql;
  temporal: Client;
  taskQueue: string;
  target: BareTarget;
}

interface TelegramMessageLike {
  message_id: number;
  date: number;
  chat: { id: number; type: string };
  from?: { id: number };
  text?: string;
}

const sha256Hex = (s: string) => createHash('sha256').update(s).digest('hex');

export function createBareIngressApp(deps: BareDeps): Hono {
  const { sql, temporal, taskQueue, target } = deps;
  let eventSeq = 0;
  const app = new Hono();
  app.onError((err, c) => {
    process.stderr.write(`bare ingress: ${err.message}\n`);
    return c.json({ error: 'internal' }, 500);
  });

  app.post('/v1/webhooks/telegram/:route_key', async (c) => {
    let update: { update_id: number; message?: TelegramMessageLike };
    try {
      update = JSON.parse(await c.req.text());
    } catch {
      return c.json({ error: 'bad json' }, 400);
    }
    const m = update.message;
    if (!m) return c.json({});
    const externalMessageId = `${m.chat.id}:${m.message_id}`;
    const idempotencyKey = sha256Hex(`${target.tenantId}|${target.bindingId}|telegram|${externalMessageId}`);
    const workflowId = `msg-${idempotencyKey}`;
    const eventId = `evt_${ulid()}`;
    const payload = {
      channel: 'telegram',
      externalMessageId,
      kind: 'text',
      text: m.text ?? null,
      senderId: String(m.from?.id ?? m.chat.id),
      chatId: String(m.chat.id),
      sentAt: new Date(m.date * 1000).toISOString(),
    };
    eventSeq += 1;
    await sql`
      insert into message_event (tenant_id, event_id, session_id, binding_id, external_message_id,
                                 idempotency_key, event_seq, kind, payload, payload_digest, status,
                                 request_id, workflow_id)
      values (${target.tenantId}, ${eventId}, ${target.sessionId}, ${target.bindingId}, ${externalMessageId},
              ${idempotencyKey}, ${eventSeq}, 'text', ${sql.json(payload)}, ${sha256Hex(JSON.stringify(payload))},
              'received', ${`req_${ulid()}`}, ${workflowId})`;
    try {
      await temporal.connection.withDeadline(Date.now() + 3_000, () =>
        temporal.workflow.start<typeof messageWorkflow>('messageWorkflow', {
          workflowId,
          taskQueue,
          args: [{ tenantId: target.tenantId, eventId, channel: 'telegram' }],
          workflowIdConflictPolicy: 'FAIL',
          workflowIdReusePolicy: 'REJECT_DUPLICATE',
          typedSearchAttributes: [
            { key: SA_TENANT, value: target.tenantId },
            { key: SA_CHANNEL, value: 'telegram' },
            { key: SA_STATUS, value: 'received' },
          ],
        }),
      );
    } catch {
      return c.json({ error: 'start failed' }, 503);
    }
    return c.json({});
  });
  return app;
}
