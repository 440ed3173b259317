import type { Harness } from './harness';
import type { SeededTelegram } from './seed';
import { telegramTextUpdate } from './seed';
import { waitFor } from './wait';
import { type SeededWecom, signedPost, wecomInnerXml } from './wecom';

export async function postTelegramText(
  h: Harness,
  t: SeededTelegram,
  chatId: number,
  text: string,
): Promise<number> {
  const res = await h.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
    body: JSON.stringify(telegramTextUpdate({ chatId, text })),
  });
  return res.status;
}

/** Posts one signed, encrypted WeCom text callback from `from` (a direct conversation). */
export async function postWecomText(
  h: Harness,
  w: SeededWecom,
  from: string,
  content: string,
): Promise<number> {
  const post = signedPost(w, wecomInnerXml({ corpId: w.corpId, agentId: w.agentId, from, content }));
  const res = await h.app.request(post.path, {
    method: 'POST',
    headers: { 'content-type': 'text/xml; charset=utf-8' },
    body: post.body,
  });
  return res.status;
}

export interface MessageRow {
  event_id: string;
  workflow_id: string;
  status: string;
  outcome: string | null;
  failure_reason: string | null;
  segment_count: number | null;
  reply_id: string | null;
  chat_id: string;
  text: string;
  event_seq: number;
  session_id: string;
}

/** The tenant's messages, per session in event order. */
export function messagesOf(h: Harness, tenantId: string): Promise<MessageRow[]> {
  return h.sql<MessageRow[]>`
    select event_id, workflow_id, status, outcome, failure_reason, segment_count, reply_id,
           payload->>'chatId' as chat_id, payload->>'text' as text, event_seq, session_id
    from message_event where tenant_id = ${tenantId} order by session_id, event_seq`;
}

export interface SegmentRow {
  segment_id: string;
  event_id: string;
  segment_index: number;
  segment_count: number;
  content: string;
  status: string;
  attempts: number;
  last_error: string | null;
}

export function segmentsOf(h: Harness, tenantId: string): Promise<SegmentRow[]> {
  return h.sql<SegmentRow[]>`
    select segment_id, event_id, segment_index, segment_count, content, status, attempts, last_error
    from reply_outbox where tenant_id = ${tenantId} order by event_id, segment_index`;
}

export interface DeadLetterRow {
  dead_letter_id: string;
  event_id: string;
  kind: string;
  segment_id: string | null;
  reason_class: string;
  status: string;
  detail: Record<string, unknown>;
}

export function deadLettersOf(h: Harness, tenantId: string): Promise<DeadLetterRow[]> {
  return h.sql<DeadLetterRow[]>`
    select dead_letter_id, event_id, kind, segment_id, reason_class, status, detail
    from dead_letter where tenant_id = ${tenantId} order by created_at, dead_letter_id`;
}

/** Waits until the tenant has `count` messages and every one of them is replied or failed. */
export async function waitForFinished(
  h: Harness,
  tenantId: string,
  count: number,
  timeoutMs: number,
): Promise<MessageRow[]> {
  let rows: MessageRow[] = [];
  await waitFor(
    async () => {
      rows = await messagesOf(h, tenantId);
      return rows.length >= count && rows.every((r) => r.status === 'replied' || r.status === 'failed');
    },
    { timeoutMs, label: `${count} finished messages of ${tenantId}` },
  );
  return rows;
}

/** Diagnostics for a timeout: the tenants' unfinished messages, their segments and workflow state. */
export async function unfinishedMessages(h: Harness, tenantIds: string[], limit = 10) {
  const rows = await h.sql<
    { event_id: string; workflow_id: string; status: string; text: string; segments: unknown }[]
  >`
    select e.event_id, e.workflow_id, e.status, e.payload->>'text' as text,
           (select json_agg(json_build_object('index', o.segment_index, 'status', o.status, 'attempts', o.attempts,
                   'last_error', o.last_error, 'owner', o.claim_owner, 'lease', o.lease_expires_at) order by o.segment_index)
            from reply_outbox o where o.tenant_id = e.tenant_id and o.event_id = e.event_id) as segments
    from message_event e
    where e.tenant_id in ${h.sql(tenantIds)} and e.status not in ('replied', 'failed')
    order by e.session_id, e.event_seq limit ${limit}`;
  return Promise.all(
    rows.map(async (r) => {
      const d = await h.temporal.workflow
        .getHandle(r.workflow_id)
        .describe()
        .catch(() => null);
      return { ...r, workflow: d?.status.name, pendingActivities: d?.raw.pendingActivities?.length };
    }),
  );
}

/**
 * Checks that `pieces`, in order, rebuild `text` when only whitespace is put back between them
 * (the whitespace-only pieces a reply may contain are not sent). Returns the offsets in `text`
 * where each piece starts, or throws with the first mismatch.
 */
export function alignPieces(text: string, pieces: readonly string[]): number[] {
  const starts: number[] = [];
  let pos = 0;
  pieces.forEach((piece, i) => {
    let at = pos;
    while (!text.startsWith(piece, at)) {
      if (at >= text.length || !/\s/.test(text[at]!))
        throw new Error(`piece ${i} does not continue the text at offset ${pos} (non-whitespace skipped)`);
      at++;
    }
    starts.push(at);
    pos = at + piece.length;
  });
  if (text.slice(pos).trim() !== '') throw new Error(`text after offset ${pos} was not delivered`);
  return starts;
}

/** Every grapheme cluster boundary of `text` (UTF-16 offsets), from Intl.Segmenter. */
export function graphemeBoundaries(text: string): Set<number> {
  const seg = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
  const out = new Set<number>([0, text.length]);
  for (const { index } of seg.segment(text)) out.add(index);
  return out;
}

/** True when the string holds an unpaired surrogate (a code point was split). */
export function hasLoneSurrogate(s: string): boolean {
  return /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}
