import { readFileSync } from 'node:fs';
import { Client, Connection, type ConnectionOptions } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import {
  makeTelemetryFilterString,
  NativeConnection,
  type NativeConnectionOptions,
  Runtime,
} from '@temporalio/worker';
import type { Env } from '../config/env';
import type { Logger } from '../lib/log';
import { temporalLogger } from './temporal-logger';

/** Connection settings for self-hosted Temporal or Temporal Cloud (address, namespace, mTLS or API key). */
export function temporalConnectionOptions(
  env: Env,
  address: string,
): ConnectionOptions & NativeConnectionOptions {
  const tls =
    env.TEMPORAL_TLS || env.TEMPORAL_TLS_CLIENT_CERT_PATH || env.TEMPORAL_API_KEY
      ? {
          serverNameOverride: env.TEMPORAL_TLS_SERVER_NAME,
          serverRootCACertificate: env.TEMPORAL_TLS_SERVER_CA_CERT_PATH
            ? readFileSync(env.TEMPORAL_TLS_SERVER_CA_CERT_PATH)
            : undefined,
          clientCertPair:
            env.TEMPORAL_TLS_CLIENT_CERT_PATH && env.TEMPORAL_TLS_CLIENT_KEY_PATH
              ? {
                  crt: readFileSync(env.TEMPORAL_TLS_CLIENT_CERT_PATH),
                  key: readFileSync(env.TEMPORAL_TLS_CLIENT_KEY_PATH),
                }
              : undefined,
        }
      : undefined;
  return { address, tls, apiKey: env.TEMPORAL_API_KEY };
}

export async function connectClient(
  env: Env,
  address: string,
  opts: { tracing?: boolean } = {},
): Promise<Client> {
  const connection = await Connection.connect(temporalConnectionOptions(env, address));
  return new Client({
    connection,
    namespace: env.TEMPORAL_NAMESPACE,
    // Propagates the webhook's trace context into the workflow it starts.
    interceptors: opts.tracing ? { workflow: [new OpenTelemetryWorkflowClientInterceptor()] } : undefined,
  });
}

/**
 * Installs the Temporal SDK's process-wide Runtime: its logger is ours (runtime/temporal-logger.ts:
 * the SDK's lines, Core's forwarded WARN and up, activity and workflow `log`, all as pino JSON), and
 * unless SWITCHYARD_TEMPORAL_METRICS_PORT is 0, Core's Prometheus exporter on HOST:that port (its
 * own listener and /metrics: Core's worker, poller, slot and request metrics, `temporal_`
 * prefixed, durations in ms as Temporal's dashboards expect). Call once, before the first
 * NativeConnection (which would install a default Runtime); never from tests, which share one
 * process-wide Runtime. Throws a readable error when Core cannot listen (a taken port; a HOST
 * that is not an IP address).
 */
export function installTemporalRuntime(env: Env, log: Logger): void {
  const logger = temporalLogger(log);
  // Core's own lines (connection, polling) are forwarded to that logger instead of stderr text.
  const logging = { filter: makeTelemetryFilterString({ core: 'WARN', other: 'ERROR' }), forward: {} };
  if (env.SWITCHYARD_TEMPORAL_METRICS_PORT === 0) {
    Runtime.install({ logger, telemetryOptions: { logging } });
    return;
  }
  // Core takes a socket address, not a host name.
  const ip = env.HOST === 'localhost' ? '127.0.0.1' : env.HOST;
  const bindAddress = `${ip.includes(':') ? `[${ip}]` : ip}:${env.SWITCHYARD_TEMPORAL_METRICS_PORT}`;
  try {
    Runtime.install({ logger, telemetryOptions: { logging, metrics: { prometheus: { bindAddress } } } });
  } catch (err) {
    throw new Error(
      `cannot serve the Temporal SDK metrics on ${bindAddress} (${(err as Error).message}); set ` +
        'SWITCHYARD_TEMPORAL_METRICS_PORT to a free port, or 0 to turn it off (HOST must be an IP address)',
    );
  }
}

export function connectWorkerConnection(env: Env, address: string): Promise<NativeConnection> {
  return NativeConnection.connect(temporalConnectionOptions(env, address));
}
