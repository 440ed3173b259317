import { ApplicationFailure } from '@temporalio/activity';
import { dispatchToolCall, receiptRef, type ToolDefinition } from '../../agents/tools';
import type { ToolInvocationRow } from '../../db/queries/tools';
import { settled, type ToolOutcome } from './outcome';
import { reconcile } from './reconcile';
import type { ToolRun, ToolSteps } from './steps';

/** Holding a dispatching claim: send once, record what the provider said. */
export async function dispatch(
  s: ToolSteps,
  run: ToolRun,
  tool: ToolDefinition,
  row: ToolInvocationRow,
): Promise<ToolOutcome> {
  const started = performance.now();
  const result = await dispatchToolCall({
    url: tool.endpoint_url,
    idempotencyKey: row.idempotency_key,
    args: row.arguments,
    timeoutMs: s.timeoutMs,
  });
  const latencyMs = performance.now() - started;
  s.deps.metrics?.toolDispatches.inc({ result: result.kind });
  s.deps.metrics?.toolDispatchSeconds.observe({ result: result.kind }, latencyMs / 1000);
  switch (result.kind) {
    case 'accepted': {
      const next = await s.recordAnswer(
        run,
        row,
        started,
        ['dispatching'],
        {
          to: 'accepted',
          providerReceipt: result.body,
          providerReceiptRef: receiptRef(result.body),
          lastError: null,
          resolved: true,
          release: true,
        },
        { decision: 'accepted', latencyMs, details: { http_status: result.httpStatus } },
      );
      return settled(next);
    }
    case 'rejected': {
      const next = await s.recordAnswer(
        run,
        row,
        started,
        ['dispatching'],
        {
          to: 'rejected',
          providerReceipt: result.body,
          lastError: `http_${result.httpStatus}`,
          resolved: true,
          release: true,
        },
        { decision: 'rejected', latencyMs, errorType: `http_${result.httpStatus}` },
      );
      return settled(next);
    }
    case 'not_sent':
      await s.transition(run, row, ['dispatching'], {
        to: 'prepared',
        lastError: result.reason,
        release: true,
      });
      throw ApplicationFailure.create({
        message: `tool ${tool.name} was not reached (${result.reason}); retrying with the same key`,
        type: 'ToolRetryable',
        ...(result.retryAfterMs === undefined ? {} : { nextRetryDelay: result.retryAfterMs }),
      });
    case 'unknown': {
      // Recorded before anything else happens, so a crash here leaves an explicit unknown.
      const unknown = await s.transition(run, row, ['dispatching'], {
        to: 'unknown',
        lastError: result.reason,
      });
      const reconciling = await s.transition(run, unknown, ['unknown'], {
        to: 'reconciling',
        reconciled: true,
      });
      return reconcile(s, run, tool, reconciling);
    }
    default: {
      const exhaustive: never = result;
      return exhaustive;
    }
  }
}
