import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActivityDeps } from '../../activities/deps';
import { housekeepingActivities } from '../../activities/housekeeping';
import { ensureHousekeepingSchedule } from '../../runtime/housekeeping-schedule';
import { api, createTenant, type Json, ok, tenantPath } from '../helpers/admin';
import { enqueueWorkerAudit, failAuditLinking } from '../helpers/audit';
import { createHarness, type Harness } from '../helpers/harness';

// Housekeeping on its Temporal Schedule: audit retention per tenant keeps the chain verifiable
// (from the signed checkpoint it leaves), and the tenant-less ingress tables are pruned.
describe('housekeeping', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const verify = (tenantId: string): Promise<Json> =>
    ok(api(h.app, 'GET', tenantPath(tenantId, '/audit-events/verification')));

  /**
   * A tenant with 5 audit rows, the first `old` of them older than its 1-day retention. Ageing a
   * row changes what its digest covers, so the chain is re-sealed from there on (this test holds
   * the key, as the application does).
   */
  async function agedTenant(old = 3): Promise<string> {
    const t = (await createTenant(h.app)).tenant_id as string;
    for (let v = 1; v <= 4; v++) {
      await ok(
        api(h.app, 'POST', tenantPath(t, '/status-transitions'), {
          body: { expected_version: v, next_status: v % 2 ? 'suspended' : 'active', reason: 'age' },
        }),
      );
    }
    await h.sql.begin(async (tx) => {
      await tx`update tenant set audit_retention_days = 1 where tenant_id = ${t}`;
      await tx`alter table audit_log disable trigger user`;
      await tx`update audit_log set occurred_at = now() - interval '2 days' where tenant_id = ${t} and seq <= ${old}`;
      for (let seq = 1; seq <= 5; seq++) {
        await tx`update audit_log l set previous_digest = p.digest
                 from audit_log p where l.tenant_id = ${t} and l.seq = ${seq}
                   and p.tenant_id = ${t} and p.seq = ${seq - 1}`;
        await tx`update audit_log l set digest = audit_digest(l) where l.tenant_id = ${t} and l.seq = ${seq}`;
      }
      await tx`alter table audit_log enable trigger user`;
    });
    expect(await verify(t)).toMatchObject({ valid: true, checked: 5 });
    return t;
  }

  it('removes audit rows past retention; the rest verifies from the signed checkpoint', async () => {
    const t = await agedTenant();
    const run = housekeepingActivities({ sql: h.workerSql, log: h.appDeps.log } as unknown as ActivityDeps);
    const report = await run.housekeep({ batchSize: 2 });
    expect(report.auditRowsRemoved).toBeGreaterThanOrEqual(2);
    // Bounded per run: the third old row goes in the next one.
    expect((await h.sql`select min(seq)::int as s from audit_log where tenant_id = ${t}`)[0]!.s).toBe(3);
    await run.housekeep({ batchSize: 2 });
    const rows = await h.sql<
      { seq: number }[]
    >`select seq::int as seq from audit_log where tenant_id = ${t} order by seq`;
    expect(rows.map((r) => r.seq)).toEqual([4, 5]);
    const [checkpoint] = await h.sql<{ seq: number; removed_total: number }[]>`
      select seq::int as seq, removed_total::int as removed_total from audit_retention_checkpoint where tenant_id = ${t}`;
    expect(checkpoint).toEqual({ seq: 3, removed_total: 3 });
    expect(await verify(t)).toMatchObject({ valid: true, checked: 2, checkpoint: { seq: 5 } });

    // A retention checkpoint edited by whoever controls the database no longer verifies.
    await h.sql`update audit_retention_checkpoint set seq = 2 where tenant_id = ${t}`;
    expect(await verify(t)).toMatchObject({ valid: false, first_invalid: 'retention_checkpoint:2' });
  });

  it('never removes the head, never signs away a row that does not verify, and takes no verification checkpoint for a retention one', async () => {
    const run = housekeepingActivities({ sql: h.workerSql, log: h.appDeps.log } as unknown as ActivityDeps);
    // Every row past retention: the head stays (the next entry links to it), the chain verifies.
    const all = await agedTenant(5);
    await run.housekeep({});
    expect(await h.sql`select seq::int as seq from audit_log where tenant_id = ${all}`).toEqual([{ seq: 5 }]);
    expect(await verify(all)).toMatchObject({ valid: true, checked: 1 });
    await ok(
      api(h.app, 'POST', tenantPath(all, '/status-transitions'), {
        body: { expected_version: 5, next_status: 'suspended', reason: 'after retention' },
      }),
    );
    expect(await verify(all)).toMatchObject({ valid: true, checked: 2 });

    // An edited row at the boundary: refused, nothing removed, reported.
    const edited = await agedTenant(3);
    await h.sql.begin(async (tx) => {
      await tx`alter table audit_log disable trigger user`;
      await tx`update audit_log set actor_id = 'mallory' where tenant_id = ${edited} and seq = 3`;
      await tx`alter table audit_log enable trigger user`;
    });
    const report = await run.housekeep({});
    expect(report.auditRefused).toBeGreaterThanOrEqual(1);
    expect(await h.sql`select count(*)::int as n from audit_log where tenant_id = ${edited}`).toEqual([
      { n: 5 },
    ]);

    // A verification checkpoint (signed for verification) planted as the retention checkpoint.
    const fresh = (await createTenant(h.app)).tenant_id as string;
    const v = await verify(fresh);
    await h.sql`insert into audit_retention_checkpoint (tenant_id, seq, digest, signature, removed_total)
                values (${fresh}, ${v.checkpoint.seq}, ${v.checkpoint.digest}, ${v.checkpoint.signature}, 1)`;
    expect(await verify(fresh)).toMatchObject({
      valid: false,
      first_invalid: `retention_checkpoint:${v.checkpoint.seq}`,
    });
  });

  it("seals every other tenant's pending entries when one tenant's sealing raises, and finishes the run", async () => {
    const run = housekeepingActivities({ sql: h.workerSql, log: h.appDeps.log } as unknown as ActivityDeps);
    const pending = async (tenantId: string) =>
      (await h.sql`select count(*)::int as n from audit_pending where tenant_id = ${tenantId}`)[0]!.n;
    const faulty = (await createTenant(h.app)).tenant_id as string;
    const healthy = (await createTenant(h.app)).tenant_id as string;
    // Linking the faulty tenant's entries raises. Installed before its entry is queued, so no
    // other file's sealer links it first.
    const repair = await failAuditLinking(h.sql, {
      name: 'test_housekeeping_boom',
      tenantId: faulty,
      message: 'boom (housekeeping test)',
    });
    try {
      await enqueueWorkerAudit(h.workerSql, faulty, 'x.boom');
      await enqueueWorkerAudit(h.workerSql, healthy, 'x.fine');
      const report = await run.housekeep({});
      expect(report.auditSealFailed).toBeGreaterThanOrEqual(1);
      expect(await pending(healthy)).toBe(0);
      expect(await pending(faulty)).toBe(1);
    } finally {
      await repair();
    }
    // The next run seals what the fault left pending, and the chain verifies.
    await run.housekeep({});
    expect(await pending(faulty)).toBe(0);
    expect(await verify(faulty)).toMatchObject({ valid: true, pending: 0 });
  });

  it('prunes old rate-limit windows and replay guards, and leaves fresh ones', async () => {
    const t = (await createTenant(h.app)).tenant_id as string;
    const digest = 'f'.repeat(60) + Date.now().toString(16).slice(-4);
    await h.sql`insert into rate_limit_window (tenant_id, window_start, count)
                values (${t}, now() - interval '1 hour', 3), (${t}, date_trunc('minute', now()), 1)`;
    await h.sql`insert into ingress_replay_guard (route_key_digest, nonce, seen_at)
                values (${digest}, 'old', now() - interval '1 hour'), (${digest}, 'new', now())`;
    const run = housekeepingActivities({ sql: h.workerSql, log: h.appDeps.log } as unknown as ActivityDeps);
    const report = await run.housekeep({});
    expect(report.rateLimitWindows).toBeGreaterThanOrEqual(1);
    expect(report.replayGuards).toBeGreaterThanOrEqual(1);
    expect(await h.sql`select count(*)::int as n from rate_limit_window where tenant_id = ${t}`).toEqual([
      { n: 1 },
    ]);
    expect(await h.sql`select nonce from ingress_replay_guard where route_key_digest = ${digest}`).toEqual([
      { nonce: 'new' },
    ]);
  });

  it('runs on its Temporal Schedule, visible with its result', async () => {
    const t = await agedTenant();
    const worker = await h.startWorker();
    const scheduleId = `housekeeping-test-${h.taskQueue}`;
    try {
      await ensureHousekeepingSchedule(h.temporal, {
        taskQueue: h.taskQueue,
        everySeconds: 3600,
        scheduleId,
      });
      const schedule = h.temporal.schedule.getHandle(scheduleId);
      await schedule.trigger();
      let workflowId: string | undefined;
      for (let i = 0; i < 100 && !workflowId; i++) {
        const d = await schedule.describe();
        workflowId = d.info.recentActions[0]?.action.workflow.workflowId;
        if (!workflowId) await new Promise((r) => setTimeout(r, 100));
      }
      expect(workflowId).toBeDefined();
      const result = await h.temporal.workflow.getHandle(workflowId!).result();
      expect(result.auditRowsRemoved).toBeGreaterThanOrEqual(3);
      expect(await h.sql`select count(*)::int as n from audit_log where tenant_id = ${t}`).toEqual([
        { n: 2 },
      ]);
      expect(await verify(t)).toMatchObject({ valid: true, checked: 2 });
    } finally {
      await h.temporal.schedule
        .getHandle(scheduleId)
        .delete()
        .catch(() => undefined);
      await worker.stop();
    }
  });
});
