import { Context } from '@temporalio/activity';

/**
 * The running regular activity's context; null in a local activity (it has no heartbeats: nothing
 * it records there reaches its next attempt) or outside any activity (a direct call in a test).
 */
export function regularActivity(): Context | null {
  try {
    const ctx = Context.current();
    return ctx.info.isLocal ? null : ctx;
  } catch {
    return null;
  }
}
