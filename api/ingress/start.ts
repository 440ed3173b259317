import { type Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import {
  type Channel,
  type MessageWorkflowInput,
  SA_CHANNEL,
  SA_STATUS,
  SA_TENANT,
} from '../../workflows/shared';

const START_DEADLINE_MS = 3_000;

export interface StartParams {
  workflowId: string;
  taskQueue: string;
  input: MessageWorkflowInput;
  channel: Channel;
}

/**
 * Starts the message workflow. The ID is the message's idempotency key; a second start of the
 * same message fails with "already started", which is the expected duplicate outcome.
 */
export async function startMessageWorkflow(
  client: Client,
  p: StartParams,
): Promise<'started' | 'already_started'> {
  try {
    // Bounded: a webhook must answer within the provider's timeout (WeCom: 5 s) even when Temporal
    // is unreachable; the message is recorded and the reconciler or the provider's retry starts it.
    await client.connection.withDeadline(Date.now() + START_DEADLINE_MS, () =>
      client.workflow.start('messageWorkflow', {
        workflowId: p.workflowId,
        taskQueue: p.taskQueue,
        args: [p.input],
        workflowIdConflictPolicy: 'FAIL',
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        typedSearchAttributes: [
          { key: SA_TENANT, value: p.input.tenantId },
          { key: SA_CHANNEL, value: p.channel },
          { key: SA_STATUS, value: 'received' },
        ],
      }),
    );
    return 'started';
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return 'already_started';
    throw err;
  }
}
