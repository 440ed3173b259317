import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Logger } from '../lib/log';
import { registerWorkerReady } from '../telemetry/metrics';
import { closeServer } from './drain';

// The worker's own small HTTP server (SWITCHYARD_WORKER_PORT on HOST): what a scraper and
// an orchestrator need from a process that otherwise only talks to Temporal and PostgreSQL.
//   GET /metrics  its Prometheus registry
//   GET /healthz  200 while the process runs (liveness)
//   GET /readyz   200 while `ready()` holds and it is not draining (readiness), else 503
// Nothing else: no admin surface, no bodies read.

export interface WorkerHttp {
  url: string;
  /** From now on /readyz answers 503 `draining` (shutdown has begun); cannot be undone. */
  setDraining(): void;
  close(): Promise<void>;
}

/** A scrape or probe still open this long after close() is cut. */
const CLOSE_BOUND_MS = 2_000;

export function startWorkerHttp(opts: {
  host: string;
  port: number;
  registry: Registry;
  /** The worker can take work (its state is RUNNING). */
  ready: () => boolean;
  log: Logger;
}): Promise<WorkerHttp> {
  let draining = false;
  const isReady = () => !draining && opts.ready();
  registerWorkerReady(opts.registry, isReady);
  const json = (res: ServerResponse, status: number, body: object) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
    res.end(JSON.stringify(body));
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return json(res, 405, { status: 'method_not_allowed' });
    switch (path) {
      case '/healthz':
        return json(res, 200, { status: 'ok' });
      case '/readyz': {
        if (draining) return json(res, 503, { status: 'draining' });
        const ready = isReady();
        return json(res, ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready' });
      }
      case '/metrics': {
        const text = await opts.registry.metrics();
        res.writeHead(200, { 'content-type': opts.registry.contentType, 'cache-control': 'no-store' });
        res.end(text);
        return;
      }
      default:
        return json(res, 404, { status: 'not_found' });
    }
  };
  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      opts.log.error({ err: (err as Error).message, path: req.url?.split('?', 1)[0] }, 'worker http failed');
      if (!res.headersSent) json(res, 500, { status: 'error' });
      else res.destroy();
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      reject(
        new Error(
          `the worker's HTTP server cannot listen on ${opts.host}:${opts.port} (${err.code ?? err.message}); ` +
            'set SWITCHYARD_WORKER_PORT to a free port, or 0 to turn it off',
        ),
      );
    });
    server.listen(opts.port, opts.host, () => {
      const { address, port } = server.address() as AddressInfo;
      resolve({
        url: `http://${address.includes(':') ? `[${address}]` : address}:${port}`,
        setDraining: () => {
          draining = true;
        },
        close: () => closeServer(server, CLOSE_BOUND_MS),
      });
    });
  });
}
