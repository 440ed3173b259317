import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createSql } from '../../db/client';

// A transaction whose connection is lost (PostgreSQL restarted, failed over or ended the backend)
// must fail that transaction and nothing else: the process lives on (the published postgres.js
// 3.4.9 threw an uncaught TypeError from its rollback write and ended it — the release gate saw
// an API process die during its PostgreSQL restart), a statement the transaction's callback still
// sends fails instead of running on the reconnected session, outside the transaction, and the
// pool serves the next query. vendor/README.md has the patch this rests on.
describe('a transaction whose connection is lost', () => {
  const table = `conn_loss_${process.pid}_${Date.now()}`;
  // One connection, so the reconnected session is the one the lost transaction held.
  const sql = createSql(inject('databaseUrl'), { max: 1 });
  const admin = createSql(inject('databaseUrl'), { max: 1 });

  beforeAll(async () => {
    await admin.unsafe(`create table public.${table} (x int not null)`);
  });
  afterAll(async () => {
    await admin.unsafe(`drop table if exists public.${table}`);
    await Promise.all([sql.end({ timeout: 5 }), admin.end({ timeout: 5 })]);
  });

  const codeOf = (err: unknown) => (err as { code?: string }).code ?? String(err);

  it('fails with the connection, sends nothing on the next session, and the pool goes on', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let lateStatement!: (outcome: string) => void;
    const late = new Promise<string>((r) => {
      lateStatement = r;
    });
    const tx = sql.begin(async (t) => {
      await t.unsafe(`insert into public.${table} values (1)`);
      const [row] = await t<{ pid: number }[]>`select pg_backend_pid() as pid`;
      await admin`select pg_terminate_backend(${row!.pid})`;
      // The transaction's callback is still at work (an HTTP call, say) when its connection goes.
      await gate;
      lateStatement(
        await t.unsafe(`insert into public.${table} values (2)`).then(
          () => 'ran',
          (err: unknown) => codeOf(err),
        ),
      );
    });
    const outcome = await tx.then(
      () => 'committed',
      (err: unknown) => codeOf(err),
    );
    expect(['CONNECTION_CLOSED', '57P01']).toContain(outcome);

    // The pool reconnects for the next query, while the callback above still holds its handle.
    expect(await sql`select 1 as ok`).toEqual([{ ok: 1 }]);
    release();
    expect(await late).toBe('CONNECTION_CLOSED');
    expect(await sql.unsafe(`select x from public.${table}`)).toEqual([]);

    // A statement that fails inside a lost transaction makes it roll back: that write must not
    // take the process down (it would end the test run with an uncaught TypeError).
    for (let i = 0; i < 5; i++) {
      const lost = await sql
        .begin(async (t) => {
          const [row] = await t<{ pid: number }[]>`select pg_backend_pid() as pid`;
          await admin`select pg_terminate_backend(${row!.pid})`;
          await new Promise((r) => setTimeout(r, 20));
          await t`select 1`;
        })
        .then(
          () => 'committed',
          (err: unknown) => codeOf(err),
        );
      expect(['CONNECTION_CLOSED', '57P01']).toContain(lost);
    }
    expect(await sql`select 1 as ok`).toEqual([{ ok: 1 }]);
  });
});
