import { z } from '@hono/zod-openapi';
import {
  type DeadLetterRow,
  getDeadLetter,
  unsentSegmentsOfRetry,
} from '../../db/queries/admin/dead-letters';
import { type LaterPending, reopenForRetry } from '../../db/queries/dlq-retry';
import { OPERATOR_MAX_REPAIRS, repairBegin } from '../../db/queries/repair';
import {
  type MessageStartFacts,
  messageStartFacts,
  tenantTraceSamplingRate,
  workflowFactsOf,
} from '../../db/queries/workflow-facts';
import { startDeliveryRetryWorkflow, startMessageWorkflow } from '../../lib/workflow-start';
import { type Channel, deliveryRetryWorkflowId } from '../../workflows/shared';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { scopedTenant } from './auth';
import { adminTx, audit, requireWritableTenant } from './context';
import { DeadLetterParams, DeadLetterSchema, deadLetterJson } from './dead-letters';
import { type AdminApp, actorOf } from './env';
import { adminRoute } from './route';
import { errorResponse, jsonBody, jsonResponse } from './schemas';

// An operator's retry of a dead letter. One transaction reopens it and audits it, then a workflow
// run (deterministic id, duplicates rejected) continues the message from what is durable:
//   * segment: the dead letter open → retried, the message failed → reply_pending, unsent segments
//     → retryable; a delivery retry run sends the kept segments in order;
//   * execution (its workflow ended abnormally, or it never started): the message failed →
//     execution_reconciling (or received when nothing ran); a repair run resumes it — a pinned
//     reply is delivered, recorded tool calls are reconciled by their keys, never dispatched again.
// Both are refused (409 invalid_transition) while a later message of the same chat is unfinished:
// the retried reply would interleave with that message's (chat order). Tool dead letters are
// settled by the invocation's resolution route, not here.

const RetryBody = z
  .object({ reason: z.string().trim().min(1, 'reason must not be blank').max(1000).optional() })
  .strict()
  .openapi('RetryDeadLetter');

const RetryResponse = DeadLetterSchema.extend({
  retry_workflow_id: z.string().openapi({ description: 'The delivery retry or repair run (Temporal)' }),
}).openapi('DeadLetterRetry');

const START_DEADLINE_MS = 5_000;

const retryRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/dead-letters/{dead_letter_id}/retry',
  tags: ['dead letters'],
  summary:
    'Retry an open segment or execution dead letter (202): a segment letter’s unsent segments are ' +
    'delivered again in order; an execution letter’s message is resumed by a repair run. A tool ' +
    'letter, a letter that is not open, or a retry while a later message of the chat is unfinished ' +
    'is 409 invalid_transition.',
  request: { params: DeadLetterParams, body: jsonBody(RetryBody) },
  errors: [400, 403, 404, 409],
  responses: {
    202: jsonResponse(RetryResponse, 'The retried dead letter; the run continues asynchronously'),
    503: errorResponse('unavailable: the retry is recorded but its run could not be started; retry'),
  },
});

type Prepared =
  | {
      kind: 'segment';
      row: DeadLetterRow;
      segmentIds: string[];
      restart: boolean;
      /** the tenant's, for the retry run's tracing */
      samplingRate: number | null;
    }
  | {
      kind: 'execution';
      row: DeadLetterRow;
      workflowId: string;
      repair: number;
      channel: Channel;
      facts: MessageStartFacts | null;
    };

function laterPendingError(other: LaterPending): ApiError {
  const which = other.kind === 'later_pending' ? 'A later' : 'An earlier';
  return new ApiError(
    'invalid_transition',
    `${which} message of this chat (event_seq ${other.eventSeq}) is still ${other.status}: retrying now ` +
      'would deliver this reply out of order. Retry once it has finished.',
    other.kind === 'later_pending'
      ? { later_event_id: other.eventId, later_event_seq: other.eventSeq, later_status: other.status }
      : { earlier_event_id: other.eventId, earlier_event_seq: other.eventSeq, earlier_status: other.status },
  );
}

