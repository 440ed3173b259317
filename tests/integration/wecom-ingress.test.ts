import { createCipheriv, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_BYTES } from '../../api/app';
import { routeKeyDigest } from '../../api/ingress/candidate';
import { computeSignature, encrypt, parseEncodingAesKey } from '../../channels/wecom/crypto';
import { claimNonce, pruneReplayGuard } from '../../db/queries/replay-guard';
import { type FakeWecom, startFakeWecom } from '../fakes/wecom';
import { createHarness, type Harness } from '../helpers/harness';
import { waitFor } from '../helpers/wait';
import {
  envelopeXml,
  nextMsgId,
  randomNonce,
  type SeededWecom,
  seedWecomTenant,
  signedPost,
  wecomInnerXml,
} from '../helpers/wecom';

// WeCom callback ingress on real PostgreSQL and a real Temporal dev server: URL verification,
// record-once for messages and provider retries, and a negative matrix where every refusal leaves
// no tenant data behind (only, before trust, a row in the tenant-less security sink).
describe('WeCom webhook ingress', () => {
  let h: Harness;
  let fake: FakeWecom;
  let rid = 0;
  const nextRequestId = () => `wecom-test-${process.pid}-${Date.now()}-${rid++}`;

  beforeAll(async () => {
    h = await createHarness();
    fake = await startFakeWecom();
    await h.startWorker();
  });
  afterAll(async () => {
    await h?.close();
    await fake?.close();
  });

  const seed = async (opts: Parameters<typeof seedWecomTenant>[2] = {}) => {
    const w = await seedWecomTenant(h.sql, h.secrets, { apiBaseUrl: fake.url, ...opts });
    fake.addApp({ corpId: w.corpId, corpSecret: w.corpSecret, agentId: w.agentId });
    return w;
  };

  // The server never adopts a client's x-request-id: remember ours (the response header) per
  // client-chosen id, which is what the security sink records.
  const serverIds = new Map<string, string>();
  const track = async (clientId: string, pending: Response | Promise<Response>) => {
    const res = await pending;
    serverIds.set(clientId, res.headers.get('x-request-id')!);
    return res;
  };
  const post = (path: string, body: string, o: { contentType?: string | null; requestId?: string } = {}) => {
    const requestId = o.requestId ?? nextRequestId();
    return track(
      requestId,
      h.app.request(path, {
        method: 'POST',
        headers: {
          ...(o.contentType === null ? {} : { 'content-type': o.contentType ?? 'text/xml; charset=utf-8' }),
          'x-request-id': requestId,
        },
        body,
      }),
    );
  };
  const get = (path: string, requestId = nextRequestId()) =>
    track(requestId, h.app.request(path, { headers: { 'x-request-id': requestId } }));

  const textMessage = (
    w: SeededWecom,
    content: string,
    extra: Partial<Parameters<typeof wecomInnerXml>[0]> = {},
  ) => wecomInnerXml({ corpId: w.corpId, agentId: w.agentId, from: 'zhangsan', content, ...extra });

  const counts = async (tenantId: string) => {
    const [e] = await h.sql<
      { n: number }[]
    >`select count(*)::int as n from message_event where tenant_id = ${tenantId}`;
    const [s] = await h.sql<
      { n: number }[]
    >`select count(*)::int as n from session where tenant_id = ${tenantId}`;
    return { events: e!.n, sessions: s!.n };
  };
  const securityClass = async (requestId: string) => {
    const rows = await h.sql<{ failure_class: string; route_key_digest: string | null }[]>`
      select failure_class, route_key_digest from ingress_security_event
      where request_id = ${serverIds.get(requestId) ?? requestId}`;
    return rows.map((r) => r.failure_class);
  };
  const workflowsOf = async (tenantId: string) => {
    const ids: string[] = [];
    for await (const wf of h.temporal.workflow.list({ query: `SwitchyardTenantId = '${tenantId}'` }))
      ids.push(wf.workflowId);
    return ids;
  };
  const nowS = () => Math.floor(Date.now() / 1000);

  it('GET verifies the callback URL and answers the exact echostr plaintext, with + sent as %2B or raw', async () => {
    const w = await seed();
    let echostr = '';
    let plaintext = '';
    while (!echostr.includes('+')) {
      plaintext = `${randomBytes(6).toString('hex')}${Date.now()}`;
      echostr = encrypt({ encodingAesKey: w.encodingAesKey, message: plaintext, receiveId: w.corpId });
    }
    const timestamp = String(nowS());
    const nonce = randomNonce();
    const sig = computeSignature(w.token, timestamp, nonce, echostr);
    const base = `/v1/webhooks/wecom/${w.routeKey}?msg_signature=${sig}&timestamp=${timestamp}&nonce=${nonce}`;

    const encoded = await get(`${base}&echostr=${encodeURIComponent(echostr)}`);
    expect(encoded.status).toBe(200);
    expect(encoded.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await encoded.text()).toBe(plaintext);

    // A raw '+' (and raw '/' and '=') must not be form-decoded into a space.
    expect(`${base}&echostr=${echostr}`).toContain('+');
    const raw = await get(`${base}&echostr=${echostr}`);
    expect(raw.status).toBe(200);
    expect(await raw.text()).toBe(plaintext);

    // Same echostr, signature over the form-decoded variant (+ → space) does not verify.
    const spaced = echostr.replaceAll('+', ' ');
    const rid1 = nextRequestId();
    const bad = await get(
      `/v1/webhooks/wecom/${w.routeKey}?msg_signature=${computeSignature(w.token, timestamp, nonce, spaced)}&timestamp=${timestamp}&nonce=${nonce}&echostr=${echostr}`,
      rid1,
    );
    expect(bad.status).toBe(401);
    expect(await securityClass(rid1)).toEqual(['bad_signature']);

    const rid2 = nextRequestId();
    const missing = await get(`${base}`, rid2);
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('validation_failed');
    expect(await securityClass(rid2)).toEqual([]);
    expect(await counts(w.tenantId)).toEqual({ events: 0, sessions: 0 });

    const doc = (await (await h.app.request('/openapi.json')).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    expect(Object.keys(doc.paths['/v1/webhooks/wecom/{route_key}'] ?? {}).sort()).toEqual(['get', 'post']);
  });

  it('POST of a text message answers 200 with an empty body, records one message and starts its workflow', async () => {
    const w = await seed();
    const msgId = nextMsgId();
    const req = signedPost(w, textMessage(w, '  hello switchyard  ', { msgId }));
    const res = await post(req.path, req.body);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');

    const rows = await h.sql<
      {
        event_id: string;
        workflow_id: string;
        kind: string;
        external_message_id: string;
        payload: Record<string, unknown>;
      }[]
    >`select event_id, workflow_id, kind, external_message_id, payload from message_event where tenant_id = ${w.tenantId}`;
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ kind: 'text', external_message_id: msgId });
    expect(rows[0]!.payload).toMatchObject({
      channel: 'wecom',
      text: 'hello switchyard',
      senderId: 'zhangsan',
      chatId: 'zhangsan',
      chatType: 'direct',
      threadId: null,
    });
    const [session] = await h.sql<{ kind: string; external_user_id: string }[]>`
      select kind, external_user_id from session where tenant_id = ${w.tenantId}`;
    expect(session).toEqual({ kind: 'direct', external_user_id: 'zhangsan' });

    const desc = await h.temporal.workflow.getHandle(rows[0]!.workflow_id).describe();
    expect(desc.searchAttributes.SwitchyardTenantId).toEqual([w.tenantId]);
    expect(desc.searchAttributes.SwitchyardChannel).toEqual(['wecom']);
  });

  it('the same POST three times concurrently and once more later gives one row and one workflow', async () => {
    const w = await seed();
    const req = signedPost(w, textMessage(w, 'retry me'));
    const responses = await Promise.all([1, 2, 3].map(() => post(req.path, req.body)));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
    for (const r of responses) expect(await r.text()).toBe('');

    await new Promise((r) => setTimeout(r, 300));
    const later = await post(req.path, req.body);
    expect(later.status).toBe(200);

    const rows = await h.sql<{ workflow_id: string; event_seq: number }[]>`
      select workflow_id, event_seq from message_event where tenant_id = ${w.tenantId}`;
    expect(rows).toHaveLength(1);
    expect(rows[0]!.event_seq).toBe(1);
    await waitFor(async () => (await workflowsOf(w.tenantId)).length >= 1, { label: 'workflow visible' });
    expect(await workflowsOf(w.tenantId)).toEqual([rows[0]!.workflow_id]);
  });

  it('group messages, non-text messages and events are recorded by their identity; events retry as duplicates', async () => {
    const w = await seed();
    const group = signedPost(w, textMessage(w, 'hi group', { chatId: 'wrchat-1', from: 'lisi' }));
    const image = signedPost(
      w,
      wecomInnerXml({ corpId: w.corpId, agentId: w.agentId, from: 'lisi', msgType: 'image' }),
    );
    const eventXml = wecomInnerXml({
      corpId: w.corpId,
      agentId: w.agentId,
      from: 'wangwu',
      msgType: 'event',
      event: 'subscribe',
      msgId: null,
    });
    const event = signedPost(w, eventXml);
    for (const r of [group, image, event, event]) expect((await post(r.path, r.body)).status).toBe(200);
    // The same event delivered again with a new nonce and signature (a fresh WeCom push) is still one row.
    const pushedAgain = signedPost(w, eventXml);
    expect((await post(pushedAgain.path, pushedAgain.body)).status).toBe(200);

    const rows = await h.sql<
      { kind: string; external_message_id: string; payload: Record<string, unknown> }[]
    >`
      select kind, external_message_id, payload from message_event where tenant_id = ${w.tenantId} order by created_at`;
    expect(rows).toHaveLength(3);
    expect(rows[0]!.payload).toMatchObject({
      kind: 'text',
      chatId: 'wrchat-1',
      chatType: 'group',
      senderId: 'lisi',
    });
    // A picture is media now (issue #15): it executes, its MediaId fetched later by the execution.
    expect(rows[1]).toMatchObject({
      kind: 'text',
      payload: { kind: 'media', platformType: 'image', media: [{ kind: 'image', fileId: 'media-1' }] },
    });
    expect(rows[2]).toMatchObject({ kind: 'unsupported', payload: { platformType: 'event:subscribe' } });
    expect(rows[2]!.external_message_id).toMatch(/^digest:[0-9a-f]{64}$/);
    const sessions = await h.sql<{ kind: string; external_chat_id: string }[]>`
      select kind, external_chat_id from session where tenant_id = ${w.tenantId} and kind = 'group'`;
    expect(sessions).toEqual([{ kind: 'group', external_chat_id: 'wrchat-1' }]);
  });

  it('a used nonce with a different payload is refused; the original request stays a retryable duplicate', async () => {
    const w = await seed();
    const nonce = randomNonce();
    const first = signedPost(w, textMessage(w, 'first'), { nonce });
    expect((await post(first.path, first.body)).status).toBe(200);

    const other = signedPost(w, textMessage(w, 'smuggled'), { nonce });
    const ridA = nextRequestId();
    expect((await post(other.path, other.body, { requestId: ridA })).status).toBe(401);
    expect(await securityClass(ridA)).toEqual(['replayed_nonce']);
    // The refusal left no trace in the guard: the same refused request again is still refused.
    const ridB = nextRequestId();
    expect((await post(other.path, other.body, { requestId: ridB })).status).toBe(401);
    expect(await securityClass(ridB)).toEqual(['replayed_nonce']);
    // The byte-identical original (a provider retry) passes to message de-duplication.
    expect((await post(first.path, first.body)).status).toBe(200);

    const rows = await h.sql<{ payload: { text: string } }[]>`
      select payload from message_event where tenant_id = ${w.tenantId}`;
    expect(rows.map((r) => r.payload.text)).toEqual(['first']);
  });

  it('replay guard: fresh, retry and replayed claims; pruning keeps 2 windows plus margin', async () => {
    const digest = routeKeyDigest(randomBytes(16).toString('base64url'));
    const nonce = randomNonce();
    expect(await claimNonce(h.sql, { routeKeyDigest: digest, nonce, signature: 'a'.repeat(40) })).toBe(
      'fresh',
    );
    const [again, other] = await Promise.all([
      claimNonce(h.sql, { routeKeyDigest: digest, nonce, signature: 'a'.repeat(40) }),
      claimNonce(h.sql, { routeKeyDigest: digest, nonce, signature: 'b'.repeat(40) }),
    ]);
    expect([again, other]).toEqual(['retry', 'replayed']);
    // Two different requests racing on a fresh nonce: exactly one wins.
    const raced = randomNonce();
    const race = await Promise.all(
      ['c', 'd', 'e'].map((ch) =>
        claimNonce(h.sql, { routeKeyDigest: digest, nonce: raced, signature: ch.repeat(40) }),
      ),
    );
    expect(race.filter((r) => r === 'fresh')).toHaveLength(1);
    expect(race.filter((r) => r === 'replayed')).toHaveLength(2);
    const rows = async () =>
      (
        await h.sql<
          { n: number }[]
        >`select count(*)::int as n from ingress_replay_guard where route_key_digest = ${digest}`
      )[0]!.n;
    expect(await rows()).toBe(4);

    // Rows younger than 2·300 s + 60 s stay; older ones go (both rows of a claim share seen_at).
    await h.sql`update ingress_replay_guard set seen_at = now() - interval '659 seconds'
                where route_key_digest = ${digest} and nonce in (
                  select nonce from ingress_replay_guard where route_key_digest = ${digest} order by nonce limit 2)`;
    await pruneReplayGuard(h.sql, { windowSeconds: 300 });
    expect(await rows()).toBe(4);
    await h.sql`update ingress_replay_guard set seen_at = now() - interval '661 seconds' where route_key_digest = ${digest}`;
    await pruneReplayGuard(h.sql, { windowSeconds: 300, limit: 10_000 });
    expect(await rows()).toBe(0);
  });

  it('refuses every malformed, forged, stale or misdirected request without touching tenant data', async () => {
    const w = await seed();
    const key = parseEncodingAesKey(w.encodingAesKey);
    const rawEncrypt = (plain: Buffer) => {
      const c = createCipheriv('aes-256-cbc', key, key.subarray(0, 16));
      c.setAutoPadding(false);
      return Buffer.concat([c.update(plain), c.final()]).toString('base64');
    };
    const inner = () => textMessage(w, 'must not be recorded');
    const layout = (xml: string) => {
      const msg = Buffer.from(xml);
      const len = Buffer.alloc(4);
      len.writeUInt32BE(msg.length);
      const plain = Buffer.concat([randomBytes(16), len, msg, Buffer.from(w.corpId)]);
      const pad = 32 - (plain.length % 32);
      return Buffer.concat([plain, Buffer.alloc(pad, pad)]);
    };
    const valid = signedPost(w, inner());
    const validBytes = Buffer.from(valid.encrypt, 'base64');
    const sig = valid.query.msg_signature;
    const flipped = `${sig.slice(0, -1)}${sig.endsWith('0') ? '1' : '0'}`;
    const qs = (q: Record<string, string>) =>
      `/v1/webhooks/wecom/${w.routeKey}?${Object.entries(q)
        .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
        .join('&')}`;
    const { msg_signature, timestamp, nonce } = valid.query;

    type Case = {
      name: string;
      send: (requestId: string) => Response | Promise<Response>;
      status: number;
      failureClass: string | null;
    };
    const P = (path: string, body: string, contentType?: string | null) => (requestId: string) =>
      post(path, body, { requestId, contentType });
    const signed = (o: Parameters<typeof signedPost>[2], xml = inner()) => {
      const r = signedPost(w, xml, o);
      return P(r.path, r.body);
    };
    const cases: Case[] = [
      {
        name: 'no msg_signature',
        send: P(qs({ timestamp, nonce }), valid.body),
        status: 400,
        failureClass: null,
      },
      {
        name: 'no timestamp',
        send: P(qs({ msg_signature, nonce }), valid.body),
        status: 400,
        failureClass: null,
      },
      {
        name: 'no nonce',
        send: P(qs({ msg_signature, timestamp }), valid.body),
        status: 400,
        failureClass: null,
      },
      {
        name: 'non-decimal timestamp',
        send: P(qs({ msg_signature, timestamp: '1e9', nonce }), valid.body),
        status: 400,
        failureClass: null,
      },
      {
        name: 'GET without echostr',
        send: (id) => get(qs({ msg_signature, timestamp, nonce }), id),
        status: 400,
        failureClass: null,
      },
      {
        name: 'bad signature',
        send: signed({ signature: flipped }),
        status: 401,
        failureClass: 'bad_signature',
      },
      {
        name: 'signature too long',
        send: signed({ signature: `${sig}0` }),
        status: 401,
        failureClass: 'bad_signature',
      },
      {
        name: 'signature too short',
        send: signed({ signature: sig.slice(0, 20) }),
        status: 401,
        failureClass: 'bad_signature',
      },
      {
        name: 'signature over another nonce',
        send: P(qs({ msg_signature, timestamp, nonce: randomNonce() }), valid.body),
        status: 401,
        failureClass: 'bad_signature',
      },
      {
        name: 'truncated ciphertext (half a block)',
        send: signed({ encrypt: validBytes.subarray(0, validBytes.length - 16).toString('base64') }),
        status: 401,
        failureClass: 'bad_ciphertext',
      },
      {
        name: 'truncated ciphertext (odd length)',
        send: signed({ encrypt: validBytes.subarray(0, validBytes.length - 5).toString('base64') }),
        status: 401,
        failureClass: 'bad_ciphertext',
      },
      {
        name: 'extra zero block after the padding',
        send: signed({ encrypt: rawEncrypt(Buffer.concat([layout(inner()), Buffer.alloc(32)])) }),
        status: 401,
        failureClass: 'bad_ciphertext',
      },
      {
        name: 'non-canonical base64 padding',
        send: signed({ encrypt: `${valid.encrypt}====` }),
        status: 401,
        failureClass: 'bad_ciphertext',
      },
      {
        name: 'encrypted for another corp',
        send: signed({ receiveId: 'wwsomeoneelse' }),
        status: 401,
        failureClass: 'receive_id_mismatch',
      },
      {
        name: 'stale timestamp',
        send: signed({ timestamp: String(nowS() - 400) }),
        status: 401,
        failureClass: 'stale_timestamp',
      },
      {
        name: 'future timestamp',
        send: signed({ timestamp: String(nowS() + 400) }),
        status: 401,
        failureClass: 'future_timestamp',
      },
      {
        name: 'malformed XML',
        send: P(valid.path, `<xml><Encrypt><![CDATA[${valid.encrypt}]]></Encrypt>`),
        status: 401,
        failureClass: 'malformed_envelope',
      },
      { name: 'empty body', send: P(valid.path, ''), status: 401, failureClass: 'malformed_envelope' },
      {
        name: 'XML without Encrypt',
        send: P(valid.path, '<xml><ToUserName>x</ToUserName></xml>'),
        status: 401,
        failureClass: 'malformed_envelope',
      },
      {
        name: 'DOCTYPE payload',
        send: P(
          valid.path,
          `<!DOCTYPE xml [<!ENTITY e SYSTEM "file:///etc/passwd">]><xml><Encrypt>&e;</Encrypt></xml>`,
        ),
        status: 401,
        failureClass: 'envelope_forbidden_markup',
      },
      {
        name: 'oversize envelope under the body limit',
        send: P(
          valid.path,
          envelopeXml({ corpId: w.corpId, agentId: w.agentId, encrypt: 'A'.repeat(70_000) }),
        ),
        status: 401,
        failureClass: 'envelope_too_large',
      },
      {
        name: 'application/json',
        send: P(valid.path, valid.body, 'application/json'),
        status: 415,
        failureClass: null,
      },
      { name: 'text/plain', send: P(valid.path, valid.body, 'text/plain'), status: 415, failureClass: null },
      { name: 'no content type', send: P(valid.path, valid.body, null), status: 415, failureClass: null },
      {
        name: 'body over the app limit',
        send: P(valid.path, `<xml><Encrypt>${'A'.repeat(MAX_BODY_BYTES + 10)}</Encrypt></xml>`),
        status: 413,
        failureClass: null,
      },
      {
        name: 'unknown route',
        send: signed({ routeKey: randomBytes(16).toString('base64url') }),
        status: 401,
        failureClass: 'unknown_route',
      },
      {
        name: 'verified, but the inner XML is not a message',
        send: signed({}, '<xml><Foo>1</Foo></xml>'),
        status: 400,
        failureClass: null,
      },
      {
        name: 'verified, but the inner XML has a DOCTYPE',
        send: signed({}, '<!DOCTYPE x><xml><MsgType>text</MsgType></xml>'),
        status: 400,
        failureClass: null,
      },
    ];

    for (const c of cases) {
      const requestId = nextRequestId();
      const res = await c.send(requestId);
      expect({ case: c.name, status: res.status }).toEqual({ case: c.name, status: c.status });
      const body = (await res.json()) as { error: { code: string; message: string } };
      if (c.status === 401) {
        expect(body.error).toMatchObject({
          code: 'unauthenticated',
          message: 'Request could not be verified.',
        });
      }
      expect({ case: c.name, classes: await securityClass(requestId) }).toEqual({
        case: c.name,
        classes: c.failureClass === null ? [] : [c.failureClass],
      });
    }
    expect(await counts(w.tenantId)).toEqual({ events: 0, sessions: 0 });
    expect(await workflowsOf(w.tenantId)).toEqual([]);
  });

  it('inactive bindings and disabled tenants get the same fixed 401 as an unknown route', async () => {
    for (const [opts, failureClass] of [
      [{ bindingStatus: 'draft' }, 'binding_not_active'],
      [{ bindingStatus: 'suspended' }, 'binding_not_active'],
      [{ tenantStatus: 'disabled' }, 'tenant_disabled'],
    ] as const) {
      const w = await seed(opts);
      const req = signedPost(w, textMessage(w, 'anyone there?'));
      const requestId = nextRequestId();
      const res = await post(req.path, req.body, { requestId });
      expect(res.status).toBe(401);
      expect(await securityClass(requestId)).toEqual([failureClass]);
      expect(await counts(w.tenantId)).toEqual({ events: 0, sessions: 0 });
    }
  });

  it('fuzzed query strings and bodies never get 2xx or 5xx and never record anything', async () => {
    const w = await seed();
    const hex40 = fc.stringMatching(/^[0-9a-f]{40}$/);
    const nearNow = fc.integer({ min: -1000, max: 1000 }).map((d) => String(nowS() + d));
    const param = (name: string, value: fc.Arbitrary<string>) =>
      fc.option(
        value.map((v) => `${name}=${encodeURIComponent(v)}`),
        { nil: undefined, freq: 8 },
      );
    const anyBody = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 2000 }),
      fc
        .base64String({ maxLength: 400 })
        .map((e) => envelopeXml({ corpId: w.corpId, agentId: w.agentId, encrypt: e })),
      fc
        .base64String({ maxLength: 400 })
        .map((e) => `<xml><Encrypt>${e}</Encrypt><Encrypt>${e}</Encrypt></xml>`),
      fc.constantFrom('<xml/>', '<xml></xml>', '<?xml version="1.0"?><xml><Encrypt/></xml>', '<a><xml/></a>'),
    );
    const contentType = fc.constantFrom(
      'text/xml',
      'application/xml; charset=utf-8',
      'application/json',
      null,
    );

    // 1. Unsigned: plausible or arbitrary parameters, arbitrary bodies and content types.
    const unsigned = fc.record({
      method: fc.constantFrom('GET', 'POST'),
      query: fc.oneof(
        {
          weight: 3,
          arbitrary: fc
            .tuple(
              param('msg_signature', fc.oneof(hex40, fc.string())),
              param(
                'timestamp',
                fc.oneof(nearNow, fc.integer({ min: 0, max: 2 ** 40 }).map(String), fc.string()),
              ),
              param('nonce', fc.oneof(fc.integer({ min: 0 }).map(String), fc.string({ unit: 'binary' }))),
              param('echostr', fc.base64String()),
            )
            .map((parts) => parts.filter((p) => p !== undefined).join('&')),
        },
        { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
      ),
      body: anyBody,
      contentType,
    });
    // 2. Correctly signed with the binding's token, so the request reaches the timestamp window and
    //    decryption: the ciphertext is arbitrary (never a valid encryption under the binding's key).
    const signedGarbage = fc
      .record({
        method: fc.constantFrom('GET', 'POST'),
        encrypt: fc.oneof(
          fc.base64String({ minLength: 4, maxLength: 600 }),
          fc.string({ minLength: 1, maxLength: 100 }),
        ),
        timestamp: nearNow,
        nonce: fc.integer({ min: 1 }).map(String),
      })
      .map(({ method, encrypt: e, timestamp, nonce }) => {
        const sig = computeSignature(w.token, timestamp, nonce, e);
        const query = `msg_signature=${sig}&timestamp=${timestamp}&nonce=${nonce}`;
        return method === 'GET'
          ? { method, query: `${query}&echostr=${encodeURIComponent(e)}`, body: '', contentType: null }
          : {
              method,
              query,
              body: envelopeXml({ corpId: w.corpId, agentId: w.agentId, encrypt: e }),
              contentType: 'text/xml',
            };
      });

    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(fc.oneof(unsigned, signedGarbage), async (r) => {
        const path = `/v1/webhooks/wecom/${w.routeKey}?${r.query}`;
        const res =
          r.method === 'GET' ? await get(path) : await post(path, r.body, { contentType: r.contentType });
        await res.arrayBuffer();
        seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
        expect([400, 401, 413, 415]).toContain(res.status);
      }),
      { numRuns: 100 },
    );
    // The runs reached past the parameter checks, not only the 400 path.
    expect(seen.get(401) ?? 0).toBeGreaterThan(10);
    expect(await counts(w.tenantId)).toEqual({ events: 0, sessions: 0 });
    const [guard] = await h.sql<{ n: number }[]>`
      select count(*)::int as n from ingress_replay_guard where route_key_digest = ${routeKeyDigest(w.routeKey)}`;
    expect(guard!.n).toBe(0);
  });
});
