import { z } from '@hono/zod-openapi';
import type { TransactionSql } from 'postgres';
import {
  OPERATOR_MAX_REPAIRS,
  operatorFail,
  permitWaiters,
  repairBegin,
  wakeListOf,
} from '../../db/queries/repair';
import { messageStartFacts, workflowFactsOf } from '../../db/queries/workflow-facts';
import {
  describeWorkflow,
  startMessageWorkflow,
  type WorkflowState,
  wakeWorkflows,
} from '../../lib/workflow-start';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { scopedTenant } from './auth';
import { adminTx, audit, requireWritableTenant } from './context';
import type { AdminApp } from './env';
import { adminRoute } from './route';
import { errorResponse, jsonBody, jsonResponse, pathId, TenantParams } from './schemas';

// Operator actions on a stuck message (its workflow terminated in the Web UI, a chat that went
// silent): `repair` hands it to a repair run now — the same run the sweeper would start, which
// delivers a pinned reply, reconciles recorded tool calls by their keys and continues the turn —
// and `fail` ends it with the operator's reason, freeing its session and its tenant permit. A
// workflow still running is terminated first, so two runs never work on one message. Both are
// tenant-scoped, audited in the transaction that makes the change, and refused for a finished
// message (409 invalid_transition) without changing anything.

const Params = TenantParams.extend({ event_id: pathId('event_id') });
const CLOSED: ReadonlySet<WorkflowState> = new Set([
  'completed',
  'failed',
  'cancelled',
  'terminated',
  'continued_as_new',
  'timed_out',
  'not_found',
]);
const FailBody = z
  .object({ reason: z.string().trim().min(1, 'reason must not be blank').max(1000) })
  .strict()
  .openapi('FailMessage');
const RepairBody = z
  .object({ reason: z.string().trim().min(1, 'reason must not be blank').max(1000).optional() })
  .strict()
  .openapi('RepairMessage');

const RepairResponse = z
  .object({
    event_id: z.string(),
    status: z.string().openapi({ description: 'The message status the repair run starts from' }),
    repair: z.number().int().openapi({ description: 'How many repair runs this message has had' }),
    workflow_id: z.string().openapi({ description: 'The repair run (repair-<n>-<key>)' }),
    previous_workflow_status: z
      .string()
      .openapi({ description: 'The replaced run, as Temporal reported it' }),
  })
  .openapi('MessageRepair');

const FailResponse = z
  .object({
    event_id: z.string(),
    status: z.literal('failed'),
    outcome: z.literal('operator_failed'),
    previous_status: z.string(),
    previous_workflow_status: z.string(),
  })
  .openapi('MessageFailed');

const unavailable = errorResponse('unavailable: Temporal could not be reached; nothing changed');

const repairRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/messages/{event_id}/repair',
  tags: ['messages'],
  summary:
    'Repair a stuck message now (202): its workflow is terminated if still running, and a repair run ' +
    'resumes it from what is durable (pinned reply → delivery; recorded tools reconciled, never ' +
    're-dispatched). A finished message is 409 invalid_transition.',
  request: { params: Params, body: jsonBody(RepairBody) },
  errors: [400, 403, 404, 409],
  responses: {
    202: jsonResponse(RepairResponse, 'The repair run was started'),
    503: unavailable,
  },
});

const failRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/messages/{event_id}/fail',
  tags: ['messages'],
  summary:
    'End a stuck message as failed (outcome operator_failed) with the operator’s reason: its workflow ' +
    'is terminated if still running, its session’s next message and its tenant permit are freed. A ' +
    'finished message is 409 invalid_transition; a missing reason 400.',
  request: { params: Params, body: jsonBody(FailBody) },
  errors: [400, 403, 404, 409],
  responses: {
    200: jsonResponse(FailResponse, 'The failed message'),
    503: unavailable,
  },
});

/** The message's status and workflow id, locked for the change; 404 / 409 as the contract says. */
async function lockUnfinished(tx: TransactionSql, tenantId: string, eventId: string) {
  const [m] = await tx<{ status: string; workflow_id: string | null }[]>`
    select status, workflow_id from message_event
    where tenant_id = ${tenantId} and event_id = ${eventId} for update`;
  if (!m) throw new ApiError('not_found', 'No such message.');
  if (m.status === 'replied' || m.status === 'failed')
    throw new ApiError(
      'invalid_transition',
      `The message is ${m.status}: there is nothing to repair or end.`,
    );
  return m;
}

