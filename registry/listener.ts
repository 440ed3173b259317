import { createListenSql, type Sql } from '../db/client';
import type { Logger } from '../lib/log';
import type { ConfigRegistry } from './cache';
import { parseRegistryEvent, REGISTRY_CHANNEL } from './events';

/** How often the listening session is checked (a silent network loss has no close event). */
export const LISTENER_PROBE_MS = 5_000;
const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5_000;

export interface RegistryListener {
  /** Resolves once the first LISTEN took effect (false if `timeoutMs` passed first). */
  ready(timeoutMs: number): Promise<boolean>;
  connected(): boolean;
  /** The listening session's backend pid (tests terminate it); null while reconnecting. */
  backendPid(): number | null;
  close(): Promise<void>;
}

/**
 * Feeds a registry the version events of migration 0028 over one dedicated LISTEN session.
 * Every (re)connection flushes the registry once its LISTEN is in effect: whatever was committed
 * while no session listened was never announced, so nothing cached from before may be trusted.
 * A session lost (terminated backend, restart, network) is replaced with backoff; a probe every
 * LISTENER_PROBE_MS notices a session that died silently or was replaced under the LISTEN.
 * While no session listens, entries live only up to the registry's TTL.
 */
export function startRegistryListener(p: {
  sql: Sql;
  registry: ConfigRegistry;
  log: Logger;
  probeMs?: number;
}): RegistryListener {
  const probeMs = p.probeMs ?? LISTENER_PROBE_MS;
  let closed = false;
  let pid: number | null = null;
  let session: Sql | null = null;
  let lost: () => void = () => undefined;
  let markReady: () => void = () => undefined;
  const readyOnce = new Promise<void>((resolve) => {
    markReady = resolve;
  });

  const onnotify = (channel: string, payload: string) => {
    if (channel !== REGISTRY_CHANNEL) return;
    const outcome = p.registry.apply(parseRegistryEvent(payload));
    if (outcome === 'malformed')
      p.log.warn({ channel }, 'registry: ignored a notification that is no version event');
  };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      timer.unref();
    });

  /** Resolves when the session is gone or no longer the one listening. */
  const watch = async (s: Sql, listening: number, gone: Promise<void>) => {
    while (!closed) {
      const tick = sleep(probeMs).then(() => 'tick' as const);
      if ((await Promise.race([gone.then(() => 'gone' as const), tick])) === 'gone') return;
      const probe = s<{ pid: number }[]>`select pg_backend_pid() as pid`.then((r) => r[0]?.pid ?? null);
      const answer = await Promise.race([probe, sleep(probeMs).then(() => 'timeout' as const)]).catch(
        () => 'failed' as const,
      );
      if (answer !== listening) return; // timed out, failed, or a new session without our LISTEN
    }
  };

  const run = async () => {
    let attempt = 0;
    while (!closed) {
      let endSession: () => void = () => undefined;
      const gone = new Promise<void>((resolve) => {
        endSession = resolve;
      });
      lost = endSession;
      // This session's own close only: an ended earlier session may still report its close.
      const s = createListenSql(p.sql, { onnotify, onclose: endSession });
      session = s;
      try {
        await s.unsafe(`LISTEN ${REGISTRY_CHANNEL}`);
        const [row] = await s<{ pid: number }[]>`select pg_backend_pid() as pid`;
        // Listening from here on: drop whatever was cached before (events may have been missed).
        p.registry.flush('listener_connected');
        pid = row!.pid;
        if (attempt > 0) p.log.info({ attempt }, 'registry: listening again; cache flushed');
        attempt = 0;
        markReady();
        await watch(s, pid, gone);
      } catch (err) {
        if (!closed) p.log.warn({ err: (err as Error).message, attempt }, 'registry: LISTEN session failed');
      }
      pid = null;
      session = null;
      await s.end({ timeout: 0 }).catch(() => undefined);
      if (closed) break;
      p.log.warn('registry: LISTEN session lost; entries live only up to their TTL until it is back');
      await sleep(Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** attempt++));
    }
  };
  const running = run();

  return {
    ready: (timeoutMs) => Promise.race([readyOnce.then(() => true), sleep(timeoutMs).then(() => false)]),
    connected: () => pid !== null,
    backendPid: () => pid,
    async close() {
      closed = true;
      lost();
      await session?.end({ timeout: 0 }).catch(() => undefined);
      await running;
    },
  };
}
