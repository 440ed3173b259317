import pino, { type Logger } from 'pino';

export type { Logger };

// Secrets never reach a log line: these paths are redacted wherever they appear, and call
// sites log ids and classes, never bodies or credentials.
const REDACT = [
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'headers["x-telegram-bot-api-secret-token"]',
  '*.headers["x-telegram-bot-api-secret-token"]',
  '*.token',
  '*.bot_token',
  '*.webhook_secret_token',
  '*.corp_secret',
  '*.encoding_aes_key',
  '*.access_token',
  '*.api_key',
  '*.value',
  '*.key',
];

export function createLogger(opts: { level: string; name?: string }): Logger {
  return pino({
    level: opts.level,
    name: opts.name ?? 'switchyard',
    redact: { paths: REDACT, censor: '[redacted]' },
    base: undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
