import { trace } from '@opentelemetry/api';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor, Next } from '@temporalio/worker';
import type { ExecutionPlan } from '../workflows/shared';

/**
 * Adds the tenant attributes of the design (tenant.id, tenant.version, agent_app.id) to each
 * activity's span. Registered after Temporal's OTel interceptor, so its span is the active one.
 * Only ids from the activity's input: never bodies or secrets.
 */
export class TenantSpanAttributes implements ActivityInboundCallsInterceptor {
  async execute(
    input: ActivityExecuteInput,
    next: Next<ActivityInboundCallsInterceptor, 'execute'>,
  ): Promise<unknown> {
    const arg = input.args[0] as { tenantId?: unknown; plan?: ExecutionPlan | null } | undefined;
    const span = trace.getActiveSpan();
    if (span && typeof arg?.tenantId === 'string') {
      span.setAttribute('tenant.id', arg.tenantId);
      if (arg.plan) {
        span.setAttribute('tenant.version', arg.plan.tenant.version);
        span.setAttribute('agent_app.id', arg.plan.app.id);
      }
    }
    return next(input);
  }
}
