// Fake Telegram Bot API (sendMessage, getMe, sendChatAction, editMessageText, deleteMessage) over
// plain HTTP on 127.0.0.1. Test fixture only.
import { STATUS_CODES } from 'node:http';
import type { ApiError, Chat, Message, UserFromGetMe } from '@grammyjs/types';
import {
  answer,
  type Fault,
  FaultInjector,
  type FaultKind,
  type FaultPlan,
  parseBody,
  type RandomFaultOptions,
  type RecordedRequest,
  type Reply,
  readBody,
  sendJson,
  startServer,
  waitForCount,
} from './http';
import { type TelegramFile, type TelegramMediaSent, telegramFiles } from './media-files';

export interface TelegramSent {
  token: string;
  chatId: number | string;
  threadId: number | undefined;
  text: string;
  parseMode: string | undefined;
  messageId: number;
  /** Date.now() when the send was accepted */
  at: number;
}

/** An accepted sendChatAction. */
export interface TelegramChatAction {
  token: string;
  chatId: number | string;
  threadId: number | undefined;
  action: string;
  at: number;
}

/** An accepted editMessageText of a message this fake sent. */
export interface TelegramEdit {
  token: string;
  chatId: number | string;
  messageId: number;
  text: string;
  at: number;
}

export interface TelegramRequest extends RecordedRequest {
  token?: string;
  method: string;
  chatId?: number | string;
  /** true when the request reached a chat during its flood-control penalty */
  violation?: boolean;
}

export interface TelegramViolation {
  chatId: number | string;
  at: number;
  penaltyUntil: number;
}

export interface FakeTelegramOptions {
  /** bot tokens registered up front (same as calling addBot) */
  bots?: string[];
  /** while a chat is penalised, answer 429 with the remaining retry_after (default true) */
  enforcePenalty?: boolean;
  /** a request this many ms before the penalty ends is not counted as a violation (timer slack; default 5) */
  penaltyGraceMs?: number;
}

export interface FakeTelegram {
  readonly url: string;
  /** accepted sends, in order (an edit changes the entry's text) */
  readonly sent: TelegramSent[];
  /** accepted chat actions (typing…), in order */
  readonly chatActions: TelegramChatAction[];
  /** accepted message edits, in order */
  readonly edits: TelegramEdit[];
  /** accepted deleteMessage calls, in order */
  readonly deletions: { chatId: number | string; messageId: number; at: number }[];
  /** the messages a chat shows now: sent, not deleted, with their current (edited) text */
  visibleIn(chatId: number | string): TelegramSent[];
  /** accepted edits of messages in a chat, in order */
  editsIn(chatId: number | string): TelegramEdit[];
  /**
   * every editMessageText is refused with this 400 description (as Telegram refuses a message that
   * can't be edited); undefined accepts edits again
   */
  refuseEdits(description: string | undefined): void;
  /** every request received, including faulted and rejected ones */
  readonly requests: TelegramRequest[];
  /** requests that arrived at a chat before its 429 penalty ended */
  readonly violations: TelegramViolation[];
  /** FIFO of faults applied to the next sendMessage requests */
  readonly faults: Fault[];
  readonly faultsInjected: number;
  readonly faultsByKind: Readonly<Record<FaultKind, number>>;
  addBot(token: string): void;
  /** the token is revoked: every call with it answers 401 Unauthorized */
  removeBot(token: string): void;
  /**
   * getMe answers these fields instead of the token's own (e.g. another `id`, as a provider that
   * does not own the bot id would); undefined restores the default
   */
  setBotIdentity(token: string, identity: Partial<UserFromGetMe> | undefined): void;
  blockChat(chatId: number | string): void;
  unblockChat(chatId: number | string): void;
  missingChat(chatId: number | string): void;
  /** hook consulted for every request (sendMessage and getMe) after the queue */
  setFaultPlan(plan: FaultPlan<TelegramRequest> | undefined): void;
  /** random faults on sendMessage; pass undefined to stop */
  failRandomly(opts: RandomFaultOptions | undefined): void;
  clearFaults(): void;
  sentTo(chatId: number | string): TelegramSent[];
  /** gaps in ms between consecutive accepted sends to a chat */
  intervals(chatId: number | string): number[];
  penaltyUntil(chatId: number | string): number | undefined;
  waitForSent(n: number, timeoutMs?: number): Promise<void>;
  /** a file getFile and the file download serve (tests/fakes/media-files.ts) */
  addFile(f: Omit<TelegramFile, 'filePath'> & { filePath?: string }): void;
  /** accepted sendPhoto / sendDocument calls, in order */
  readonly mediaSent: TelegramMediaSent[];
  /** file paths downloaded through /file/bot<token>/…, in order */
  readonly downloads: string[];
  close(): Promise<void>;
}

