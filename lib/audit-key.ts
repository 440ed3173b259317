import { createHmac } from 'node:crypto';

// The audit chain is keyed (migration 0021: each digest is an HMAC-SHA256): someone who can write
// to the database but does not hold the key (a DBA account, an edited backup, the owner bypassing
// audit_append) cannot produce rows that verify. The key is derived from the master key, which
// never enters the database, and reaches PostgreSQL only as the `app.audit_key` parameter of the
// application's own connections (db/client.ts).

const LABEL = 'switchyard.audit.v3';

/** The chain key (64 hex characters) for a base64 master key. */
export function auditKeyFrom(masterKeyBase64: string): string {
  return createHmac('sha256', Buffer.from(masterKeyBase64, 'base64')).update(LABEL).digest('hex');
}

const sign = (auditKey: string, kind: string, c: { tenantId: string; seq: number; digest: string }) =>
  createHmac('sha256', Buffer.from(auditKey, 'hex'))
    .update(`${LABEL}.${kind}\n${c.tenantId}\n${c.seq}\n${c.digest}`)
    .digest('hex');

/** A checkpoint signature: the chain's head at `seq`, vouched for by the key holder. */
export const signCheckpoint = (auditKey: string, c: { tenantId: string; seq: number; digest: string }) =>
  sign(auditKey, 'checkpoint', c);

/**
 * A retention checkpoint's signature (migration 0025 computes the same in SQL): where the chain
 * starts after retention removed the rows up to `seq`. A label of its own, so a verification
 * checkpoint (signCheckpoint) can never be planted as one.
 */
export const signRetentionCheckpoint = (
  auditKey: string,
  c: { tenantId: string; seq: number; digest: string },
) => sign(auditKey, 'retention', c);
