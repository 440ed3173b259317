import type { TransactionSql } from 'postgres';
import type { SessionKind } from '../../channels/inbound';
import type { MessageWorkflowFacts } from '../../lib/workflow-summary';

// What a later start of a message workflow (a sweeper start or repair, an operator's retry) shows
// in the Temporal Web UI (lib/workflow-summary.ts), and the trace its audit entries join.

export interface MessageStartFacts {
  session_kind: SessionKind;
  app_id: string;
  /** the pinned plan's revision, or the app's published one while nothing is pinned */
  revision: number | null;
  trace_id: string | null;
  /** only when asked for: tenant_app_writer may not read the tenant table */
  tenant_key: string | null;
  /** the tenant's, through tenant_runtime_snapshot (either runtime role, the transaction's tenant) */
  trace_sampling_rate: number | null;
}

/** Reads the facts of one message in `tx` (either runtime role); null when there is no such message. */
export async function messageStartFacts(
  tx: TransactionSql,
  p: { tenantId: string; eventId: string; withTenantKey?: boolean },
): Promise<MessageStartFacts | null> {
  const tenantKey = p.withTenantKey
    ? tx`(select t.tenant_key from tenant t where t.tenant_id = e.tenant_id)`
    : tx`null::text`;
  const rows = await tx<MessageStartFacts[]>`
    select s.kind as session_kind, s.app_id,
           coalesce((e.execution_plan -> 'app' ->> 'revision')::int, a.published_revision) as revision,
           e.trace_id, ${tenantKey} as tenant_key,
           (select r.trace_sampling_rate from tenant_runtime_snapshot(e.tenant_id) r) as trace_sampling_rate
    from message_event e
    join session s on s.tenant_id = e.tenant_id and s.session_id = e.session_id
    left join agent_app a on a.tenant_id = s.tenant_id and a.app_id = s.app_id
    where e.tenant_id = ${p.tenantId} and e.event_id = ${p.eventId}`;
  return rows[0] ?? null;
}

/** The facts as startMessageWorkflow takes them. */
export function workflowFactsOf(f: MessageStartFacts | null): MessageWorkflowFacts {
  return f
    ? {
        tenantKey: f.tenant_key,
        sessionKind: f.session_kind,
        appId: f.app_id,
        revision: f.revision,
        traceSamplingRate: f.trace_sampling_rate,
      }
    : {};
}

/** The tenant's trace_sampling_rate, read in its own transaction (either runtime role). */
export async function tenantTraceSamplingRate(tx: TransactionSql, tenantId: string): Promise<number | null> {
  const [r] = await tx<{ rate: number }[]>`
    select trace_sampling_rate as rate from tenant_runtime_snapshot(${tenantId})`;
  return r?.rate ?? null;
}
