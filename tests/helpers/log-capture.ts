import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../lib/log';

export type Line = Record<string, unknown> & { level: number; msg: string };

/** A logger like the processes' own (lib/log.ts), writing its JSON lines to memory. */
export function capturingLogger(): { log: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l) as Line);
      done();
    },
  });
  // pino writes synchronously to a plain stream: a line is in `lines` when the call returns.
  return { log: createLogger({ level: 'trace', destination }), lines };
}
