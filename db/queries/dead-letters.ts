import type { TransactionSql } from 'postgres';
import { jsonb } from '../json';

export interface NewDeadLetter {
  tenantId: string;
  deadLetterId: string;
  eventId: string;
  kind: 'execution' | 'segment' | 'tool';
  segmentId?: string | null;
  invocationId?: string | null;
  reasonClass: string;
  detail?: Record<string, unknown>;
}

/** Idempotent: the dead-letter id is derived from what failed, so a retried activity writes it once. */
export async function insertDeadLetter(tx: TransactionSql, d: NewDeadLetter): Promise<void> {
  await tx`
    insert into dead_letter (tenant_id, dead_letter_id, event_id, kind, segment_id, invocation_id, reason_class, detail)
    values (${d.tenantId}, ${d.deadLetterId}, ${d.eventId}, ${d.kind}, ${d.segmentId ?? null}, ${d.invocationId ?? null},
            ${d.reasonClass}, ${jsonb(tx, d.detail ?? {})})
    on conflict (tenant_id, dead_letter_id) do nothing`;
}
