import type { PlannedMessage } from './workload';

// The release gate's checker, after Jepsen's: it reads only what a user and an operator can see —
// what the fake providers delivered to each chat, the tools' applied effects, the webhook answers,
// and the admin API's message and dead-letter lists — and accounts for every message sent.

export interface Delivered {
  chatId: number;
  text: string;
  at: number;
}

export interface AckRecord {
  token: string;
  /** when the request was sent, ms since the run started */
  at: number;
  /** which API process answered (1-based) */
  api: number;
  status: number | 'error';
  ms: number;
  /** sent while PostgreSQL was down or restarting: a 5xx and a provider retry are correct then */
  duringDbOutage: boolean;
}

export interface MessageState {
  token: string;
  status: string;
  outcome: string | null;
  /** reason classes of its dead letters */
  deadLetters: string[];
  /** a segment recorded a possible duplicate (binding policy resend_possible_duplicate) */
  flaggedDuplicate: boolean;
}

export interface Observations {
  planned: PlannedMessage[];
  delivered: Delivered[];
  /** tool effects applied at the provider, by the reference the call carried */
  effects: { ref: string }[];
  acks: AckRecord[];
  messages: MessageState[];
  /** reason classes a dead letter may carry given the faults injected */
  allowedReasons: string[];
  processesLeft: string[];
  /**
   * processes that exited without the harness asking (crashes) or did not stop cleanly on SIGTERM,
   * each with its log's last lines
   */
  crashes: string[];
  /** every message the harness meant to send (the report fails if some were not sent in time) */
  plannedCount: number;
  /** the state rows the admin API lists (one per recorded message; duplicates are a failure) */
  allStates: MessageState[];
}

export interface ChatReport {
  chatId: number;
  sent: number;
  answered: number;
  orderViolations: number;
}

export interface Report {
  messages: number;
  answered: number;
  lost: string[];
  deadLettered: { token: string; reasons: string[] }[];
  unexpectedReasons: { token: string; reasons: string[] }[];
  duplicatedReplies: { token: string; copies: number; flagged: boolean; channel: string }[];
  duplicatedEffects: { ref: string; count: number }[];
  unexpected: string[];
  orderViolations: { chatId: number; expected: string[]; seen: string[] }[];
  slowAcks: number;
  slowAcksDuringDbOutage: number;
  failedAcks: number;
  ackP99Ms: number;
  notTerminal: string[];
  processesLeft: string[];
  crashes: string[];
  chats: ChatReport[];
  notSent: number;
  /** replied tool turns whose side effect was not applied exactly once */
  missingEffects: string[];
  /** messages recorded more than once (an ingestion duplicate) */
  recordedTwice: string[];
  /** acks over 5 s outside the outage, with when they were sent */
  slowAckDetails: { token: string; at: number; api: number; ms: number }[];
}

const TOKEN = /c\d+-m\d+/g;

