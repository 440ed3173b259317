import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/activity';
import {
  artifactRetentionTenants,
  deleteMarkedArtifacts,
  type MarkedArtifact,
  markExpiredArtifacts,
} from '../db/queries/artifact-retention';
import { withTenantTx } from '../db/tx';
import { type ArtifactStore, filesystemStore, StorageError } from '../lib/artifact-store';
import { openStoreFor } from './artifacts';
import type { ActivityDeps } from './deps';

// Artifact retention, a housekeeping part: per tenant, artifacts older than the tenant's
// artifact_retention_days go — the object in the store the artifact was written to (through the
// tenant's backend profile, credentials by its secret reference), then the row. Per row the order is
// mark (one statement for the batch) → delete the object → delete the row, so a crash anywhere leaves
// a marked row, which the next run takes first; an object already gone counts as deleted. A store
// that fails (or a profile that no longer opens) is skipped for the rest of this run, its rows stay
// marked for the next; the tenant's other stores (filesystem, other profiles) go on. A row whose
// profile now points at another bucket or endpoint than the one it was written to (store_location)
// is never deleted through it: deleting there "succeeds" and leaves the real object for ever.
// Kept whatever their age: see artifact_still_needed (migrations 0040, 0043).

export interface ArtifactRetentionOptions {
  /** Artifacts per tenant per run. */
  batchSize: number;
  /** No new tenant is started after this long; the rest go in the next run. */
  budgetMs: number;
}

/** A store of a tenant that did not delete this run: its rows stay marked for the next. */
export interface StoreFailure {
  tenantId: string;
  backendProfileId: string;
  storage: MarkedArtifact['storage'];
  reasonClass: FailureReason;
  /** marked rows of this store left for the next run */
  left: number;
}

export interface ArtifactRetentionReport {
  removed: number;
  bytes: number;
  tenants: number;
  /** stores (tenant, profile) that failed or were refused this run (their marked rows wait) */
  storeFailures: number;
  /** the first MAX_REPORTED_FAILURES of them */
  failures: StoreFailure[];
}

/** A store's reason class, or the profile's: no longer opens, or points elsewhere than the row. */
type FailureReason = StorageError['reasonClass'] | 'store_moved';

/** Tenants considered per run (the listing's cap). */
const MAX_TENANTS_PER_RUN = 10_000;
/** Failures named in the report (all are counted and logged). */
const MAX_REPORTED_FAILURES = 100;

export async function pruneArtifacts(
  deps: ActivityDeps,
  opts: ArtifactRetentionOptions,
): Promise<ArtifactRetentionReport> {
  const started = performance.now();
  const report: ArtifactRetentionReport = {
    removed: 0,
    bytes: 0,
    tenants: 0,
    storeFailures: 0,
    failures: [],
  };
  for (const tenantId of await artifactRetentionTenants(deps.sql, MAX_TENANTS_PER_RUN)) {
    if (performance.now() - started > opts.budgetMs) break;
    const r = await pruneTenant(deps, tenantId, opts.batchSize);
    report.removed += r.removed;
    report.bytes += r.bytes;
    if (r.removed > 0) report.tenants += 1;
    for (const f of r.failures) {
      report.storeFailures += 1;
      if (report.failures.length < MAX_REPORTED_FAILURES) report.failures.push(f);
      deps.metrics?.housekeepingArtifactFailures.inc({ reason_class: f.reasonClass });
      deps.log.warn(
        {
          tenant_id: tenantId,
          backend_profile_id: f.backendProfileId,
          storage: f.storage,
          reason_class: f.reasonClass,
          left: f.left,
        },
        f.reasonClass === 'store_moved'
          ? "artifact retention refused: the backend profile no longer points at the objects' store; they stay marked"
          : 'artifact retention skipped a store that failed; its rows are retried next run',
      );
    }
  }
  return report;
}

async function pruneTenant(
  deps: ActivityDeps,
  tenantId: string,
  limit: number,
): Promise<{ removed: number; bytes: number; failures: StoreFailure[] }> {
  const asApp = { role: 'tenant_app_writer' as const, tenantId };
  const marked = await withTenantTx(deps.sql, asApp, (tx) => markExpiredArtifacts(tx, tenantId, limit));
  const stores = new Map<string, ArtifactStore>();
  const gone: MarkedArtifact[] = [];
  // Per store (storage and profile): the first failure skips the store's other rows this run.
  const failed = new Map<string, StoreFailure>();
  const fail = (a: MarkedArtifact, key: string, reasonClass: FailureReason) => {
    const f = failed.get(key) ?? {
      tenantId,
      backendProfileId: a.backend_profile_id,
      storage: a.storage,
      reasonClass,
      left: 0,
    };
    f.left += 1;
    failed.set(key, f);
  };
  for (const a of marked) {
    const key = storeKeyOf(a);
    const down = failed.get(key);
    if (down) {
      down.left += 1;
      continue;
    }
    let store: ArtifactStore;
    try {
      store = await storeOf(deps, tenantId, a, stores);
    } catch (err) {
      fail(a, key, failureOf(err));
      continue;
    }
    // Written elsewhere than the profile points now: refused, kept marked (the operator's call).
    if (a.store_location !== null && store.location !== a.store_location) {
      fail(a, `${key}:moved`, 'store_moved');
      continue;
    }
    try {
      await store.delete(a.content_ref);
      gone.push(a);
    } catch (err) {
      fail(a, key, failureOf(err));
    }
  }
  const removed = await withTenantTx(deps.sql, asApp, (tx) =>
    deleteMarkedArtifacts(
      tx,
      tenantId,
      gone.map((a) => a.artifact_id),
    ),
  );
  return { removed, bytes: gone.reduce((n, a) => n + a.size_bytes, 0), failures: [...failed.values()] };
}

const storeKeyOf = (a: MarkedArtifact) => `${a.storage}:${a.backend_profile_id}`;

/**
 * A store that fails, or a profile that no longer opens (openStore's ConfigurationError). Anything
 * else (the database) fails the activity: what is marked is taken up by the retry.
 */
function failureOf(err: unknown): FailureReason {
  if (err instanceof StorageError) return err.reasonClass;
  if (err instanceof ApplicationFailure) return 'storage_misconfigured';
  throw err;
}

/**
 * The store the artifact was written to. Filesystem objects are under the data dir whatever the
 * profile says now; an S3 object needs the profile (bucket, endpoint, credentials), and a profile
 * no longer on S3 cannot reach it: a configuration failure, the row stays marked. Whether the
 * profile still points at the row's bucket and endpoint is the caller's check (store_location).
 */
async function storeOf(
  deps: ActivityDeps,
  tenantId: string,
  a: MarkedArtifact,
  cache: Map<string, ArtifactStore>,
): Promise<ArtifactStore> {
  const key = storeKeyOf(a);
  const cached = cache.get(key);
  if (cached) return cached;
  let store: ArtifactStore;
  if (a.storage === 'filesystem') {
    store = filesystemStore(join(deps.artifacts?.dataDir ?? '.data', 'artifacts'));
  } else {
    store = (await openStoreFor(deps, tenantId, a.backend_profile_id)).store;
    if (store.storage !== 's3')
      throw new StorageError('storage_misconfigured', 'the backend profile no longer stores artifacts in s3');
  }
  cache.set(key, store);
  return store;
}
