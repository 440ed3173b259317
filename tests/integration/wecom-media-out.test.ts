import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeWecom, startFakeWecom } from '../fakes/wecom';
import { createHarness, type Harness } from '../helpers/harness';
import { waitFor } from '../helpers/wait';
import { type SeededWecom, seedWecomTenant, signedPost, wecomInnerXml } from '../helpers/wecom';

// Media out for WeCom (issue #15 item 6) on real PostgreSQL and Temporal against the fake WeCom
// server API: a reply's image attachment is its own outbox segment after the text, sent as
// media/upload + an `image` message with the uploaded media_id, under the same exactly-once rules
// as text — also when the connection drops after WeCom applied the send.

// The smallest valid PNG (1×1): the type check looks at the bytes' signature.
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
    '1f15c4890000000d49444154789c6300010000050001' +
    '0d0a2db40000000049454e44ae426082',
  'hex',
);
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('WeCom media out', () => {
  let h: Harness;
  let wecom: FakeWecom;
  let files: Server;
  let filesBase: string;

  beforeAll(async () => {
    h = await createHarness();
    wecom = await startFakeWecom();
    // Where the scripted rule's attachment URL points (egress allow_private in tests).
    files = createServer((req, res) => {
      if (req.url === '/cat.png') {
        res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(PNG.length) });
        res.end(PNG);
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((r) => files.listen(0, '127.0.0.1', r));
    filesBase = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
    const dataDir = mkdtempSync(join(tmpdir(), 'switchyard-data-'));
    await h.startWorker({ artifacts: { dataDir, trustedEndpoints: [] } });
  });
  afterAll(async () => {
    await h?.close();
    await wecom?.close();
    await new Promise((r) => files?.close(r));
  });

  async function tenant(): Promise<SeededWecom> {
    const w = await seedWecomTenant(h.sql, h.secrets, {
      apiBaseUrl: wecom.url,
      scripted: {
        rules: [
          {
            match: '^picture of (\\w+)$',
            reply: 'Here is your {{1}}.',
            attachments: [{ url: `${filesBase}/{{1}}.png`, kind: 'image' }],
          },
        ],
        default_reply: 'no',
      },
    });
    wecom.addApp({ corpId: w.corpId, corpSecret: w.corpSecret, agentId: w.agentId });
    return w;
  }

  async function post(w: SeededWecom, from: string, content: string) {
    const p = signedPost(w, wecomInnerXml({ corpId: w.corpId, agentId: w.agentId, from, content }));
    const res = await h.app.request(p.path, {
      method: 'POST',
      headers: { 'content-type': 'text/xml' },
      body: p.body,
    });
    expect(res.status).toBe(200);
  }

  async function finished(tenantId: string) {
    let row: { event_id: string; status: string; outcome: string | null } | undefined;
    await waitFor(
      async () => {
        [row] = await h.sql<NonNullable<typeof row>[]>`
          select event_id, status, outcome from message_event where tenant_id = ${tenantId}
          order by created_at desc limit 1`;
        return row?.status === 'replied' || row?.status === 'failed';
      },
      { timeoutMs: 30_000, label: 'the message to finish' },
    );
    return row!;
  }

  const segmentsOf = (tenantId: string) =>
    h.sql<{ segment_kind: string; status: string; payload_ref: string | null }[]>`
      select segment_kind, status, payload_ref from reply_outbox where tenant_id = ${tenantId} order by segment_index`;

  /** Uploads of the PNG made for this test's sends (the fake is shared by the file's tests). */
  const pngUploads = (since: number) => wecom.uploads.slice(since);

  it('uploads the image once and sends it as one `image` message with that media_id, after the text', async () => {
    const w = await tenant();
    const uploadsBefore = wecom.uploads.length;
    await post(w, 'lisi', 'picture of cat');
    expect(await finished(w.tenantId)).toMatchObject({ status: 'replied', outcome: null });

    const uploads = pngUploads(uploadsBefore);
    expect(uploads).toHaveLength(1);
    expect(uploads[0]).toMatchObject({ type: 'image', fileName: 'cat.png', contentType: 'image/png' });
    expect(sha256(uploads[0]!.bytes)).toBe(sha256(PNG));
    const delivered = wecom.deliveredTo('lisi').filter((d) => d.agentId === w.agentId);
    expect(delivered.map((d) => [d.endpoint, d.msgtype, d.content])).toEqual([
      ['message/send', 'text', 'Here is your cat.'],
      ['message/send', 'image', `media:${uploads[0]!.mediaId}`],
    ]);
    expect(wecom.duplicatesDelivered).toBe(0);
    const segments = await segmentsOf(w.tenantId);
    expect(segments).toEqual([
      { segment_kind: 'text', status: 'sent', payload_ref: null },
      { segment_kind: 'image', status: 'sent', payload_ref: expect.stringMatching(/^art_/) },
    ]);
  });

  it('a connection that drops after WeCom applied the image send: resent under the duplicate check, delivered once', async () => {
    const w = await tenant();
    const uploadsBefore = wecom.uploads.length;
    let dropped = 0;
    // The image's message/send is applied, then the connection drops before the answer (once).
    wecom.setFaultPlan((req) => {
      const body = req.body as { msgtype?: string; agentid?: number } | undefined;
      if (body?.msgtype === 'image' && body.agentid === w.agentId && dropped === 0) {
        dropped++;
        return { kind: 'apply_then_drop' };
      }
      return undefined;
    });
    try {
      await post(w, 'wangwu', 'picture of cat');
      expect(await finished(w.tenantId)).toMatchObject({ status: 'replied', outcome: null });
    } finally {
      wecom.setFaultPlan(undefined);
    }
    expect(dropped).toBe(1);
    const uploads = pngUploads(uploadsBefore);
    expect(uploads).toHaveLength(1);
    const delivered = wecom.deliveredTo('wangwu').filter((d) => d.agentId === w.agentId);
    expect(delivered.map((d) => [d.msgtype, d.content])).toEqual([
      ['text', 'Here is your cat.'],
      ['image', `media:${uploads[0]!.mediaId}`],
    ]);
    // The resend reached WeCom and was answered with the original msgid, not delivered again.
    const imageSends = wecom.requests.filter(
      (r) =>
        r.endpoint === 'message/send' &&
        (r.body as { msgtype?: string; agentid?: number } | undefined)?.msgtype === 'image' &&
        (r.body as { agentid?: number }).agentid === w.agentId,
    );
    expect(imageSends).toHaveLength(2);
    expect(imageSends[1]!.suppressed).toBe(true);
    expect(await segmentsOf(w.tenantId)).toMatchObject([
      { segment_kind: 'text', status: 'sent' },
      { segment_kind: 'image', status: 'sent' },
    ]);
    const dead = await h.sql`select 1 from dead_letter where tenant_id = ${w.tenantId}`;
    expect(dead).toHaveLength(0);
  });

  it('a 503 on the image send (it may have been applied) is resent with the same media_id: one upload, one image', async () => {
    const w = await tenant();
    const uploadsBefore = wecom.uploads.length;
    let refused = 0;
    wecom.setFaultPlan((req) => {
      const body = req.body as { msgtype?: string; agentid?: number } | undefined;
      if (body?.msgtype === 'image' && body.agentid === w.agentId && refused === 0) {
        refused++;
        return { kind: 'status', status: 503 };
      }
      return undefined;
    });
    try {
      await post(w, 'zhaoliu', 'picture of cat');
      expect(await finished(w.tenantId)).toMatchObject({ status: 'replied', outcome: null });
    } finally {
      wecom.setFaultPlan(undefined);
    }
    expect(refused).toBe(1);
    // A 5xx may come from a proxy after WeCom applied the send: never a second upload (a new
    // media_id the duplicate check cannot match), the same media_id again.
    const uploads = pngUploads(uploadsBefore);
    expect(uploads).toHaveLength(1);
    const delivered = wecom.deliveredTo('zhaoliu').filter((d) => d.agentId === w.agentId);
    expect(delivered.map((d) => [d.msgtype, d.content])).toEqual([
      ['text', 'Here is your cat.'],
      ['image', `media:${uploads[0]!.mediaId}`],
    ]);
  });

  it('an applied image send whose resend fails too is unknown and parked, never uploaded and sent again', async () => {
    const w = await tenant();
    const uploadsBefore = wecom.uploads.length;
    let faults = 0;
    // The first send is applied and its connection drops; the resend with the same media_id meets
    // a 502 (not applied). Before, that 502 went back to delivery, which uploaded again and sent a
    // new media_id: a second image.
    wecom.setFaultPlan((req) => {
      const body = req.body as { msgtype?: string; agentid?: number } | undefined;
      if (body?.msgtype !== 'image' || body.agentid !== w.agentId) return undefined;
      faults++;
      if (faults === 1) return { kind: 'apply_then_drop' };
      if (faults === 2) return { kind: 'status', status: 502 };
      return undefined;
    });
    try {
      await post(w, 'sunqi', 'picture of cat');
      await waitFor(
        async () =>
          (await h.sql`select 1 from dead_letter where tenant_id = ${w.tenantId} and kind = 'segment'`)
            .length > 0,
        { timeoutMs: 30_000, label: 'the image segment to be parked' },
      );
    } finally {
      wecom.setFaultPlan(undefined);
    }
    expect(faults).toBe(2);
    expect(pngUploads(uploadsBefore)).toHaveLength(1);
    const images = wecom.deliveredTo('sunqi').filter((d) => d.agentId === w.agentId && d.msgtype === 'image');
    expect(images).toHaveLength(1);
    const [dead] = await h.sql<{ reason_class: string }[]>`
      select reason_class from dead_letter where tenant_id = ${w.tenantId} and kind = 'segment'`;
    expect(dead!.reason_class).toBe('unknown_outcome');
  });
});
