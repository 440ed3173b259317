import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_CONSOLE_BODY_BYTES, stageConsoleUploads } from '../../api/admin/console-media';
import { MAX_BODY_BYTES, newApp } from '../../api/app';
import { idempotencyKeyOf } from '../../api/ingress/record';
import { consoleExternalId } from '../../channels/console/inbound';
import { type FakeOpenAI, imagePartsOf, startFakeOpenAI } from '../fakes/openai';
import { type AdminTenant, api, type Json, ok, setupTenant, tenantPath } from '../helpers/admin';
import { publishRevision } from '../helpers/execution-flow';
import { createHarness, type Harness } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

// Console media in (issue #15): an operator's photo is sent with the console message, checked
// against the tenant's backend profile (cap, type allowlist, a picture is a picture) and stored as
// an artifact under the tenant's prefix before the message is recorded; the execution reads it
// back (digest checked) and gives it to the agent like any channel's media. Refused → 400, nothing
// stored, recorded or started.

// The smallest valid PNG (1×1): the type check looks at the bytes' signature.
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
    '1f15c4890000000d49444154789c6300010000050001' +
    '0d0a2db40000000049454e44ae426082',
  'hex',
);
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const photo = (extra: Record<string, unknown> = {}) => ({
  content_type: 'image/png',
  file_name: 'dot.png',
  data_base64: PNG.toString('base64'),
  ...extra,
});

