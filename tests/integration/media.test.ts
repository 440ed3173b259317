import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../db/ids';
import { secretAad } from '../../lib/secret-box';
import { type FakeOpenAI, imagePartsOf, startFakeOpenAI } from '../fakes/openai';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeWecom, startFakeWecom } from '../fakes/wecom';
import { createHarness, type Harness } from '../helpers/harness';
import { type SeededTelegram, seedTelegramTenant } from '../helpers/seed';
import { waitFor } from '../helpers/wait';
import { seedWecomTenant, signedPost, wecomInnerXml } from '../helpers/wecom';

// Media in (issue #15 item 5) on real PostgreSQL, Temporal and an S3-compatible server (s3rver on
// 127.0.0.1): the webhook records only the descriptor; the execution downloads the attachment
// from the channel's file API, checks it, stores it as an artifact and gives it to the agent.

const BUCKET = 'switchyard-media';
// The smallest valid PNG (1×1): the type check looks at the bytes' signature.
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
    '1f15c4890000000d49444154789c6300010000050001' +
    '0d0a2db40000000049454e44ae426082',
  'hex',
);
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('media in', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let wecom: FakeWecom;
  let openai: FakeOpenAI;
  let s3: S3rver;
  let s3Url: string;
  let s3Client: S3Client;
  let dataDir: string;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    wecom = await startFakeWecom();
    openai = await startFakeOpenAI();
    s3 = new S3rver({
      port: 0,
      address: '127.0.0.1',
      silent: true,
      directory: mkdtempSync(join(tmpdir(), 's3rver-')),
      configureBuckets: [{ name: BUCKET, configs: [] }],
    });
    const { port } = await s3.run();
    s3Url = `http://127.0.0.1:${port}`;
    s3Client = new S3Client({
      endpoint: s3Url,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    });
    dataDir = mkdtempSync(join(tmpdir(), 'switchyard-data-'));
    await h.startWorker({ artifacts: { dataDir, trustedEndpoints: [] } });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([telegram?.close(), wecom?.close(), openai?.close()]);
    s3Client?.destroy();
    await s3?.close();
  });

  /** The tenant's backend profile stores artifacts in s3rver, with an object_storage secret. */
  async function useS3(tenantId: string, extra: Record<string, unknown> = {}, endpoint = s3Url) {
    const ref = newId('sec');
    await h.sql.begin(async (tx) => {
      await tx`insert into secret (tenant_id, secret_ref, name, purpose)
               values (${tenantId}, ${ref}, ${`s3-${randomBytes(6).toString('hex')}`}, 'object_storage')`;
      const sealed = h.secrets.seal(
        JSON.stringify({ access_key_id: 'S3RVER', secret_access_key: 'S3RVER' }),
        secretAad(tenantId, ref),
      );
      await tx`insert into secret_version (tenant_id, secret_ref, version, key_id, ciphertext)
               values (${tenantId}, ${ref}, 1, ${h.secrets.keyId}, ${sealed})`;
      const artifacts = {
        provider: 's3',
        endpoint,
        bucket: BUCKET,
        region: 'us-east-1',
        force_path_style: true,
        credentials_secret_ref: ref,
        ...extra,
      };
      await tx`update backend_profile set artifacts = ${tx.json(artifacts)} where tenant_id = ${tenantId}`;
    });
  }

  async function visionModel(tenantId: string) {
    const ref = newId('sec');
    await h.sql.begin(async (tx) => {
      await tx`insert into secret (tenant_id, secret_ref, name, purpose)
               values (${tenantId}, ${ref}, ${`key-${randomBytes(6).toString('hex')}`}, 'model_api_key')`;
      const sealed = h.secrets.seal(JSON.stringify(openai.apiKey), secretAad(tenantId, ref));
      await tx`insert into secret_version (tenant_id, secret_ref, version, key_id, ciphertext)
               values (${tenantId}, ${ref}, 1, ${h.secrets.keyId}, ${sealed})`;
      await tx`update model_profile set provider = 'openai_compatible', model = 'gpt-4o-mini',
               base_url = ${openai.baseURL}, api_key_secret_ref = ${ref}, vision = true where tenant_id = ${tenantId}`;
    });
  }

  let nextMessage = 1;
  function mediaUpdate(chatId: number, media: Record<string, unknown>) {
    return {
      update_id: 50_000 + nextMessage,
      message: {
        message_id: nextMessage++,
        date: Math.floor(Date.now() / 1000),
        chat: { id: chatId, type: 'private' },
        from: { id: chatId, is_bot: false, first_name: 'Test' },
        ...media,
      },
    };
  }

  async function post(t: SeededTelegram, update: unknown) {
    const res = await h.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
      body: JSON.stringify(update),
    });
    expect(res.status).toBe(200);
  }

  async function finished(tenantId: string) {
    let row:
      | { event_id: string; status: string; outcome: string | null; failure_reason: string | null }
      | undefined;
    await waitFor(
      async () => {
        [row] = await h.sql<NonNullable<typeof row>[]>`
          select event_id, status, outcome, failure_reason from message_event where tenant_id = ${tenantId}
          order by created_at desc limit 1`;
        return row?.status === 'replied' || row?.status === 'failed';
      },
      { timeoutMs: 30_000, label: 'the message to finish' },
    );
    return row!;
  }

  const artifactsOf = (tenantId: string) =>
    h.sql<
      {
        artifact_id: string;
        content_ref: string;
        content_digest: string;
        size_bytes: number;
        kind: string;
        storage: string;
        content_type: string;
      }[]
    >`
      select artifact_id, content_ref, content_digest, size_bytes, kind, storage, content_type
      from artifact where tenant_id = ${tenantId}`;

  it('a Telegram photo reaches a vision model as an image part and is stored in S3 under the tenant prefix', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    await useS3(t.tenantId);
    await visionModel(t.tenantId);
    const fileId = `photo-${randomBytes(4).toString('hex')}`;
    telegram.addFile({ fileId, bytes: PNG });
    openai.enqueue('A tiny picture.');
    await post(
      t,
      mediaUpdate(6001, {
        caption: 'what is this?',
        photo: [
          { file_id: `${fileId}-thumb`, file_unique_id: 'x', width: 1, height: 1, file_size: 10 },
          { file_id: fileId, file_unique_id: 'y', width: 1, height: 1, file_size: PNG.length },
        ],
      }),
    );
    const msg = await finished(t.tenantId);
    expect(msg).toMatchObject({ status: 'replied', outcome: null });
    expect(telegram.sentTo(6001).map((s) => s.text)).toEqual(['A tiny picture.']);

    // The fake checked the wire format (a malformed part is a 400); the image is the photo's bytes.
    const request = openai.completions.at(-1)!.request;
    const parts = imagePartsOf(request);
    expect(parts.ok && parts.images).toEqual([
      { mediaType: 'image/png', bytes: PNG, url: expect.any(String) },
    ]);
    expect(JSON.stringify(request.messages)).toContain('what is this?');

    const [art] = await artifactsOf(t.tenantId);
    expect(art).toMatchObject({
      kind: 'image',
      storage: 's3',
      content_type: 'image/png',
      size_bytes: PNG.length,
      content_digest: sha256(PNG),
      content_ref: `${t.tenantId}/${art!.artifact_id}`,
    });
    const obj = await s3Client.send(new GetObjectCommand({ Bucket: BUCKET, Key: art!.content_ref }));
    const stored = Buffer.from(await obj.Body!.transformToByteArray());
    expect(sha256(stored)).toBe(art!.content_digest);
    // The webhook downloaded nothing: only the execution did, once.
    expect(telegram.downloads.filter((p) => p.includes(fileId))).toHaveLength(1);
  });

  it('a scripted agent is told about the attachment in {{text}} (filesystem store by default)', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      scripted: { rules: [], default_reply: 'Got: {{text}}' },
    });
    telegram.addBot(t.botToken);
    const fileId = `doc-${randomBytes(4).toString('hex')}`;
    const pdf = Buffer.from('%PDF-1.4 fake report');
    telegram.addFile({ fileId, bytes: pdf });
    await post(
      t,
      mediaUpdate(6002, {
        caption: 'my report',
        document: {
          file_id: fileId,
          file_unique_id: 'd',
          file_name: 'report.pdf',
          mime_type: 'application/pdf',
          file_size: pdf.length,
        },
      }),
    );
    const msg = await finished(t.tenantId);
    expect(msg.status).toBe('replied');
    expect(telegram.sentTo(6002).map((s) => s.text)).toEqual([
      `Got: my report\n[file attached: report.pdf, application/pdf, ${(pdf.length / 1024).toFixed(1)} KB]`,
    ]);
    const [art] = await artifactsOf(t.tenantId);
    expect(art).toMatchObject({ storage: 'filesystem', content_digest: sha256(pdf) });
    const onDisk = readFileSync(join(dataDir, 'artifacts', art!.content_ref));
    expect(sha256(onDisk)).toBe(art!.content_digest);
  });

  it('an attachment over the cap or of a type not allowed is media_rejected with a clear reply, and nothing is kept', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    await useS3(t.tenantId, { max_bytes: 1024 * 1024 });
    // Declared over the cap: refused before any download.
    await post(
      t,
      mediaUpdate(6003, {
        video: {
          file_id: 'big-video',
          file_unique_id: 'v',
          mime_type: 'video/mp4',
          file_size: 5 * 1024 * 1024,
        },
      }),
    );
    let msg = await finished(t.tenantId);
    expect(msg).toMatchObject({ status: 'replied', outcome: 'media_rejected', failure_reason: 'too_large' });
    expect(telegram.sentTo(6003).at(-1)?.text).toBe(
      'Sorry, your video is larger than the 1 MB this service accepts.',
    );

    // Declared small, but the bytes are over the cap: cut off while reading, still refused.
    telegram.addFile({ fileId: 'liar', bytes: Buffer.alloc(1024 * 1024 + 10, 1), declaredSize: 100 });
    await post(t, mediaUpdate(6003, { voice: { file_id: 'liar', file_unique_id: 'l', file_size: 100 } }));
    await waitFor(async () => telegram.sentTo(6003).length === 2, { timeoutMs: 30_000 });
    msg = await finished(t.tenantId);
    expect(msg).toMatchObject({ outcome: 'media_rejected', failure_reason: 'too_large' });

    // A type not on the allowlist.
    telegram.addFile({ fileId: 'exe', bytes: Buffer.from('MZ') });
    await post(
      t,
      mediaUpdate(6003, {
        document: {
          file_id: 'exe',
          file_unique_id: 'e',
          file_name: 'setup.exe',
          mime_type: 'application/x-msdownload',
          file_size: 2,
        },
      }),
    );
    await waitFor(async () => telegram.sentTo(6003).length === 3, { timeoutMs: 30_000 });
    msg = await finished(t.tenantId);
    expect(msg).toMatchObject({
      status: 'replied',
      outcome: 'media_rejected',
      failure_reason: 'type_not_allowed',
    });
    expect(telegram.sentTo(6003).at(-1)?.text).toContain('application/x-msdownload');

    // Refused by the provider's file API.
    telegram.addFile({
      fileId: 'gone',
      bytes: PNG,
      refuse: 'Bad Request: wrong file_id or the file is temporarily unavailable',
    });
    await post(
      t,
      mediaUpdate(6003, { photo: [{ file_id: 'gone', file_unique_id: 'g', width: 1, height: 1 }] }),
    );
    await waitFor(async () => telegram.sentTo(6003).length === 4, { timeoutMs: 30_000 });
    msg = await finished(t.tenantId);
    expect(msg).toMatchObject({ outcome: 'media_rejected', failure_reason: 'provider_refused' });

    expect(await artifactsOf(t.tenantId)).toHaveLength(0);
    const listed = await s3Client.send(
      new ListObjectsV2Command({ Bucket: BUCKET, Prefix: `${t.tenantId}/` }),
    );
    expect(listed.KeyCount ?? 0).toBe(0);
    const audits = await h.sql<{ error_type: string }[]>`
      select error_type from audit_log where tenant_id = ${t.tenantId} and action = 'media.rejected'
      union all
      select error_type from audit_pending where tenant_id = ${t.tenantId} and action = 'media.rejected'`;
    expect(audits.map((a) => a.error_type).sort()).toEqual([
      'provider_refused',
      'too_large',
      'too_large',
      'type_not_allowed',
    ]);
  });

  it('an S3 endpoint that refuses: retried, then the message fails with a reason class and no artifact row', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    // A port nobody listens on (just closed): every connection is refused.
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    await useS3(t.tenantId, {}, `http://127.0.0.1:${port}`);
    telegram.addFile({ fileId: 'nostore', bytes: PNG });
    await post(
      t,
      mediaUpdate(6004, { photo: [{ file_id: 'nostore', file_unique_id: 'n', width: 1, height: 1 }] }),
    );
    const msg = await finished(t.tenantId);
    expect(msg).toMatchObject({ status: 'failed', outcome: 'model_failed' });
    expect(await artifactsOf(t.tenantId)).toHaveLength(0);
    const audits = await h.sql<{ error_type: string }[]>`
      select error_type from audit_log where tenant_id = ${t.tenantId} and action = 'media.store'
      union all
      select error_type from audit_pending where tenant_id = ${t.tenantId} and action = 'media.store'`;
    expect(audits.map((a) => a.error_type)).toEqual(['storage_unavailable']);
    // The user still gets the fallback reply.
    expect(telegram.sentTo(6004)).toHaveLength(1);
  });

  it('a reply with an image is delivered once via sendPhoto, as its own outbox segment after the text', async () => {
    // Where the scripted rule's attachment URL points (egress allow_private in tests).
    const files = createHttpServer((req, res) => {
      if (req.url === '/cat.png') {
        res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(PNG.length) });
        res.end(PNG);
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((r) => files.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
    try {
      const t = await seedTelegramTenant(h.sql, h.secrets, {
        apiBaseUrl: telegram.url,
        scripted: {
          rules: [
            {
              match: '^picture of (\\w+)$',
              reply: 'Here is your {{1}}.',
              attachments: [{ url: `${base}/{{1}}.png`, kind: 'image', caption: 'a {{1}}' }],
            },
          ],
          default_reply: 'no',
        },
      });
      telegram.addBot(t.botToken);
      await useS3(t.tenantId);
      await post(t, mediaUpdate(6005, { text: 'picture of cat' }));
      const msg = await finished(t.tenantId);
      expect(msg).toMatchObject({ status: 'replied', outcome: null });
      expect(telegram.sentTo(6005).map((m) => m.text)).toEqual(['Here is your cat.']);
      const photos = telegram.mediaSent.filter((m) => m.chatId === '6005');
      expect(photos).toHaveLength(1);
      expect(photos[0]).toMatchObject({ method: 'sendPhoto', caption: 'a cat', fileName: 'cat.png' });
      expect(sha256(photos[0]!.bytes)).toBe(sha256(PNG));
      const segments = await h.sql<{ segment_kind: string; payload_ref: string | null; status: string }[]>`
        select segment_kind, payload_ref, status from reply_outbox where tenant_id = ${t.tenantId} order by segment_index`;
      const [art] = await artifactsOf(t.tenantId);
      expect(segments).toEqual([
        { segment_kind: 'text', payload_ref: null, status: 'sent' },
        { segment_kind: 'image', payload_ref: art!.artifact_id, status: 'sent' },
      ]);
      expect(art).toMatchObject({ kind: 'image', storage: 's3', content_digest: sha256(PNG) });
    } finally {
      await new Promise((r) => files.close(r));
    }
  });

  it('a WeCom file is fetched with media/get and stored the same way', async () => {
    const w = await seedWecomTenant(h.sql, h.secrets, {
      apiBaseUrl: wecom.url,
      scripted: { rules: [], default_reply: 'Got: {{text}}' },
    });
    wecom.addApp({ corpId: w.corpId, corpSecret: w.corpSecret, agentId: w.agentId });
    await useS3(w.tenantId);
    const bytes = Buffer.from('hello wecom file');
    wecom.addMedia({ mediaId: 'm-file-1', bytes, contentType: 'text/plain', fileName: 'notes.txt' });
    const inner = wecomInnerXml({
      corpId: w.corpId,
      agentId: w.agentId,
      from: 'zhangsan',
      msgType: 'file',
    }).replace('<AgentID>', '<MediaId><![CDATA[m-file-1]]></MediaId><AgentID>');
    const p = signedPost(w, inner);
    const res = await h.app.request(p.path, {
      method: 'POST',
      headers: { 'content-type': 'text/xml' },
      body: p.body,
    });
    expect(res.status).toBe(200);
    const msg = await finished(w.tenantId);
    expect(msg.status).toBe('replied');
    const [art] = await artifactsOf(w.tenantId);
    expect(art).toMatchObject({
      kind: 'file',
      storage: 's3',
      content_type: 'text/plain',
      content_digest: sha256(bytes),
    });
    expect(art!.content_ref.startsWith(`${w.tenantId}/`)).toBe(true);
    const obj = await s3Client.send(new GetObjectCommand({ Bucket: BUCKET, Key: art!.content_ref }));
    expect(sha256(Buffer.from(await obj.Body!.transformToByteArray()))).toBe(art!.content_digest);
    expect(existsSync(join(dataDir, 'artifacts', w.tenantId))).toBe(false);
  });
});
