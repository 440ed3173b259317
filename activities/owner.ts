import { Context } from '@temporalio/activity';

/** The workflow (id) the running activity belongs to; null outside an activity (a direct call). */
export function callingWorkflowId(): string | null {
  try {
    return Context.current().info.workflowExecution?.workflowId ?? null;
  } catch {
    return null;
  }
}

/**
 * True unless the running activity belongs to a run that no longer works the message (one replaced
 * by a repair run, e.g. reset in the Web UI afterwards): such a run must not write for it.
 */
export function isCurrentRun(messageWorkflowId: string | null): boolean {
  const caller = callingWorkflowId();
  // A message with no recorded workflow (written by hand, not by ingress) is not checked.
  return caller === null || messageWorkflowId === null || caller === messageWorkflowId;
}

/** owner = worker + workflow run + activity attempt: each attempt claims under its own identity. */
export function attemptOwner(workerId: string): string {
  try {
    const info = Context.current().info;
    return `${workerId}/${info.workflowExecution?.runId ?? 'none'}/${info.activityId}#${info.attempt}`;
  } catch {
    return `${workerId}/direct`;
  }
}
