import type { Client } from '@temporalio/client';
import type { Sql } from 'postgres';
import { startMessageWorkflow } from '../api/ingress/start';
import { insertDeadLetter } from '../db/queries/dead-letters';
import { markFailed } from '../db/queries/execution';
import { withTenantTx } from '../db/tx';
import type { Logger } from '../lib/log';
import type { Channel } from '../workflows/shared';

export interface ReconcilerOptions {
  sql: Sql;
  temporal: Client;
  taskQueue: string;
  log: Logger;
  /** A `received` message younger than this is still being started by its webhook request. */
  minAgeSeconds: number;
  /** Older than this, a never-started message goes to the DLQ instead of being replayed. */
  maxAgeSeconds: number;
  batchSize: number;
}

export interface ReconcileReport {
  started: number;
  alreadyRunning: number;
  deadLettered: number;
  failed: number;
}

/**
 * One pass of the start reconciler: a message recorded whose workflow never started (Temporal was
 * down, or the API crashed between the insert and the start) is started now, under the same
 * workflow ID, so a concurrent or earlier start makes this a no-op. Too old → DLQ, not a replay.
 */
export async function reconcileUnstarted(o: ReconcilerOptions): Promise<ReconcileReport> {
  const report: ReconcileReport = { started: 0, alreadyRunning: 0, deadLettered: 0, failed: 0 };
  const rows = await withTenantTx(
    o.sql,
    { role: 'tenant_app_writer', tenantId: null },
    (tx) =>
      tx<{ tenant_id: string; event_id: string; workflow_id: string; created_at: Date }[]>`
      select * from list_unstarted_message_events(make_interval(secs => ${o.minAgeSeconds}), ${o.batchSize})`,
  );
  for (const row of rows) {
    try {
      const ageSeconds = (Date.now() - row.created_at.getTime()) / 1000;
      if (ageSeconds > o.maxAgeSeconds) {
        if (await workflowExists(o.temporal, row.workflow_id)) {
          report.alreadyRunning++;
          continue;
        }
        await withTenantTx(o.sql, { role: 'tenant_app_writer', tenantId: row.tenant_id }, async (tx) => {
          const failed = await markFailed(
            tx,
            row.tenant_id,
            row.event_id,
            'start_expired',
            'never started within the replay age limit',
          );
          if (failed) {
            await insertDeadLetter(tx, {
              tenantId: row.tenant_id,
              deadLetterId: `dl_${row.event_id.slice(4)}_start`,
              eventId: row.event_id,
              kind: 'execution',
              reasonClass: 'start_expired',
              detail: { age_seconds: Math.round(ageSeconds) },
            });
          }
        });
        report.deadLettered++;
        continue;
      }
      const channel = await withTenantTx(
        o.sql,
        { role: 'tenant_app_writer', tenantId: row.tenant_id },
        async (tx) => {
          const [b] = await tx<{ channel: Channel }[]>`
          select b.channel from message_event e
          join channel_binding b on b.tenant_id = e.tenant_id and b.binding_id = e.binding_id
          where e.tenant_id = ${row.tenant_id} and e.event_id = ${row.event_id}`;
          return b?.channel;
        },
      );
      if (!channel) continue;
      const result = await startMessageWorkflow(o.temporal, {
        workflowId: row.workflow_id,
        taskQueue: o.taskQueue,
        channel,
        input: { tenantId: row.tenant_id, eventId: row.event_id, channel },
      });
      if (result === 'started') report.started++;
      else report.alreadyRunning++;
    } catch (err) {
      report.failed++;
      o.log.warn(
        { eventId: row.event_id, err: (err as Error).message },
        'reconciler could not start a message',
      );
    }
  }
  if (report.started || report.deadLettered) o.log.info(report, 'start reconciler pass');
  return report;
}

/** True while the message's workflow runs; a closed one (terminated, timed out) no longer will. */
async function workflowExists(temporal: Client, workflowId: string): Promise<boolean> {
  try {
    const desc = await temporal.workflow.getHandle(workflowId).describe();
    return desc.status.name === 'RUNNING';
  } catch (err) {
    if ((err as Error).name === 'WorkflowNotFoundError') return false;
    throw err;
  }
}

/** Runs passes every intervalMs until stopped; a pass never overlaps the next. */
/**
 * The production cadence: a `received` message is given 10 s to be started by its own webhook
 * request, and is replayed for up to 24 h; passes of at most 100 messages every 5 s.
 */
export const RECONCILER_DEFAULTS = {
  minAgeSeconds: 10,
  maxAgeSeconds: 24 * 3600,
  batchSize: 100,
  intervalMs: 5000,
};

export function startReconcilerLoop(
  opts: Pick<ReconcilerOptions, 'sql' | 'temporal' | 'taskQueue' | 'log'> &
    Partial<Omit<ReconcilerOptions, 'sql' | 'temporal' | 'taskQueue' | 'log'> & { intervalMs: number }>,
): {
  stop(): Promise<void>;
} {
  const o = { ...RECONCILER_DEFAULTS, ...opts };
  let stopped = false;
  let current: Promise<unknown> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    if (stopped) return;
    current = reconcileUnstarted(o)
      .catch((err: unknown) => o.log.warn({ err: (err as Error).message }, 'reconciler pass failed'))
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, o.intervalMs);
      });
  };
  timer = setTimeout(tick, o.intervalMs);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await current;
    },
  };
}
