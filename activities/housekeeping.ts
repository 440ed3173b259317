import { isTransientDbError } from '../db/errors';
import { pendingAuditTenants, sealAudit } from '../db/queries/audit-seal';
import { auditRetentionPrune, housekeepingPrune } from '../db/queries/housekeeping';
import { pruneSecurityEvents } from '../db/queries/ingress';
import { pruneArtifacts } from './artifact-retention';
import type { ActivityDeps } from './deps';

// Housekeeping (run by the housekeeping workflow on a Temporal Schedule): sealing of pending audit
// entries (the backstop behind the workers' sealers, runtime/audit-sealer.ts), audit retention per
// tenant (the chain stays verifiable from the signed checkpoint it leaves), artifact retention per
// tenant (activities/artifact-retention.ts: object and row), and pruning of the security sink,
// rate-limit windows and replay guards. Each part is bounded per run; what is left
// goes in the next run. The report is the workflow's result, visible in the Web UI, and counted in
// switchyard_housekeeping_* metrics.

export interface HousekeepingOptions {
  /** Rows per table (per tenant for audit) per run. */
  batchSize: number;
  /** Security events older than this are removed (at least an hour). */
  securityRetentionSeconds: number;
  /** Artifacts per tenant per run (each one a store call, so fewer than rows of the other parts). */
  artifactBatchSize: number;
}

export const HOUSEKEEPING_DEFAULTS: HousekeepingOptions = {
  batchSize: 10_000,
  securityRetentionSeconds: 7 * 24 * 3600,
  artifactBatchSize: 500,
};

/** Artifact retention starts no new tenant after this long (the activity's timeout is 5 minutes). */
const ARTIFACT_BUDGET_MS = 120_000;

export interface HousekeepingReport {
  /** pending audit entries sealed into their chains by this run */
  auditSealed: number;
  /** tenants whose sealing stopped at a pending entry whose mac does not hold (an operator looks) */
  auditSealRefused: number;
  /** tenants whose sealing raised (left pending for the next run; the others are sealed regardless) */
  auditSealFailed: number;
  auditRowsRemoved: number;
  auditTenants: number;
  /** tenants left alone: the row a checkpoint would name does not verify (an operator looks) */
  auditRefused: number;
  /** artifacts removed (object and row) past their tenant's artifact_retention_days */
  artifactsRemoved: number;
  artifactBytesRemoved: number;
  artifactTenants: number;
  /** stores (tenant, backend profile) that failed or were refused (store_moved); their rows stay marked */
  artifactStoreFailures: number;
  securityEvents: number;
  rateLimitWindows: number;
  replayGuards: number;
}

export function housekeepingActivities(deps: ActivityDeps) {
  /** Every tenant's pending entries, up to `limit` per tenant (waiting for a chain another sealer holds). */
  async function sealPending(limit: number): Promise<{ sealed: number; refused: number; failed: number }> {
    let sealed = 0;
    let refused = 0;
    let failed = 0;
    for (const tenantId of await pendingAuditTenants(deps.sql, 10_000)) {
      // One tenant's fault (a raising trigger, a lock timeout) must not leave every other tenant's
      // entries unsealed and the retention and pruning parts of this run undone: it is logged,
      // counted and retried by the next run and by the workers' sealers. Only the failing batch is
      // undone (sealAudit commits per batch: earlier batches of that tenant stay sealed, uncounted
      // here). A lost database is no one tenant's fault: it fails the run, which Temporal retries.
      let r: Awaited<ReturnType<typeof sealAudit>>;
      try {
        r = await sealAudit(deps.sql, tenantId, {
          role: 'tenant_app_writer',
          wait: true,
          maxRows: limit,
        });
      } catch (err) {
        if (isTransientDbError(err)) throw err;
        failed += 1;
        deps.metrics?.auditSealed.inc({ outcome: 'failed' });
        deps.log.warn(
          { tenant_id: tenantId, err: String(err) },
          'audit sealing failed; the tenant is retried by the next run',
        );
        continue;
      }
      sealed += r.sealed;
      if (r.refused) {
        refused += 1;
        deps.metrics?.auditSealed.inc({ outcome: 'refused' });
        deps.log.error(
          { tenant_id: tenantId, audit_id: r.refused },
          "audit sealing refused: a pending entry's mac does not hold",
        );
      }
    }
    deps.metrics?.auditSealed.inc({ outcome: 'sealed' }, sealed);
    return { sealed, refused, failed };
  }

  return {
    async housekeep(opts: Partial<HousekeepingOptions> = {}): Promise<HousekeepingReport> {
      const o = { ...HOUSEKEEPING_DEFAULTS, ...opts };
      const sealing = await sealPending(o.batchSize);
      const audit = await auditRetentionPrune(deps.sql, o.batchSize);
      const artifacts = await pruneArtifacts(deps, {
        batchSize: o.artifactBatchSize,
        budgetMs: ARTIFACT_BUDGET_MS,
      });
      const securityEvents = await pruneSecurityEvents(deps.sql, {
        retentionSeconds: o.securityRetentionSeconds,
        limit: o.batchSize,
      });
      const other = await housekeepingPrune(deps.sql, o.batchSize);
      const report: HousekeepingReport = {
        auditSealed: sealing.sealed,
        auditSealRefused: sealing.refused,
        auditSealFailed: sealing.failed,
        auditRowsRemoved: audit.reduce((n, a) => n + a.removed, 0),
        auditTenants: audit.filter((a) => a.removed > 0).length,
        auditRefused: audit.filter((a) => a.refused).length,
        artifactsRemoved: artifacts.removed,
        artifactBytesRemoved: artifacts.bytes,
        artifactTenants: artifacts.tenants,
        artifactStoreFailures: artifacts.storeFailures,
        securityEvents,
        rateLimitWindows: other.rate_limit_windows,
        replayGuards: other.replay_guards,
      };
      for (const a of audit.filter((x) => x.refused)) {
        deps.log.warn(
          { tenant_id: a.tenant_id, upto_seq: a.upto_seq },
          'audit retention refused: the boundary row does not verify',
        );
      }
      deps.log.info({ ...report }, 'housekeeping run');
      const m = deps.metrics;
      m?.housekeepingRuns.inc({ outcome: report.auditRefused > 0 ? 'audit_refused' : 'ok' });
      m?.housekeepingRemoved.inc({ part: 'audit_rows' }, report.auditRowsRemoved);
      m?.housekeepingRemoved.inc({ part: 'artifacts' }, report.artifactsRemoved);
      m?.housekeepingRemoved.inc({ part: 'security_events' }, report.securityEvents);
      m?.housekeepingRemoved.inc({ part: 'rate_limit_windows' }, report.rateLimitWindows);
      m?.housekeepingRemoved.inc({ part: 'replay_guards' }, report.replayGuards);
      return report;
    },
  };
}
