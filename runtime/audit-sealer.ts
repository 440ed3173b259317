import type { Sql } from 'postgres';
import { pendingAuditTenants, type SealResult, sealAudit } from '../db/queries/audit-seal';
import type { Logger } from '../lib/log';
import type { Metrics } from '../telemetry/metrics';

// The worker's background sealer: every `everyMs` it lists the tenants with pending audit entries
// (audit_pending_tenants) and seals each (audit_seal, migration 0030) without waiting for a chain
// another process is sealing or an admin request is appending to (that tenant is taken up again in
// the next pass). Any number of worker processes may run one: the chain lock decides who seals a
// tenant at a time. The order within a chain is the order entries are sealed in — commit order up
// to one pass (an entry whose transaction commits after a pass goes into a later one, behind
// entries with higher pending ids), whichever process seals. Housekeeping and verification seal
// too, so a tenant is never left unsealed because no worker runs.
// A tenant whose sealing was refused (a pending entry's mac does not hold) or failed is left out
// of the listing for `backoffMs`: its oldest entry never leaves, so it would sort first in every
// pass and, with enough of them, take all of a pass's tenants from the rest. An operator
// quarantine (audit_quarantine) seals what follows the refused entry itself.

/** Tenants taken per pass; the rest (the most recently written) wait for the next one. */
const TENANTS_PER_PASS = 200;
/** How long a refused (or failing) tenant is left out before it is tried again. */
const BACKOFF_MS = 60_000;

export interface AuditSealer {
  /** Stops the loop after the pass under way, then seals once more (entries of drained activities). */
  close(): Promise<void>;
}

export function startAuditSealer(p: {
  sql: Sql;
  log: Logger;
  everyMs: number;
  metrics?: Pick<Metrics, 'auditSealed'>;
  tenantsPerPass?: number;
  backoffMs?: number;
  now?: () => number;
}): AuditSealer {
  const now = p.now ?? Date.now;
  const tenantsPerPass = p.tenantsPerPass ?? TENANTS_PER_PASS;
  const backoffMs = p.backoffMs ?? BACKOFF_MS;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let running: Promise<void> = Promise.resolve();
  /** Refusals already reported, so a stuck tenant is logged once per row, not once per pass. */
  const reported = new Set<string>();
  /** Tenants left out of the listing, until when. */
  const backingOff = new Map<string, number>();

  const sealTenant = async (tenantId: string): Promise<SealResult | null> => {
    try {
      return await sealAudit(p.sql, tenantId, { role: 'tenant_app_writer', wait: false });
    } catch (err) {
      p.log.warn(
        { tenant_id: tenantId, err: String(err) },
        'audit sealing failed; the tenant is retried later',
      );
      return null;
    }
  };

  const pass = async () => {
    const t = now();
    for (const [tenantId, until] of backingOff) if (until <= t) backingOff.delete(tenantId);
    let tenants: string[];
    try {
      tenants = await pendingAuditTenants(p.sql, tenantsPerPass, [...backingOff.keys()]);
    } catch (err) {
      p.log.warn({ err: String(err) }, 'could not list tenants with pending audit entries');
      return;
    }
    for (const tenantId of tenants) {
      const r = await sealTenant(tenantId);
      if (!r || r.refused) backingOff.set(tenantId, now() + backoffMs);
      if (!r) continue;
      if (r.sealed > 0) p.metrics?.auditSealed.inc({ outcome: 'sealed' }, r.sealed);
      if (r.refused && !reported.has(`${tenantId}/${r.refused}`)) {
        reported.add(`${tenantId}/${r.refused}`);
        p.metrics?.auditSealed.inc({ outcome: 'refused' });
        p.log.error(
          { tenant_id: tenantId, audit_id: r.refused },
          "audit sealing refused: a pending entry's mac does not hold (edited or written without the key); the tenant's later entries stay pending until it is quarantined",
        );
      }
    }
  };

  const schedule = () => {
    if (closed) return;
    timer = setTimeout(() => {
      running = pass().finally(schedule);
    }, p.everyMs);
    timer.unref();
  };
  schedule();

  return {
    async close() {
      closed = true;
      clearTimeout(timer);
      await running;
      await pass();
    },
  };
}
