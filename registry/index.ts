import type { Registry } from 'prom-client';
import type { Sql } from '../db/client';
import type { Logger } from '../lib/log';
import { type ConfigRegistry, createConfigRegistry } from './cache';
import { type RegistryListener, startRegistryListener } from './listener';
import { registerRegistryMetrics } from './metrics';

export interface RunningRegistry {
  registry: ConfigRegistry;
  listener: RegistryListener;
  close(): Promise<void>;
}

/** How long a process waits for its first LISTEN before serving anyway (entries then rely on the TTL). */
const FIRST_LISTEN_WAIT_MS = 5_000;

/**
 * One process's registry with its LISTEN session (and, given `metrics`, its figures). Resolves
 * once the session listens (or after FIRST_LISTEN_WAIT_MS, logged), so a process starts serving
 * with invalidation in place.
 */
export async function startRegistry(p: {
  sql: Sql;
  ttlMs: number;
  log: Logger;
  metrics?: Registry;
  probeMs?: number;
}): Promise<RunningRegistry> {
  const registry = createConfigRegistry({ sql: p.sql, ttlMs: p.ttlMs });
  const listener = startRegistryListener({
    sql: p.sql,
    registry,
    log: p.log,
    ...(p.probeMs ? { probeMs: p.probeMs } : {}),
  });
  if (p.metrics) registerRegistryMetrics(p.metrics, registry, listener);
  if (!(await listener.ready(FIRST_LISTEN_WAIT_MS))) {
    p.log.warn('registry: not listening yet; serving with the TTL as the only bound until it is');
  }
  return { registry, listener, close: () => listener.close() };
}
