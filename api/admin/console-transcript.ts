import type { ConversationItemRow, ConversationPosition } from '../../db/queries/admin/console';
import {
  conversationRepliesAfter,
  conversationUsersAfter,
  conversationUsersBySeq,
} from '../../db/queries/admin/console';
import { MESSAGE_EVENT_STATUSES } from '../../db/schema/message-event';
import type { TransactionSql } from '../../db/tx';
import { fieldError } from './errors';

// The console conversation's read side (GET …/console/messages, api/admin/console.ts): one page
// after a cursor, and the cursor itself.

/** Watched messages a cursor carries at most (the newest are kept). */
const MAX_WATCH = 32;
/** A message in one of these will not change again by itself (a retry or repair is told by its segments). */
const SETTLED: ReadonlySet<string> = new Set(['replied', 'failed']);

/**
 * The page after `pos` and the position after it. Two streams, each read as a prefix in its own
 * commit order: user messages by event_seq and sent segments by sent_seq (migration 0033), so a
 * segment sent at any time later — of a message reopened by a retry or a repair, or out of index
 * order — comes after the cursor once. They are merged by time, each stream keeping its order,
 * and cut at `limit`. Before them come user messages read earlier whose status changed: the
 * watched ones (not yet settled) and those of the segments on this page.
 */
export async function readAfter(
  tx: TransactionSql,
  p: { tenantId: string; sessionId: string; pos: ConversationPosition; limit: number },
): Promise<{ items: ConversationItemRow[]; next: ConversationPosition }> {
  const { tenantId, sessionId, pos, limit } = p;
  const [users, replies] = await Promise.all([
    conversationUsersAfter(tx, { tenantId, sessionId, afterSeq: pos.userSeq, limit }),
    conversationRepliesAfter(tx, { tenantId, sessionId, afterSentSeq: pos.sentSeq, limit }),
  ]);
  const merged: ConversationItemRow[] = [];
  let u = 0;
  let r = 0;
  while (merged.length < limit && (u < users.length || r < replies.length)) {
    const user = users[u];
    const reply = replies[r];
    if (user && (!reply || user.at.getTime() <= reply.at.getTime())) {
      merged.push(user);
      u++;
    } else if (reply) {
      merged.push(reply);
      r++;
    }
  }
  const readUsers = users.slice(0, u);
  const readReplies = replies.slice(0, r);
  const userSeq = Math.max(pos.userSeq, ...readUsers.map((i) => i.event_seq));
  const sentSeq = Math.max(pos.sentSeq, ...readReplies.map((i) => i.sent_seq));

  // Messages read before this page that may have changed: the watched ones, and those whose
  // segments are on this page (a settled message reopened). One not read yet comes as a user item.
  const told = new Map(pos.watch.map((w) => [w.seq, w.status]));
  const earlier = new Set([...told.keys(), ...readReplies.map((i) => i.event_seq)]);
  for (const i of readUsers) earlier.delete(i.event_seq);
  const current = await conversationUsersBySeq(tx, {
    tenantId,
    sessionId,
    seqs: [...earlier].filter((seq) => seq <= userSeq),
  });
  const changed = current.filter((m) => told.get(m.event_seq) !== m.status);

  const watch = [...current, ...readUsers]
    .filter((m) => !SETTLED.has(m.status))
    .map((m) => ({ seq: m.event_seq, status: m.status }))
    .sort((x, y) => x.seq - y.seq)
    .slice(-MAX_WATCH);
  return { items: [...changed, ...merged], next: { userSeq, sentSeq, watch } };
}

const START: ConversationPosition = { userSeq: 0, sentSeq: 0, watch: [] };
const INT = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const STATUS = (v: unknown): v is string =>
  typeof v === 'string' && (MESSAGE_EVENT_STATUSES as readonly string[]).includes(v);

/** Opaque to clients: base64url of ['cv2', userSeq, sentSeq, [seq, status, seq, status, …]]. */
export function encodePosition(p: ConversationPosition): string {
  const watch = p.watch.flatMap((w) => [w.seq, w.status]);
  return Buffer.from(JSON.stringify(['cv2', p.userSeq, p.sentSeq, watch]), 'utf8').toString('base64url');
}

/** A cursor this list did not hand out is a 400, never a 500. */
export function decodePosition(raw: string | undefined): ConversationPosition {
  if (raw === undefined || raw === '') return START;
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    v = null;
  }
  if (Array.isArray(v) && v.length === 4 && v[0] === 'cv2' && INT(v[1]) && INT(v[2]) && Array.isArray(v[3])) {
    const flat = v[3] as unknown[];
    if (flat.length % 2 === 0 && flat.length <= 2 * MAX_WATCH) {
      const watch: ConversationPosition['watch'] = [];
      for (let i = 0; i < flat.length; i += 2) {
        const [seq, status] = [flat[i], flat[i + 1]];
        // watched messages were read, so none is past userSeq
        if (!INT(seq) || !STATUS(status) || seq > v[1]) throw fieldError('after', NOT_A_CURSOR);
        watch.push({ seq, status });
      }
      return { userSeq: v[1], sentSeq: v[2], watch };
    }
  }
  throw fieldError('after', NOT_A_CURSOR);
}

const NOT_A_CURSOR = 'after is not a cursor returned by this list';
