import type { Sql } from 'postgres';
import type { SecretBox } from '../../lib/secret-box';
import { seededRandom } from '../fakes/http';
import type { FakeToolProvider } from '../fakes/tool-provider';
import { seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { type SeededWecom, seedWecomTenant, signedPost, wecomInnerXml } from '../helpers/wecom';

// What the release gate sends: chats over three tenants and both channels (Telegram direct, group
// and forum topics; WeCom direct), a scripted agent and an OpenAI-compatible one (the fake), some
// turns calling a side-effecting tool, some replies long enough for two segments. Every message
// carries a token (c<chat>-m<n>) that its reply repeats, so the checker can account for each one
// from what the fakes received alone.

export type ChatKind = 'direct' | 'group' | 'topic';

export interface Chat {
  id: number;
  tenant: TenantKey;
  channel: 'telegram' | 'wecom';
  kind: ChatKind;
  /** Telegram: chat id; WeCom: the user id */
  target: string;
  threadId?: number;
}

export type TenantKey = 'scripted_tg' | 'wecom' | 'model_tg';

export interface PlannedMessage {
  token: string;
  chat: Chat;
  text: string;
  /** segments its reply has (long replies: 2) */
  parts: number;
  /** calls the side-effecting tool */
  tool: boolean;
  /** how many times the harness delivers it (provider re-deliveries) */
  copies: number;
}

export interface SeededTenants {
  scripted_tg: Awaited<ReturnType<typeof seedTelegramTenant>>;
  wecom: SeededWecom;
  model_tg: Awaited<ReturnType<typeof seedTelegramTenant>>;
}

/** Telegram's ~1 msg/s per chat pacing makes long replies slow; a few are enough to test segments. */
const LONG_EVERY = 17;
const TOOL_EVERY = 5;

export function planChats(count: number): Chat[] {
  const chats: Chat[] = [];
  for (let i = 0; i < count; i++) {
    const id = i + 1;
    const slot = i % 5;
    if (slot === 0 || slot === 1) {
      const kind: ChatKind = i % 15 === 0 ? 'group' : i % 15 === 5 ? 'topic' : 'direct';
      chats.push({
        id,
        tenant: 'scripted_tg',
        channel: 'telegram',
        kind,
        target: String(kind === 'direct' ? 80_000 + id : -1_000_000_000 - id),
        ...(kind === 'topic' ? { threadId: 7 } : {}),
      });
    } else if (slot === 2 || slot === 3) {
      chats.push({ id, tenant: 'wecom', channel: 'wecom', kind: 'direct', target: `user${id}` });
    } else {
      chats.push({
        id,
        tenant: 'model_tg',
        channel: 'telegram',
        kind: 'direct',
        target: String(80_000 + id),
      });
    }
  }
  return chats;
}

/** `messages` spread round-robin over the chats; deterministic for a seed. */
export function planMessages(chats: Chat[], messages: number, seed: number): PlannedMessage[] {
  const rnd = seededRandom(seed);
  const perChat = new Map<number, number>();
  const out: PlannedMessage[] = [];
  for (let i = 0; i < messages; i++) {
    const chat = chats[i % chats.length]!;
    const n = (perChat.get(chat.id) ?? 0) + 1;
    perChat.set(chat.id, n);
    const token = `c${chat.id}-m${n}`;
    const tool = chat.channel === 'telegram' && i % TOOL_EVERY === 0;
    const long = !tool && chat.tenant !== 'model_tg' && i % LONG_EVERY === 0;
    const text = tool ? `book ${token}` : long ? `long ${token}` : `hi ${token}`;
    const r = rnd();
    out.push({ token, chat, text, parts: long ? 2 : 1, tool, copies: r < 0.6 ? 1 : r < 0.85 ? 2 : 3 });
  }
  return out;
}

export function toolDefinition(tools: FakeToolProvider) {
  return {
    name: 'book',
    description: 'Books a reference (chaos tool)',
    parameters: { type: 'object', properties: { ref: { type: 'string' } }, required: ['ref'] },
    endpoint_url: `${tools.url}/tools/book`,
    side_effect: true,
    idempotency: 'provider_key',
    receipt_url: `${tools.url}/receipts/{key}`,
  };
}

/**
 * A reply in two segments: two paragraphs, each with the token, together over the channel's limit
 * (Telegram 4096 UTF-16 units, WeCom 2048 bytes) and each under it.
 */
const longReply = (n: number) => `{{1}} (1/2) ${'a'.repeat(n)}\n\n{{1}} (2/2) ${'b'.repeat(n)}`;

export const scripted = (channel: 'telegram' | 'wecom') => ({
  rules: [
    {
      match: '^book (\\S+)$',
      tool_call: { name: 'book', arguments: { ref: '{{1}}' } },
      reply: 'Booked {{1}}',
    },
    { match: '^long (\\S+)$', reply: longReply(channel === 'telegram' ? 2500 : 1500) },
  ],
  default_reply: 'You said: {{text}}',
});

/** Seeds the three tenants as the schema owner; the model tenant's revision is published by the caller. */
export async function seedTenants(
  sql: Sql,
  secrets: SecretBox,
  urls: { telegram: string; wecom: string },
  tools: FakeToolProvider,
): Promise<SeededTenants> {
  const tool = toolDefinition(tools);
  const scripted_tg = await seedTelegramTenant(sql, secrets, {
    apiBaseUrl: urls.telegram,
    tools: [tool],
    scripted: scripted('telegram'),
    // policy dlq (the default): an unconfirmable Telegram send goes to the DLQ, never twice.
  });
  const wecom = await seedWecomTenant(sql, secrets, { apiBaseUrl: urls.wecom, scripted: scripted('wecom') });
  const model_tg = await seedTelegramTenant(sql, secrets, {
    apiBaseUrl: urls.telegram,
    tools: [tool],
    scripted: scripted('telegram'),
    config: { unknown_send_policy: 'resend_possible_duplicate' },
  });
  return { scripted_tg, wecom, model_tg };
}

/** One provider delivery of a message: the webhook request as Telegram or WeCom sends it. */
export function webhookRequest(
  m: PlannedMessage,
  t: SeededTenants,
  ids: { telegramMessageId: number; wecomMsgId: string },
): { path: string; init: RequestInit } {
  if (m.chat.channel === 'telegram') {
    const tenant = m.chat.tenant === 'model_tg' ? t.model_tg : t.scripted_tg;
    const update = telegramTextUpdate({
      chatId: Number(m.chat.target),
      text: m.text,
      messageId: ids.telegramMessageId,
      fromId: 90_000 + m.chat.id,
      chatType: m.chat.kind === 'direct' ? 'private' : 'supergroup',
      ...(m.chat.threadId ? { threadId: m.chat.threadId } : {}),
    });
    const body = JSON.stringify(update);
    return {
      path: `/v1/webhooks/telegram/${tenant.routeKey}`,
      init: {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          'x-telegram-bot-api-secret-token': tenant.webhookSecret,
        },
        body,
      },
    };
  }
  const w = t.wecom;
  const post = signedPost(
    w,
    wecomInnerXml({
      corpId: w.corpId,
      agentId: w.agentId,
      from: m.chat.target,
      content: m.text,
      msgId: ids.wecomMsgId,
    }),
  );
  return {
    path: post.path,
    init: { method: 'POST', headers: { 'content-type': 'text/xml' }, body: post.body },
  };
}

/** The text of the reply's parts as the agent writes them (the checker matches on tokens). */
export function expectedReply(m: PlannedMessage): string {
  if (m.tool) return `Booked ${m.token}`;
  if (m.parts === 2) return `${m.token} (1/2)`;
  return m.chat.tenant === 'model_tg' ? `echo: ${m.text}` : `You said: ${m.text}`;
}
