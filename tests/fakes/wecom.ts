// Fake WeCom (企业微信) server API: gettoken, message/send, appchat/send. Test fixture only.
import { randomBytes } from 'node:crypto';
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
import { type WecomMedia, wecomFiles } from './media-files';

export interface WecomApp {
  corpId: string;
  corpSecret: string;
  agentId: number;
}

export interface WecomDelivered {
  endpoint: 'message/send' | 'appchat/send';
  corpId: string;
  /** undefined for appchat/send */
  agentId: number | undefined;
  touser: string | undefined;
  toparty: string | undefined;
  totag: string | undefined;
  chatid: string | undefined;
  msgtype: string;
  content: string;
  msgid: string;
  at: number;
}

export interface WecomRequest extends RecordedRequest {
  corpId?: string;
  /** WeCom errcode answered (HTTP 200 bodies); undefined when dropped / HTTP fault */
  errcode?: number;
  /** true when the duplicate check suppressed this send */
  suppressed?: boolean;
}

export interface FakeWecomOptions {
  apps?: WecomApp[];
  /** expires_in returned by gettoken (default 7200) */
  tokenTtlSeconds?: number;
}

export interface FakeWecom {
  readonly url: string;
  /** messages actually delivered (one per accepted send request) */
  readonly delivered: WecomDelivered[];
  readonly requests: WecomRequest[];
  /** sends answered with the original msgid because of enable_duplicate_check */
  readonly duplicatesSuppressed: number;
  /** identical (agentid, recipient, msgtype, content) messages delivered more than once; assert == 0 */
  readonly duplicatesDelivered: number;
  /** FIFO of faults applied to the next message/send or appchat/send requests */
  readonly faults: Fault[];
  readonly faultsInjected: number;
  readonly faultsByKind: Readonly<Record<FaultKind, number>>;
  addApp(app: WecomApp): void;
  /**
   * gettoken for this corp answers `errcode` whatever the secret (e.g. 40001 for a revoked secret,
   * -1 for "system busy"); undefined restores normal answers
   */
  failGettoken(corpId: string, errcode: number | undefined): void;
  /** message/send to only-invalid recipients → 81013; mixed → success with `invaliduser` */
  invalidUser(userId: string): void;
  /** appchat/send (or message/send with chatid) to this chat → 86003 */
  missingChat(chatId: string): void;
  /** all currently issued tokens become expired (42001); the next gettoken issues a new one */
  expireTokens(): void;
  /** gettoken calls received for this corpid (including failed / faulted ones) */
  tokenCalls(corpId: string): number;
  /** hook consulted for every request (including gettoken) after the queue */
  setFaultPlan(plan: FaultPlan<WecomRequest> | undefined): void;
  failRandomly(opts: RandomFaultOptions | undefined): void;
  clearFaults(): void;
  deliveredTo(recipient: string): WecomDelivered[];
  waitForDelivered(n: number, timeoutMs?: number): Promise<void>;
  /** media media/get serves (tests/fakes/media-files.ts) */
  addMedia(m: WecomMedia): void;
  /** accepted media/upload calls, in order */
  readonly uploads: ReturnType<typeof wecomFiles>['uploads'];
  close(): Promise<void>;
}

const MAX_CONTENT_BYTES = 2048;
const ok = (extra: Record<string, unknown> = {}): Reply => ({
  status: 200,
  body: { errcode: 0, errmsg: 'ok', ...extra },
});
const wxErr = (errcode: number, errmsg: string): Reply => ({ status: 200, body: { errcode, errmsg } });

const str = (v: unknown): string | undefined =>
  typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : undefined;

interface TokenInfo {
  corpId: string;
  corpSecret: string;
  agentId: number;
  expiresAt: number;
  expired: boolean;
}

