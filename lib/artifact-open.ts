import { join } from 'node:path';
import { ArtifactsConfig } from './artifact-config';
import { type ArtifactStore, filesystemStore, s3Store } from './artifact-store';
import type { SecretBox } from './secret-box';
import { secretAad } from './secret-box';

// Opening a backend profile's artifact store, for the worker (media in and out) and for the API
// (console uploads land as artifacts before the message is recorded). Both read the same inputs
// in a tenant transaction (db/queries/artifacts.ts artifactStoreInputs); the S3 credentials secret
// is found only with purpose object_storage, and opened here only to build the client.

/** What a process needs to open stores: its secret box and its artifact settings. */
export interface ArtifactStoreEnv {
  secrets: SecretBox;
  /**
   * `filesystem` profiles keep objects under `<dataDir>/artifacts`; `trustedEndpoints` are the
   * origins of SWITCHYARD_ARTIFACT_ENDPOINTS. Absent: `.data`, none trusted.
   */
  artifacts?: { dataDir: string; trustedEndpoints: readonly string[] };
  /** Per-request timeout of the S3 client (at least 10 s). */
  timeoutMs: number;
}

/** The database's part: the profile's `artifacts` and its credentials secret, still sealed. */
export interface ArtifactStoreInputs {
  backend: { profile_id: string; artifacts: Record<string, unknown> };
  secretRef: string | null;
  sealed: { key_id: string; ciphertext: Buffer } | null;
}

/** A backend profile's artifact store, opened for one activity attempt or one request. */
export interface OpenedStore {
  profileId: string;
  config: ArtifactsConfig;
  store: ArtifactStore;
}

/** The profile cannot give a store: its `artifacts` no longer parse, or its credentials are gone. */
export class ArtifactConfigError extends Error {
  override name = 'ArtifactConfigError';
}

/**
 * Opens the store a profile configures. A profile whose `artifacts` no longer parse, or whose S3
 * credentials secret is missing, is a configuration error, never a silent fallback.
 */
export function openArtifactStore(
  env: ArtifactStoreEnv,
  tenantId: string,
  inputs: ArtifactStoreInputs,
): OpenedStore {
  const parsed = ArtifactsConfig.safeParse(inputs.backend.artifacts);
  if (!parsed.success) throw new ArtifactConfigError('the backend profile has an invalid artifacts config');
  const config = parsed.data;
  const profileId = inputs.backend.profile_id;
  if (config.provider === 'filesystem')
    return {
      profileId,
      config,
      store: filesystemStore(join(env.artifacts?.dataDir ?? '.data', 'artifacts')),
    };
  let credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } | null = null;
  if (inputs.secretRef) {
    if (!inputs.sealed)
      throw new ArtifactConfigError('the artifacts credentials secret is missing or disabled');
    const value = openCredentials(env, tenantId, inputs.secretRef, inputs.sealed);
    credentials = {
      accessKeyId: String(value.access_key_id ?? ''),
      secretAccessKey: String(value.secret_access_key ?? ''),
      ...(value.session_token ? { sessionToken: value.session_token } : {}),
    };
  }
  const endpoint = config.endpoint ?? null;
  const trusted =
    endpoint !== null && (env.artifacts?.trustedEndpoints ?? []).includes(new URL(endpoint).origin);
  return {
    profileId,
    config,
    store: s3Store({
      endpoint,
      bucket: config.bucket!,
      region: config.region ?? 'us-east-1',
      forcePathStyle: config.force_path_style ?? false,
      credentials,
      operatorTrusted: trusted,
      timeoutMs: Math.max(env.timeoutMs, 10_000),
    }),
  };
}

/**
 * The S3 credentials secret, opened and parsed. Its failures become one fixed ArtifactConfigError
 * without the cause: callers log and answer with err.message, and JSON.parse's message quotes the
 * input (part of the secret), the secret box's may name the key.
 */
function openCredentials(
  env: ArtifactStoreEnv,
  tenantId: string,
  secretRef: string,
  sealed: { key_id: string; ciphertext: Buffer },
): { access_key_id?: string; secret_access_key?: string; session_token?: string } {
  try {
    const value: unknown = JSON.parse(
      env.secrets.open(sealed.ciphertext, secretAad(tenantId, secretRef), sealed.key_id),
    );
    if (typeof value !== 'object' || value === null) throw new TypeError('not an object');
    return value as { access_key_id?: string; secret_access_key?: string; session_token?: string };
  } catch {
    throw new ArtifactConfigError(
      'the artifacts credentials secret cannot be opened or is not a JSON object',
    );
  }
}
