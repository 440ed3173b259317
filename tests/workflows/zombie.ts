// Test-only workflow (bundled separately by tests/integration/execution-zombie.test.ts): one model
// turn as a regular activity whose StartToClose timeout is short enough for a test, so that an
// attempt stalled at the provider times out, its retry runs, and the stalled attempt — a zombie
// still running in the worker — finishes afterwards.
import { proxyActivities } from '@temporalio/workflow';
import type { createActivities } from '../../activities';
import type { ModelTurnInput, ModelTurnResult } from '../../activities/model';

const { modelTurn } = proxyActivities<ReturnType<typeof createActivities>>({
  startToCloseTimeout: '2 seconds',
  retry: {
    initialInterval: '100 milliseconds',
    maximumAttempts: 3,
    nonRetryableErrorTypes: ['FencedOut', 'PlanDrift', 'ConfigurationError', 'ModelPermanent'],
  },
});

export async function zombieModelTurnWorkflow(input: ModelTurnInput): Promise<ModelTurnResult> {
  return modelTurn(input);
}
