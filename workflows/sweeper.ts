import { sleep } from '@temporalio/workflow';
import type { SweepOptions } from '../activities/sweeper';
import { sweeps } from './options';
import { emptySweepReport, type SweepReport } from './shared';

export interface SweeperInput {
  /** How long one scheduled run sweeps before it ends (the Schedule starts the next one). */
  runForMs: number;
  /** Pause between passes. */
  passIntervalMs: number;
  options: Partial<SweepOptions>;
}

/**
 * One scheduled run of the repair sweeper (runtime/sweeper-schedule.ts): passes every
 * passIntervalMs for runForMs, so a recorded message is started and an abnormally ended workflow
 * repaired within seconds, while the Schedule (visible and pausable in the Web UI) starts a new,
 * short history every interval instead of one that grows. Returns the runs' totals.
 */
export async function sweeperWorkflow(input: SweeperInput): Promise<SweepReport> {
  const totals = emptySweepReport();
  const ends = Date.now() + input.runForMs;
  for (;;) {
    const r = await sweeps.sweep(input.options);
    for (const k of ['checked', 'started', 'alive', 'woken', 'repaired', 'deadLettered', 'failed'] as const)
      totals[k] += r[k] ?? 0;
    for (const [reason, n] of Object.entries(r.reasons))
      totals.reasons[reason] = (totals.reasons[reason] ?? 0) + n;
    if (Date.now() + input.passIntervalMs >= ends) return totals;
    await sleep(input.passIntervalMs);
  }
}
