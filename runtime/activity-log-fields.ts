import { Context } from '@temporalio/activity';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor, Next } from '@temporalio/worker';
import { type LogFields, withLogFields } from '../lib/log-context';

/**
 * Runs each activity attempt with its log fields (lib/log-context.ts): the workflow id and the
 * activity type from Temporal, tenant_id and event_id from the activity's one input object when it
 * has them (ids only). Every `deps.log` line of the attempt carries them, and its trace ids while
 * the activity's span is active.
 */
export class ActivityLogFields implements ActivityInboundCallsInterceptor {
  execute(
    input: ActivityExecuteInput,
    next: Next<ActivityInboundCallsInterceptor, 'execute'>,
  ): Promise<unknown> {
    const info = Context.current().info;
    const arg = input.args[0] as { tenantId?: unknown; eventId?: unknown } | undefined;
    const fields: LogFields = { activity: info.activityType };
    if (info.workflowExecution) fields.workflow_id = info.workflowExecution.workflowId;
    if (typeof arg?.tenantId === 'string') fields.tenant_id = arg.tenantId;
    if (typeof arg?.eventId === 'string') fields.event_id = arg.eventId;
    return withLogFields(fields, () => next(input));
  }
}
