import { context } from '@opentelemetry/api';
import { type Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { tenantWorkContext, unsampledContext } from '../telemetry/sampling';
import type { deliveryRetryWorkflow } from '../workflows/delivery-retry';
import type { messageWorkflow } from '../workflows/message';
import {
  type DeliveryWorkflowInput,
  type MessageWorkflowInput,
  SA_CHANNEL,
  SA_STATUS,
  SA_TENANT,
  wakeSignal,
} from '../workflows/shared';
import {
  type MessageWorkflowFacts,
  messageWorkflowDetails,
  messageWorkflowSummary,
} from './workflow-summary';

// The one place workflows are started (ingress, the repair sweeper, operator actions): typed by
// the workflow function, business-key IDs, duplicates rejected by Temporal, and a deadline so a
// caller answering a provider or an operator is never held by an unreachable Temporal.

const START_DEADLINE_MS = 3_000;

/**
 * Starts a message workflow run — the first one (ID `msg-<key>`) or a repair run
 * (`repair-<n>-<key>`). A second start of the same ID fails with "already started", which is the
 * expected duplicate outcome.
 */
export async function startMessageWorkflow(
  client: Client,
  p: {
    workflowId: string;
    taskQueue: string;
    input: MessageWorkflowInput;
    /** What the Web UI shows besides the input's channel, tenant and event (whatever is known). */
    facts?: MessageWorkflowFacts;
    deadlineMs?: number;
  },
): Promise<'started' | 'already_started'> {
  const rate = p.facts?.traceSamplingRate;
  const traced = tenantWorkContext(rate);
  try {
    await context.with(traced, () =>
      client.connection.withDeadline(Date.now() + (p.deadlineMs ?? START_DEADLINE_MS), () =>
        client.workflow.start<typeof messageWorkflow>('messageWorkflow', {
          workflowId: p.workflowId,
          taskQueue: p.taskQueue,
          args: [p.input],
          workflowIdConflictPolicy: 'FAIL',
          workflowIdReusePolicy: 'REJECT_DUPLICATE',
          staticSummary: messageWorkflowSummary(p.input, p.facts ?? {}),
          staticDetails: messageWorkflowDetails(p.input, p.facts ?? {}),
          typedSearchAttributes: [
            { key: SA_TENANT, value: p.input.tenantId },
            { key: SA_CHANNEL, value: p.input.channel },
            { key: SA_STATUS, value: 'received' },
          ],
        }),
      ),
    );
    return 'started';
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return 'already_started';
    throw err;
  }
}

/** Starts an operator's delivery retry of a dead letter (one run per dead letter). */
export async function startDeliveryRetryWorkflow(
  client: Client,
  p: {
    workflowId: string;
    taskQueue: string;
    input: DeliveryWorkflowInput;
    deadlineMs?: number;
    /** the tenant's trace_sampling_rate (telemetry/sampling.ts); absent: the caller decided */
    traceSamplingRate?: number | null;
  },
): Promise<'started' | 'already_started'> {
  const rate = p.traceSamplingRate;
  const traced = tenantWorkContext(rate);
  try {
    await context.with(traced, () =>
      client.connection.withDeadline(Date.now() + (p.deadlineMs ?? START_DEADLINE_MS), () =>
        client.workflow.start<typeof deliveryRetryWorkflow>('deliveryRetryWorkflow', {
          workflowId: p.workflowId,
          taskQueue: p.taskQueue,
          args: [p.input],
          workflowIdReusePolicy: 'REJECT_DUPLICATE',
          workflowIdConflictPolicy: 'FAIL',
          staticSummary: `delivery retry · ${p.input.tenantId} · ${p.input.deadLetterId}`,
          staticDetails: [
            `**Delivery retry of dead letter ${p.input.deadLetterId}**`,
            '',
            `- Tenant id: ${p.input.tenantId}`,
            `- Event id: ${p.input.eventId}`,
            `- Segments: ${p.input.segmentIds.length}`,
          ].join('\n'),
          typedSearchAttributes: [
            { key: SA_TENANT, value: p.input.tenantId },
            { key: SA_STATUS, value: 'reply_pending' },
          ],
        }),
      ),
    );
    return 'started';
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return 'already_started';
    throw err;
  }
}

/**
 * Wakes waiting message workflows (a freed session or permit), best effort: a woken workflow
 * re-checks the database; a lost signal is sent again by the repair sweeper. Untraced: a wake
 * is plumbing, and the woken message's own sampling decided its trace.
 */
export async function wakeWorkflows(client: Client, workflowIds: readonly string[]): Promise<void> {
  await context.with(unsampledContext(), () =>
    Promise.all(
      workflowIds.map((id) =>
        client.workflow
          .getHandle(id)
          .signal(wakeSignal)
          .catch(() => undefined),
      ),
    ),
  );
}

/** A workflow's state as an operator reads it (lower case), or why it cannot be told. */
export type WorkflowState =
  | 'running'
  | 'completed'
  | 'failed'
  | 'cancelled'
  | 'terminated'
  | 'continued_as_new'
  | 'timed_out'
  | 'paused'
  | 'unspecified'
  | 'unknown'
  | 'not_found';

/** Describes the latest run of a workflow ID (after a reset, the reset's run). */
export async function describeWorkflow(
  client: Client,
  workflowId: string,
  deadlineMs = START_DEADLINE_MS,
): Promise<{
  state: WorkflowState;
  pendingActivities: number;
  workflowTaskAttempt: number;
  /** a workflow task is scheduled or running: the workflow will look at the database again anyway */
  workflowTaskPending: boolean;
}> {
  try {
    const d = await client.connection.withDeadline(Date.now() + deadlineMs, () =>
      client.workflow.getHandle(workflowId).describe(),
    );
    return {
      state: d.status.name.toLowerCase() as WorkflowState,
      pendingActivities: d.raw.pendingActivities?.length ?? 0,
      // A workflow task failing again and again (a nondeterminism error, a workflow bug) keeps the
      // workflow "running" with nothing in flight; its attempt count tells it from a healthy wait.
      workflowTaskAttempt: d.raw.pendingWorkflowTask?.attempt ?? 0,
      workflowTaskPending: d.raw.pendingWorkflowTask != null,
    };
  } catch (err) {
    if ((err as Error).name === 'WorkflowNotFoundError')
      return { state: 'not_found', pendingActivities: 0, workflowTaskAttempt: 0, workflowTaskPending: false };
    throw err;
  }
}
