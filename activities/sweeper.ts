import { ApplicationFailure } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { enqueueAudit } from '../db/queries/audit';
import { insertDeadLetter } from '../db/queries/dead-letters';
import { markFailed } from '../db/queries/execution';
import {
  listRepairCandidates,
  markSweepChecked,
  permitWaiters,
  type RepairBegin,
  type RepairCandidate,
  repairBegin,
  wakeListOf,
} from '../db/queries/repair';
import { messageStartFacts, workflowFactsOf } from '../db/queries/workflow-facts';
import { withTenantTx } from '../db/tx';
import {
  describeWorkflow,
  startMessageWorkflow,
  type WorkflowState,
  wakeWorkflows,
} from '../lib/workflow-start';
import { sweepReasonLabel } from '../telemetry/labels';
import { recordFinish } from '../telemetry/metrics';
import { activeTraceId } from '../telemetry/trace-id';
import { emptySweepReport, type SweepReport } from '../workflows/shared';
import type { ActivityDeps } from './deps';

export type { SweepReport };

// The repair sweeper (run by the sweeper workflow on a Temporal Schedule): every message must reach
// an end. A message recorded whose workflow never started is started (the webhook acknowledged it
// even when Temporal was unreachable); one whose workflow ended abnormally — terminated or reset
// away in the Web UI, failed, timed out, cancelled, lost — gets a repair run that continues from
// what is durable (message_repair_begin, execution_start); past the repair limit, or never started
// within the replay age limit, it is failed with a dead letter an operator can retry. The session's
// next message is woken either way.

export interface SweepOptions {
  /** A `received` message younger than this is still being started by its own webhook request. */
  unstartedSeconds: number;
  /** A session's head message unchanged (and not found alive) for this long has its workflow checked. */
  staleSeconds: number;
  /** Older than this, a never-started message goes to the DLQ instead of being replayed. */
  maxAgeSeconds: number;
  /** Repair runs per message before it is dead-lettered instead. */
  maxRepairs: number;
  /**
   * A running message whose lease expired this long ago, with no live attempt — nothing in flight
   * and its workflow task failing again and again (≥ stuckTaskAttempts) — is repaired.
   */
  leaseGraceSeconds: number;
  stuckTaskAttempts: number;
  batchSize: number;
  /** Only these tenants (tests share one database across task queues); null: all. */
  tenantIds: string[] | null;
}

export const SWEEP_DEFAULTS: SweepOptions = {
  unstartedSeconds: 3,
  staleSeconds: 60,
  maxAgeSeconds: 24 * 3600,
  maxRepairs: 3,
  leaseGraceSeconds: 600,
  stuckTaskAttempts: 5,
  batchSize: 50,
  tenantIds: null,
};

const WORKER_ACTOR = 'sweeper';

