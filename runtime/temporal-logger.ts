import type { LogLevel, LogMetadata, Logger as TemporalLogger } from '@temporalio/worker';
import type { Logger } from '../lib/log';

/**
 * The Temporal SDK's Runtime logger, written through pino: the SDK's own lines, Core's forwarded
 * ones, activity `Context.log` and workflow `log` (replay-aware, delivered by the SDK's default
 * logger sink) come out as the same JSON as ours, in a `component: "temporal"` child. The SDK's
 * meta (sdkComponent, workflowId, activityType, …) becomes the line's fields; pino's redaction
 * applies to it as to every line.
 */
export function temporalLogger(log: Logger): TemporalLogger {
  const child = log.child({ component: 'temporal' });
  const write = (level: LogLevel, message: string, meta?: LogMetadata): void => {
    child[pinoLevel(level)](meta ?? {}, message);
  };
  return {
    log: write,
    trace: (message, meta) => write('TRACE', message, meta),
    debug: (message, meta) => write('DEBUG', message, meta),
    info: (message, meta) => write('INFO', message, meta),
    warn: (message, meta) => write('WARN', message, meta),
    error: (message, meta) => write('ERROR', message, meta),
  };
}

export function pinoLevel(level: LogLevel): 'trace' | 'debug' | 'info' | 'warn' | 'error' {
  switch (level) {
    case 'TRACE':
      return 'trace';
    case 'DEBUG':
      return 'debug';
    case 'INFO':
      return 'info';
    case 'WARN':
      return 'warn';
    case 'ERROR':
      return 'error';
    default: {
      const _exhaustive: never = level;
      // Outside the SDK's type (a newer Core?): logged rather than thrown, a logger never throws.
      return 'warn';
    }
  }
}
