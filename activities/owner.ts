import { Context } from '@temporalio/activity';

/** owner = worker + workflow run + activity attempt: each attempt claims under its own identity. */
export function attemptOwner(workerId: string): string {
  try {
    const info = Context.current().info;
    return `${workerId}/${info.workflowExecution?.runId ?? 'none'}/${info.activityId}#${info.attempt}`;
  } catch {
    return `${workerId}/direct`;
  }
}
