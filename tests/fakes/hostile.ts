// Hostile peers for the egress tests: what a tenant could point an outbound URL at to get past the
// egress layer — a redirect elsewhere, a body without end (plain, declared, gzip-inflating, as
// server-sent events), or a trap that records whatever reaches it. Test fixtures only.
// No vitest imports here, like the other fakes.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Writable } from 'node:stream';
import { createGzip } from 'node:zlib';

const GiB = 1024 * 1024 * 1024;

/** One request as a hostile server saw it. */
export interface HostileRequest {
  at: number;
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  /** the request body, as text */
  body: string;
}

/** A body that does not end until the peer hangs up (or a bound is reached). */
export interface FloodAnswer {
  kind: 'flood';
  /** default 200 */
  status?: number;
  headers?: Record<string, string>;
  /** declares this Content-Length (a lie: it stops when the peer hangs up) */
  contentLength?: number;
  /** gzip the body on the fly (Content-Encoding: gzip): a few KiB on the wire inflate to the flood */
  gzip?: boolean;
  /** written once before the filler, e.g. the start of a JSON document */
  prefix?: string;
  /** the unit repeated (default 64 KiB of "a") */
  unit?: string;
  /** stops by itself after this many body bytes (default 1 GiB) … */
  limitBytes?: number;
  /** … or this long (default 60 s) */
  limitMs?: number;
}

export type HostileAnswer =
  | FloodAnswer
  | { kind: 'redirect'; status: number; location: string }
  | { kind: 'json'; status?: number; body: unknown };

/** What one flood did. */
export interface FloodRecord {
  path: string;
  /** body bytes handed to the socket (before gzip, when gzipping) */
  written: number;
  /** the peer closed the connection before the flood reached its bound */
  closedByPeer: boolean;
  /** resolves once the response is over, whoever ended it */
  readonly over: Promise<void>;
}

export interface HostileServer {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly requests: HostileRequest[];
  readonly floods: FloodRecord[];
  close(): Promise<void>;
}

export type HostileRoute = (req: HostileRequest) => HostileAnswer | Promise<HostileAnswer>;

/**
 * A server at `host:port` (default 127.0.0.1, any port) answering each request as `route` says.
 * Every request is recorded before it is answered.
 */
export async function startHostile(
  route: HostileRoute,
  opts: { host?: string; port?: number } = {},
): Promise<HostileServer> {
  const host = opts.host ?? '127.0.0.1';
  const requests: HostileRequest[] = [];
  const floods: FloodRecord[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    void handle(req, res).catch(() => res.destroy());
  });
  async function handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const rec: HostileRequest = {
      at: Date.now(),
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      headers: req.headers,
      body: Buffer.concat(chunks).toString('utf8'),
    };
    requests.push(rec);
    const answer = await route(rec);
    switch (answer.kind) {
      case 'json': {
        const text = JSON.stringify(answer.body);
        res.writeHead(answer.status ?? 200, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(text),
        });
        res.end(text);
        return;
      }
      case 'redirect':
        res.writeHead(answer.status, { location: answer.location, 'content-length': 0 });
        res.end();
        return;
      case 'flood':
        floods.push(flood(rec.path, res, answer));
        return;
      default: {
        const exhaustive: never = answer;
        return exhaustive;
      }
    }
  }
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    host,
    port,
    requests,
    floods,
    async close() {
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await stopped;
    },
  };
}

/** Writes `o`'s body as fast as the peer reads it, until the peer hangs up or a bound is reached. */
function flood(path: string, res: ServerResponse, o: FloodAnswer): FloodRecord {
  const limitBytes = o.limitBytes ?? GiB;
  const deadline = Date.now() + (o.limitMs ?? 60_000);
  const unit = Buffer.from(o.unit ?? 'a'.repeat(64 * 1024));
  let finish: () => void = () => undefined;
  const rec: FloodRecord = {
    path,
    written: 0,
    closedByPeer: false,
    over: new Promise<void>((resolve) => {
      finish = resolve;
    }),
  };
  res.writeHead(o.status ?? 200, {
    'content-type': 'application/octet-stream',
    ...(o.contentLength === undefined ? {} : { 'content-length': String(o.contentLength) }),
    ...(o.gzip ? { 'content-encoding': 'gzip' } : {}),
    ...o.headers,
  });
  let sink: Writable = res;
  if (o.gzip) {
    const gzip = createGzip();
    gzip.pipe(res);
    sink = gzip;
  }
  let stopped = false;
  res.on('close', () => {
    stopped = true;
    rec.closedByPeer = !res.writableFinished;
    if (sink !== res) sink.destroy();
    finish();
  });
  if (o.prefix) {
    rec.written += Buffer.byteLength(o.prefix);
    sink.write(o.prefix);
  }
  const pump = () => {
    while (!stopped) {
      if (rec.written >= limitBytes || Date.now() >= deadline) {
        sink.end();
        return;
      }
      const piece = unit.subarray(0, Math.min(unit.length, limitBytes - rec.written));
      rec.written += piece.length;
      if (!sink.write(piece)) {
        sink.once('drain', pump);
        return;
      }
    }
  };
  pump();
  return rec;
}

/** A trap: answers 200 `{}` to anything and records it (the place nothing may reach). */
export function startTrap(opts: { host?: string; port?: number } = {}): Promise<HostileServer> {
  return startHostile(() => ({ kind: 'json', body: {} }), opts);
}

/** Answers every request with `status` and a Location of `location(path)`. */
export function startRedirector(status: number, location: (path: string) => string): Promise<HostileServer> {
  return startHostile((req) => ({ kind: 'redirect', status, location: location(req.path) }));
}
