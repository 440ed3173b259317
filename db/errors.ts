// Which database errors are worth simply trying again.

/**
 * Connection-level failures: the socket was refused, reset, closed or timed out (Node and postgres.js
 * codes; CONNECTION_DESTROYED also when a connection being retired for idleness or age takes a
 * statement with it). Not postgres.js's CONNECTION_ENDED: that only follows this process's own
 * `sql.end()`, and no retry on an ended client can succeed.
 */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_DESTROYED',
]);

/** SQLSTATEs of a server going away or not back yet: admin_shutdown, crash_shutdown, cannot_connect_now. */
const SERVER_GONE = new Set(['57P01', '57P02', '57P03']);

/**
 * Whether a failed statement may succeed when it is sent again: the connection failed (a restart,
 * a failover, a network blip), the server was shutting down or starting up, or an 08xxx connection
 * exception. Everything else — a constraint, a type error, a lock or statement timeout — is not.
 * A statement that failed this way may still have committed (the answer was lost, not the
 * commit): a caller that retries must treat a miss on the retry as possibly its own write.
 */
export function isTransientDbError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, cause, errors } = err as { code?: unknown; cause?: unknown; errors?: unknown };
  if (
    typeof code === 'string' &&
    (CONNECTION_CODES.has(code) || SERVER_GONE.has(code) || /^08[0-9A-Z]{3}$/.test(code))
  )
    return true;
  // Node reports a refused connection to every address of a host as an AggregateError.
  if (Array.isArray(errors) && errors.length > 0 && errors.every(isTransientDbError)) return true;
  return cause !== undefined && cause !== err && isTransientDbError(cause);
}

/**
 * A lock wait that ran past the connection's lock_timeout (SQLSTATE 55P03, lock_not_available):
 * nothing of the statement was done (ingress's bounded-wait pools, db/client.ts createBoundedWaitSql).
 */
export function isLockTimeout(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '55P03';
}