export function registerDeadLetterRetryRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(retryRoute, async (c) => {
    const { tenant_id, dead_letter_id } = c.req.valid('param');
    const tenantId = scopedTenant(c, tenant_id);
    const reason = c.req.valid('json').reason ?? null;
    const actor = actorOf(c.get('principal')).actorId;
    const prepared = await adminTx(deps, tenantId, async (tx): Promise<Prepared> => {
      await requireWritableTenant(tx, tenantId);
      const current = await getDeadLetter(tx, tenantId, dead_letter_id);
      if (!current) throw new ApiError('not_found', 'No such dead letter.');
      if (current.kind === 'tool') {
        throw new ApiError(
          'invalid_transition',
          'A tool dead letter is settled through its invocation’s resolution route (an operator ' +
            'establishes whether the side effect happened); discard it once handled.',
        );
      }
      if (current.kind === 'execution') return reopenExecution(tx, current);
      if (current.status === 'retried') {
        // Reopened earlier, but its delivery run may never have started (the start failed after the
        // commit): start it now if the message still waits for it. A run that exists is a duplicate.
        const segmentIds = await unsentSegmentsOfRetry(
          tx,
          tenantId,
          current.event_id,
          deliveryRetryWorkflowId(tenantId, dead_letter_id),
        );
        if (!segmentIds) throw new ApiError('invalid_transition', 'The dead letter was already retried.');
        return {
          kind: 'segment',
          row: current,
          segmentIds,
          restart: true,
          samplingRate: await tenantTraceSamplingRate(tx, tenantId),
        };
      }
      const plan = await reopenForRetry(tx, {
        tenantId,
        deadLetterId: dead_letter_id,
        actor,
        reason,
        workflowId: deliveryRetryWorkflowId(tenantId, dead_letter_id),
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
      if ('kind' in plan) throw laterPendingError(plan);
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
      return {
        kind: 'segment',
        row: row ?? current,
        segmentIds: plan.segmentIds,
        restart: false,
        samplingRate: await tenantTraceSamplingRate(tx, tenantId),
      };

      async function reopenExecution(
        t: typeof tx,
        dl: DeadLetterRow,
      ): Promise<Extract<Prepared, { kind: 'execution' }>> {
        if (dl.status !== 'open')
          throw new ApiError('invalid_transition', `The dead letter is ${dl.status}, not open.`);
        const begun = await repairBegin(t, {
          tenantId,
          eventId: dl.event_id,
          expectedWorkflowId: null,
          reasonClass: dl.reason_class,
          maxRepairs: OPERATOR_MAX_REPAIRS,
          reopen: true,
        });
        if (begun.kind === 'later_pending' || begun.kind === 'earlier_pending') {
          throw laterPendingError({
            kind: begun.kind,
            eventId: begun.event_id,
            eventSeq: Number(begun.event_seq),
            status: begun.status,
          });
        }
        if (begun.kind !== 'repair') {
          throw new ApiError('invalid_transition', 'The message of this dead letter is not failed.');
        }
        await t`
          update dead_letter set status = 'retried', resolved_at = now(), resolved_by = ${actor},
                                 resolution_reason = ${reason}
          where tenant_id = ${tenantId} and dead_letter_id = ${dl.dead_letter_id}`;
        await audit(c, t, tenantId, {
          action: 'dead_letter.retry',
          decision: 'retried',
          reason,
          details: {
            dead_letter_id,
            event_id: dl.event_id,
            kind: dl.kind,
            workflow_id: begun.workflow_id,
            repair: begun.repair,
          },
        });
        const row = await getDeadLetter(t, tenantId, dl.dead_letter_id);
        return {
          kind: 'execution',
          row: row ?? dl,
          workflowId: begun.workflow_id,
          repair: begun.repair,
          channel: begun.channel,
          facts: await messageStartFacts(t, { tenantId, eventId: dl.event_id, withTenantKey: true }),
        };
      }
    });

    if (prepared.kind === 'execution') {
      // A start that fails here is made by the repair sweeper (the message records its run's id).
      await startMessageWorkflow(deps.temporal, {
        workflowId: prepared.workflowId,
        taskQueue: deps.taskQueue,
        deadlineMs: START_DEADLINE_MS,
        input: {
          tenantId,
          eventId: prepared.row.event_id,
          channel: prepared.channel,
          repair: { attempt: prepared.repair, reasonClass: prepared.row.reason_class },
        },
        facts: workflowFactsOf(prepared.facts),
      }).catch((err: unknown) =>
        deps.log.warn(
          { workflowId: prepared.workflowId, err: (err as Error).message },
          'could not start the repair run; the sweeper will',
        ),
      );
      return c.json({ ...deadLetterJson(prepared.row), retry_workflow_id: prepared.workflowId }, 202);
    }

    const workflowId = deliveryRetryWorkflowId(tenantId, dead_letter_id);
    let started: 'started' | 'already_started';
    try {
      started = await startDeliveryRetryWorkflow(deps.temporal, {
        workflowId,
        taskQueue: deps.taskQueue,
        deadlineMs: START_DEADLINE_MS,
        input: {
          tenantId,
          eventId: prepared.row.event_id,
          segmentIds: prepared.segmentIds,
          deadLetterId: dead_letter_id,
        },
        traceSamplingRate: prepared.samplingRate,
      });
    } catch (err) {
      deps.log.warn(
        { workflowId, err: { name: (err as Error).name, message: (err as Error).message } },
        'could not start the delivery retry',
      );
      throw new ApiError(
        'unavailable',
        'The retry is recorded but its delivery run could not be started; send the retry again.',
      );
    }
    if (prepared.restart) {
      if (started === 'already_started')
        throw new ApiError('invalid_transition', 'The dead letter was already retried.');
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
