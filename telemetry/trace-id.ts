import { isSpanContextValid, trace } from '@opentelemetry/api';

/**
 * The trace id of the active span, as stored in message_event.trace_id and audit_log.trace_id, or
 * null when tracing is off (the no-op span's context is invalid) or no span is active.
 */
export function activeTraceId(): string | null {
  const ctx = trace.getActiveSpan()?.spanContext();
  return ctx && isSpanContextValid(ctx) ? ctx.traceId : null;
}
