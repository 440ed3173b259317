import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { runMigrations } from '../../db/migrate';
import { appendAudit, enqueueAudit } from '../../db/queries/audit';
import { sealAudit } from '../../db/queries/audit-seal';
import { withTenantTx } from '../../db/tx';
import { createLogger } from '../../lib/log';
import { startAuditSealer } from '../../runtime/audit-sealer';
import { api, createTenant, ok, seedRefusedPendingAudit, tenantPath } from '../helpers/admin';
import { enqueueWorkerAudit, failAuditLinking } from '../helpers/audit';
import { createHarness, type Harness } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

// A pending audit entry whose mac does not hold is never sealed (migration 0030), and sealing of its
// tenant stops in front of it. What must hold then: the tenant does not take the sealer's passes
// from other tenants; verification reports it (`refused`); the platform can quarantine it, which
// links an `audit.quarantined` entry in its place and lets sealing continue; and a sealing that
// fails outright never fails an admin mutation, which still appends after the sealed prefix.

describe('audit quarantine', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const verification = (tenantId: string, seal = true) =>
    ok(api(h.app, 'GET', tenantPath(tenantId, `/audit-events/verification${seal ? '' : '?seal=false'}`)));
  const enqueue = (tenantId: string, action: string) => enqueueWorkerAudit(h.workerSql, tenantId, action);
  const chain = async (tenantId: string) =>
    (
      await h.sql<{ action: string }[]>`
        select action from audit_log where tenant_id = ${tenantId} order by seq`
    ).map((r) => r.action);
  const quarantine = (tenantId: string, pendingId: number, token?: string) =>
    api(h.app, 'POST', tenantPath(tenantId, `/audit-events/pending/${pendingId}/quarantine`), {
      body: { reason: 'tampered in transit' },
      ...(token ? { token } : {}),
    });

  it('a tampered pending entry is refused until the platform quarantines it; then sealing goes on', async () => {
    const t = (await createTenant(h.app)).tenant_id as string;
    await enqueue(t, 'x.before');
    expect(await verification(t)).toMatchObject({ valid: true, checked: 2, pending: 0, refused: 0 });
    const victim = await enqueue(t, 'x.victim');
    const later = await enqueue(t, 'x.later');
    await h.sql.begin(async (tx) => {
      await tx`alter table audit_pending disable trigger user`;
      await tx`update audit_pending set actor_id = 'mallory' where audit_id = ${victim.audit_id}`;
      await tx`alter table audit_pending enable trigger user`;
    });
    const [tampered] = await h.sql<{ mac: string }[]>`
      select mac from audit_pending where pending_id = ${victim.pending_id}`;

    expect(await verification(t)).toMatchObject({
      valid: false,
      checked: 2,
      pending: 2,
      refused: 1,
      first_invalid: victim.audit_id,
    });

    // A tenant key may not quarantine (not even its own tenant's), an entry whose mac holds is not
    // quarantined, an unknown one is 404: none of them changes anything.
    const key = await ok(
      api(h.app, 'POST', tenantPath(t, '/api-keys'), { body: { role: 'tenant_admin' } }),
      201,
    );
    const before = await chain(t);
    expect((await quarantine(t, victim.pending_id, key.key)).status).toBe(403);
    const holds = await quarantine(t, later.pending_id);
    expect([holds.status, holds.body.error.code, holds.body.error.details]).toEqual([
      409,
      'conflict',
      { reason: 'not_refused' },
    ]);
    expect((await quarantine(t, 999_999_999_999)).status).toBe(404);
    const other = (await createTenant(h.app)).tenant_id as string;
    expect((await quarantine(other, victim.pending_id)).status).toBe(404);
    expect(await chain(t)).toEqual(before);
    expect(await h.sql`select 1 from audit_pending where tenant_id = ${t}`).toHaveLength(2);

    const done = await ok(quarantine(t, victim.pending_id));
    expect(done).toMatchObject({
      sealed_after: 1,
      entry: {
        action: 'audit.quarantined',
        actor_type: 'platform',
        reason: 'tampered in transit',
        details: {
          pending_id: victim.pending_id,
          claimed_audit_id: victim.audit_id,
          mac: tampered!.mac,
          content_sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
        },
      },
    });
    // The refused row's content (its actor) is nowhere in the entry that replaced it.
    expect(JSON.stringify(done.entry)).not.toContain('mallory');
    // In its place: after what was sealed before it, before what was queued behind it.
    expect(await chain(t)).toEqual([
      'tenant.create',
      'x.before',
      'api_key.create',
      'audit.quarantined',
      'x.later',
    ]);
    expect(await verification(t)).toMatchObject({ valid: true, checked: 5, pending: 0, refused: 0 });
    // And later entries are sealed as ever.
    await enqueue(t, 'x.after');
    expect(await verification(t)).toMatchObject({ valid: true, checked: 6, pending: 0, refused: 0 });
    const listed = await ok(api(h.app, 'GET', tenantPath(t, '/audit-events?action=audit.quarantined')));
    expect(listed.items.map((e: { audit_id: string }) => e.audit_id)).toEqual([done.entry.audit_id]);
  });

  it('an admin mutation succeeds when sealing fails, appended after the sealed prefix', async () => {
    const t = (await createTenant(h.app)).tenant_id as string;
    await enqueue(t, 'x.first');
    await enqueue(t, 'x.boom');
    await enqueue(t, 'x.last');
    // A fault in sealing that is not a refusal: linking one of the entries raises.
    const repair = await failAuditLinking(h.sql, {
      name: 'test_audit_boom',
      tenantId: t,
      action: 'x.boom',
      message: 'boom (test)',
    });
    try {
      await expect(sealAudit(h.workerSql, t, { role: 'tenant_app_writer', wait: true })).rejects.toThrow(
        'boom (test)',
      );
      // The admin entry goes in after the sealed prefix; the failed sealing is undone as a whole.
      const admin = await withTenantTx(h.apiSql, { role: 'tenant_admin_writer', tenantId: t }, (tx) =>
        appendAudit(tx, { tenantId: t, action: 'tool.decision', actorType: 'api_key', actorId: 'key_1' }),
      );
      expect(admin.seq).toBe(2);
      // A mutation through the API as well, and verification answers (reporting what is pending).
      await ok(api(h.app, 'POST', tenantPath(t, '/api-keys'), { body: { role: 'tenant_viewer' } }), 201);
      expect(await verification(t)).toMatchObject({ valid: true, checked: 3, pending: 3, refused: 0 });
    } finally {
      await repair();
    }
    expect(await verification(t)).toMatchObject({ valid: true, checked: 6, pending: 0, refused: 0 });
    expect(await chain(t)).toEqual([
      'tenant.create',
      'tool.decision',
      'api_key.create',
      'x.first',
      'x.boom',
      'x.last',
    ]);
  });

  describe('the background sealer (a database of its own: it seals every tenant it lists)', () => {
    const dbName = `audit_sealer_${process.pid}_${Date.now()}`;
    let superSql: postgres.Sql;
    let own: Harness;

    beforeAll(async () => {
      const suiteUrl = inject('databaseUrl');
      superSql = postgres(suiteUrl, { max: 1, onnotice: () => undefined });
      await superSql.unsafe(`create database ${dbName}`);
      const u = new URL(suiteUrl);
      u.pathname = `/${dbName}`;
      await runMigrations(u.toString());
      own = await createHarness({ databaseUrl: u.toString() });
    }, 120_000);
    afterAll(async () => {
      await own?.close();
      await superSql?.unsafe(`drop database if exists ${dbName} with (force)`);
      await superSql?.end();
    });

    it('a refused tenant is backed off from and does not starve the others', async () => {
      const blocked = (await createTenant(own.app)).tenant_id as string;
      const fine = (await createTenant(own.app)).tenant_id as string;
      // The blocked tenant's refused entry is the oldest pending one: it sorts first in every listing.
      await seedRefusedPendingAudit(own.sql, blocked);
      const queued = await withTenantTx(own.workerSql, { role: 'tenant_app_writer', tenantId: fine }, (tx) =>
        enqueueAudit(tx, { tenantId: fine, action: 'x.test', actorType: 'worker', actorId: 'w/1' }),
      );
      // One tenant per pass: without the back-off every pass would be the blocked tenant's.
      const sealer = startAuditSealer({
        sql: own.workerSql,
        log: createLogger({ level: 'silent' }),
        everyMs: 20,
        tenantsPerPass: 1,
        backoffMs: 60_000,
      });
      try {
        await waitFor(
          async () =>
            (await own.sql`select 1 from audit_log where audit_id = ${queued.audit_id}`).length === 1,
          { timeoutMs: 10_000, label: "the other tenant's entry sealed" },
        );
      } finally {
        await sealer.close();
      }
      expect(await own.sql`select 1 from audit_pending where tenant_id = ${blocked}`).toHaveLength(1);
      expect(await own.sql`select 1 from audit_pending where tenant_id = ${fine}`).toHaveLength(0);
    });
  });
});
