import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  DeleteObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { Registry } from 'prom-client';
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneArtifacts } from '../../activities/artifact-retention';
import type { ActivityDeps } from '../../activities/deps';
import { housekeepingActivities } from '../../activities/housekeeping';
import { newId } from '../../db/ids';
import { withTenantTx } from '../../db/tx';
import { s3Location } from '../../lib/artifact-store';
import { contentDigest, sha256Hex } from '../../lib/digest';
import { secretAad } from '../../lib/secret-box';
import { createMetrics } from '../../telemetry/metrics';
import type { housekeepingWorkflow } from '../../workflows/housekeeping';
import { api, configurationOf, ok, tenantPath } from '../helpers/admin';
import { createHarness, type Harness } from '../helpers/harness';
import { seedTelegramTenant } from '../helpers/seed';

// Artifact retention, a housekeeping part, on real PostgreSQL, Temporal and an S3-compatible
// server (s3rver on 127.0.0.1): an artifact older than its tenant's artifact_retention_days loses
// its object (S3 or filesystem) and then its row; fresh ones, other tenants' and those an unsent
// segment of an unfinished message still attaches stay; a store that fails leaves the rows marked
// for the next run.

const BUCKET = 'switchyard-retention';
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

describe('artifact retention', () => {
  let h: Harness;
  let s3: S3rver;
  let s3Url: string;
  let s3Client: S3Client;
  let dataDir: string;
  let deps: ActivityDeps;

  beforeAll(async () => {
    h = await createHarness();
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
    deps = {
      sql: h.workerSql,
      secrets: h.secrets,
      log: h.appDeps.log,
      suspendedReply: 'unavailable',
      workerId: 'retention-test',
      sendTimeoutMs: 2000,
      artifacts: { dataDir, trustedEndpoints: [] },
      metrics: createMetrics(new Registry()),
    } as ActivityDeps;
  });
  afterAll(async () => {
    await h?.close();
    s3Client?.destroy();
    await s3?.close();
  });

  interface Tenant {
    tenantId: string;
    bindingId: string;
    appId: string;
    profileId: string;
  }

  async function tenant(): Promise<Tenant> {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: 'http://127.0.0.1:9' });
    const [row] = await h.sql<{ default_backend_profile_id: string }[]>`
      select default_backend_profile_id from tenant where tenant_id = ${t.tenantId}`;
    return { ...t, profileId: row!.default_backend_profile_id };
  }

  /** The tenant's backend profile stores artifacts in S3 at `endpoint`, with an object_storage secret. */
  async function useS3(t: Tenant, endpoint = s3Url) {
    const ref = newId('sec');
    await h.sql.begin(async (tx) => {
      await tx`insert into secret (tenant_id, secret_ref, name, purpose)
               values (${t.tenantId}, ${ref}, ${`s3-${randomBytes(6).toString('hex')}`}, 'object_storage')`;
      const sealed = h.secrets.seal(
        JSON.stringify({ access_key_id: 'S3RVER', secret_access_key: 'S3RVER' }),
        secretAad(t.tenantId, ref),
      );
      await tx`insert into secret_version (tenant_id, secret_ref, version, key_id, ciphertext)
               values (${t.tenantId}, ${ref}, 1, ${h.secrets.keyId}, ${sealed})`;
      const artifacts = {
        provider: 's3',
        endpoint,
        bucket: BUCKET,
        region: 'us-east-1',
        force_path_style: true,
        credentials_secret_ref: ref,
      };
      await tx`update backend_profile set artifacts = ${tx.json(artifacts)} where tenant_id = ${t.tenantId}`;
    });
  }

  let seq = 1;
  /** A message of the tenant in `status`, its reply pinned (one segment) once it has one. */
  async function message(t: Tenant, status: string): Promise<{ eventId: string; replyId: string }> {
    const segments = ['completed', 'reply_pending', 'replied'].includes(status) ? 1 : 0;
    const sessionId = newId('ses');
    const eventId = newId('evt');
    const replyId = newId('rep');
    const n = seq++;
    await h.sql.begin(async (tx) => {
      await tx`insert into session (tenant_id, session_id, binding_id, app_id, kind, external_user_id, identity_key, last_event_seq)
               values (${t.tenantId}, ${sessionId}, ${t.bindingId}, ${t.appId}, 'direct', '42', ${`direct|42|${sessionId}`}, 1)`;
      const payload = { kind: 'text', text: 'hello', externalMessageId: String(n) };
      await tx`insert into message_event (tenant_id, event_id, session_id, binding_id, external_message_id, idempotency_key,
                                          event_seq, kind, payload, payload_digest, status, request_id, workflow_id,
                                          reply_id, reply_cache_ref, segment_count, execution_plan)
               values (${t.tenantId}, ${eventId}, ${sessionId}, ${t.bindingId}, ${String(n)}, ${sha256Hex(eventId)}, 1, 'text',
                       ${tx.json(payload)}, ${contentDigest(payload)}, ${status}, 'req_seed', ${`message-${eventId}`},
                       ${segments > 0 ? replyId : null}, ${segments > 0 ? replyId : null}, ${segments > 0 ? segments : null},
                       ${tx.json({ tenant: { id: t.tenantId, version: 1 } })})`;
    });
    return { eventId, replyId };
  }

  /** An artifact of `eventId`, its object written to the store it names, created `ageDays` ago. */
  async function artifact(
    t: Tenant,
    eventId: string,
    storage: 's3' | 'filesystem',
    ageDays: number,
    /** store_location as written (s3: the store it was written to; default the test's S3 server) */
    location: string | null = storage === 's3' ? s3Location({ endpoint: s3Url, bucket: BUCKET }) : null,
  ): Promise<{ artifactId: string; key: string }> {
    const artifactId = newId('art');
    const key = `${t.tenantId}/${artifactId}`;
    if (storage === 's3') {
      await s3Client.send(
        new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: PNG, ContentType: 'image/png' }),
      );
    } else {
      const path = join(dataDir, 'artifacts', key);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, PNG);
    }
    await h.sql`
      insert into artifact (tenant_id, artifact_id, event_id, direction, kind, content_type, size_bytes,
                            content_digest, content_ref, storage, store_location, backend_profile_id, created_at)
      values (${t.tenantId}, ${artifactId}, ${eventId}, 'outbound', 'image', 'image/png', ${PNG.length},
              ${sha256Hex(PNG)}, ${key}, ${storage}, ${location}, ${t.profileId},
              now() - make_interval(days => ${ageDays}))`;
    return { artifactId, key };
  }

  async function inS3(key: string): Promise<boolean> {
    try {
      await s3Client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }));
      return true;
    } catch (err) {
      if (err instanceof S3ServiceException && err.$metadata.httpStatusCode === 404) return false;
      throw err;
    }
  }

  const rowsOf = async (tenantId: string) => [
    ...(await h.sql<{ artifact_id: string; marked: boolean }[]>`
      select artifact_id, deleting_at is not null as marked from artifact where tenant_id = ${tenantId}
      order by artifact_id`),
  ];
  const run = (opts: { artifactBatchSize?: number } = {}) => housekeepingActivities(deps).housekeep(opts);
  /**
   * Retention alone, and what it reported about `t`: the database is shared with other test files,
   * so a count over every tenant says nothing about this test's.
   */
  const retainFor = async (t: Tenant) => {
    const report = await pruneArtifacts(deps, { batchSize: 500, budgetMs: 60_000 });
    return report.failures
      .filter((f) => f.tenantId === t.tenantId)
      .map(({ reasonClass, storage, left }) => ({ reasonClass, storage, left }));
  };
  /** A port nobody listens on (just closed): every connection is refused. */
  const closedPort = async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    return port;
  };

  it('the tenant admin API sets artifact_retention_days (default 30) and refuses bad values, changing nothing', async () => {
    const created = await ok(
      api(h.app, 'POST', '/v1/admin/tenants', {
        body: { tenant_key: `ret-${Date.now().toString(36)}`, display_name: 'Retention' },
      }),
      201,
    );
    expect(created.artifact_retention_days).toBe(30);
    const path = tenantPath(created.tenant_id, '/configuration');
    for (const bad of [0, -1, 1.5, '7', null, 36_501]) {
      const res = await api(h.app, 'PUT', path, {
        body: configurationOf(created, { artifact_retention_days: bad }),
      });
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
    }
    const bad = await api(h.app, 'POST', '/v1/admin/tenants', {
      body: {
        tenant_key: `ret-bad-${Date.now().toString(36)}`,
        display_name: 'x',
        artifact_retention_days: 0,
      },
    });
    expect(bad.status).toBe(400);
    expect(await ok(api(h.app, 'GET', tenantPath(created.tenant_id)))).toMatchObject({
      artifact_retention_days: 30,
      version: 1,
    });

    const updated = await ok(
      api(h.app, 'PUT', path, { body: configurationOf(created, { artifact_retention_days: 7 }) }),
    );
    expect(updated).toMatchObject({ artifact_retention_days: 7, version: 2 });
    // Left out of the snapshot: unchanged (clients written before the field keep working).
    const again = await ok(
      api(h.app, 'PUT', path, { body: configurationOf(updated, { display_name: 'Renamed' }) }),
    );
    expect(again).toMatchObject({ artifact_retention_days: 7, display_name: 'Renamed', version: 3 });
  });

  it('removes an S3 artifact past retention from the store and from SQL (on the Temporal worker); fresh ones and another tenant stay', async () => {
    const a = await tenant();
    const b = await tenant();
    await useS3(a);
    await useS3(b);
    // b keeps its artifacts 60 days (through the admin API): its 40-day-old one stays.
    const bNow = await ok(api(h.app, 'GET', tenantPath(b.tenantId)));
    await ok(
      api(h.app, 'PUT', tenantPath(b.tenantId, '/configuration'), {
        body: configurationOf(bNow, { artifact_retention_days: 60 }),
      }),
    );
    const am = await message(a, 'replied');
    const bm = await message(b, 'replied');
    const old = await artifact(a, am.eventId, 's3', 40);
    const fresh = await artifact(a, am.eventId, 's3', 1);
    const other = await artifact(b, bm.eventId, 's3', 40);

    const worker = await h.startWorker({ artifacts: { dataDir, trustedEndpoints: [] } });
    try {
      const report = await h.temporal.workflow.execute<typeof housekeepingWorkflow>('housekeepingWorkflow', {
        taskQueue: h.taskQueue,
        workflowId: `housekeeping-artifacts-${a.tenantId}`,
        args: [{}],
      });
      // Counts over the shared database's tenants: only the shape here; a's and b's rows below.
      expect(report.artifactsRemoved).toBeGreaterThanOrEqual(1);
    } finally {
      await worker.stop();
    }
    expect(await inS3(old.key)).toBe(false);
    expect(await rowsOf(a.tenantId)).toEqual([{ artifact_id: fresh.artifactId, marked: false }]);
    expect(await inS3(fresh.key)).toBe(true);
    expect(await rowsOf(b.tenantId)).toEqual([{ artifact_id: other.artifactId, marked: false }]);
    expect(await inS3(other.key)).toBe(true);
  });

  it('removes a filesystem artifact past retention; a marked row whose object is already gone is finished', async () => {
    const t = await tenant();
    const m = await message(t, 'failed');
    const old = await artifact(t, m.eventId, 'filesystem', 31);
    // A run that crashed after deleting the object: the row is marked, the file gone.
    const crashed = await artifact(t, m.eventId, 'filesystem', 31);
    await h.sql`update artifact set deleting_at = now() where tenant_id = ${t.tenantId} and artifact_id = ${crashed.artifactId}`;
    rmSync(join(dataDir, 'artifacts', crashed.key));
    expect(await retainFor(t)).toEqual([]);
    expect(existsSync(join(dataDir, 'artifacts', old.key))).toBe(false);
    expect(await rowsOf(t.tenantId)).toEqual([]);
  });

  it('a store that fails: counted for its tenant, rows stay marked; the next run deletes them', async () => {
    const t = await tenant();
    await useS3(t, `http://127.0.0.1:${await closedPort()}`);
    const m = await message(t, 'replied');
    // Rows from before store_location was recorded (null): the profile's store is trusted.
    const one = await artifact(t, m.eventId, 's3', 45, null);
    const two = await artifact(t, m.eventId, 's3', 44, null);

    const failures = () =>
      deps.metrics!.housekeepingArtifactFailures.get().then((x) => x.values.reduce((n, v) => n + v.value, 0));
    const before = await failures();
    expect(await retainFor(t)).toEqual([{ reasonClass: 'storage_unavailable', storage: 's3', left: 2 }]);
    expect(await failures()).toBeGreaterThan(before);
    // Nothing half-deleted: both rows (marked) and both objects are still there.
    expect(await rowsOf(t.tenantId)).toEqual(
      [one.artifactId, two.artifactId].sort().map((id) => ({ artifact_id: id, marked: true })),
    );
    expect(await inS3(one.key)).toBe(true);
    expect(await inS3(two.key)).toBe(true);

    // The store is back (the profile points at the S3 server again): the next run finishes.
    await h.sql`update backend_profile set artifacts = jsonb_set(artifacts, '{endpoint}', to_jsonb(${s3Url}::text))
                where tenant_id = ${t.tenantId}`;
    // One object already removed by hand counts as deleted.
    await s3Client.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: one.key }));
    expect(await retainFor(t)).toEqual([]);
    expect(await rowsOf(t.tenantId)).toEqual([]);
    expect(await inS3(two.key)).toBe(false);
  });

  it('one store that fails does not stop the tenant: its marked rows wait, the filesystem ones go', async () => {
    const t = await tenant();
    const down = `http://127.0.0.1:${await closedPort()}`;
    await useS3(t, down);
    const m = await message(t, 'replied');
    // Older, so they come first in the batch (and marked ones first of all on later runs).
    const at = s3Location({ endpoint: down, bucket: BUCKET });
    const s3Old = await artifact(t, m.eventId, 's3', 60, at);
    const s3Older = await artifact(t, m.eventId, 's3', 61, at);
    const local = await artifact(t, m.eventId, 'filesystem', 40);

    expect(await retainFor(t)).toEqual([{ reasonClass: 'storage_unavailable', storage: 's3', left: 2 }]);
    expect(existsSync(join(dataDir, 'artifacts', local.key))).toBe(false);
    expect(await rowsOf(t.tenantId)).toEqual(
      [s3Old.artifactId, s3Older.artifactId].sort().map((id) => ({ artifact_id: id, marked: true })),
    );
    // The next run: the marked rows first again, and again the rest of the tenant is not held up.
    const later = await artifact(t, m.eventId, 'filesystem', 40);
    expect(await retainFor(t)).toEqual([{ reasonClass: 'storage_unavailable', storage: 's3', left: 2 }]);
    expect(existsSync(join(dataDir, 'artifacts', later.key))).toBe(false);
    expect(await rowsOf(t.tenantId)).toHaveLength(2);
  });

  it('never deletes through a profile that now points at another bucket or endpoint than the object was written to', async () => {
    const t = await tenant();
    await useS3(t);
    const m = await message(t, 'replied');
    // Written while the profile pointed elsewhere (another endpoint); the same key exists here.
    const moved = await artifact(
      t,
      m.eventId,
      's3',
      40,
      s3Location({ endpoint: 'https://old.example', bucket: BUCKET }),
    );
    const here = await artifact(t, m.eventId, 's3', 40);

    expect(await retainFor(t)).toEqual([{ reasonClass: 'store_moved', storage: 's3', left: 1 }]);
    expect(await rowsOf(t.tenantId)).toEqual([{ artifact_id: moved.artifactId, marked: true }]);
    // Not deleted at the profile's current store (that would "succeed" and leave the real object).
    expect(await inS3(moved.key)).toBe(true);
    expect(await inS3(here.key)).toBe(false);
  });

  it('keeps an attachment an unsent segment of an unfinished message needs, and its own unfinished message', async () => {
    const t = await tenant();
    await useS3(t);
    // An old artifact of a finished message, attached by a later message still being delivered.
    const earlier = await message(t, 'replied');
    const attached = await artifact(t, earlier.eventId, 's3', 90);
    const later = await message(t, 'reply_pending');
    const segmentId = newId('seg');
    await h.sql`insert into reply_outbox (tenant_id, segment_id, event_id, reply_id, idempotency_key, segment_index,
                                          segment_count, channel, target, content, status, segment_kind, payload_ref)
                values (${t.tenantId}, ${segmentId}, ${later.eventId}, ${later.replyId}, ${`out-${segmentId}`}, 0, 1,
                        'telegram', ${h.sql.json({ chatId: '42' })}, '', 'retryable', 'image', ${attached.artifactId})`;
    // An old artifact of a message not yet run (its media is still to be read).
    const running = await message(t, 'received');
    const inbound = await artifact(t, running.eventId, 's3', 90);

    // A failed message whose attachment segment waits in the DLQ (an operator's retry sends it).
    const parked = await message(t, 'failed');
    const parkedArt = await artifact(t, parked.eventId, 's3', 90);
    const parkedSeg = newId('seg');
    await h.sql`update message_event set reply_id = ${parked.replyId}, reply_cache_ref = ${parked.replyId}, segment_count = 1
                where tenant_id = ${t.tenantId} and event_id = ${parked.eventId}`;
    await h.sql`insert into reply_outbox (tenant_id, segment_id, event_id, reply_id, idempotency_key, segment_index,
                                          segment_count, channel, target, content, status, segment_kind, payload_ref)
                values (${t.tenantId}, ${parkedSeg}, ${parked.eventId}, ${parked.replyId}, ${`out-${parkedSeg}`}, 0, 1,
                        'telegram', ${h.sql.json({ chatId: '42' })}, '', 'failed', 'image', ${parkedArt.artifactId})`;
    await h.sql`insert into dead_letter (tenant_id, dead_letter_id, event_id, kind, segment_id, reason_class)
                values (${t.tenantId}, ${newId('dl')}, ${parked.eventId}, 'segment', ${parkedSeg}, 'http_400')`;

    // A failed message whose execution waits in the DLQ: a retry runs it again, reading its media.
    const deadExec = await message(t, 'failed');
    const deadExecArt = await artifact(t, deadExec.eventId, 's3', 90);
    await h.sql`insert into dead_letter (tenant_id, dead_letter_id, event_id, kind, reason_class)
                values (${t.tenantId}, ${newId('dl')}, ${deadExec.eventId}, 'execution', 'model_failed')`;

    await run();
    expect((await rowsOf(t.tenantId)).map((r) => r.artifact_id).sort()).toEqual(
      [attached.artifactId, inbound.artifactId, parkedArt.artifactId, deadExecArt.artifactId].sort(),
    );
    expect(await inS3(deadExecArt.key)).toBe(true);
    expect(await inS3(attached.key)).toBe(true);
    expect(await inS3(inbound.key)).toBe(true);

    // Once sent and the messages finished, both go.
    await h.sql`update reply_outbox set status = 'sent', sent_at = now() where tenant_id = ${t.tenantId} and segment_id = ${segmentId}`;
    await h.sql`update message_event set status = 'replied' where tenant_id = ${t.tenantId} and event_id = ${later.eventId}`;
    await h.sql`update message_event set status = 'failed' where tenant_id = ${t.tenantId} and event_id = ${running.eventId}`;
    await h.sql`update dead_letter set status = 'discarded', resolved_at = now(), resolved_by = 'test'
                where tenant_id = ${t.tenantId}`;
    await run();
    expect(await rowsOf(t.tenantId)).toEqual([]);
    expect(await inS3(attached.key)).toBe(false);
    expect(await inS3(inbound.key)).toBe(false);
  });

  it('is bounded per run, and the owner functions refuse another tenant than the transaction’s', async () => {
    const t = await tenant();
    const m = await message(t, 'replied');
    for (let i = 0; i < 3; i++) await artifact(t, m.eventId, 'filesystem', 60);
    await run({ artifactBatchSize: 2 });
    expect(await rowsOf(t.tenantId)).toHaveLength(1);
    await run({ artifactBatchSize: 2 });
    expect(await rowsOf(t.tenantId)).toHaveLength(0);

    const other = await tenant();
    await expect(
      withTenantTx(
        h.workerSql,
        { role: 'tenant_app_writer', tenantId: t.tenantId },
        (tx) => tx`select * from artifact_retention_mark(${other.tenantId}, 10)`,
      ),
    ).rejects.toMatchObject({ code: '42501' });
    // The worker may not update or delete artifact rows itself.
    await expect(
      withTenantTx(
        h.workerSql,
        { role: 'tenant_app_writer', tenantId: t.tenantId },
        (tx) => tx`delete from artifact where tenant_id = ${t.tenantId}`,
      ),
    ).rejects.toMatchObject({ code: '42501' });
  });
});
