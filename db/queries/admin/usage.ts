import type { TransactionSql } from 'postgres';

export interface UsageTotals {
  tokens_in: number;
  tokens_out: number;
  cost_minor: number;
}

/** Sums the immutable usage events of [from, to); zeros when there are none. */
export async function sumUsage(
  tx: TransactionSql,
  p: { tenantId: string; from: string; to: string },
): Promise<UsageTotals> {
  const [row] = await tx<UsageTotals[]>`
    select coalesce(sum(tokens_in), 0)::bigint as tokens_in,
           coalesce(sum(tokens_out), 0)::bigint as tokens_out,
           coalesce(sum(cost_minor), 0)::bigint as cost_minor
    from usage_event
    where tenant_id = ${p.tenantId} and occurred_at >= ${p.from}::text::timestamptz and occurred_at < ${p.to}::text::timestamptz`;
  return row ?? { tokens_in: 0, tokens_out: 0, cost_minor: 0 };
}
