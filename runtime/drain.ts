import type { Server } from 'node:http';

/** How long a closing listener waits for in-flight requests before it cuts their connections. */
export const CLOSE_BOUND_MS = 10_000;
const IDLE_SWEEP_MS = 50;

/**
 * Stops accepting connections, lets in-flight requests finish, then resolves. Keep-alive
 * connections are closed as soon as they are idle (Node's close() only closes those idle at the
 * moment it is called, so a connection whose request was in flight would otherwise stay open until
 * its keep-alive timeout); whatever is still open after `boundMs` is cut.
 */
export function closeServer(server: Server, boundMs = CLOSE_BOUND_MS): Promise<void> {
  return new Promise((resolve) => {
    const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
    const bound = setTimeout(() => server.closeAllConnections(), boundMs);
    server.close(() => {
      clearInterval(sweep);
      clearTimeout(bound);
      resolve();
    });
  });
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