export function check(o: Observations): Report {
  const byToken = new Map(o.planned.map((m) => [m.token, m]));
  const state = new Map(o.messages.map((m) => [m.token, m]));
  // Deliveries per (chat, exact text): one reply part delivered twice is a duplicate.
  const partCopies = new Map<string, number>();
  const tokensSeen = new Map<string, Set<string>>();
  const firstSeenOrder = new Map<number, string[]>();
  // Per chat, the planned position of every delivered part in delivery order: it may never go back.
  const positions = new Map<number, { token: string; index: number }[]>();
  const indexOf = new Map<string, number>();
  for (const [i, m] of o.planned.entries()) indexOf.set(m.token, i);
  const unexpected: string[] = [];
  for (const d of [...o.delivered].sort((a, b) => a.at - b.at)) {
    const tokens = [...new Set(d.text.match(TOKEN) ?? [])];
    if (tokens.length === 0) {
      unexpected.push(`chat ${d.chatId}: ${d.text.slice(0, 60)}`);
      continue;
    }
    for (const token of tokens) {
      const m = byToken.get(token);
      if (!m || m.chat.id !== d.chatId) {
        unexpected.push(`chat ${d.chatId}: ${token}`);
        continue;
      }
      const key = `${d.chatId}\u0000${d.text}`;
      partCopies.set(key, (partCopies.get(key) ?? 0) + 1);
      positions.set(d.chatId, [...(positions.get(d.chatId) ?? []), { token, index: indexOf.get(token)! }]);
      const seen = tokensSeen.get(token) ?? new Set<string>();
      if (seen.size === 0) firstSeenOrder.set(d.chatId, [...(firstSeenOrder.get(d.chatId) ?? []), token]);
      seen.add(d.text);
      tokensSeen.set(token, seen);
    }
  }

  const notTerminal = o.allStates
    .filter((x) => x.status !== 'replied' && x.status !== 'failed')
    .map((x) => `${x.token} (${x.status})`);
  const counts = new Map<string, number>();
  for (const x of o.allStates) counts.set(x.token, (counts.get(x.token) ?? 0) + 1);
  const recordedTwice = [...counts].filter(([, n]) => n > 1).map(([t]) => t);
  const lost: string[] = [];
  const deadLettered: Report['deadLettered'] = [];
  const unexpectedReasons: Report['unexpectedReasons'] = [];
  let answered = 0;
  for (const m of o.planned) {
    const parts = tokensSeen.get(m.token)?.size ?? 0;
    const s = state.get(m.token);
    // Every dead letter, also of a message whose reply did arrive (an unconfirmable send that was
    // in fact delivered), must name a fault the run injected.
    const odd = (s?.deadLetters ?? []).filter((r) => !o.allowedReasons.includes(r));
    if (odd.length > 0) unexpectedReasons.push({ token: m.token, reasons: odd });
    if (s && s.deadLetters.length > 0) deadLettered.push({ token: m.token, reasons: s.deadLetters });
    if (parts >= m.parts) {
      answered++;
      continue;
    }
    // A dead letter accounts for a missing reply only when the message ended failed with it.
    if (s && s.status === 'failed' && s.deadLetters.length > 0) continue;
    lost.push(
      `${m.token} (${s ? `${s.status}/${s.outcome ?? '-'}` : 'not recorded'}, ${parts}/${m.parts} parts)`,
    );
  }

  const duplicatedReplies: Report['duplicatedReplies'] = [];
  for (const [key, copies] of partCopies) {
    if (copies < 2) continue;
    const [chatId, text] = key.split('\u0000') as [string, string];
    const token = (text.match(TOKEN) ?? [''])[0]!;
    const m = byToken.get(token);
    duplicatedReplies.push({
      token,
      copies,
      flagged: state.get(token)?.flaggedDuplicate ?? false,
      channel: `${m?.chat.channel ?? '?'}/${m?.chat.tenant ?? chatId}`,
    });
  }

  // More distinct texts for a message than its reply has parts: two different replies to one message.
  for (const [token, texts] of tokensSeen) {
    const m = byToken.get(token);
    if (m && texts.size > m.parts)
      duplicatedReplies.push({
        token,
        copies: texts.size,
        flagged: false,
        channel: `${m.chat.channel}/${m.chat.tenant}`,
      });
  }
  const effectCounts = new Map<string, number>();
  for (const e of o.effects) effectCounts.set(e.ref, (effectCounts.get(e.ref) ?? 0) + 1);
  const duplicatedEffects = [...effectCounts]
    .filter(([, n]) => n > 1)
    .map(([ref, count]) => ({ ref, count }));
  // A replied tool turn ("Booked …") must rest on exactly one applied effect.
  const missingEffects = o.planned
    .filter(
      (m) =>
        m.tool && (tokensSeen.get(m.token)?.size ?? 0) >= m.parts && (effectCounts.get(m.token) ?? 0) !== 1,
    )
    .map((m) => `${m.token} (${effectCounts.get(m.token) ?? 0} effects)`);

  const orderViolations: Report['orderViolations'] = [];
  const chats: ChatReport[] = [];
  const byChat = new Map<number, PlannedMessage[]>();
  for (const m of o.planned) byChat.set(m.chat.id, [...(byChat.get(m.chat.id) ?? []), m]);
  for (const [chatId, sent] of byChat) {
    const seen = firstSeenOrder.get(chatId) ?? [];
    const expected = sent.map((m) => m.token).filter((t) => seen.includes(t));
    // Replies in inbound order, and no message's parts interleaved with another's: the planned
    // position of what the chat received never goes back (a resent copy of the same part excepted).
    const seq = positions.get(chatId) ?? [];
    let violations = seen.filter((t, i) => expected[i] !== t).length;
    for (let i = 1; i < seq.length; i++) if (seq[i]!.index < seq[i - 1]!.index) violations++;
    if (violations > 0) orderViolations.push({ chatId, expected, seen });
    chats.push({ chatId, sent: sent.length, answered: seen.length, orderViolations: violations });
  }

  const okAcks = o.acks.filter((a) => a.status !== 'error');
  const times = o.acks.map((a) => a.ms).sort((a, b) => a - b);
  return {
    messages: o.planned.length,
    answered,
    lost,
    deadLettered,
    unexpectedReasons,
    duplicatedReplies,
    duplicatedEffects,
    unexpected,
    orderViolations,
    slowAcks: o.acks.filter((a) => a.ms > 5000 && !a.duringDbOutage).length,
    slowAcksDuringDbOutage: o.acks.filter((a) => a.ms > 5000 && a.duringDbOutage).length,
    failedAcks: o.acks.length - okAcks.filter((a) => a.status === 200).length,
    ackP99Ms: times.length ? times[Math.min(times.length - 1, Math.floor(times.length * 0.99))]! : 0,
    notTerminal,
    processesLeft: o.processesLeft,
    crashes: o.crashes,
    chats,
    notSent: o.plannedCount - o.planned.length,
    missingEffects,
    recordedTwice,
    slowAckDetails: o.acks
      .filter((a) => a.ms > 5000 && !a.duringDbOutage)
      .map((a) => ({ token: a.token, at: Math.round(a.at), api: a.api, ms: Math.round(a.ms) })),
  };
}

