import { ConfigError, type Env, loadEnv } from '../config/env';

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

/** Runs the stop callbacks (last started, first stopped) on SIGINT/SIGTERM, within 30 s. */
export function onShutdown(
  stops: (() => Promise<void>)[],
  log: { info(msg: string): void; error(o: object, msg: string): void },
) {
  let stopping = false;
  const shutdown = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log.info('shutting down');
    const timer = setTimeout(() => process.exit(1), 30_000);
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
