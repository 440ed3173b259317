import { ApplicationFailure } from '@temporalio/activity';
import {
  type ArtifactRow,
  artifactRowOf,
  artifactStoreInputs,
  insertArtifact,
} from '../db/queries/artifacts';
import type { ArtifactDirection, ArtifactKind } from '../db/schema/artifact';
import { withTenantTx } from '../db/tx';
import {
  ArtifactConfigError,
  type ArtifactStoreInputs,
  type OpenedStore,
  openArtifactStore,
} from '../lib/artifact-open';
import { artifactKey } from '../lib/artifact-store';
import { sha256Hex } from '../lib/digest';
import type { ActivityDeps } from './deps';

export type { OpenedStore };

/**
 * Opens the store a profile configures (lib/artifact-open.ts). A profile whose `artifacts` no
 * longer parse, or whose S3 credentials secret is missing, fails the activity permanently.
 */
export function openStore(deps: ActivityDeps, tenantId: string, inputs: ArtifactStoreInputs): OpenedStore {
  try {
    return openArtifactStore(
      { secrets: deps.secrets, artifacts: deps.artifacts, timeoutMs: deps.sendTimeoutMs },
      tenantId,
      inputs,
    );
  } catch (err) {
    if (err instanceof ArtifactConfigError)
      throw ApplicationFailure.nonRetryable(err.message, 'ConfigurationError');
    throw err;
  }
}

export async function openStoreFor(
  deps: ActivityDeps,
  tenantId: string,
  profileId: string,
): Promise<OpenedStore> {
  const inputs = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, (tx) =>
    artifactStoreInputs(tx, tenantId, profileId),
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
    insertArtifact(
      tx,
      a.tenantId,
      artifactRowOf(opened, {
        ...a,
        sizeBytes: a.bytes.byteLength,
        contentDigest: sha256Hex(a.bytes),
      }),
    ),
  );
}