export async function startFakeWecom(opts: FakeWecomOptions = {}): Promise<FakeWecom> {
  const ttl = opts.tokenTtlSeconds ?? 7200;
  const apps: WecomApp[] = [...(opts.apps ?? [])];
  const tokens = new Map<string, TokenInfo>();
  const tokenCalls = new Map<string, number>();
  const gettokenErrors = new Map<string, number>();
  const invalidUsers = new Set<string>();
  const missingChats = new Set<string>();
  const dupWindow = new Map<string, { msgid: string; at: number }>();
  const delivered: WecomDelivered[] = [];
  const requests: WecomRequest[] = [];
  const injector = new FaultInjector<WecomRequest>();
  let suppressed = 0;
  let msgSeq = 0;

  const dupKey = (d: Pick<WecomDelivered, 'agentId' | 'msgtype' | 'content'>, recipient: string) =>
    JSON.stringify([d.agentId ?? null, recipient, d.msgtype, d.content]);
  const recipientOf = (d: Pick<WecomDelivered, 'touser' | 'toparty' | 'totag' | 'chatid'>) =>
    d.chatid !== undefined
      ? `chat:${d.chatid}`
      : `u:${d.touser ?? ''}|p:${d.toparty ?? ''}|t:${d.totag ?? ''}`;

  const getToken = (url: URL): Reply => {
    const corpId = url.searchParams.get('corpid') ?? '';
    const secret = url.searchParams.get('corpsecret') ?? '';
    const app = apps.find((a) => a.corpId === corpId && a.corpSecret === secret);
    if (!corpId) return wxErr(41002, 'corpid missing');
    if (!secret) return wxErr(41004, 'corpsecret missing');
    const forced = gettokenErrors.get(corpId);
    if (forced !== undefined) return wxErr(forced, forced === -1 ? 'system busy' : 'invalid credential');
    // like WeCom: an unknown corp is 40013, a known corp with a wrong secret 40001
    if (!apps.some((a) => a.corpId === corpId)) return wxErr(40013, 'invalid corpid');
    if (!app) return wxErr(40001, 'invalid credential');
    const now = Date.now();
    // like WeCom: repeated calls within the validity period return the same token
    for (const [token, t] of tokens) {
      if (t.corpId === corpId && t.corpSecret === secret && !t.expired && t.expiresAt > now) {
        return ok({ access_token: token, expires_in: Math.floor((t.expiresAt - now) / 1000) });
      }
    }
    const token = `fake-wecom-${randomBytes(24).toString('hex')}`;
    tokens.set(token, {
      corpId,
      corpSecret: secret,
      agentId: app.agentId,
      expiresAt: now + ttl * 1000,
      expired: false,
    });
    return ok({ access_token: token, expires_in: ttl });
  };

  const checkToken = (url: URL): Reply | TokenInfo => {
    const token = url.searchParams.get('access_token');
    if (!token) return wxErr(41001, 'access_token missing');
    const info = tokens.get(token);
    if (!info) return wxErr(40014, 'invalid access_token');
    if (info.expired || info.expiresAt <= Date.now()) return wxErr(42001, 'access_token expired');
    return info;
  };

  const send = (
    endpoint: WecomDelivered['endpoint'],
    url: URL,
    body: Record<string, unknown> | undefined,
    rec: WecomRequest,
  ): Reply => {
    const auth = checkToken(url);
    if ('status' in auth) return auth;
    rec.corpId = auth.corpId;
    if (!body) return wxErr(47001, 'data format error');
    const msgtype = str(body.msgtype);
    if (!msgtype) return wxErr(41008, 'missing msgtype');
    const payload = body[msgtype];
    // image / file messages carry an uploaded media_id (tests/fakes/media-files.ts): `media:<id>`.
    const mediaId =
      (msgtype === 'image' || msgtype === 'file') && payload && typeof payload === 'object'
        ? str((payload as Record<string, unknown>).media_id)
        : undefined;
    if (mediaId !== undefined && !fileRoutes.uploads.some((u) => u.mediaId === mediaId))
      return wxErr(40007, 'invalid media_id');
    const content =
      mediaId !== undefined
        ? `media:${mediaId}`
        : payload && typeof payload === 'object'
          ? (payload as Record<string, unknown>).content
          : undefined;
    if (msgtype !== 'text' && msgtype !== 'markdown' && mediaId === undefined)
      return wxErr(40008, 'invalid message type');
    if (typeof content !== 'string' || content === '') return wxErr(44004, 'empty content');
    if (Buffer.byteLength(content, 'utf8') > MAX_CONTENT_BYTES)
      return wxErr(45002, 'content size out of limit');

    let agentId: number | undefined;
    let touser = str(body.touser);
    const toparty = str(body.toparty);
    const totag = str(body.totag);
    const chatid = str(body.chatid);
    let invaliduser: string | undefined;
    if (endpoint === 'message/send') {
      agentId = Number(body.agentid);
      if (!Number.isFinite(agentId) || body.agentid === undefined) return wxErr(41011, 'missing agentid');
      if (agentId !== auth.agentId) return wxErr(40056, 'invalid agentid');
    }
    if (endpoint === 'appchat/send' || chatid !== undefined) {
      if (!chatid) return wxErr(86001, 'invalid chatid');
      if (missingChats.has(chatid)) return wxErr(86003, 'chatid not exist');
    } else {
      if (!touser && !toparty && !totag) return wxErr(40003, 'invalid userid');
      if (touser && touser !== '@all') {
        const users = touser.split('|');
        const bad = users.filter((u) => invalidUsers.has(u));
        if (bad.length > 0) invaliduser = bad.join('|');
        const good = users.filter((u) => !invalidUsers.has(u));
        if (good.length === 0 && !toparty && !totag) return wxErr(81013, 'user & party & tag all invalid');
        touser = good.join('|') || undefined;
      }
    }

    const d = { agentId, msgtype, content };
    const key = dupKey(d, recipientOf({ touser, toparty, totag, chatid }));
    const now = Date.now();
    if (Number(body.enable_duplicate_check) === 1) {
      const interval = Math.min(Number(body.duplicate_check_interval) || 1800, 4 * 3600);
      const prev = dupWindow.get(key);
      if (prev && now - prev.at < interval * 1000) {
        suppressed++;
        rec.suppressed = true;
        return ok({ msgid: prev.msgid, ...(invaliduser ? { invaliduser } : {}) });
      }
    }
    const msgid = `fakemsg-${++msgSeq}-${randomBytes(6).toString('hex')}`;
    dupWindow.set(key, { msgid, at: now });
    delivered.push({
      endpoint,
      corpId: auth.corpId,
      agentId,
      touser,
      toparty,
      totag,
      chatid,
      msgtype,
      content,
      msgid,
      at: now,
    });
    return ok(endpoint === 'message/send' ? { msgid, ...(invaliduser ? { invaliduser } : {}) } : { msgid });
  };

  const fileRoutes = wecomFiles((url) => !('status' in checkToken(url)));
  const srv = await startServer(async (req, res) => {
    if (await fileRoutes.handle(req, res)) return;
    const url = new URL(req.url ?? '/', 'http://fake');
    const raw = await readBody(req);
    const body = parseBody(req, raw);
    const path = url.pathname.replace(/\/+$/, '');
    const endpoint =
      path === '/cgi-bin/gettoken'
        ? 'gettoken'
        : path === '/cgi-bin/message/send'
          ? 'message/send'
          : path === '/cgi-bin/appchat/send'
            ? 'appchat/send'
            : path;
    const rec: WecomRequest = {
      at: Date.now(),
      method: req.method ?? 'GET',
      path: url.pathname,
      endpoint,
      body,
      headers: req.headers,
    };
    requests.push(rec);
    if (endpoint === 'gettoken') {
      rec.corpId = url.searchParams.get('corpid') ?? '';
      tokenCalls.set(rec.corpId, (tokenCalls.get(rec.corpId) ?? 0) + 1);
    }
    const isSend = endpoint === 'message/send' || endpoint === 'appchat/send';
    if (!isSend && endpoint !== 'gettoken') {
      rec.status = 404;
      return sendJson(res, 404, { errcode: 404, errmsg: 'not found' });
    }
    if (isSend && req.method !== 'POST') {
      rec.status = 200;
      rec.errcode = 43002;
      return sendJson(res, 200, { errcode: 43002, errmsg: 'require POST method' });
    }
    const fault = injector.next(rec, isSend);
    await answer(
      srv,
      res,
      rec,
      fault,
      (f) => {
        if (f.kind === 'status') return { status: f.status, body: { errcode: -1, errmsg: 'system busy' } };
        rec.errcode = 45009;
        return wxErr(45009, 'api freq out of limit');
      },
      () => {
        const r =
          endpoint === 'gettoken'
            ? getToken(url)
            : send(endpoint as WecomDelivered['endpoint'], url, body, rec);
        rec.errcode = (r.body as { errcode: number }).errcode;
        return r;
      },
    );
  });

  return {
    url: srv.url,
    delivered,
    requests,
    get duplicatesSuppressed() {
      return suppressed;
    },
    get duplicatesDelivered() {
      const seen = new Set<string>();
      let dups = 0;
      for (const d of delivered) {
        const key = dupKey(d, recipientOf(d));
        if (seen.has(key)) dups++;
        else seen.add(key);
      }
      return dups;
    },
    faults: injector.queue,
    get faultsInjected() {
      return injector.injected;
    },
    faultsByKind: injector.injectedByKind,
    addApp: (app) => void apps.push(app),
    failGettoken(corpId, errcode) {
      if (errcode === undefined) gettokenErrors.delete(corpId);
      else gettokenErrors.set(corpId, errcode);
    },
    invalidUser: (userId) => void invalidUsers.add(userId),
    missingChat: (chatId) => void missingChats.add(chatId),
    expireTokens() {
      for (const t of tokens.values()) t.expired = true;
    },
    tokenCalls: (corpId) => tokenCalls.get(corpId) ?? 0,
    setFaultPlan: (plan) => injector.setPlan(plan),
    failRandomly: (o) => injector.failRandomly(o),
    clearFaults: () => injector.clear(),
    deliveredTo: (recipient) =>
      delivered.filter(
        (d) =>
          d.chatid === recipient || (d.touser ?? '').split('|').includes(recipient) || d.touser === '@all',
      ),
    waitForDelivered: (n, timeoutMs = 5000) =>
      waitForCount(() => delivered.length, n, timeoutMs, 'delivered WeCom messages'),
    addMedia: (m) => fileRoutes.addMedia(m),
    uploads: fileRoutes.uploads,
    close: () => srv.close(),
  };
}
