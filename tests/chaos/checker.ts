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
  chats: ChatReport[];
}

const TOKEN = /c\d+-m\d+/g;

export function check(o: Observations): Report {
  const byToken = new Map(o.planned.map((m) => [m.token, m]));
  const state = new Map(o.messages.map((m) => [m.token, m]));
  // Deliveries per (chat, exact text): one reply part delivered twice is a duplicate.
  const partCopies = new Map<string, number>();
  const tokensSeen = new Map<string, Set<string>>();
  const firstSeenOrder = new Map<number, string[]>();
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
      const seen = tokensSeen.get(token) ?? new Set<string>();
      if (seen.size === 0) firstSeenOrder.set(d.chatId, [...(firstSeenOrder.get(d.chatId) ?? []), token]);
      seen.add(d.text);
      tokensSeen.set(token, seen);
    }
  }

  const lost: string[] = [];
  const deadLettered: Report['deadLettered'] = [];
  const unexpectedReasons: Report['unexpectedReasons'] = [];
  const notTerminal: string[] = [];
  let answered = 0;
  for (const m of o.planned) {
    const parts = tokensSeen.get(m.token)?.size ?? 0;
    const s = state.get(m.token);
    if (s && s.status !== 'replied' && s.status !== 'failed') notTerminal.push(`${m.token} (${s.status})`);
    // Every dead letter, also of a message whose reply did arrive (an unconfirmable send that was
    // in fact delivered), must name a fault the run injected.
    const odd = (s?.deadLetters ?? []).filter((r) => !o.allowedReasons.includes(r));
    if (odd.length > 0) unexpectedReasons.push({ token: m.token, reasons: odd });
    if (s && s.deadLetters.length > 0) deadLettered.push({ token: m.token, reasons: s.deadLetters });
    if (parts >= m.parts) {
      answered++;
      continue;
    }
    if (s && s.deadLetters.length > 0) continue;
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

  const effectCounts = new Map<string, number>();
  for (const e of o.effects) effectCounts.set(e.ref, (effectCounts.get(e.ref) ?? 0) + 1);
  const duplicatedEffects = [...effectCounts]
    .filter(([, n]) => n > 1)
    .map(([ref, count]) => ({ ref, count }));

  const orderViolations: Report['orderViolations'] = [];
  const chats: ChatReport[] = [];
  const byChat = new Map<number, PlannedMessage[]>();
  for (const m of o.planned) byChat.set(m.chat.id, [...(byChat.get(m.chat.id) ?? []), m]);
  for (const [chatId, sent] of byChat) {
    const seen = firstSeenOrder.get(chatId) ?? [];
    const expected = sent.map((m) => m.token).filter((t) => seen.includes(t));
    const violations = seen.filter((t, i) => expected[i] !== t).length;
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
    chats,
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
  return { pass: failures.length === 0, failures };
}
