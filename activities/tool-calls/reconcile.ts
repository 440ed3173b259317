import { ApplicationFailure } from '@temporalio/activity';
import { fetchToolReceipt, receiptRef, type ToolDefinition } from '../../agents/tools';
import type { ToolInvocationRow } from '../../db/queries/tools';
import { settled, type ToolOutcome } from './outcome';
import type { ToolRun, ToolSteps } from './steps';

/** Holding a reconciling claim: establish by the same key whether the provider accepted. */
export async function reconcile(
  s: ToolSteps,
  run: ToolRun,
  tool: ToolDefinition,
  row: ToolInvocationRow,
): Promise<ToolOutcome> {
  const claimedAt = performance.now();
  if (!tool.side_effect) {
    // Nothing to protect: sending again is harmless.
    await s.transition(run, row, ['reconciling'], { to: 'prepared', release: true });
    throw ApplicationFailure.retryable(`side-effect-free tool ${tool.name} is sent again`, 'ToolRetryable');
  }
  if (!tool.receipt_url) return manual(s, run, row, 'unknown_outcome_no_receipt_url');

  const receipt = await fetchToolReceipt({
    receiptUrlTemplate: tool.receipt_url,
    idempotencyKey: row.idempotency_key,
    timeoutMs: s.timeoutMs,
  });
  switch (receipt.kind) {
    case 'found': {
      const next = await s.recordAnswer(
        run,
        row,
        claimedAt,
        ['reconciling'],
        {
          to: 'accepted',
          providerReceipt: receipt.receipt,
          providerReceiptRef: receiptRef(receipt.receipt),
          resolved: true,
          reconciled: true,
          release: true,
        },
        { decision: 'accepted', details: { reconciled: true, after: row.last_error } },
      );
      return settled(next);
    }
    case 'not_found':
      if (tool.idempotency === 'provider_key') {
        // Confirmed not applied and the provider deduplicates by key: queue it again, same key.
        await s.transition(run, row, ['reconciling'], {
          to: 'prepared',
          lastError: 'not_accepted',
          reconciled: true,
          release: true,
        });
        throw ApplicationFailure.retryable(
          `tool ${tool.name} did not accept the call; dispatching again with the same key`,
          'ToolRetryable',
        );
      }
      return manual(s, run, row, 'not_accepted_without_provider_idempotency');
    case 'error': {
      const age = (row.dispatch_age_s ?? 0) + (performance.now() - claimedAt) / 1000;
      if (age >= tool.reconcile_window_s) return manual(s, run, row, 'reconcile_window_exceeded');
      await s.transition(run, row, ['reconciling'], {
        to: 'reconciling',
        lastError: receipt.reason,
        reconciled: true,
        release: true,
      });
      throw ApplicationFailure.retryable(
        `receipt for tool ${tool.name} unavailable (${receipt.reason}); reconciling again`,
        'ToolReconciling',
      );
    }
    default: {
      const exhaustive: never = receipt;
      return exhaustive;
    }
  }
}

/** Holding a reconciling claim, the outcome cannot be established: an operator decides (DLQ). */
async function manual(
  s: ToolSteps,
  run: ToolRun,
  row: ToolInvocationRow,
  reason: string,
): Promise<ToolOutcome> {
  await s.transition(
    run,
    row,
    ['reconciling'],
    { to: 'manual', lastError: reason, reconciled: true, release: true },
    { decision: 'manual', errorType: reason },
  );
  return { status: 'manual', invocationId: row.invocation_id };
}
