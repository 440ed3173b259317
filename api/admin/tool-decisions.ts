import { z } from '@hono/zod-openapi';
import {
  decideApproval,
  lockToolInvocation,
  resolveManualInvocation,
} from '../../db/queries/admin/tool-invocations';
import { toolDecisionSignal } from '../../workflows/shared';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { audit, requireWritableTenant, tenantTx } from './context';
import type { AdminApp } from './env';
import { adminRoute } from './route';
import { JsonObject, jsonBody, jsonResponse, pathId, TenantParams } from './schemas';
import { ToolInvocationSchema, toolInvocationJson } from './tool-invocations';

// Operator decisions on tool invocations that wait for a human: resolving an outcome nobody could
// establish (`manual`) and approving or denying a call that requires approval. Each is a CAS on
// the invocation's status, audited in the same transaction; afterwards the message's workflow is
// signalled (toolDecisionSignal) so it continues at once. A lost signal only delays it: the
// workflow re-checks a manual invocation periodically and an approval at its deadline.

const reason = z.string().trim().min(1, 'reason must not be blank').max(1000);

const ResolutionBody = z
  .object({
    outcome: z.enum(['accepted', 'rejected']),
    reason,
    provider_receipt: JsonObject.optional().openapi({
      description: 'What the provider confirmed (accepted): given to the model as the tool result',
    }),
  })
  .strict()
  .openapi('ToolInvocationResolution');

const ApprovalBody = z
  .object({ decision: z.enum(['approve', 'deny']), reason })
  .strict()
  .openapi('ToolInvocationApproval');

const tags = ['tool invocations'];
const InvocationParams = TenantParams.extend({ invocation_id: pathId('invocation_id') });

const resolutionRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/tool-invocations/{invocation_id}/resolution',
  tags,
  summary:
    'Resolve a manual tool invocation (manual → accepted | rejected); the waiting execution continues. ' +
    'Anything but manual is 409 invalid_transition.',
  request: { params: InvocationParams, body: jsonBody(ResolutionBody) },
  errors: [400, 403, 404, 409],
  responses: { 200: jsonResponse(ToolInvocationSchema, 'The resolved invocation') },
});

const approvalRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/tool-invocations/{invocation_id}/approval',
  tags,
  summary:
    'Approve (→ prepared, then dispatched) or deny (→ rejected) a call awaiting approval, before its ' +
    'deadline. Anything else is 409 invalid_transition.',
  request: { params: InvocationParams, body: jsonBody(ApprovalBody) },
  errors: [400, 403, 404, 409],
  responses: { 200: jsonResponse(ToolInvocationSchema, 'The decided invocation') },
});

/** Best effort and bounded: the workflow also re-checks on its own if this signal is lost. */
async function signalWorkflow(deps: AppDeps, workflowId: string | null, invocationId: string) {
  if (!workflowId) return;
  try {
    await deps.temporal.connection.withDeadline(Date.now() + 3_000, () =>
      deps.temporal.workflow.getHandle(workflowId).signal(toolDecisionSignal, { invocationId }),
    );
  } catch (err) {
    deps.log.warn(
      { workflowId, invocationId, err: { name: (err as Error).name, message: (err as Error).message } },
      'could not signal the tool decision; the workflow picks it up when it re-checks',
    );
  }
}

export function registerToolDecisionRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(resolutionRoute, async (c) => {
    const { invocation_id } = c.req.valid('param');
    const body = c.req.valid('json');
    const { row, workflowId } = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      const current = await lockToolInvocation(tx, tenantId, invocation_id);
      if (!current) throw new ApiError('not_found', 'No such tool invocation.');
      if (current.status !== 'manual') {
        throw new ApiError(
          'invalid_transition',
          `The tool invocation is ${current.status}; only a manual invocation can be resolved.`,
        );
      }
      const resolved = await resolveManualInvocation(tx, {
        tenantId,
        invocationId: invocation_id,
        outcome: body.outcome,
        reason: body.reason,
        providerReceipt: body.provider_receipt ?? null,
      });
      if (!resolved) throw new ApiError('invalid_transition', 'The tool invocation is no longer manual.');
      await audit(c, tx, tenantId, {
        action: 'tool_invocation.resolve',
        decision: 'resolved',
        reason: body.reason,
        toolName: resolved.tool_name,
        sessionId: resolved.session_id,
        details: {
          invocation_id,
          event_id: resolved.event_id,
          outcome: body.outcome,
          provider_receipt: body.provider_receipt !== undefined,
        },
      });
      return { row: resolved, workflowId: current.workflow_id };
    });
    await signalWorkflow(deps, workflowId, invocation_id);
    return c.json(toolInvocationJson(row), 200);
  });

  admin.openapi(approvalRoute, async (c) => {
    const { invocation_id } = c.req.valid('param');
    const body = c.req.valid('json');
    const { row, workflowId } = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      const current = await lockToolInvocation(tx, tenantId, invocation_id);
      if (!current) throw new ApiError('not_found', 'No such tool invocation.');
      if (current.status !== 'awaiting_approval') {
        throw new ApiError(
          'invalid_transition',
          `The tool invocation is ${current.status}; only one awaiting approval can be decided.`,
        );
      }
      if (current.approval_expired) {
        throw new ApiError('invalid_transition', 'The approval deadline has passed.');
      }
      const decided = await decideApproval(tx, {
        tenantId,
        invocationId: invocation_id,
        decision: body.decision,
        reason: body.reason,
      });
      if (!decided)
        throw new ApiError('invalid_transition', 'The tool invocation is no longer awaiting approval.');
      await audit(c, tx, tenantId, {
        action: 'tool_invocation.approval',
        decision: body.decision === 'approve' ? 'approved' : 'refused',
        reason: body.reason,
        toolName: decided.tool_name,
        sessionId: decided.session_id,
        details: { invocation_id, event_id: decided.event_id },
      });
      return { row: decided, workflowId: current.workflow_id };
    });
    await signalWorkflow(deps, workflowId, invocation_id);
    return c.json(toolInvocationJson(row), 200);
  });
}