export function sweeperActivities(deps: ActivityDeps) {
  const temporal = (): { client: Client; taskQueue: string } => {
    if (!deps.temporal || !deps.taskQueue)
      throw ApplicationFailure.nonRetryable('this worker has no Temporal client', 'ConfigurationError');
    return { client: deps.temporal, taskQueue: deps.taskQueue };
  };
  const asTenant = (tenantId: string | null) => ({ role: 'tenant_app_writer' as const, tenantId });
  const count = (action: 'started' | 'repaired' | 'dead_lettered', reasonClass: string) =>
    deps.metrics?.sweeperActions.inc({ action, reason_class: sweepReasonLabel(reasonClass) });

  /** Hands one message to a repair run (or the DLQ past the limit) and starts that run. */
  async function repair(c: RepairCandidate, reasonClass: string, o: SweepOptions): Promise<RepairBegin> {
    const { client, taskQueue } = temporal();
    const { begun, facts } = await withTenantTx(deps.sql, asTenant(c.tenant_id), async (tx) => {
      const facts = await messageStartFacts(tx, { tenantId: c.tenant_id, eventId: c.event_id });
      const r = await repairBegin(tx, {
        tenantId: c.tenant_id,
        eventId: c.event_id,
        expectedWorkflowId: c.workflow_id,
        reasonClass,
        maxRepairs: o.maxRepairs,
        reopen: false,
      });
      if (r.kind === 'repair' || r.kind === 'dead_lettered') {
        // Enqueued like every runtime entry: the sealer links it into the chain (no chain lock here).
        await enqueueAudit(tx, {
          tenantId: c.tenant_id,
          actorType: 'worker',
          actorId: WORKER_ACTOR,
          action: 'message.repair',
          decision: r.kind === 'repair' ? 'repair_started' : 'dead_lettered',
          reason: reasonClass,
          channel: c.channel,
          // The message's trace (from its webhook), else this sweep's.
          traceId: facts?.trace_id ?? activeTraceId(),
          details: {
            event_id: c.event_id,
            previous_workflow_id: c.workflow_id,
            ...(r.kind === 'repair'
              ? { workflow_id: r.workflow_id, repair: r.repair }
              : { dead_letter_id: r.dead_letter_id }),
          },
        });
      }
      return { begun: r, facts };
    });
    if (begun.kind === 'repair') {
      await startMessageWorkflow(client, {
        workflowId: begun.workflow_id,
        taskQueue,
        input: {
          tenantId: c.tenant_id,
          eventId: c.event_id,
          channel: c.channel,
          repair: { attempt: begun.repair, reasonClass },
        },
        facts: workflowFactsOf(facts),
      });
    } else if (begun.kind === 'dead_lettered') {
      await wakeWorkflows(client, begun.wake);
    }
    if (begun.kind === 'repair' || begun.kind === 'dead_lettered') {
      // Its permit (if it held one) was released with the status change: wake the next waiters.
      const waiters = await withTenantTx(deps.sql, asTenant(c.tenant_id), (tx) =>
        permitWaiters(tx, c.tenant_id),
      );
      await wakeWorkflows(client, waiters);
    }
    return begun;
  }

  /**
   * A never-started message past the replay age limit: failed with a dead letter, not replayed.
   * Returns whom that frees (the session's next message, which waits for this one's turn), or null
   * when this call did not fail it. The wake list is read in the failing transaction: the status
   * change took the session's row lock (migration 0046), so a message recorded meanwhile is either
   * in the list or sees this one failed.
   */
  async function expire(c: RepairCandidate, ageSeconds: number): Promise<string[] | null> {
    return withTenantTx(deps.sql, asTenant(c.tenant_id), async (tx) => {
      const failed = await markFailed(
        tx,
        c.tenant_id,
        c.event_id,
        'start_expired',
        'never started within the replay age limit',
      );
      if (failed) {
        await insertDeadLetter(tx, {
          tenantId: c.tenant_id,
          deadLetterId: `dl_${c.event_id.slice(4)}_start_${c.repair_count}`,
          eventId: c.event_id,
          kind: 'execution',
          reasonClass: 'start_expired',
          detail: { age_seconds: Math.round(ageSeconds) },
        });
      }
      return failed === null ? null : await wakeListOf(tx, c.tenant_id, c.event_id);
    });
  }

  /** A running execution that waits for an operator is alive however long its lease is idle. */
  async function waitsForOperator(c: RepairCandidate): Promise<boolean> {
    const rows = await withTenantTx(
      deps.sql,
      asTenant(c.tenant_id),
      (tx) => tx`
        select 1 from tool_invocation
        where tenant_id = ${c.tenant_id} and event_id = ${c.event_id} and status in ('manual', 'awaiting_approval')
        limit 1`,
    );
    return rows.length > 0;
  }

  /** Starts, repairs or expires one candidate, or finds it alive; counted in the report. */
  async function sweepOne(
    c: RepairCandidate,
    o: SweepOptions,
    report: SweepReport,
    alive: Map<string, string[]>,
  ): Promise<void> {
    const { client, taskQueue } = temporal();
    // Every recorded message carries its workflow id (record_inbound_message sets it).
    if (!c.workflow_id) throw new Error('the message has no workflow id');
    const workflowId = c.workflow_id;
    const ageSeconds = (Date.now() - c.created_at.getTime()) / 1000;
    const { state, pendingActivities, workflowTaskAttempt, workflowTaskPending } = await describeWorkflow(
      client,
      workflowId,
    );
    const markAlive = async () => {
      report.alive++;
      alive.set(c.tenant_id, [...(alive.get(c.tenant_id) ?? []), c.event_id]);
      // A session head waiting this long for its turn was freed without hearing it (its wake lost:
      // the finisher crashed before signalling, Temporal refused the signal) or waits for a permit:
      // asked to look again. Waiting workflows do not poll on their own (workflows/message.ts), so
      // this is the database's whole poll load from waiters: at most batchSize per pass.
      if (await waitsForTurn()) {
        await wakeWorkflows(client, [workflowId]);
        report.woken++;
      }
    };
    // Waiting for its turn (received) or for a permit again (running or reconciling: a repair run,
    // a resume after parking, a run continued as new) — not in an activity, not on an operator.
    // A workflow with a task already pending (a wake queued behind a busy worker) is not woken
    // again: that task re-checks the database, and another wake would only grow its history.
    const waitsForTurn = async () =>
      c.started &&
      !workflowTaskPending &&
      (c.status === 'received' ||
        ((c.status === 'running' || c.status === 'execution_reconciling') &&
          pendingActivities === 0 &&
          !(await waitsForOperator(c))));
    const repaired = async (reasonClass: string) => {
      const r = await repair(c, reasonClass, o);
      if (r.kind === 'repair') {
        report.repaired++;
        report.reasons[reasonClass] = (report.reasons[reasonClass] ?? 0) + 1;
        count('repaired', reasonClass);
      } else if (r.kind === 'dead_lettered') {
        report.deadLettered++;
        count('dead_lettered', reasonClass);
        // The reason class is the stored outcome, unless the message had one already.
        recordFinish(deps.metrics, { status: 'failed', outcome: reasonClass, eventId: c.event_id });
      }
    };
    switch (state) {
      case 'not_found': {
        // Never started (the webhook could not reach Temporal), or a repair run whose start failed:
        // started now under its recorded id. A first run that did start and is gone (its history
        // deleted) is repaired.
        const neverStarted = c.status === 'received' && !c.started;
        // An operator's retry (repair_count > 0) is started whatever the message's age.
        if (neverStarted && c.repair_count === 0 && ageSeconds > o.maxAgeSeconds) {
          const wake = await expire(c, ageSeconds);
          if (wake) {
            // Its session's next message waited for this one: without the wake it would sit
            // silent until a later pass found it stale.
            await wakeWorkflows(client, wake);
            count('dead_lettered', 'start_expired');
            recordFinish(deps.metrics, { status: 'failed', outcome: 'start_expired', eventId: c.event_id });
          }
          report.deadLettered++;
          return;
        }
        if (neverStarted || workflowId.startsWith('repair-')) {
          const facts = await withTenantTx(deps.sql, asTenant(c.tenant_id), (tx) =>
            messageStartFacts(tx, { tenantId: c.tenant_id, eventId: c.event_id }),
          );
          const started = await startMessageWorkflow(client, {
            workflowId,
            taskQueue,
            input: { tenantId: c.tenant_id, eventId: c.event_id, channel: c.channel },
            facts: workflowFactsOf(facts),
          });
          if (started === 'started') {
            report.started++;
            count('started', 'never_started');
          }
          return;
        }
        return repaired('workflow_missing');
      }
      case 'running':
      case 'paused':
      case 'unspecified':
      case 'unknown':
      case 'continued_as_new': {
        // Alive — unless it is a running execution whose lease expired long ago with nothing in
        // flight (no pending activity, no operator wait) and its workflow task failing again and
        // again: a workflow stuck on its own code. A healthy wait (timers, a permit, the lane) has
        // no failing workflow task.
        const stuck =
          state === 'running' &&
          c.status === 'running' &&
          (c.lease_expired_s ?? 0) > o.leaseGraceSeconds &&
          pendingActivities === 0 &&
          workflowTaskAttempt >= o.stuckTaskAttempts &&
          !(await waitsForOperator(c));
        if (!stuck) return await markAlive();
        // Only once it is surely ended: two runs must never work one message.
        await client.workflow
          .getHandle(workflowId)
          .terminate('switchyard repair: execution lease expired with no live attempt')
          .catch((err: unknown) => {
            if ((err as Error).name !== 'WorkflowNotFoundError') throw err;
          });
        return repaired('lease_expired');
      }
      case 'completed':
      case 'failed':
      case 'cancelled':
      case 'terminated':
      case 'timed_out':
        return repaired(reasonClassOf(state));
      default: {
        const exhaustive: never = state;
        throw new Error(`unexpected workflow state ${String(exhaustive)}`);
      }
    }
  }

  return {
    /**
     * One pass of the repair sweeper over at most `batchSize` candidates (oldest check first).
     * Each candidate is independent: one that fails is counted and retried by the next pass.
     */
    async sweep(input: Partial<SweepOptions> = {}): Promise<SweepReport> {
      const o: SweepOptions = { ...SWEEP_DEFAULTS, ...input };
      const report = emptySweepReport();
      const candidates = await withTenantTx(deps.sql, asTenant(null), (tx) =>
        listRepairCandidates(tx, {
          unstartedSeconds: o.unstartedSeconds,
          staleSeconds: o.staleSeconds,
          limit: o.batchSize,
          tenantIds: o.tenantIds,
        }),
      );
      const alive = new Map<string, string[]>();
      for (const c of candidates) {
        report.checked++;
        try {
          await sweepOne(c, o, report, alive);
        } catch (err) {
          report.failed++;
          deps.log.warn(
            { tenantId: c.tenant_id, eventId: c.event_id, err: (err as Error).message },
            'sweeper could not handle a message',
          );
        }
      }
      for (const [tenantId, eventIds] of alive) {
        await withTenantTx(deps.sql, asTenant(tenantId), (tx) => markSweepChecked(tx, tenantId, eventIds));
      }
      if (report.started || report.repaired || report.deadLettered || report.failed)
        deps.log.info(report, 'repair sweeper pass');
      return report;
    },
  };
}

/** The dead-letter reason class of an abnormal workflow end. */
function reasonClassOf(
  state: Extract<WorkflowState, 'completed' | 'failed' | 'cancelled' | 'terminated' | 'timed_out'>,
) {
  return `workflow_${state}`;
}
