import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { OpenAPIHono } from '@hono/zod-openapi';
import { Scalar } from '@scalar/hono-api-reference';
import type { AppDeps, AppEnv } from '../deps';

const require = createRequire(import.meta.url);
// The docs page must render with no internet: serve Scalar's browser bundle ourselves.
const scalarBundlePath = join(dirname(require.resolve('@scalar/api-reference')), 'browser/standalone.js');
let scalarBundle: Promise<string> | undefined;

/** A readiness probe answers within this, whatever a dependency does (a probe times out as false). */
export const PROBE_DEADLINE_MS = 1_000;

function probeDatabase(deps: AppDeps): Promise<boolean> {
  const query = deps.sql`select 1`;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => {
      query.cancel();
      resolve(false);
    }, PROBE_DEADLINE_MS);
  });
  const answered = query.then(
    () => true,
    () => false,
  );
  return Promise.race([answered, timeout]).finally(() => clearTimeout(timer));
}

function probeTemporal(deps: AppDeps): Promise<boolean> {
  return deps.temporal.connection
    .withDeadline(Date.now() + PROBE_DEADLINE_MS, () => deps.temporal.workflowService.getSystemInfo({}))
    .then(
      () => true,
      () => false,
    );
}

export function registerServiceRoutes(app: OpenAPIHono<AppEnv>, deps: AppDeps): void {
  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.get('/readyz', async (c) => {
    // Draining: the answer a load balancer needs is "stop sending", without probing anything.
    if (deps.draining?.()) return c.json({ status: 'draining', postgres: null, temporal: null }, 503);
    const [db, temporal] = await Promise.all([probeDatabase(deps), probeTemporal(deps)]);
    const ready = db && temporal;
    return c.json({ status: ready ? 'ready' : 'not_ready', postgres: db, temporal }, ready ? 200 : 503);
  });

  app.get('/metrics', async (c) => {
    c.header('content-type', deps.metrics.contentType);
    return c.body(await deps.metrics.metrics());
  });

  app.get('/docs/scalar.js', async (c) => {
    scalarBundle ??= readFile(scalarBundlePath, 'utf8');
    c.header('content-type', 'application/javascript; charset=utf-8');
    c.header('cache-control', 'public, max-age=86400');
    return c.body(await scalarBundle);
  });
  app.get('/docs', Scalar({ url: '/openapi.json', cdn: '/docs/scalar.js', pageTitle: 'Switchyard API' }));
}
