import { z } from 'zod';

// One schema for every process setting. Entry points call loadEnv() once and pass the
// result down; nothing deeper reads process.env (see STYLE.md, "Config").

const optionalString = z
  .string()
  .trim()
  .transform((v) => (v === '' ? undefined : v))
  .optional();

const port = (fallback: number) => z.coerce.number().int().min(1).max(65535).default(fallback);
/** A port of an optional listener: 0 turns it off. */
const portOrOff = (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback);

const boolish = z
  .enum(['true', 'false', '1', '0', ''])
  .optional()
  .transform((v) => v === 'true' || v === '1');

/**
 * bin/worker.sh's default (keep the two equal): bench:scale's worker stays flat at it over backlogs
 * of 2,000 and 20,000, with room above the ~110 MB live heap for media work (a 20 MB image is,
 * by estimate, about three times its size in strings while its model request is built: base64 and
 * the JSON body; not measured).
 */
export const DEFAULT_WORKER_HEAP_MB = 384;
/** Below this the workflow thread's cache (SWITCHYARD_WORKER_MAX_CACHED_WORKFLOWS) has no room. */
const MIN_WORKER_HEAP_MB = 128;

export const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  HOST: z.string().default('127.0.0.1'),
  PORT: port(3000),
  /** The worker's HTTP server on HOST: /metrics, /healthz, /readyz (runtime/worker-http.ts); 0: off. */
  SWITCHYARD_WORKER_PORT: portOrOff(9464),
  /** The Temporal SDK's own Prometheus metrics (Core's exporter, its /metrics) on HOST; 0: off. */
  SWITCHYARD_TEMPORAL_METRICS_PORT: portOrOff(9465),
  SWITCHYARD_DATA_DIR: z.string().default('.data'),
  SWITCHYARD_ADMIN_TOKEN: optionalString.pipe(
    z.string().min(24, 'must be at least 24 characters').optional(),
  ),
  SWITCHYARD_MASTER_KEY: optionalString.pipe(
    z
      .string()
      .regex(/^[A-Za-z0-9+/]{43}=$/, 'must be 32 bytes, base64-encoded (44 characters)')
      .optional(),
  ),
  SWITCHYARD_SUSPENDED_REPLY: z.string().min(1).default('This service is temporarily unavailable.'),
  /**
   * Outbound calls to tenant-configured URLs: `public_only` refuses internal addresses (default for
   * `npm run worker`), `allow_private` permits them (default for the embedded `npm start`).
   */
  SWITCHYARD_EGRESS: z.enum(['public_only', 'allow_private']).optional(),
  /**
   * Channel api base URLs besides Telegram's and WeCom's own that may answer an activation's
   * ownership proof (comma-separated; `any` only for a sandbox). The embedded default allows any.
   */
  SWITCHYARD_PROOF_API_BASES: optionalString.transform((v, ctx) => {
    if (v === undefined) return undefined;
    if (v === 'any') return 'any' as const;
    const list = v
      .split(',')
      .map((u) => u.trim().replace(/\/+$/, ''))
      .filter(Boolean);
    for (const u of list) {
      if (!/^https?:\/\/[^\s/]+/.test(u)) {
        ctx.addIssue({ code: 'custom', message: 'must be a comma-separated list of http(s) URLs, or any' });
        return z.NEVER;
      }
    }
    return list;
  }),
  /**
   * S3 endpoints of the operator's own (comma-separated http(s) URLs) that backend profiles' artifact
   * stores may reach even when they are internal addresses; any other endpoint is held to
   * SWITCHYARD_EGRESS like a tenant's URL.
   */
  SWITCHYARD_ARTIFACT_ENDPOINTS: optionalString.transform((v, ctx) => {
    const list = (v ?? '')
      .split(',')
      .map((u) => u.trim())
      .filter(Boolean);
    const origins: string[] = [];
    for (const u of list) {
      if (!/^https?:\/\/[^\s/]+/.test(u)) {
        ctx.addIssue({ code: 'custom', message: 'must be a comma-separated list of http(s) URLs' });
        return z.NEVER;
      }
      origins.push(new URL(u).origin);
    }
    return origins;
  }),
  SWITCHYARD_PUBLIC_URL: optionalString.pipe(z.url().optional()),
  /**
   * Reverse proxies of our own between clients and the API. The failed-authentication limiter
   * keys on the socket's address unless this is > 0; then it believes that many X-Forwarded-For
   * entries from the right. Never set it without such proxies: a client could pick its address.
   */
  SWITCHYARD_TRUSTED_PROXY_HOPS: z.coerce.number().int().min(0).max(10).default(0),
  DATABASE_URL: optionalString.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
      .optional(),
  ),
  /**
   * The migrating identity (a superuser, or a member of switchyard_owner) for `npm run migrate` and
   * for `npm start` against an external database; DATABASE_URL is what the API and the worker log
   * in as (switchyard_api / switchyard_worker), never the owner.
   */
  MIGRATION_DATABASE_URL: optionalString.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
      .optional(),
  ),
  /** With these, `npm run migrate` also turns on LOGIN for switchyard_api / switchyard_worker. */
  SWITCHYARD_API_DB_PASSWORD: optionalString.pipe(
    z.string().min(16, 'must be at least 16 characters').optional(),
  ),
  SWITCHYARD_WORKER_DB_PASSWORD: optionalString.pipe(
    z.string().min(16, 'must be at least 16 characters').optional(),
  ),
  SWITCHYARD_PG_PORT: port(54329),
  // The repair sweeper (a Temporal Schedule, runtime/sweeper-schedule.ts): a chat whose head
  // message's workflow ended abnormally is repaired within REPAIR_AFTER_S + SWEEP_PASS_S.
  SWITCHYARD_SWEEP_EVERY_S: z.coerce.number().int().min(10).max(3600).default(60),
  SWITCHYARD_SWEEP_PASS_S: z.coerce.number().int().min(1).max(600).default(5),
  SWITCHYARD_REPAIR_AFTER_S: z.coerce.number().int().min(5).max(86_400).default(60),
  /** Interval of the housekeeping Schedule (audit retention, pruning of ingress tables). */
  SWITCHYARD_HOUSEKEEPING_EVERY_S: z.coerce.number().int().min(60).max(86_400).default(3600),
  /** How often the worker seals the runtime's pending audit entries into their chains (runtime/audit-sealer.ts). */
  SWITCHYARD_AUDIT_SEAL_EVERY_MS: z.coerce.number().int().min(20).max(60_000).default(200),
  SWITCHYARD_MAX_REPAIRS: z.coerce.number().int().min(0).max(20).default(3),
  // Shutdown (SIGTERM): the API answers /readyz 503 and keeps serving for DRAIN_S (so a load
  // balancer stops sending first), then closes its listener; the worker stops polling at once and
  // gives running activities SHUTDOWN_GRACE_S to finish before they are cancelled and handed back.
  SWITCHYARD_DRAIN_S: z.coerce.number().min(0).max(300).default(5),
  SWITCHYARD_SHUTDOWN_GRACE_S: z.coerce.number().min(0).max(600).default(20),
  /** Workflows a worker keeps cached (runtime/worker.ts): bounds its memory whatever the backlog. */
  SWITCHYARD_WORKER_MAX_CACHED_WORKFLOWS: z.coerce.number().int().min(0).max(100_000).default(200),
  /**
   * The worker's V8 heap bound in MB, applied at launch by bin/worker.sh (a heap limit is a launch
   * flag); 0: V8's own limit. Checked here so a bad value refuses to start with a clear message.
   */
  SWITCHYARD_WORKER_HEAP_MB: z.preprocess(
    // Empty is unset, as the launcher's ${…:-default} reads it.
    (v) => (v === '' ? undefined : v),
    z
      .string()
      // What the launcher accepts: digits only (no sign, space, exponent or hex), at most 7.
      .regex(/^\d{1,7}$/, 'must be a whole number of MB')
      .transform(Number)
      .refine((mb) => mb === 0 || (mb >= MIN_WORKER_HEAP_MB && mb <= 1_048_576), {
        message: `must be 0 (V8's own limit) or from ${MIN_WORKER_HEAP_MB} to 1048576 (MB)`,
      })
      .default(DEFAULT_WORKER_HEAP_MB),
  ),
  /**
   * The API's configuration registry (registry/): the longest a cached binding, tenant gate or
   * sealed secret is served without a re-read when version events are lost. 0: no caching.
   */
  SWITCHYARD_REGISTRY_TTL_S: z.coerce.number().min(0).max(300).default(30),
  /**
   * Ingress group commit (api/ingress/record-batcher.ts): record statements an API process runs at
   * once; webhooks arriving meanwhile share the next one. More only helps a database with the
   * cores to run them side by side.
   */
  SWITCHYARD_INGRESS_RECORD_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
  TEMPORAL_ADDRESS: optionalString,
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('switchyard'),
  TEMPORAL_API_KEY: optionalString,
  TEMPORAL_TLS: boolish,
  TEMPORAL_TLS_CLIENT_CERT_PATH: optionalString,
  TEMPORAL_TLS_CLIENT_KEY_PATH: optionalString,
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: optionalString,
  TEMPORAL_TLS_SERVER_NAME: optionalString,
  /** Base of the Temporal Web UI links in admin responses (none when unset; npm start: its dev UI). */
  SWITCHYARD_TEMPORAL_UI_URL: optionalString.pipe(z.url().optional()),
  SWITCHYARD_TEMPORAL_PORT: port(7233),
  SWITCHYARD_TEMPORAL_UI_PORT: port(8233),
  // OpenTelemetry: traces are exported only when one of the standard variables asks for it.
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalString.pipe(z.url().optional()),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optionalString.pipe(z.url().optional()),
  OTEL_TRACES_EXPORTER: z.enum(['otlp', 'console', 'none', '']).optional(),
  OTEL_SERVICE_NAME: optionalString,
  // Sampling (telemetry/sampling.ts): a request is sampled by its tenant's trace_sampling_rate once
  // the tenant is trusted; until then (and when it never is: a rejected webhook, a bad bearer) by
  // this rate, so a flood of forged requests cannot flood the trace backend.
  SWITCHYARD_UNTRUSTED_TRACE_SAMPLING_RATE: z.coerce.number().min(0).max(1).default(0.1),
});

export type Env = z.infer<typeof envSchema>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Settings renamed since they were first read: the former name still counts when the new one is unset. */
const FORMER_NAMES: Record<string, string> = {
  SWITCHYARD_WORKER_PORT: 'SWITCHYARD_WORKER_METRICS_PORT',
  SWITCHYARD_TEMPORAL_UI_URL: 'TEMPORAL_UI_URL',
};

function withFormerNames(source: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out = { ...source };
  for (const [name, former] of Object.entries(FORMER_NAMES))
    if (out[name] === undefined && out[former] !== undefined) out[name] = out[former];
  return out;
}

/** Parses the environment, failing fast with one readable line per bad variable. Values are never echoed. */
export function loadEnv(source: NodeJS.ProcessEnv = process.env): Env {
  const parsed = envSchema.safeParse(withFormerNames(source));
  if (parsed.success) return parsed.data;
  const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(root)'}: ${i.message}`);
  throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
}