const MAX_TEXT = 4096;

function err(status: number, description: string, retryAfter?: number): Reply {
  const body: ApiError = { ok: false, error_code: status, description };
  if (retryAfter !== undefined) body.parameters = { retry_after: retryAfter };
  return { status, body };
}

function normChatId(v: unknown): number | string | undefined {
  if (typeof v === 'number') return v;
  if (typeof v !== 'string' || v === '') return undefined;
  return /^-?\d+$/.test(v) ? Number(v) : v;
}

function chatFor(chatId: number | string): Chat {
  if (typeof chatId === 'string') {
    return { id: -1001000000000, type: 'channel', title: chatId, username: chatId.replace(/^@/, '') };
  }
  if (chatId > 0) return { id: chatId, type: 'private', first_name: 'User' };
  if (chatId < -1000000000000) return { id: chatId, type: 'supergroup', title: `Supergroup ${chatId}` };
  return { id: chatId, type: 'group', title: `Group ${chatId}` };
}

function numOrUndef(v: unknown): number | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

// The fakes running in this process by URL, so a helper handed only a binding's api_base_url can
// register a bot where that binding's activation will ask getMe.
const running = new Map<string, FakeTelegram>();

/** The fake Telegram of this process serving `url`, if any. */
export function fakeTelegramAt(url: string): FakeTelegram | undefined {
  return running.get(url.replace(/\/+$/, ''));
}

