import { readFileSync } from 'node:fs';
import { Client, Connection, type ConnectionOptions } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import { NativeConnection, type NativeConnectionOptions } from '@temporalio/worker';
import type { Env } from '../config/env';

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

export function connectWorkerConnection(env: Env, address: string): Promise<NativeConnection> {
  return NativeConnection.connect(temporalConnectionOptions(env, address));
}
