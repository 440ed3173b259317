import type { ConnectionLike } from '@temporalio/client';
import { ConfigError, type Env, loadEnv } from '../config/env';
import type { Logger } from '../lib/log';
import { requireSearchAttributes, SearchAttributesMissing } from './search-attributes';

/** Parses the environment or exits with a readable message (exit code 2). */
export function loadEnvOrExit(): Env {
  try {
    return loadEnv();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
}

/** For the scale-out entry points, which never fall back to embedded services. */
export function requireSettings<K extends keyof Env>(
  env: Env,
  keys: readonly K[],
  why: string,
): Env & { [P in K]-?: NonNullable<Env[P]> } {
  const missing = keys.filter((k) => env[k] === undefined || env[k] === '');
  if (missing.length > 0) {
    console.error(
      `Invalid configuration:\n${missing.map((k) => `  ${String(k)}: required ${why}`).join('\n')}`,
    );
    process.exit(2);
  }
  return env as never;
}

/**
 * Refuses to start (exit 2) when the Temporal namespace lacks Switchyard's custom search
 * attributes, naming them and the commands that register them; a server that will not say (the
 * operator API refused) gets a warning and the process starts.
 */
export async function requireSearchAttributesOrExit(
  connection: ConnectionLike,
  namespace: string,
  log: Logger,
): Promise<void> {
  try {
    const check = await requireSearchAttributes(connection, namespace);
    if (!check.verified)
      log.warn(
        { namespace, reason: check.reason },
        'could not list the Temporal search attributes; starting anyway',
      );
  } catch (err) {
    if (!(err instanceof SearchAttributesMissing)) throw err;
    log.error({ namespace }, err.message);
    process.exit(2);
  }
}

/**
 * Runs the stop callbacks (last started, first stopped) on SIGINT/SIGTERM; exits 1 if they take
 * longer than `deadlineMs` (default 30 s; an entry point with a drain or grace period adds it).
 */
export function onShutdown(
  stops: (() => Promise<void>)[],
  log: { info(msg: string): void; error(o: object, msg: string): void },
  opts: { deadlineMs?: number } = {},
) {
  let stopping = false;
  const shutdown = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log.info('shutting down');
    const timer = setTimeout(() => {
      log.error({ deadlineMs: opts.deadlineMs ?? 30_000 }, 'shutdown took too long; exiting');
      process.exit(1);
    }, opts.deadlineMs ?? 30_000);
    for (const stop of [...stops].reverse()) {
      await stop().catch((err: unknown) => log.error({ err: String(err) }, 'stop failed'));
    }
    clearTimeout(timer);
    process.exit(code);
  };
  process.on('SIGINT', () => void shutdown(0));
  process.on('SIGTERM', () => void shutdown(0));
  return shutdown;
}