describe('console media in', () => {
  let h: Harness;
  let app: ReturnType<typeof newApp>;
  let openai: FakeOpenAI;
  let dataDir: string;
  let worker: Promise<unknown> | undefined;
  let ensureWorker: () => Promise<unknown>;

  beforeAll(async () => {
    h = await createHarness();
    openai = await startFakeOpenAI();
    // The API stores the uploads where the worker reads them (the embedded default's data dir).
    dataDir = mkdtempSync(join(tmpdir(), 'switchyard-data-'));
    const artifacts = { dataDir, trustedEndpoints: [] };
    app = newApp({ ...h.appDeps, artifacts });
    // Started by the first test that needs one (the first test tampers with a stored upload before
    // any worker could read it).
    ensureWorker = () => {
      worker ??= h.startWorker({ artifacts });
      return worker;
    };
  });
  afterAll(async () => {
    await h?.close();
    await openai?.close();
  });

  /** A tenant with a console binding whose app answers by the revision given. */
  async function consoleTenant(revision: Record<string, unknown>, modelProfileId?: string) {
    const t = await setupTenant(app);
    await publishRevision(app, { ...t, modelProfileId: modelProfileId ?? t.modelProfileId }, revision);
    const binding = await ok(
      api(app, 'POST', tenantPath(t.tenantId, '/bindings'), {
        token: t.adminKey,
        body: { channel: 'console', app_id: t.appId, activate: true },
      }),
      201,
    );
    return { t, path: tenantPath(t.tenantId, `/bindings/${binding.binding_id}/console/messages`) };
  }
  const send = (t: AdminTenant, path: string, body: Json) =>
    api(app, 'POST', path, { token: t.adminKey, body });
  const finished = async (t: AdminTenant, eventId: string) => {
    let detail: Json;
    await waitFor(
      async () => {
        detail = await ok(
          api(app, 'GET', tenantPath(t.tenantId, `/messages/${eventId}`), { token: t.adminKey }),
        );
        return detail.status === 'replied' || detail.status === 'failed';
      },
      { timeoutMs: 30_000, label: 'the message to finish' },
    );
    return detail;
  };
  const repliesOf = async (t: AdminTenant, path: string, conversation: string) => {
    const page = await ok(api(app, 'GET', `${path}?conversation_id=${conversation}`, { token: t.viewerKey }));
    return page.items as Json[];
  };
  const rowsOf = (tenantId: string) =>
    h.sql<{ n: number }[]>`select count(*)::int as n from message_event where tenant_id = ${tenantId}`;
  const artifactRows = (tenantId: string) =>
    h.sql<
      {
        artifact_id: string;
        event_id: string;
        kind: string;
        content_type: string;
        size_bytes: number;
        content_digest: string;
        content_ref: string;
        storage: string;
        file_name: string | null;
      }[]
    >`select artifact_id, event_id, kind, content_type, size_bytes, content_digest, content_ref, storage, file_name
      from artifact where tenant_id = ${tenantId} order by artifact_id`;
  const storedObjects = (tenantId: string) => {
    const dir = join(dataDir, 'artifacts', tenantId);
    return existsSync(dir) ? readdirSync(dir) : [];
  };

  /** A tenant with a console binding whose app asks a vision model (the fake OpenAI). */
  async function visionTenant() {
    const setup = await setupTenant(app);
    const as = { token: setup.adminKey };
    const secret = await ok(
      api(app, 'POST', tenantPath(setup.tenantId, '/secrets'), {
        ...as,
        body: { name: 'llm', purpose: 'model_api_key', value: openai.apiKey },
      }),
      201,
    );
    const vision = await ok(
      api(app, 'POST', tenantPath(setup.tenantId, '/model-profiles'), {
        ...as,
        body: {
          profile_key: 'vision',
          provider: 'openai_compatible',
          model: 'gpt-4o-mini',
          base_url: openai.baseURL,
          api_key_secret_ref: secret.secret_ref,
          vision: true,
        },
      }),
      201,
    );
    await publishRevision(app, { ...setup, modelProfileId: vision.model_profile_id }, {});
    const binding = await ok(
      api(app, 'POST', tenantPath(setup.tenantId, '/bindings'), {
        ...as,
        body: { channel: 'console', app_id: setup.appId, activate: true },
      }),
      201,
    );
    const path = tenantPath(setup.tenantId, `/bindings/${binding.binding_id}/console/messages`);
    return { setup, path };
  }

  it('a stored upload whose bytes no longer match its digest is never given to the model', async () => {
    const { setup, path } = await visionTenant();
    const before = openai.requests.length;
    const accepted = await ok(
      send(setup, path, { conversation_id: 't', text: 'tampered?', attachments: [photo()] }),
      202,
    );
    // No worker runs yet: the API stored the object and wrote its row; the bytes change under it.
    const [art] = await artifactRows(setup.tenantId);
    expect(art).toMatchObject({ event_id: accepted.event_id, content_digest: sha256(PNG) });
    // Still a PNG (the signature holds), one byte of its image data changed.
    const other = Buffer.from(PNG);
    other.writeUInt8(other.readUInt8(other.length - 20) ^ 0xff, other.length - 20);
    writeFileSync(join(dataDir, 'artifacts', art!.content_ref), other);
    await ensureWorker();
    const detail = await finished(setup, accepted.event_id);
    expect(detail).toMatchObject({ status: 'failed', outcome: 'model_failed' });
    expect(openai.requests.length).toBe(before);
    const [audit] = await h.sql<{ error_type: string }[]>`
      select error_type from audit_pending where tenant_id = ${setup.tenantId} and action = 'media.store'
      union all
      select error_type from audit_log where tenant_id = ${setup.tenantId} and action = 'media.store'`;
    expect(audit).toEqual({ error_type: 'digest_mismatch' });
  });

  it('a console photo is stored under the tenant prefix with its digest and the scripted agent sees it', async () => {
    await ensureWorker();
    const { t, path } = await consoleTenant({
      scripted: {
        rules: [{ match: '\\[image attached: ([^,\\]]+)', reply: 'I see your picture {{1}}.' }],
        default_reply: 'You said: {{text}}',
      },
    });
    const accepted = await ok(
      send(t, path, {
        conversation_id: 'pics',
        text: 'look',
        attachments: [photo()],
        client_message_id: 'p1',
      }),
      202,
    );
    expect(accepted).toMatchObject({ status: 'received', duplicate: false });
    const detail = await finished(t, accepted.event_id);
    expect(detail).toMatchObject({ status: 'replied', outcome: null, kind: 'text' });

    // The reply shows the agent saw the attachment (its description reached the rules).
    const items = await repliesOf(t, path, 'pics');
    expect(items.map((i) => [i.kind, i.text])).toEqual([
      ['user', 'look'],
      ['reply', 'I see your picture dot.png.'],
    ]);
    expect(items[0].attachments).toEqual([
      { file_name: 'dot.png', content_type: 'image/png', size_bytes: PNG.length },
    ]);

    // One artifact: the tenant's prefix, the bytes' digest, the object on disk is those bytes.
    const [art, ...more] = await artifactRows(t.tenantId);
    expect(more).toEqual([]);
    expect(art).toMatchObject({
      event_id: accepted.event_id,
      kind: 'image',
      content_type: 'image/png',
      size_bytes: PNG.length,
      content_digest: sha256(PNG),
      content_ref: `${t.tenantId}/${art!.artifact_id}`,
      storage: 'filesystem',
      file_name: 'dot.png',
    });
    expect(sha256(readFileSync(join(dataDir, 'artifacts', art!.content_ref)))).toBe(sha256(PNG));
    // The payload names the artifact (id and digest); the detail lists it.
    expect(detail.payload.media).toEqual([
      expect.objectContaining({
        kind: 'image',
        staged: {
          artifactId: art!.artifact_id,
          contentDigest: sha256(PNG),
          backendProfileId: t.backendProfileId,
        },
      }),
    ]);
    expect(detail.artifacts).toEqual([
      expect.objectContaining({ artifact_id: art!.artifact_id, kind: 'image', content_digest: sha256(PNG) }),
    ]);

    // A client's retry is the same message: no second message, artifact or object.
    const again = await ok(
      send(t, path, {
        conversation_id: 'pics',
        text: 'look',
        attachments: [photo()],
        client_message_id: 'p1',
      }),
      202,
    );
    expect(again).toMatchObject({ event_id: accepted.event_id, duplicate: true });
    expect((await rowsOf(t.tenantId))[0]!.n).toBe(1);
    expect(await artifactRows(t.tenantId)).toHaveLength(1);
    expect(storedObjects(t.tenantId)).toEqual([art!.artifact_id]);
  });

  it('a console photo reaches a vision model as an image part', async () => {
    await ensureWorker();
    const { setup, path } = await visionTenant();
    openai.enqueue('A tiny picture.');
    const accepted = await ok(
      send(setup, path, { conversation_id: 'v', text: 'what is this?', attachments: [photo()] }),
      202,
    );
    expect(await finished(setup, accepted.event_id)).toMatchObject({ status: 'replied', outcome: null });
    const request = openai.completions.at(-1)!.request;
    const parts = imagePartsOf(request);
    expect(parts.ok && parts.images).toEqual([
      { mediaType: 'image/png', bytes: PNG, url: expect.any(String) },
    ]);
    expect(JSON.stringify(request.messages)).toContain('what is this?');
    const items = await repliesOf(setup, path, 'v');
    expect(items.filter((i) => i.kind === 'reply').map((i) => i.text)).toEqual(['A tiny picture.']);
  });

  it('an oversized, wrong-type or fake picture → 400 media_rejected, nothing stored, recorded or started', async () => {
    await ensureWorker();
    const { t, path } = await consoleTenant({});
    // This tenant accepts attachments up to 100 bytes.
    await h.sql`update backend_profile set artifacts = ${h.sql.json({ provider: 'filesystem', max_bytes: 100 })}
                where tenant_id = ${t.tenantId}`;
    const refused = async (attachments: Json[], reason: string, index = 0) => {
      const res = await send(t, path, { conversation_id: 'no', text: 'x', attachments });
      expect([res.status, res.body.error?.code, res.body.error?.details?.reason], res.text).toEqual([
        400,
        'media_rejected',
        reason,
      ]);
      expect(res.body.error.details.index).toBe(index);
    };
    await refused(
      [photo({ data_base64: Buffer.concat([PNG, Buffer.alloc(200)]).toString('base64') })],
      'too_large',
    );
    await refused(
      [
        photo(),
        { content_type: 'application/x-msdownload', data_base64: Buffer.from('MZ').toString('base64') },
      ],
      'type_not_allowed',
      1,
    );
    await refused([photo({ data_base64: Buffer.from('not a picture').toString('base64') })], 'type_mismatch');
    // Shape errors are the usual validation_failed; a body over the route's cap is 413.
    for (const bad of [
      [photo({ data_base64: 'not base64!' })],
      [photo({ content_type: 'image/png; charset=x' })],
      [],
      Array.from({ length: 5 }, () => photo()),
    ]) {
      const res = await send(t, path, { conversation_id: 'no', attachments: bad });
      expect([res.status, res.body.error?.code], JSON.stringify(bad).slice(0, 100)).toEqual([
        400,
        'validation_failed',
      ]);
    }
    const huge = await send(t, path, {
      conversation_id: 'no',
      attachments: [photo({ data_base64: Buffer.alloc(7 * 1024 * 1024).toString('base64') })],
    });
    expect([huge.status, huge.body.error?.code]).toEqual([413, 'payload_too_large']);

    expect((await rowsOf(t.tenantId))[0]!.n).toBe(0);
    expect(await artifactRows(t.tenantId)).toEqual([]);
    expect(storedObjects(t.tenantId)).toEqual([]);
    expect(await repliesOf(t, path, 'no')).toEqual([]);
    // Still a text message without attachments is accepted, and text alone stays required.
    const blank = await send(t, path, { conversation_id: 'no', text: ' ' });
    expect([blank.status, blank.body.error?.code]).toEqual([400, 'validation_failed']);
  });

  /** A request body that counts what was read of it (nothing is pulled before a read). */
  const countedBody = (total: number) => {
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>(
      {
        pull(ctrl) {
          if (pulled >= total) return ctrl.close();
          const n = Math.min(64 * 1024, total - pulled);
          pulled += n;
          ctrl.enqueue(new Uint8Array(n).fill(0x20));
        },
      },
      { highWaterMark: 0 },
    );
    return { body, pulled: () => pulled };
  };
  const rawPost = async (
    path: string,
    p: { token: string; body: ReadableStream<Uint8Array> | Buffer; contentLength?: number },
  ): Promise<Response> =>
    await app.request(path, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${p.token}`,
        'content-type': 'application/json',
        ...(p.contentLength === undefined ? {} : { 'content-length': String(p.contentLength) }),
      },
      body: p.body,
      duplex: 'half',
    } as RequestInit);

  it('before authentication no console send body is read beyond the default cap', async () => {
    const { t, path } = await consoleTenant({ scripted: { rules: [], default_reply: 'ok' } });
    const stranger = `sy_${'A'.repeat(43)}`;
    // 5 MiB declared: within the route's cap, so nothing is judged or read before adminAuth: 401.
    const five = countedBody(5 * 1024 * 1024);
    const res5 = await rawPost(path, { token: stranger, body: five.body, contentLength: 5 * 1024 * 1024 });
    expect(res5.status).toBe(401);
    expect(five.pulled()).toBe(0);
    // Over the route's cap: 413 from the header alone.
    const nine = countedBody(MAX_CONSOLE_BODY_BYTES + 1);
    const res9 = await rawPost(path, {
      token: stranger,
      body: nine.body,
      contentLength: MAX_CONSOLE_BODY_BYTES + 1,
    });
    expect(res9.status).toBe(413);
    expect(nine.pulled()).toBe(0);
    // Without a declared length (chunked): the default 1 MiB cap, read and refused before auth.
    const chunked = countedBody(2 * 1024 * 1024);
    const resChunked = await rawPost(path, { token: stranger, body: chunked.body });
    expect(resChunked.status).toBe(413);
    expect(chunked.pulled()).toBeLessThanOrEqual(MAX_BODY_BYTES + 64 * 1024);
    expect((await rowsOf(t.tenantId))[0]!.n).toBe(0);

    // Authenticated, the same chunked body is told to declare its length; a declared one over the
    // default is read (after auth) and accepted.
    const authChunked = await rawPost(path, { token: t.adminKey, body: countedBody(2 * 1024 * 1024).body });
    expect(authChunked.status).toBe(413);
    expect(((await authChunked.json()) as Json).error.message).toMatch(/Content-Length/);
    const big = Buffer.concat([
      Buffer.from(JSON.stringify({ conversation_id: 'big', text: 'hello' })),
      Buffer.alloc(MAX_BODY_BYTES + 512 * 1024, 0x20),
    ]);
    const accepted = await rawPost(path, { token: t.adminKey, body: big, contentLength: big.byteLength });
    expect(accepted.status, await accepted.clone().text()).toBe(202);
    expect((await rowsOf(t.tenantId))[0]!.n).toBe(1);
  });

  it('a retry with the same client_message_id and other bytes is the first message: its objects only', async () => {
    const { t, path } = await consoleTenant({ scripted: { rules: [], default_reply: 'ok' } });
    const first = await ok(
      send(t, path, { conversation_id: 'r', client_message_id: 'same', attachments: [photo()] }),
      202,
    );
    const other = Buffer.from(PNG);
    other.writeUInt8(other.readUInt8(other.length - 20) ^ 0xff, other.length - 20);
    const again = await ok(
      send(t, path, {
        conversation_id: 'r',
        client_message_id: 'same',
        attachments: [photo({ data_base64: other.toString('base64') })],
      }),
      202,
    );
    expect(again).toMatchObject({ event_id: first.event_id, duplicate: true });
    const rows = await artifactRows(t.tenantId);
    expect(rows.map((r) => [r.event_id, r.content_digest])).toEqual([[first.event_id, sha256(PNG)]]);
    // The retry's other bytes were stored under their own id, then removed: nothing left over.
    expect(storedObjects(t.tenantId)).toEqual([rows[0]!.artifact_id]);
    expect(readFileSync(join(dataDir, 'artifacts', rows[0]!.content_ref)).equals(PNG)).toBe(true);
    expect((await rowsOf(t.tenantId))[0]!.n).toBe(1);

    // Once retention marks the row, the admin API shows it as deleting.
    await ensureWorker();
    await finished(t, first.event_id);
    await h.sql`update artifact set deleting_at = now() where tenant_id = ${t.tenantId}`;
    const detail = await ok(
      api(app, 'GET', tenantPath(t.tenantId, `/messages/${first.event_id}`), { token: t.viewerKey }),
    );
    expect(detail.artifacts.map((a: Json) => a.deleting)).toEqual([true]);
  });

  it('an upload the worker cannot find (a filesystem profile, API on another host) fails the message clearly', async () => {
    await ensureWorker();
    const { setup, path } = await visionTenant();
    const before = openai.requests.length;
    // The API writes to its own data dir; the worker reads another (two hosts, one filesystem profile).
    const elsewhere = newApp({
      ...h.appDeps,
      artifacts: { dataDir: mkdtempSync(join(tmpdir(), 'switchyard-api-host-')), trustedEndpoints: [] },
    });
    const accepted = await ok(
      api(elsewhere, 'POST', path, {
        token: setup.adminKey,
        body: { conversation_id: 'hosts', text: 'see?', attachments: [photo()] },
      }),
      202,
    );
    const detail = await finished(setup, accepted.event_id);
    expect(detail).toMatchObject({
      status: 'replied',
      outcome: 'media_rejected',
      failure_reason: 'artifact_missing',
    });
    expect(openai.requests.length).toBe(before);
  });

  it('a store that does not take the upload → 503, nothing recorded, started or left stored', async () => {
    const { t, path } = await consoleTenant({ scripted: { rules: [], default_reply: 'ok' } });
    // The data dir is a file: every write fails (storage_unavailable).
    const notADir = join(mkdtempSync(join(tmpdir(), 'switchyard-data-')), 'file');
    writeFileSync(notADir, 'x');
    const broken = newApp({ ...h.appDeps, artifacts: { dataDir: notADir, trustedEndpoints: [] } });
    const res = await api(broken, 'POST', path, {
      token: t.adminKey,
      body: { conversation_id: 'down', text: 'two', attachments: [photo(), photo({ file_name: 'b.png' })] },
    });
    expect([res.status, res.body.error?.code], res.text).toEqual([503, 'unavailable']);
    expect((await rowsOf(t.tenantId))[0]!.n).toBe(0);
    expect(await artifactRows(t.tenantId)).toEqual([]);
    expect(storedObjects(t.tenantId)).toEqual([]);
    expect(await repliesOf(t, path, 'down')).toEqual([]);
  });

  it('uploads of a failed record are removed only when no message of that client_message_id names them', async () => {
    const { t, path } = await consoleTenant({ scripted: { rules: [], default_reply: 'ok' } });
    const bindingId = path.split('/bindings/')[1]!.split('/')[0]!;
    const [tenant] = await h.sql<{ default_backend_profile_id: string }[]>`
      select default_backend_profile_id from tenant where tenant_id = ${t.tenantId}`;
    // A concurrent retry recorded the message (and its objects) first.
    await ok(send(t, path, { conversation_id: 'c', client_message_id: 'k', attachments: [photo()] }), 202);
    const stage = (clientMessageId: string) => {
      const externalMessageId = consoleExternalId({ conversationId: 'c', clientMessageId, generatedId: 'x' });
      return {
        key: idempotencyKeyOf({ tenantId: t.tenantId, bindingId, channel: 'console' }, externalMessageId),
        uploads: stageConsoleUploads(
          { ...h.appDeps, artifacts: { dataDir, trustedEndpoints: [] } },
          {
            tenantId: t.tenantId,
            bindingId,
            backendProfileId: tenant!.default_backend_profile_id,
            externalMessageId,
            attachments: [photo()],
          },
        ),
      };
    };
    // This request's record then failed: the same objects, named by the recorded message, stay.
    const same = stage('k');
    await (await same.uploads).abandon(same.key);
    const [row] = await artifactRows(t.tenantId);
    expect(storedObjects(t.tenantId)).toEqual([row!.artifact_id]);
    // A message never recorded: its objects go.
    const lone = stage('never');
    await (await lone.uploads).abandon(lone.key);
    expect(storedObjects(t.tenantId)).toEqual([row!.artifact_id]);
  });
});