/** The release targets: lost 0, unexpected 0, duplicates only where the policy allows and flagged. */
export function verdict(r: Report): { pass: boolean; failures: string[] } {
  const failures: string[] = [];
  if (r.lost.length) failures.push(`lost ${r.lost.length}`);
  if (r.unexpected.length) failures.push(`unexpected ${r.unexpected.length}`);
  const badDupes = r.duplicatedReplies.filter((d) => !(d.channel === 'telegram/model_tg' && d.flagged));
  if (badDupes.length)
    failures.push(`duplicated replies ${badDupes.length} (outside resend_possible_duplicate, or unflagged)`);
  if (r.duplicatedEffects.length) failures.push(`duplicated effects ${r.duplicatedEffects.length}`);
  if (r.orderViolations.length) failures.push(`order violations in ${r.orderViolations.length} chats`);
  if (r.unexpectedReasons.length)
    failures.push(`dead letters with an unexpected reason ${r.unexpectedReasons.length}`);
  if (r.slowAcks) failures.push(`acks over 5 s outside the PostgreSQL outage ${r.slowAcks}`);
  if (r.notTerminal.length) failures.push(`not terminal ${r.notTerminal.length}`);
  if (r.processesLeft.length) failures.push(`processes left running ${r.processesLeft.length}`);
  for (const crash of r.crashes) failures.push(`process ${crash}`);
  if (r.notSent) failures.push(`not sent within the deadline ${r.notSent}`);
  if (r.missingEffects.length)
    failures.push(`tool replies without exactly one effect ${r.missingEffects.length}`);
  if (r.recordedTwice.length) failures.push(`messages recorded twice ${r.recordedTwice.length}`);
  return { pass: failures.length === 0, failures };
}
