import { Counter, Gauge, type Registry } from 'prom-client';
import type { ConfigRegistry, EventOutcome } from './cache';
import type { RegistryListener } from './listener';

const EVENT_OUTCOMES: readonly EventOutcome[] = ['applied', 'ignored', 'duplicate', 'malformed'];

/**
 * The registry's figures on the process's /metrics, read from its counters at scrape time:
 * lookups by result, version events by outcome (an event for a tenant or object this process
 * does not cache is `ignored`), flushes, and whether the LISTEN session is up.
 */
export function registerRegistryMetrics(
  metrics: Registry,
  registry: ConfigRegistry,
  listener: RegistryListener,
): void {
  const registers = [metrics];
  new Counter<'result'>({
    name: 'switchyard_registry_lookups_total',
    help: 'Configuration registry lookups at ingress by result (hit, miss = one read, unavailable = 503)',
    labelNames: ['result'],
    registers,
    collect() {
      const s = registry.stats();
      this.reset();
      this.inc({ result: 'hit' }, s.hits);
      this.inc({ result: 'miss' }, s.misses);
      this.inc({ result: 'unavailable' }, s.unavailable);
    },
  });
  new Counter<'outcome'>({
    name: 'switchyard_registry_events_total',
    help: 'Version events received by the configuration registry, by outcome',
    labelNames: ['outcome'],
    registers,
    collect() {
      const s = registry.stats();
      this.reset();
      for (const outcome of EVENT_OUTCOMES) this.inc({ outcome }, s.events[outcome]);
    },
  });
  new Counter({
    name: 'switchyard_registry_flushes_total',
    help: 'Full flushes of the configuration registry (each LISTEN (re)connection)',
    registers,
    collect() {
      this.reset();
      this.inc(registry.stats().flushes);
    },
  });
  new Gauge({
    name: 'switchyard_registry_listener_up',
    help: '1 while the registry LISTEN session is connected, else 0 (entries then live only up to their TTL)',
    registers,
    collect() {
      this.set(listener.connected() ? 1 : 0);
    },
  });
}
