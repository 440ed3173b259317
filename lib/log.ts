import pino, { type Logger } from 'pino';
import { logMixin } from './log-context';

export type { Logger };

// Secrets never reach a log line: these keys are redacted at the top level and up to two
// levels down (pino's paths match one level each: `*.token` misses `token` and `a.b.token`), and
// call sites log ids and classes, never bodies or credentials.
const SECRET_KEYS = [
  'authorization',
  'token',
  'bot_token',
  'webhook_secret_token',
  'corp_secret',
  'encoding_aes_key',
  'access_token',
  'api_key',
];
const SECRET_HEADER = '["x-telegram-bot-api-secret-token"]';
const REDACT = [
  ...SECRET_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`]),
  // Header maps (`headers`, `req.headers`): under any key at the top or one level down.
  `*${SECRET_HEADER}`,
  `*.*${SECRET_HEADER}`,
  // A sealed secret's fields (`{ key, value }`) one level down; top-level `key`/`value` stay
  // loggable (a config key, a counter).
  '*.value',
  '*.key',
];

/**
 * The one logger of a process. Every line carries the correlation fields of the request or
 * activity it was logged in (lib/log-context.ts). `destination`: tests capture lines in memory.
 */
export function createLogger(opts: {
  level: string;
  name?: string;
  destination?: pino.DestinationStream;
}): Logger {
  const options: pino.LoggerOptions = {
    level: opts.level,
    name: opts.name ?? 'switchyard',
    redact: { paths: REDACT, censor: '[redacted]' },
    base: undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin: logMixin,
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}
