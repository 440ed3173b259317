import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/activity';
import type { TransactionSql } from 'postgres';
import {
  type ArtifactRow,
  type BackendArtifacts,
  backendArtifacts,
  insertArtifact,
  objectStorageSecret,
} from '../db/queries/artifacts';
import type { ArtifactDirection, ArtifactKind } from '../db/schema/artifact';
import { withTenantTx } from '../db/tx';
import { ArtifactsConfig } from '../lib/artifact-config';
import { type ArtifactStore, artifactKey, filesystemStore, s3Store } from '../lib/artifact-store';
import { sha256Hex } from '../lib/digest';
import { secretAad } from '../lib/secret-box';
import type { ActivityDeps } from './deps';

/** A backend profile's artifact store, opened for one activity attempt. */
export interface OpenedStore {
  profileId: string;
  config: ArtifactsConfig;
  store: ArtifactStore;
}

/** What opening a store needs from the database, read in the caller's transaction. */
export async function loadStoreInputs(tx: TransactionSql, tenantId: string, profileId: string) {
  const backend = await backendArtifacts(tx, tenantId, profileId);
  if (!backend) return null;
  const ref = (backend.artifacts as { credentials_secret_ref?: unknown }).credentials_secret_ref;
  const sealed = typeof ref === 'string' ? await objectStorageSecret(tx, tenantId, ref) : null;
  return { backend, secretRef: typeof ref === 'string' ? ref : null, sealed };
}

/**
 * Opens the store a profile configures. A profile whose `artifacts` no longer parse, or whose S3
 * credentials secret is missing, is a configuration error (permanent), never a silent fallback.
 */
export function openStore(
  deps: ActivityDeps,
  tenantId: string,
  inputs: {
    backend: BackendArtifacts;
    secretRef: string | null;
    sealed: { key_id: string; ciphertext: Buffer } | null;
  },
): OpenedStore {
  const parsed = ArtifactsConfig.safeParse(inputs.backend.artifacts);
  if (!parsed.success)
    throw ApplicationFailure.nonRetryable(
      'the backend profile has an invalid artifacts config',
      'ConfigurationError',
    );
  const config = parsed.data;
  const dataDir = deps.artifacts?.dataDir ?? '.data';
  if (config.provider === 'filesystem')
    return {
      profileId: inputs.backend.profile_id,
      config,
      store: filesystemStore(join(dataDir, 'artifacts')),
    };
  let credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } | null = null;
  if (inputs.secretRef) {
    if (!inputs.sealed)
      throw ApplicationFailure.nonRetryable(
        'the artifacts credentials secret is missing or disabled',
        'ConfigurationError',
      );
    const value = JSON.parse(
      deps.secrets.open(
        inputs.sealed.ciphertext,
        secretAad(tenantId, inputs.secretRef),
        inputs.sealed.key_id,
      ),
    ) as { access_key_id?: string; secret_access_key?: string; session_token?: string };
    credentials = {
      accessKeyId: String(value.access_key_id ?? ''),
      secretAccessKey: String(value.secret_access_key ?? ''),
      ...(value.session_token ? { sessionToken: value.session_token } : {}),
    };
  }
  const endpoint = config.endpoint ?? null;
  const trusted =
    endpoint !== null && (deps.artifacts?.trustedEndpoints ?? []).includes(new URL(endpoint).origin);
  return {
    profileId: inputs.backend.profile_id,
    config,
    store: s3Store({
      endpoint,
      bucket: config.bucket!,
      region: config.region ?? 'us-east-1',
      forcePathStyle: config.force_path_style ?? false,
      credentials,
      operatorTrusted: trusted,
      timeoutMs: Math.max(deps.sendTimeoutMs, 10_000),
    }),
  };
}

export async function openStoreFor(
  deps: ActivityDeps,
  tenantId: string,
  profileId: string,
): Promise<OpenedStore> {
  const inputs = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, (tx) =>
    loadStoreInputs(tx, tenantId, profileId),
  );
  if (!inputs) throw ApplicationFailure.nonRetryable('the backend profile is missing', 'ConfigurationError');
  return openStore(deps, tenantId, inputs);
}

/**
 * Stores the bytes under `<tenant>/<artifact id>`, then records the row (digest, size, key): a row
 * always names a stored object. A put that failed is undone as far as the store allows, so no
 * object is left without its row (StorageError propagates with its reason class).
 */
export async function storeArtifact(
  deps: ActivityDeps,
  opened: OpenedStore,
  a: {
    tenantId: string;
    eventId: string;
    artifactId: string;
    direction: ArtifactDirection;
    kind: ArtifactKind;
    contentType: string;
    bytes: Uint8Array;
    fileName: string | null;
    sourceRef: string | null;
  },
): Promise<ArtifactRow> {
  const key = artifactKey(a.tenantId, a.artifactId);
  try {
    await opened.store.put(key, a.bytes, a.contentType);
  } catch (err) {
    await opened.store.delete(key).catch(() => undefined);
    throw err;
  }
  return withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId: a.tenantId }, (tx) =>
    insertArtifact(tx, a.tenantId, {
      artifact_id: a.artifactId,
      event_id: a.eventId,
      direction: a.direction,
      kind: a.kind,
      content_type: a.contentType,
      size_bytes: a.bytes.byteLength,
      content_digest: sha256Hex(Buffer.from(a.bytes.buffer, a.bytes.byteOffset, a.bytes.byteLength)),
      content_ref: key,
      storage: opened.store.storage,
      backend_profile_id: opened.profileId,
      file_name: a.fileName,
      source_ref: a.sourceRef,
    }),
  );
}