export async function startFakeTelegram(opts: FakeTelegramOptions = {}): Promise<FakeTelegram> {
  const bots = new Set<string>(opts.bots ?? []);
  const identities = new Map<string, Partial<UserFromGetMe>>();
  const blocked = new Set<string>();
  const missing = new Set<string>();
  const nextMessageId = new Map<string, number>();
  const penalties = new Map<string, number>();
  const enforcePenalty = opts.enforcePenalty ?? true;
  const grace = opts.penaltyGraceMs ?? 5;
  const sent: TelegramSent[] = [];
  const chatActions: TelegramChatAction[] = [];
  const edits: TelegramEdit[] = [];
  const deletions: FakeTelegram['deletions'] = [];
  const deleted = new Set<string>();
  let editRefusal: string | undefined;
  const requests: TelegramRequest[] = [];
  const violations: TelegramViolation[] = [];
  const injector = new FaultInjector<TelegramRequest>();

  const botUser = (token: string): UserFromGetMe => ({
    id: Number(token.split(':')[0]) || 0,
    is_bot: true,
    first_name: 'Fake',
    username: 'fake_bot',
    can_join_groups: true,
    can_read_all_group_messages: false,
    supports_inline_queries: false,
    can_connect_to_business: false,
    has_main_web_app: false,
    has_topics_enabled: false,
    allows_users_to_create_topics: false,
    can_manage_bots: false,
    supports_join_request_queries: false,
    ...identities.get(token),
  });

  const sendMessage = (token: string, body: Record<string, unknown>, chatId: number | string): Reply => {
    const text = typeof body.text === 'string' ? body.text : '';
    const key = String(chatId);
    if (missing.has(key)) return err(400, 'Bad Request: chat not found');
    if (blocked.has(key)) return err(403, 'Forbidden: bot was blocked by the user');
    if (text.trim() === '') return err(400, 'Bad Request: message text is empty');
    if (text.length > MAX_TEXT) return err(400, 'Bad Request: message is too long');
    const threadId = numOrUndef(body.message_thread_id);
    const messageId = (nextMessageId.get(key) ?? 0) + 1;
    nextMessageId.set(key, messageId);
    const at = Date.now();
    const parseMode = typeof body.parse_mode === 'string' ? body.parse_mode : undefined;
    sent.push({ token, chatId, threadId, text, parseMode, messageId, at });
    const message: Message.TextMessage = {
      message_id: messageId,
      date: Math.floor(at / 1000),
      chat: chatFor(chatId),
      from: botUser(token),
      text,
      ...(threadId !== undefined ? { message_thread_id: threadId, is_topic_message: true } : {}),
    };
    return { status: 200, body: { ok: true, result: message } };
  };

  const sendChatAction = (token: string, body: Record<string, unknown>, chatId: number | string): Reply => {
    const key = String(chatId);
    if (missing.has(key)) return err(400, 'Bad Request: chat not found');
    if (blocked.has(key)) return err(403, 'Forbidden: bot was blocked by the user');
    const action = typeof body.action === 'string' ? body.action : '';
    if (action === '') return err(400, 'Bad Request: action is empty');
    chatActions.push({ token, chatId, threadId: numOrUndef(body.message_thread_id), action, at: Date.now() });
    return { status: 200, body: { ok: true, result: true } };
  };

  const editMessageText = (token: string, body: Record<string, unknown>, chatId: number | string): Reply => {
    const text = typeof body.text === 'string' ? body.text : '';
    const messageId = numOrUndef(body.message_id);
    const target = sent.find(
      (m) => String(m.chatId) === String(chatId) && m.messageId === messageId && m.token === token,
    );
    if (!target || messageId === undefined || deleted.has(`${chatId}/${messageId}`))
      return err(400, 'Bad Request: message to edit not found');
    if (editRefusal !== undefined) return err(400, editRefusal);
    if (text.trim() === '') return err(400, 'Bad Request: message text is empty');
    if (text.length > MAX_TEXT) return err(400, 'Bad Request: MESSAGE_TOO_LONG');
    if (text === target.text) {
      return err(
        400,
        'Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message',
      );
    }
    const at = Date.now();
    target.text = text;
    edits.push({ token, chatId, messageId, text, at });
    const message: Message.TextMessage = {
      message_id: messageId,
      date: Math.floor(target.at / 1000),
      edit_date: Math.floor(at / 1000),
      chat: chatFor(chatId),
      from: botUser(token),
      text,
    };
    return { status: 200, body: { ok: true, result: message } };
  };

  const deleteMessage = (token: string, body: Record<string, unknown>, chatId: number | string): Reply => {
    const messageId = numOrUndef(body.message_id);
    const key = `${chatId}/${messageId}`;
    const target = sent.find(
      (m) => String(m.chatId) === String(chatId) && m.messageId === messageId && m.token === token,
    );
    if (!target || messageId === undefined || deleted.has(key))
      return err(400, 'Bad Request: message to delete not found');
    deleted.add(key);
    deletions.push({ chatId, messageId, at: Date.now() });
    return { status: 200, body: { ok: true, result: true } };
  };

  const fileRoutes = telegramFiles((token) => bots.has(token));
  const srv = await startServer(async (req, res) => {
    if (await fileRoutes.handle(req, res)) return;
    const url = new URL(req.url ?? '/', 'http://fake');
    const raw = await readBody(req);
    let body = parseBody(req, raw);
    if (body) body = { ...Object.fromEntries(url.searchParams), ...body };
    // form-encoded bodies carry nested objects as JSON strings
    if (body && typeof body.reply_parameters === 'string') {
      try {
        body.reply_parameters = JSON.parse(body.reply_parameters);
      } catch {
        // leave as-is
      }
    }
    const m = /^\/bot([^/]+)\/([^/]+)$/.exec(url.pathname);
    const token = m?.[1];
    const method = m?.[2]?.toLowerCase() ?? '';
    const endpoint =
      (
        {
          sendmessage: 'sendMessage',
          getme: 'getMe',
          sendchataction: 'sendChatAction',
          editmessagetext: 'editMessageText',
          deletemessage: 'deleteMessage',
        } as Record<string, string>
      )[method] ?? method;
    const chatScoped =
      endpoint === 'sendMessage' ||
      endpoint === 'sendChatAction' ||
      endpoint === 'editMessageText' ||
      endpoint === 'deleteMessage';
    const chatId = chatScoped ? normChatId(body?.chat_id) : undefined;
    const rec: TelegramRequest = {
      at: Date.now(),
      method: req.method ?? 'GET',
      path: url.pathname,
      endpoint,
      body,
      headers: req.headers,
      ...(token !== undefined ? { token } : {}),
      ...(chatId !== undefined ? { chatId } : {}),
    };
    requests.push(rec);

    if (!m || (!chatScoped && endpoint !== 'getMe')) {
      rec.status = 404;
      return sendJson(res, 404, { ok: false, error_code: 404, description: 'Not Found' });
    }

    // flood-control penalty bookkeeping happens before anything else
    const chatKey = chatId !== undefined ? String(chatId) : undefined;
    const until = chatKey !== undefined ? penalties.get(chatKey) : undefined;
    const penalised = until !== undefined && chatId !== undefined && rec.at < until - grace;
    if (penalised && chatId !== undefined && until !== undefined) {
      rec.violation = true;
      violations.push({ chatId, at: rec.at, penaltyUntil: until });
      if (enforcePenalty) {
        const left = Math.max(1, Math.ceil((until - rec.at) / 1000));
        const r = err(429, `Too Many Requests: retry after ${left}`, left);
        rec.status = r.status;
        return sendJson(res, r.status, r.body);
      }
    }

    const fault = injector.next(rec, endpoint === 'sendMessage');
    await answer(
      srv,
      res,
      rec,
      fault,
      (f) => {
        if (f.kind === 'status') return err(f.status, STATUS_CODES[f.status] ?? 'Server Error');
        if (chatKey !== undefined) penalties.set(chatKey, Date.now() + f.retryAfterSeconds * 1000);
        return err(429, `Too Many Requests: retry after ${f.retryAfterSeconds}`, f.retryAfterSeconds);
      },
      () => {
        if (!body) return err(400, "Bad Request: can't parse request body");
        if (token === undefined || !bots.has(token)) return err(401, 'Unauthorized');
        if (endpoint === 'getMe') return { status: 200, body: { ok: true, result: botUser(token) } };
        if (chatId === undefined) return err(400, 'Bad Request: chat_id is empty');
        if (endpoint === 'sendChatAction') return sendChatAction(token, body, chatId);
        if (endpoint === 'editMessageText') return editMessageText(token, body, chatId);
        if (endpoint === 'deleteMessage') return deleteMessage(token, body, chatId);
        return sendMessage(token, body, chatId);
      },
    );
  });

  const sentTo = (chatId: number | string) => sent.filter((s) => String(s.chatId) === String(chatId));
  const fake: FakeTelegram = {
    url: srv.url,
    sent,
    chatActions,
    edits,
    deletions,
    visibleIn: (chatId) => sentTo(chatId).filter((m) => !deleted.has(`${m.chatId}/${m.messageId}`)),
    editsIn: (chatId) => edits.filter((e) => String(e.chatId) === String(chatId)),
    refuseEdits(description) {
      editRefusal = description;
    },
    requests,
    violations,
    faults: injector.queue,
    get faultsInjected() {
      return injector.injected;
    },
    faultsByKind: injector.injectedByKind,
    addBot: (token) => void bots.add(token),
    removeBot: (token) => void bots.delete(token),
    setBotIdentity(token, identity) {
      if (identity) identities.set(token, identity);
      else identities.delete(token);
    },
    blockChat: (chatId) => void blocked.add(String(chatId)),
    unblockChat: (chatId) => void blocked.delete(String(chatId)),
    missingChat: (chatId) => void missing.add(String(chatId)),
    setFaultPlan: (plan) => injector.setPlan(plan),
    failRandomly: (o) => injector.failRandomly(o),
    clearFaults: () => injector.clear(),
    sentTo,
    intervals(chatId) {
      const ts = sentTo(chatId).map((s) => s.at);
      return ts.slice(1).map((t, i) => t - (ts[i] ?? t));
    },
    penaltyUntil: (chatId) => penalties.get(String(chatId)),
    addFile: (f) => fileRoutes.addFile(f),
    mediaSent: fileRoutes.mediaSent,
    downloads: fileRoutes.downloads,
    waitForSent: (n, timeoutMs = 5000) =>
      waitForCount(() => sent.length, n, timeoutMs, 'accepted Telegram sendMessage calls'),
    close() {
      running.delete(srv.url);
      return srv.close();
    },
  };
  running.set(srv.url, fake);
  return fake;
}
