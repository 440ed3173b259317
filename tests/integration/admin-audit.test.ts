import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendAudit } from '../../db/queries/audit';
import { withTenantTx } from '../../db/tx';
import { api, createTenant, type Json, ok, tenantPath } from '../helpers/admin';
import { createHarness, type Harness } from '../helpers/harness';

// The per-tenant audit hash chain: every mutation appends in its own transaction, concurrent
// appends serialise, and verification recomputes every digest and link, so editing or deleting
// a row (as the superuser, with the append-only triggers switched off) is detected.
describe('admin API: audit chain', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  /** A tenant with a few dozen audited mutations, some of them concurrent. */
  async function busyTenant(): Promise<{ tenantId: string; token: string }> {
    const tenant = await createTenant(h.app);
    const t = tenant.tenant_id as string;
    const key = await ok(
      api(h.app, 'POST', tenantPath(t, '/api-keys'), { body: { role: 'tenant_admin' } }),
      201,
    );
    const as = { token: key.key as string };
    await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        ok(
          api(h.app, 'POST', tenantPath(t, '/secrets'), {
            ...as,
            body: { name: `s${i}`, purpose: 'tool_credential', value: `v${i}` },
          }),
          201,
        ),
      ),
    );
    for (let i = 0; i < 4; i++) {
      await ok(api(h.app, 'PUT', tenantPath(t, '/secrets/s0'), { ...as, body: { value: `r${i}` } }));
    }
    const mp = await ok(
      api(h.app, 'POST', tenantPath(t, '/model-profiles'), {
        ...as,
        body: { profile_key: 'scripted', provider: 'scripted', model: 'rules' },
      }),
      201,
    );
    const agent = await ok(
      api(h.app, 'POST', tenantPath(t, '/apps'), {
        ...as,
        body: { app_key: 'helper', display_name: 'Helper' },
      }),
      201,
    );
    await Promise.all(
      Array.from({ length: 4 }, () =>
        ok(
          api(h.app, 'POST', tenantPath(t, `/apps/${agent.app_id}/revisions`), {
            ...as,
            body: { model_profile_id: mp.model_profile_id, system_prompt: 'x' },
          }),
          201,
        ),
      ),
    );
    await ok(
      api(h.app, 'POST', tenantPath(t, '/status-transitions'), {
        body: { expected_version: 1, next_status: 'suspended', reason: 'audit test' },
      }),
    );
    return { tenantId: t, ...as };
  }

  const verify = (tenantId: string, token?: string): Promise<Json> =>
    ok(api(h.app, 'GET', tenantPath(tenantId, '/audit-events/verification'), { token }));

  /** Edits audit_log as the superuser; DDL is transactional, so no other session sees the gap. */
  async function tamper(statement: (tx: Harness['sql']) => Promise<unknown>) {
    await h.sql.begin(async (tx) => {
      await tx`alter table audit_log disable trigger user`;
      await statement(tx as unknown as Harness['sql']);
      await tx`alter table audit_log enable trigger user`;
    });
  }

  it('verifies a chain of many (partly concurrent) mutations, newest first in the list', async () => {
    const { tenantId, token } = await busyTenant();
    const rows = await h.sql<
      { seq: number }[]
    >`select seq from audit_log where tenant_id = ${tenantId} order by seq`;
    expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => i + 1));
    expect(rows.length).toBe(1 + 1 + 8 + 4 + 1 + 1 + 4 + 1);
    expect(await verify(tenantId, token)).toMatchObject({ valid: true, checked: rows.length });

    const page = await ok(api(h.app, 'GET', tenantPath(tenantId, '/audit-events?limit=5'), { token }));
    const n = rows.length;
    expect(page.items.map((e: { seq: number }) => e.seq)).toEqual([n, n - 1, n - 2, n - 3, n - 4]);
    expect(page.items[0]).toMatchObject({
      action: 'tenant.suspend',
      actor_type: 'platform',
      reason: 'audit test',
    });
    expect(page.items[1].digest).toBe(page.items[0].previous_digest);
    const next = await ok(
      api(h.app, 'GET', tenantPath(tenantId, `/audit-events?limit=5&cursor=${page.next_cursor}`), { token }),
    );
    expect(next.items[0].seq).toBe(n - 5);
    expect(page.items[0].request_id).toMatch(/^req_/);
  });

  it('accepts appends from the worker role in the same chain', async () => {
    const { tenantId } = await busyTenant();
    await withTenantTx(h.sql, { role: 'tenant_app_writer', tenantId }, (tx) =>
      appendAudit(tx, {
        tenantId,
        action: 'model.turn',
        actorType: 'worker',
        actorId: 'w1',
        decision: 'reply',
        latencyMs: 12,
        costMinor: 3,
        details: { note: 'runtime' },
      }),
    );
    expect(await verify(tenantId)).toMatchObject({ valid: true, checked: 22 });
  });

  it('detects a modified row in the middle and names it', async () => {
    const { tenantId } = await busyTenant();
    const [victim] = await h.sql<{ audit_id: string }[]>`
      select audit_id from audit_log where tenant_id = ${tenantId} and seq = 10`;
    await tamper(
      (tx) =>
        tx`update audit_log set actor_id = 'mallory' where tenant_id = ${tenantId} and audit_id = ${victim!.audit_id}`,
    );
    expect(await verify(tenantId)).toEqual({
      valid: false,
      checked: 10,
      pending: 0,
      refused: 0,
      first_invalid: victim!.audit_id,
    });
  });

  it('detects a modified timestamp or detail, even with a recomputed digest on the row', async () => {
    const { tenantId } = await busyTenant();
    const [row] = await h.sql<{ audit_id: string }[]>`
      select audit_id from audit_log where tenant_id = ${tenantId} and seq = 5`;
    await tamper(
      (tx) => tx`update audit_log set occurred_at = occurred_at + interval '1 microsecond'
                 where tenant_id = ${tenantId} and audit_id = ${row!.audit_id}`,
    );
    expect(await verify(tenantId)).toMatchObject({ valid: false, first_invalid: row!.audit_id });

    // Re-forging one row's digest still breaks the next row's link.
    const other = await busyTenant();
    const [r7, r8] = await h.sql<{ audit_id: string }[]>`
      select audit_id from audit_log where tenant_id = ${other.tenantId} and seq in (7, 8) order by seq`;
    await tamper(
      (tx) => tx`update audit_log set details = '{"forged":true}', digest = repeat('a', 64)
                 where tenant_id = ${other.tenantId} and audit_id = ${r7!.audit_id}`,
    );
    const result = await verify(other.tenantId);
    expect(result.valid).toBe(false);
    expect([r7!.audit_id, r8!.audit_id]).toContain(result.first_invalid);
  });

  it('detects a deleted row', async () => {
    const { tenantId } = await busyTenant();
    const [gone, after] = await h.sql<{ audit_id: string }[]>`
      select audit_id from audit_log where tenant_id = ${tenantId} and seq in (12, 13) order by seq`;
    await tamper(
      (tx) => tx`delete from audit_log where tenant_id = ${tenantId} and audit_id = ${gone!.audit_id}`,
    );
    expect(await verify(tenantId)).toEqual({
      valid: false,
      checked: 12,
      pending: 0,
      refused: 0,
      first_invalid: after!.audit_id,
    });

    // Deleting the first entry is detected too (the chain must start at seq 1).
    const second = await busyTenant();
    const [first] = await h.sql<{ audit_id: string }[]>`
      select audit_id from audit_log where tenant_id = ${second.tenantId} and seq = 1`;
    await tamper(
      (tx) =>
        tx`delete from audit_log where tenant_id = ${second.tenantId} and audit_id = ${first!.audit_id}`,
    );
    expect((await verify(second.tenantId)).valid).toBe(false);
  });
});
