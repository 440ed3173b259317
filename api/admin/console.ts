import { z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import {
  consoleExternalId,
  consoleInboundMessage,
  consoleSessionIdentity,
} from '../../channels/console/inbound';
import {
  type ConsoleTargetRow,
  type ConversationItemRow,
  consoleAuditLock,
  consoleMessageAudited,
  findConversationSession,
  getConsoleTarget,
  getMessageStatus,
} from '../../db/queries/admin/console';
import { sessionIdentityKey } from '../../db/queries/ingress';
import type { TransactionSql } from '../../db/tx';
import { newUlid } from '../../lib/ulid';
import { activeTraceId } from '../../telemetry/trace-id';
import { bodyGuard } from '../body-guard';
import { bodySizeLimit, payloadTooLarge } from '../body-limit';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { idempotencyKeyOf, recordAndStart } from '../ingress/record';
import type { TrustedContext } from '../ingress/trusted';
import { scopedTenant } from './auth';
import {
  ConsoleAttachment,
  MAX_CONSOLE_ATTACHMENTS,
  MAX_CONSOLE_BODY_BYTES,
  stageConsoleUploads,
} from './console-media';
import { decodePosition, encodePosition, readAfter } from './console-transcript';
import { adminTx, audit, requireTenant } from './context';
import type { AdminApp, AdminEnv } from './env';
import { adminRoute } from './route';
import { errorResponse, isoNN, jsonBody, jsonResponse, pathId, TenantParams, Timestamp } from './schemas';

// The built-in `console` channel (the operator console's chat preview): a signed-in operator's
// message enters through the same recording and workflow start as a webhook's (api/ingress/
// record.ts), so it runs the same workflow, session lane, outbox and delivery; its reply segments
// are "sent" by being recorded (channels/console/client.ts) and read back here by polling.

const ID = /^[A-Za-z0-9_-]{1,64}$/;
const idOf = (what: string) =>
  z.string().regex(ID, `${what} must be 1-64 characters of A-Z, a-z, 0-9, _ and -`);
const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 100;

const SendBody = z
  .object({
    conversation_id: idOf('conversation_id'),
    text: z
      .string()
      .max(4096)
      .optional()
      .openapi({ description: 'Required (not blank) without attachments; with them, their caption' }),
    attachments: z
      .array(ConsoleAttachment)
      .min(1)
      .max(MAX_CONSOLE_ATTACHMENTS)
      .optional()
      .openapi({
        description:
          "Files sent with the message (a photo, a document), stored as artifacts in the tenant's default " +
          'backend profile before the message is recorded; one refused → 400 media_rejected, nothing recorded',
      }),
    client_message_id: idOf('client_message_id')
      .optional()
      .openapi({ description: 'Retries with the same id (in the same conversation) are one message' }),
  })
  .strict()
  .superRefine((b, ctx) => {
    if (!b.attachments && (b.text ?? '').trim() === '')
      ctx.addIssue({ code: 'custom', path: ['text'], message: 'text must not be blank' });
  })
  .openapi('ConsoleMessage');

const Accepted = z
  .object({
    event_id: z.string(),
    status: z.string().openapi({ description: "The message's status (received when just recorded)" }),
    duplicate: z.boolean().openapi({ description: 'The client_message_id was sent before: that message' }),
  })
  .openapi('ConsoleMessageAccepted');

const Item = z
  .object({
    kind: z.enum(['user', 'reply']),
    event_id: z.string(),
    segment_index: z.number().int().nullable().openapi({ description: 'null for a user message' }),
    text: z
      .string()
      .openapi({ description: 'user: the text (or the caption of its attachments); reply: the segment' }),
    attachments: z
      .array(
        z.object({
          file_name: z.string().nullable(),
          content_type: z.string().nullable(),
          size_bytes: z.number().int().nullable(),
        }),
      )
      .optional()
      .openapi({ description: 'user: what the message carried, when it carried attachments' }),
    status: z.string().openapi({ description: "user: the message's status when read; reply: sent" }),
    at: Timestamp.openapi({ description: 'user: when recorded; reply: when sent' }),
  })
  .openapi('ConsoleItem');

const ItemsPage = z
  .object({
    items: z.array(Item),
    next_cursor: z
      .string()
      .nullable()
      .openapi({
        description:
          'Always set: pass it as `after` on the next poll (items is empty when nothing is new). A reply ' +
          'segment sent after its user message was read still comes after this cursor.',
      }),
  })
  .openapi('ConsoleItems');

const ListQuery = z.object({
  conversation_id: idOf('conversation_id').openapi({ param: { name: 'conversation_id', in: 'query' } }),
  after: z
    .string()
    .max(1000)
    .optional()
    .openapi({ param: { name: 'after', in: 'query' }, description: 'A next_cursor of this list' }),
  limit: z.coerce
    .number()
    .int()
    .optional()
    .openapi({
      param: { name: 'limit', in: 'query' },
      example: DEFAULT_LIMIT,
      description: 'Clamped to 1..100',
    }),
});

const tags = ['console'];
const Params = TenantParams.extend({ binding_id: pathId('binding_id') });

const sendRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/bindings/{binding_id}/console/messages',
  tags,
  summary: 'Send a message to a console binding as the signed-in principal',
  description:
    'Recorded and run exactly as a webhook message (same workflow, session lane = the conversation, ' +
    'outbox and delivery); idempotent by client_message_id. 409 conflict when the binding is not a ' +
    'console binding (details.reason `not_console_binding`) or not active (`binding_not_active`), ' +
    'tenant_disabled for a disabled tenant; a suspended tenant answers with its fixed reply, as for ' +
    "webhooks. Attachments (base64) are checked against and stored in the tenant's default backend " +
    'profile first (409 conflict `no_backend_profile` without one), then the message names them. ' +
    "Over the tenant's rate_limit_rpm: 429 rate_limited (recorded as failed).",
  request: { params: Params, body: jsonBody(SendBody) },
  errors: [400, 403, 404, 409],
  responses: {
    202: jsonResponse(Accepted, 'Recorded (or the earlier message with this client_message_id)'),
    400: errorResponse(
      "validation_failed: the failing fields; media_rejected: an attachment refused by the tenant's " +
        'backend profile (details.reason too_large | type_not_allowed | type_mismatch, details.index)',
    ),
    413: errorResponse(
      `payload_too_large: a declared Content-Length over ${MAX_CONSOLE_BODY_BYTES} bytes (refused before ` +
        'authentication, from the header), or a body without Content-Length over the default 1 MiB',
    ),
    503: errorResponse('unavailable: the artifact store did not take the attachments (nothing recorded)'),
    429: errorResponse(
      "rate_limited: over the tenant's rate_limit_rpm (recorded as failed; details.event_id names it), " +
        'or too many failed authentications from this address (Retry-After)',
    ),
  },
});

const listRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/bindings/{binding_id}/console/messages',
  tags,
  summary: "A console conversation in order: each user message, then its reply's segments once sent",
  description:
    'Poll with `after` = the last next_cursor. 409 conflict when the binding is not a console binding.',
  request: { params: Params, query: ListQuery },
  errors: [400, 404, 409],
  responses: { 200: jsonResponse(ItemsPage, 'What is new after the cursor') },
});

/** 404 for an unknown binding, 409 for one of another channel. */
async function consoleBinding(
  tx: TransactionSql,
  tenantId: string,
  bindingId: string,
): Promise<ConsoleTargetRow> {
  await requireTenant(tx, tenantId);
  const b = await getConsoleTarget(tx, tenantId, bindingId);
  if (!b) throw new ApiError('not_found', 'No such binding.');
  if (b.channel !== 'console') {
    throw new ApiError('conflict', 'The binding is not a console binding.', {
      reason: 'not_console_binding',
    });
  }
  return b;
}

const senderOf = (c: Context<AdminEnv>) => {
  const p = c.get('principal');
  return `console:${p.kind === 'platform' ? 'platform' : p.keyId}`;
};

/** The send route's path as Hono matches it (sendRoute.path with `:param`s). */
const SEND_PATH = '/v1/admin/tenants/:tenant_id/bindings/:binding_id/console/messages';

