import { AsyncLocalStorage } from 'node:async_hooks';
import { isSpanContextValid, trace } from '@opentelemetry/api';

/**
 * Correlation fields of the unit of work a log line belongs to: an HTTP request (api/access-log.ts)
 * or an activity attempt (runtime/activity-log-context.ts). Ids only — never text, bodies or
 * secrets — because every line logged inside that unit carries them.
 */
export interface LogFields {
  request_id?: string;
  /** Only once the tenant is trusted: a verified webhook, an authenticated admin principal. */
  tenant_id?: string;
  event_id?: string;
  workflow_id?: string;
  activity?: string;
  /** An HTTP request's server span (webhooks and admin tracing.ts), so its access line names the trace too. */
  trace_id?: string;
}

const store = new AsyncLocalStorage<LogFields>();

/** Runs fn with its own fields; everything it awaits or schedules logs with them. */
export function withLogFields<T>(fields: LogFields, fn: () => T): T {
  return store.run({ ...fields }, fn);
}

/**
 * Adds fields to the current unit of work (e.g. tenant_id once a webhook verified), seen by every
 * later line of that unit, including its access log line. Outside one: nothing to do.
 */
export function addLogFields(fields: LogFields): void {
  const current = store.getStore();
  if (current) Object.assign(current, fields);
}

/**
 * pino's mixin (lib/log.ts): the unit's fields and, while a span is active, its trace and span
 * ids. Read at each log call, so a call site passes none of them. Fields the call passes win.
 */
export function logMixin(): Record<string, string> {
  const fields: Record<string, string> = {};
  const current = store.getStore();
  if (current) {
    for (const [k, v] of Object.entries(current)) if (typeof v === 'string') fields[k] = v;
  }
  const span = trace.getActiveSpan()?.spanContext();
  if (span && isSpanContextValid(span)) {
    fields.trace_id = span.traceId;
    fields.span_id = span.spanId;
  }
  return fields;
}
