import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { appendAudit, enqueueAudit, verifyAuditChain } from '../../db/queries/audit';
import { sealAudit } from '../../db/queries/audit-seal';
import { type TransactionSql, withTenantTx } from '../../db/tx';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { api, ok, tenantPath } from '../helpers/admin';
import { SUITE_AUDIT_KEY } from '../helpers/db-logins';
import { createHarness, type Harness } from '../helpers/harness';
import { seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

// Audit sealing (migration 0030): the runtime's entries are written pending, without the tenant's
// chain lock, and a sealer links them into the chain later. What must hold: one tenant's finishes
// do not wait on the chain; the chain verifies `valid` once sealed; pending entries are counted as
// pending, never as checked; an edited or forged pending entry is never sealed and fails
// verification; a rolled-back write leaves nothing.

const PERMISSION_DENIED = { code: '42501' };

describe('audit sealing', () => {
  let h: Harness;
  let telegram: FakeTelegram;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    await h.startWorker();
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
  });

  const verification = (tenantId: string, seal: boolean) =>
    ok(api(h.app, 'GET', tenantPath(tenantId, `/audit-events/verification${seal ? '' : '?seal=false'}`)));

  /** Another session holding the tenant's chain lock, as an admin append or a sealer would. */
  async function holdChain(tenantId: string): Promise<{ release(): Promise<void> }> {
    const holder = postgres(inject('databaseUrl'), { max: 1, onnotice: () => undefined });
    let release!: () => void;
    const released = new Promise<void>((r) => {
      release = r;
    });
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => {
      locked = r;
    });
    const holding = holder.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(hashtextextended(${`audit_log:${tenantId}`}, 0))`;
      locked();
      await released;
    });
    await isLocked;
    return {
      async release() {
        release();
        await holding;
        await holder.end();
      },
    };
  }

  async function sendMessages(
    t: Awaited<ReturnType<typeof seedTelegramTenant>>,
    chats: number[],
    perChat: number,
    /** the tenant's replied messages once these are done */
    repliedAfter: number,
  ): Promise<void> {
    const before = telegram.sent.length;
    const posts = chats.flatMap((chatId) =>
      Array.from({ length: perChat }, (_, i) =>
        h.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
          body: JSON.stringify(telegramTextUpdate({ chatId, text: `m${i}` })),
        }),
      ),
    );
    expect((await Promise.all(posts)).map((r) => r.status)).toEqual(posts.map(() => 200));
    const total = chats.length * perChat;
    await telegram.waitForSent(before + total, 60_000);
    await waitFor(
      async () => {
        const [row] = await h.sql<{ n: number }[]>`
        select count(*)::int as n from message_event where tenant_id = ${t.tenantId} and status = 'replied'`;
        return (row?.n ?? 0) >= repliedAfter;
      },
      { timeoutMs: 60_000, label: 'every message replied' },
    );
  }

  it('concurrent finishes of one tenant never wait on its chain; pending until sealed, then valid', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    const chats = Array.from({ length: 10 }, (_, i) => 81_000 + i);

    // A sealed prefix first: 10 messages, sealed by verification.
    await sendMessages(t, chats, 1, 10);
    const prefix = await verification(t.tenantId, true);
    expect(prefix).toMatchObject({ valid: true, checked: 10, pending: 0, checkpoint: { seq: 10 } });

    // Then 20 more across the same 10 sessions while another session holds the tenant's chain the
    // whole time: every finish commits anyway (none waits for the chain), and their entries stay
    // pending.
    const chain = await holdChain(t.tenantId);
    try {
      await sendMessages(t, chats, 2, 30);
      const before = await verification(t.tenantId, false);
      // `valid` vouches for the sealed prefix only; the 20 pending entries are not counted as checked.
      expect(before).toMatchObject({ valid: true, checked: 10, pending: 20, checkpoint: { seq: 10 } });
      const [pending] = await h.sql<{ n: number }[]>`
        select count(*)::int as n from audit_pending
        where tenant_id = ${t.tenantId} and action = 'message.finished'`;
      expect(pending!.n).toBe(20);
      // A sealer that does not wait gives up while the chain is held.
      expect(
        await sealAudit(h.workerSql, t.tenantId, { role: 'tenant_app_writer', wait: false }),
      ).toMatchObject({ sealed: 0, busy: true });
    } finally {
      await chain.release();
    }

    const after = await verification(t.tenantId, true);
    expect(after).toMatchObject({ valid: true, checked: 30, pending: 0, checkpoint: { seq: 30 } });
    const rows = await h.sql<{ seq: number; action: string }[]>`
      select seq::int as seq, action from audit_log where tenant_id = ${t.tenantId} order by seq`;
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    expect(new Set(rows.map((r) => r.action))).toEqual(new Set(['message.finished']));
    // The sealed entries are the listing's, and nothing is left pending.
    const listed = await ok(api(h.app, 'GET', tenantPath(t.tenantId, '/audit-events?limit=50')));
    expect(listed.items).toHaveLength(30);
    expect(await h.sql`select 1 from audit_pending where tenant_id = ${t.tenantId}`).toHaveLength(0);
  }, 120_000);

  it('two writers of one tenant commit without waiting for each other', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const entry = { tenantId: t.tenantId, action: 'x.test', actorType: 'worker', actorId: 'w/1' };
    let release!: () => void;
    const released = new Promise<void>((r) => {
      release = r;
    });
    let enqueued!: () => void;
    const isEnqueued = new Promise<void>((r) => {
      enqueued = r;
    });
    // The first transaction writes its entry and stays open…
    const first = withTenantTx(
      h.workerSql,
      { role: 'tenant_app_writer', tenantId: t.tenantId },
      async (tx) => {
        await enqueueAudit(tx, entry);
        enqueued();
        await released;
      },
    );
    await isEnqueued;
    // …and the second one, with no patience for a lock, commits meanwhile.
    await withTenantTx(h.workerSql, { role: 'tenant_app_writer', tenantId: t.tenantId }, async (tx) => {
      await tx`set local lock_timeout = '200ms'`;
      await enqueueAudit(tx, { ...entry, decision: 'second' });
    });
    expect(await h.sql`select 1 from audit_pending where tenant_id = ${t.tenantId}`).toHaveLength(1);
    release();
    await first;
    expect(await verification(t.tenantId, true)).toMatchObject({ valid: true, checked: 2, pending: 0 });
  });

  it('an admin entry follows the runtime entries committed before it (audit_append seals first)', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const runtime = await withTenantTx(
      h.workerSql,
      { role: 'tenant_app_writer', tenantId: t.tenantId },
      (tx) =>
        enqueueAudit(tx, {
          tenantId: t.tenantId,
          action: 'tool.invocation',
          actorType: 'worker',
          actorId: 'w/1',
        }),
    );
    const admin = await withTenantTx(h.apiSql, { role: 'tenant_admin_writer', tenantId: t.tenantId }, (tx) =>
      appendAudit(tx, {
        tenantId: t.tenantId,
        action: 'tool.decision',
        actorType: 'api_key',
        actorId: 'key_1',
      }),
    );
    expect(
      await h.sql`select audit_id, seq::int as seq from audit_log where tenant_id = ${t.tenantId} order by seq`,
    ).toEqual([
      { audit_id: runtime.audit_id, seq: 1 },
      { audit_id: admin.audit_id, seq: 2 },
    ]);
    expect(await verification(t.tenantId, false)).toMatchObject({ valid: true, checked: 2, pending: 0 });
  });

  it('a rolled-back write leaves no pending entry', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    let auditId = '';
    await expect(
      withTenantTx(h.workerSql, { role: 'tenant_app_writer', tenantId: t.tenantId }, async (tx) => {
        auditId = (
          await enqueueAudit(tx, {
            tenantId: t.tenantId,
            action: 'x.test',
            actorType: 'worker',
            actorId: 'w/1',
          })
        ).audit_id;
        throw new Error('the change fails');
      }),
    ).rejects.toThrow('the change fails');
    expect(auditId).toMatch(/^aud_/);
    expect(await h.sql`select 1 from audit_pending where audit_id = ${auditId}`).toHaveLength(0);
    expect(await verification(t.tenantId, true)).toEqual({ valid: true, checked: 0, pending: 0, refused: 0 });
  });

  it('an edited or forged pending entry fails verification and is never sealed', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const write = (actorId: string) =>
      withTenantTx(h.workerSql, { role: 'tenant_app_writer', tenantId: t.tenantId }, (tx) =>
        enqueueAudit(tx, { tenantId: t.tenantId, action: 'x.test', actorType: 'worker', actorId }),
      );
    await write('w/1');
    expect(await verification(t.tenantId, true)).toMatchObject({ valid: true, checked: 1, pending: 0 });
    const victim = await write('w/2');
    const later = await write('w/3');

    // Edited by someone who can bypass the guard but does not hold the key.
    await h.sql.begin(async (tx) => {
      await tx`alter table audit_pending disable trigger user`;
      await tx`update audit_pending set actor_id = 'mallory' where audit_id = ${victim.audit_id}`;
      await tx`alter table audit_pending enable trigger user`;
    });
    try {
      expect(await verification(t.tenantId, false)).toMatchObject({
        valid: false,
        checked: 1,
        pending: 2,
        refused: 1,
        first_invalid: victim.audit_id,
      });
      // The sealer stops before it: neither it nor the entry after it enters the chain.
      expect(
        await sealAudit(h.workerSql, t.tenantId, { role: 'tenant_app_writer', wait: true }),
      ).toMatchObject({ sealed: 0, refused: victim.audit_id });
      // Verification seals first, is refused the same way, and reports the edited entry.
      expect(await verification(t.tenantId, true)).toMatchObject({
        valid: false,
        checked: 1,
        pending: 2,
        refused: 1,
        first_invalid: victim.audit_id,
      });
      expect(await h.sql`select 1 from audit_log where tenant_id = ${t.tenantId}`).toHaveLength(1);
      expect(
        (
          await h.sql`select audit_id from audit_pending where tenant_id = ${t.tenantId} order by pending_id`
        ).map((r) => r.audit_id),
      ).toEqual([victim.audit_id, later.audit_id]);
    } finally {
      // Not left for other files' housekeeping runs to trip over.
      await h.sql.begin(async (tx) => {
        await tx`alter table audit_pending disable trigger user`;
        await tx`delete from audit_pending where audit_id = ${victim.audit_id}`;
        await tx`alter table audit_pending enable trigger user`;
      });
    }

    // A row inserted directly, without the key, is refused the same way.
    const [forged] = await h.sql<{ audit_id: string }[]>`
      insert into audit_pending (tenant_id, audit_id, action, actor_type, actor_id, mac)
      values (${t.tenantId}, 'aud_forged1', 'x.test', 'worker', 'mallory', ${'a'.repeat(64)})
      returning audit_id`;
    try {
      expect(await verification(t.tenantId, false)).toMatchObject({
        valid: false,
        first_invalid: 'aud_forged1',
      });
      // The untouched entry ahead of it is sealed; the forged one is not.
      expect(
        await sealAudit(h.workerSql, t.tenantId, { role: 'tenant_app_writer', wait: true }),
      ).toMatchObject({ sealed: 1, refused: forged!.audit_id });
    } finally {
      await h.sql.begin(async (tx) => {
        await tx`alter table audit_pending disable trigger user`;
        await tx`delete from audit_pending where audit_id = 'aud_forged1'`;
        await tx`alter table audit_pending enable trigger user`;
      });
    }
    expect(await verification(t.tenantId, true)).toMatchObject({ valid: true, checked: 2, pending: 0 });
  });

  it('pending entries are written and removed only through the functions, each tenant its own', async () => {
    const a = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const b = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const asWorker = <T>(tenantId: string, fn: (tx: TransactionSql) => Promise<T>) =>
      withTenantTx(h.workerSql, { role: 'tenant_app_writer', tenantId }, fn);
    const mine = await asWorker(a.tenantId, (tx) =>
      enqueueAudit(tx, { tenantId: a.tenantId, action: 'x.test', actorType: 'worker', actorId: 'w/1' }),
    );
    await expect(
      asWorker(
        a.tenantId,
        (tx) => tx`update audit_pending set actor_id = 'x' where tenant_id = ${a.tenantId}`,
      ),
    ).rejects.toMatchObject(PERMISSION_DENIED);
    await expect(
      asWorker(a.tenantId, (tx) => tx`delete from audit_pending where tenant_id = ${a.tenantId}`),
    ).rejects.toMatchObject(PERMISSION_DENIED);
    await expect(
      asWorker(
        a.tenantId,
        (tx) => tx`insert into audit_pending (tenant_id, audit_id, action, actor_type, actor_id, mac)
                   values (${a.tenantId}, 'aud_direct1', 'x', 'worker', 'w', ${'b'.repeat(64)})`,
      ),
    ).rejects.toMatchObject(PERMISSION_DENIED);
    // Even the superuser cannot change or remove one without disabling the guard.
    await expect(
      h.sql`update audit_pending set actor_id = 'x' where audit_id = ${mine.audit_id}`,
    ).rejects.toThrow('leave only by sealing');
    await expect(h.sql`delete from audit_pending where audit_id = ${mine.audit_id}`).rejects.toThrow(
      'leave only by sealing',
    );
    // Another tenant neither sees, writes nor seals them.
    expect(
      await asWorker(b.tenantId, (tx) => tx`select 1 from audit_pending where tenant_id = ${a.tenantId}`),
    ).toEqual([]);
    await expect(
      asWorker(b.tenantId, (tx) =>
        enqueueAudit(tx, { tenantId: a.tenantId, action: 'x.test', actorType: 'worker', actorId: 'w/1' }),
      ),
    ).rejects.toMatchObject(PERMISSION_DENIED);
    await expect(
      asWorker(b.tenantId, (tx) => tx`select audit_seal(${a.tenantId}, 10, true)`),
    ).rejects.toMatchObject(PERMISSION_DENIED);
    // Verification in the worker's own transaction (as db-logins does) sees the same.
    expect(
      await withTenantTx(
        h.workerSql,
        { role: 'tenant_app_writer', tenantId: a.tenantId, isolation: 'repeatable read' },
        (tx) => verifyAuditChain(tx, a.tenantId, SUITE_AUDIT_KEY),
      ),
    ).toEqual({ valid: true, checked: 0, pending: 1, refused: 0 });
    await sealAudit(h.workerSql, a.tenantId, { role: 'tenant_app_writer', wait: true });
    expect(await h.sql`select 1 from audit_log where audit_id = ${mine.audit_id}`).toHaveLength(1);
  });
});