export function registerMessageActionRoutes(admin: AdminApp, deps: AppDeps): void {
  /**
   * Ends the message's current run before a change: a running workflow is terminated (an
   * operator's repair or failure replaces it). Unreachable Temporal → 503 before anything changed.
   */
  async function endRun(workflowId: string | null, why: string): Promise<WorkflowState> {
    if (!workflowId) return 'not_found';
    try {
      const { state } = await describeWorkflow(deps.temporal, workflowId);
      // Anything not closed may still act (paused, or a state this SDK does not name): end it.
      if (!CLOSED.has(state)) {
        await deps.temporal.workflow
          .getHandle(workflowId)
          .terminate(why)
          .catch((err: unknown) => {
            // Closed in between: nothing to end.
            if ((err as Error).name !== 'WorkflowNotFoundError') throw err;
          });
      }
      return state;
    } catch (err) {
      deps.log.warn(
        { workflowId, err: (err as Error).message },
        'could not reach Temporal for a message action',
      );
      throw new ApiError('unavailable', 'Temporal could not be reached; nothing changed. Try again.');
    }
  }

  admin.openapi(repairRoute, async (c) => {
    const { tenant_id, event_id } = c.req.valid('param');
    const tenantId = scopedTenant(c, tenant_id);
    const reason = c.req.valid('json').reason ?? null;
    // Validated before Temporal is touched: an unknown or finished message changes nothing.
    const before = await adminTx(deps, tenantId, async (tx) => {
      await requireWritableTenant(tx, tenantId);
      return lockUnfinished(tx, tenantId, event_id);
    });
    const previous = await endRun(before.workflow_id, 'switchyard: operator repair');
    const begun = await adminTx(deps, tenantId, async (tx) => {
      const r = await repairBegin(tx, {
        tenantId,
        eventId: event_id,
        expectedWorkflowId: before.workflow_id,
        reasonClass: 'operator_repair',
        maxRepairs: OPERATOR_MAX_REPAIRS,
        reopen: false,
      });
      if (r.kind === 'not_found') throw new ApiError('not_found', 'No such message.');
      if (r.kind === 'terminal') throw new ApiError('invalid_transition', `The message is ${r.status}.`);
      if (r.kind === 'changed')
        throw new ApiError('conflict', 'The message was repaired concurrently; reload it.', {
          workflow_id: r.workflow_id,
        });
      if (r.kind !== 'repair') throw new ApiError('internal', 'Unexpected repair result.');
      await audit(c, tx, tenantId, {
        action: 'message.repair',
        decision: 'repair_started',
        reason,
        channel: r.channel,
        details: {
          event_id,
          previous_workflow_id: before.workflow_id,
          previous_workflow_status: previous,
          workflow_id: r.workflow_id,
          repair: r.repair,
        },
      });
      // Its permit (if it held one) was released with the status change.
      return {
        ...r,
        waiters: await permitWaiters(tx, tenantId),
        facts: await messageStartFacts(tx, { tenantId, eventId: event_id, withTenantKey: true }),
      };
    });
    await wakeWorkflows(deps.temporal, begun.waiters);
    // Recorded on the message: if this start fails, the sweeper starts the run under the same id.
    await startMessageWorkflow(deps.temporal, {
      workflowId: begun.workflow_id,
      taskQueue: deps.taskQueue,
      input: {
        tenantId,
        eventId: event_id,
        channel: begun.channel,
        repair: { attempt: begun.repair, reasonClass: 'operator_repair' },
      },
      facts: workflowFactsOf(begun.facts),
    }).catch((err: unknown) =>
      deps.log.warn(
        { workflowId: begun.workflow_id, err: (err as Error).message },
        'repair run not started yet',
      ),
    );
    return c.json(
      {
        event_id,
        status: begun.status,
        repair: begun.repair,
        workflow_id: begun.workflow_id,
        previous_workflow_status: previous,
      },
      202,
    );
  });

  admin.openapi(failRoute, async (c) => {
    const { tenant_id, event_id } = c.req.valid('param');
    const tenantId = scopedTenant(c, tenant_id);
    const { reason } = c.req.valid('json');
    const before = await adminTx(deps, tenantId, async (tx) => {
      await requireWritableTenant(tx, tenantId);
      return lockUnfinished(tx, tenantId, event_id);
    });
    const previous = await endRun(before.workflow_id, 'switchyard: operator failed the message');
    const done = await adminTx(deps, tenantId, async (tx) => {
      // Lock order: the message row, the tenant's audit chain (audit_append), then the session row
      // (operatorFail's status change, migration 0048). Appended after the fail, the entry would
      // wait for the chain while holding the session, and the chat's records (and their batch)
      // would wait behind it.
      const { status: previousStatus } = await lockUnfinished(tx, tenantId, event_id);
      await audit(c, tx, tenantId, {
        action: 'message.fail',
        decision: 'failed',
        reason,
        errorType: 'operator_failed',
        details: { event_id, previous_status: previousStatus, previous_workflow_status: previous },
      });
      // Unfinished and locked (above), so this fails it.
      await operatorFail(tx, { tenantId, eventId: event_id, reason });
      // The session's next message, and the tenant's permit waiters (its permit was released).
      const wake = [...(await wakeListOf(tx, tenantId, event_id)), ...(await permitWaiters(tx, tenantId))];
      return { previousStatus, wake };
    });
    await wakeWorkflows(deps.temporal, done.wake);
    return c.json(
      {
        event_id,
        status: 'failed' as const,
        outcome: 'operator_failed' as const,
        previous_status: done.previousStatus,
        previous_workflow_status: previous,
      },
      200,
    );
  });
}