export function registerConsoleRoutes(admin: AdminApp, deps: AppDeps): void {
  // The send's body cap and guard run here, after adminAuth (the sub-app's middleware before this):
  // before authentication the app only judged a declared Content-Length and read nothing, so an
  // unauthenticated client cannot make the API buffer or scan an 8 MiB body (api/app.ts).
  for (const mw of [
    bodySizeLimit({ maxSize: MAX_CONSOLE_BODY_BYTES, onError: payloadTooLarge }),
    bodyGuard(),
  ]) {
    admin.use(SEND_PATH, (c, next) => (c.req.method === 'POST' ? mw(c, next) : next()));
  }
  admin.openapi(sendRoute, async (c) => {
    const { tenant_id, binding_id } = c.req.valid('param');
    const tenantId = scopedTenant(c, tenant_id);
    const body = c.req.valid('json');
    const b = await adminTx(deps, tenantId, async (tx) => {
      const found = await consoleBinding(tx, tenantId, binding_id);
      // The gates a webhook applies, told plainly: the caller is an authenticated operator.
      if (found.tenant_status === 'disabled')
        throw new ApiError('tenant_disabled', 'The tenant is disabled.');
      if (found.status !== 'active') {
        throw new ApiError('conflict', `The binding is ${found.status}, not active.`, {
          reason: 'binding_not_active',
        });
      }
      return found;
    });
    const senderId = senderOf(c);
    const ctx: TrustedContext = {
      tenantId,
      bindingId: b.binding_id,
      appId: b.app_id,
      channel: 'console',
      bindingConfig: b.config,
      tenantStatus: b.tenant_status,
      rateLimitRpm: b.tenant_rate_limit_rpm,
      traceSamplingRate: b.tenant_trace_sampling_rate,
      logMaskingLevel: b.tenant_log_masking_level,
    };
    const ids = {
      conversationId: body.conversation_id,
      clientMessageId: body.client_message_id ?? null,
      generatedId: newUlid(),
    };
    // Uploads land as artifacts first (api/admin/console-media.ts); the message names them.
    const uploads = body.attachments
      ? await stageConsoleUploads(deps, {
          tenantId,
          bindingId: b.binding_id,
          backendProfileId: b.tenant_default_backend_profile_id,
          externalMessageId: consoleExternalId(ids),
          attachments: body.attachments,
        })
      : null;
    const msg = consoleInboundMessage({
      ...ids,
      senderId,
      text: body.text ?? '',
      ...(uploads ? { media: uploads.media } : {}),
      sentAt: new Date(deps.now()),
    });
    const outcome = await recordAndStart(deps, ctx, msg, {
      requestId: c.get('requestId'),
      traceId: activeTraceId(),
    }).catch(async (err: unknown) => {
      // Not `discard`: a concurrent retry of this client_message_id may have recorded the message
      // naming these very objects (same ids, same keys).
      await uploads?.abandon(idempotencyKeyOf(ctx, msg.externalMessageId));
      throw err;
    });
    if (outcome.kind === 'not_routed') {
      await uploads?.discard();
      throw new ApiError('tenant_disabled', 'The tenant is disabled.');
    }
    // The rows reference the message, so they follow it; the execution writes one itself if it
    // reads the upload first, and a failure here leaves that to it (the objects are stored).
    await uploads?.settle(outcome.eventId).catch((err: unknown) => {
      deps.log.warn(
        { requestId: c.get('requestId'), eventId: outcome.eventId, err: (err as Error)?.message },
        'console upload: artifact rows not written; the execution writes them',
      );
    });
    // Sent by an operator key: audited like the other operator actions, once per message whatever
    // the retries (a send that answered 5xx after the record, a duplicate whose start failed
    // again) and whatever the outcome, a rate-limited one included.
    const auditOnce = (outcomeName: string) =>
      adminTx(deps, tenantId, async (tx) => {
        const key = { tenantId, eventId: outcome.eventId };
        await consoleAuditLock(tx, key);
        if (await consoleMessageAudited(tx, key)) return;
        await audit(c, tx, tenantId, {
          action: 'console.message',
          bindingId: b.binding_id,
          channel: 'console',
          userId: senderId,
          details: {
            event_id: outcome.eventId,
            conversation_id: body.conversation_id,
            ...(uploads ? { attachments: uploads.media.length } : {}),
            ...(outcomeName === 'rate_limited' ? { outcome: outcomeName } : {}),
          },
        });
      });
    switch (outcome.kind) {
      case 'rate_limited':
        await auditOnce(outcome.kind);
        throw new ApiError(
          'rate_limited',
          "The tenant's rate_limit_rpm is exhausted; the message was recorded as failed.",
          { event_id: outcome.eventId },
        );
      case 'start_failed': // logged by recordAndStart; the repair sweeper starts it later
      case 'recorded':
      case 'duplicate':
        break;
      default: {
        const exhaustive: never = outcome;
        return exhaustive;
      }
    }
    await auditOnce(outcome.kind);
    const duplicate = outcome.kind === 'duplicate' || (outcome.kind === 'start_failed' && outcome.duplicate);
    const status = duplicate
      ? await adminTx(deps, tenantId, (tx) => getMessageStatus(tx, tenantId, outcome.eventId))
      : null;
    return c.json({ event_id: outcome.eventId, status: status ?? 'received', duplicate }, 202);
  });

  admin.openapi(listRoute, async (c) => {
    const { tenant_id, binding_id } = c.req.valid('param');
    const tenantId = scopedTenant(c, tenant_id);
    const q = c.req.valid('query');
    const pos = decodePosition(q.after);
    const limit = Math.min(MAX_LIMIT, Math.max(1, Math.trunc(q.limit ?? DEFAULT_LIMIT)));
    const page = await adminTx(
      deps,
      tenantId,
      async (tx) => {
        await consoleBinding(tx, tenantId, binding_id);
        const identityKey = sessionIdentityKey(consoleSessionIdentity(q.conversation_id));
        const sessionId = await findConversationSession(tx, { tenantId, bindingId: binding_id, identityKey });
        if (!sessionId) return { items: [], next: pos };
        return readAfter(tx, { tenantId, sessionId, pos, limit });
      },
      // Items and the progress that moves the cursor past them come from one snapshot.
      { isolation: 'repeatable read' },
    );
    return c.json({ items: page.items.map(itemJson), next_cursor: encodePosition(page.next) }, 200);
  });
}

const itemJson = (i: ConversationItemRow): z.infer<typeof Item> => ({
  kind: i.kind,
  event_id: i.event_id,
  segment_index: i.kind === 'user' ? null : i.segment_index,
  text: i.text ?? '',
  ...(i.kind === 'user' && i.attachments ? { attachments: i.attachments } : {}),
  status: i.status,
  at: isoNN(i.at),
});
