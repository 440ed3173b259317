import { createRoute, z } from '@hono/zod-openapi';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import {
  type DeadLetterRow,
  getDeadLetter,
  unsentSegmentsOfRetry,
} from '../../db/queries/admin/dead-letters';
import { reopenForRetry } from '../../db/queries/dlq-retry';
import {
  type DeliveryWorkflowInput,
  deliveryRetryWorkflowId,
  SA_STATUS,
  SA_TENANT,
} from '../../workflows/shared';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { scopedTenant } from './auth';
import { adminTx, audit, requireWritableTenant } from './context';
import { DeadLetterParams, DeadLetterSchema, deadLetterJson } from './dead-letters';
import { type AdminApp, actorOf } from './env';
import { ErrorSchema, errorResponses, jsonBody, jsonResponse } from './schemas';

// An operator's retry of a dead-lettered delivery: one transaction reopens it (dead letter open →
// retried, message failed → reply_pending, unsent segments → retryable) and audits it; then a
// delivery retry workflow (deterministic id, duplicates rejected) sends the kept segments in
// order. Execution and tool dead letters are not retried here: re-running an execution or a side
// effect is not safe to automate (resolve a manual tool call through its resolution route).

const RetryBody = z
  .object({ reason: z.string().trim().min(1, 'reason must not be blank').max(1000).optional() })
  .strict()
  .openapi('RetryDeadLetter');

const RetryResponse = DeadLetterSchema.extend({
  retry_workflow_id: z.string().openapi({ description: 'The delivery retry workflow (Temporal)' }),
}).openapi('DeadLetterRetry');

const START_DEADLINE_MS = 5_000;

const retryRoute = createRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/dead-letters/{dead_letter_id}/retry',
  tags: ['dead letters'],
  security: [{ bearerAuth: [] }],
  summary:
    'Retry an open segment dead letter: its unsent segments are delivered again, in order, by a new ' +
    'delivery run (202). Execution and tool dead letters, or a letter that is not open, are 409 ' +
    'invalid_transition.',
  request: { params: DeadLetterParams, body: jsonBody(RetryBody) },
  responses: {
    202: jsonResponse(RetryResponse, 'The retried dead letter; delivery runs asynchronously'),
    ...errorResponses(400, 401, 403, 404, 409),
    503: {
      description: 'unavailable: the retry is recorded but its delivery run could not be started; retry',
      content: { 'application/json': { schema: ErrorSchema } },
    },
  },
});

type Prepared = { row: DeadLetterRow; segmentIds: string[]; restart: boolean };

export function registerDeadLetterRetryRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(retryRoute, async (c) => {
    const { tenant_id, dead_letter_id } = c.req.valid('param');
    const tenantId = scopedTenant(c, tenant_id);
    const reason = c.req.valid('json').reason ?? null;
    const prepared = await adminTx(deps, tenantId, async (tx): Promise<Prepared> => {
      await requireWritableTenant(tx, tenantId);
      const current = await getDeadLetter(tx, tenantId, dead_letter_id);
      if (!current) throw new ApiError('not_found', 'No such dead letter.');
      if (current.kind !== 'segment') {
        throw new ApiError(
          'invalid_transition',
          `Retrying ${current.kind === 'tool' ? 'a tool' : 'an execution'} dead letter is not supported: ` +
            'running an execution or a side effect again is not safe to automate. Discard it once handled.',
        );
      }
      if (current.status === 'retried') {
        // Reopened earlier, but its delivery run may never have started (the start failed after the
        // commit): start it now if the message still waits for it. A run that exists is a duplicate.
        const segmentIds = await unsentSegmentsOfRetry(tx, tenantId, current.event_id);
        if (!segmentIds) throw new ApiError('invalid_transition', 'The dead letter was already retried.');
        return { row: current, segmentIds, restart: true };
      }
      const plan = await reopenForRetry(tx, {
        tenantId,
        deadLetterId: dead_letter_id,
        actor: actorOf(c.get('principal')).actorId,
        reason,
      });
      if (plan === 'not_found') throw new ApiError('not_found', 'No such dead letter.');
      if (plan === 'invalid_transition') {
        throw new ApiError(
          'invalid_transition',
          current.status === 'open'
            ? 'The message of this dead letter is not waiting for a delivery retry.'
            : `The dead letter is ${current.status}, not open.`,
        );
      }
      await audit(c, tx, tenantId, {
        action: 'dead_letter.retry',
        decision: 'retried',
        reason,
        details: {
          dead_letter_id,
          event_id: plan.eventId,
          kind: current.kind,
          segments: plan.segmentIds.length,
        },
      });
      const row = await getDeadLetter(tx, tenantId, dead_letter_id);
      return { row: row ?? current, segmentIds: plan.segmentIds, restart: false };
    });

    const workflowId = deliveryRetryWorkflowId(tenantId, dead_letter_id);
    const input: DeliveryWorkflowInput = {
      tenantId,
      eventId: prepared.row.event_id,
      segmentIds: prepared.segmentIds,
      deadLetterId: dead_letter_id,
    };
    try {
      await deps.temporal.connection.withDeadline(Date.now() + START_DEADLINE_MS, () =>
        deps.temporal.workflow.start('deliveryRetryWorkflow', {
          workflowId,
          taskQueue: deps.taskQueue,
          args: [input],
          workflowIdReusePolicy: 'REJECT_DUPLICATE',
          workflowIdConflictPolicy: 'FAIL',
          typedSearchAttributes: [
            { key: SA_TENANT, value: tenantId },
            { key: SA_STATUS, value: 'reply_pending' },
          ],
        }),
      );
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) {
        deps.log.warn(
          { workflowId, err: { name: (err as Error).name, message: (err as Error).message } },
          'could not start the delivery retry',
        );
        throw new ApiError(
          'unavailable',
          'The retry is recorded but its delivery run could not be started; send the retry again.',
        );
      }
      if (prepared.restart) throw new ApiError('invalid_transition', 'The dead letter was already retried.');
    }
    if (prepared.restart) {
      // Nothing changed in the database this time; the audit records the started delivery run.
      await adminTx(deps, tenantId, (tx) =>
        audit(c, tx, tenantId, {
          action: 'dead_letter.retry',
          decision: 'restarted',
          reason,
          details: { dead_letter_id, event_id: prepared.row.event_id, kind: prepared.row.kind },
        }),
      );
    }
    return c.json({ ...deadLetterJson(prepared.row), retry_workflow_id: workflowId }, 202);
  });
}
