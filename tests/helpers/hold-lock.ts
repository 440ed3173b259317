import type { Sql, TransactionSql } from 'postgres';

export interface HeldTransaction<T> {
  /** What `take` returned. */
  value: T;
  /** The transaction's backend (for pg_blocking_pids). */
  pid: number;
  /** Ends the transaction (commits); idempotent. */
  release(): Promise<void>;
}

/**
 * Runs `take` in a transaction of its own (a `select … for update`, a `lock table`, a step
 * function whose locks a test needs held) and keeps the transaction open until `release()`, as a
 * long transaction elsewhere would. Resolves once `take` is done (rejects if it failed).
 */
export async function holdLock<T>(
  sql: Sql,
  take: (tx: TransactionSql) => Promise<T>,
): Promise<HeldTransaction<T>> {
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  let taken!: (v: { value: T; pid: number }) => void;
  const isTaken = new Promise<{ value: T; pid: number }>((r) => {
    taken = r;
  });
  const holder = sql.begin(async (tx) => {
    const [{ pid }] = (await tx`select pg_catalog.pg_backend_pid() as pid`) as unknown as [{ pid: number }];
    taken({ value: await take(tx), pid });
    await held;
  });
  const got = await Promise.race([
    isTaken,
    holder.then(() => Promise.reject(new Error('the transaction ended before its lock was taken'))),
  ]);
  return {
    ...got,
    async release() {
      release();
      await holder;
    },
  };
}
