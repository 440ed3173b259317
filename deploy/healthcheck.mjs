// The image's HEALTHCHECK (deploy/Dockerfile): GET /healthz of the process that is PID 1, read
// from its command line, so one image serves every role. The API answers on PORT, the worker on
// SWITCHYARD_WORKER_PORT (runtime/worker-http.ts); `migrate` has no listener and is
// healthy while it runs. Exit 0: healthy, 1: not. Plain JavaScript: it runs without tsx.
import { readFileSync } from 'node:fs';

const DEADLINE_MS = 2500;

function role() {
  try {
    const argv = readFileSync('/proc/1/cmdline', 'utf8').split('\0');
    const entry = argv.find((a) => /(^|\/)bin\/(api|worker|migrate)\.ts$/.test(a));
    return entry?.match(/(api|worker|migrate)\.ts$/)?.[1];
  } catch {
    return undefined;
  }
}

function url(port) {
  const bound = process.env.HOST ?? '127.0.0.1';
  const host = ['', '0.0.0.0', '::'].includes(bound) ? '127.0.0.1' : bound;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}/healthz`;
}

async function healthy(port) {
  try {
    const res = await fetch(url(port), { signal: AbortSignal.timeout(DEADLINE_MS) });
    return res.ok;
  } catch {
    return false;
  }
}

const which = role();
let ok;
switch (which) {
  case 'migrate':
    ok = true;
    break;
  case 'api':
    ok = await healthy(process.env.PORT || '3000');
    break;
  case 'worker': {
    const port = process.env.SWITCHYARD_WORKER_PORT || '9464';
    // 0 turns the worker's HTTP server off: nothing to ask, so nothing to fail on.
    ok = port === '0' ? true : await healthy(port);
    break;
  }
  default:
    // Some other command (`docker run … switchyard node -v`): not ours to judge.
    ok = true;
}
process.exit(ok ? 0 : 1);
