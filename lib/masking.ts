import { createHmac } from 'node:crypto';
import type { LogMaskingLevel } from '../db/schema/tenant';

// What a tenant's `log_masking_level` lets logs, span attributes and audit rows show of a message
// (README "Masking"). Secrets are redacted at every level by the logger itself (lib/log.ts); this
// file decides only about user text and external ids:
//
//   level   | user text (logs, spans)   | external ids (logs, spans) | audit user_id
//   none    | shown, first 200 chars    | shown                      | the external id
//   basic   | `[masked len=N]`          | pseudonym `ext_<16 hex>`   | the external id
//   strict  | `[masked]`                | `[masked]`                 | pseudonym `ext_<16 hex>`
//
// A pseudonym is an HMAC of the tenant and the id under the audit key, so an operator can follow
// one user across log lines and audit rows without learning who it is, and nobody without the key
// can compute it from a guessed id. Migration 0027 computes the same in SQL for audit rows.

export type { LogMaskingLevel };

/** How much of a message's text a `none` line shows: enough to recognise it, not a transcript. */
export const UNMASKED_TEXT_CHARS = 200;

const PSEUDONYM_LABEL = 'switchyard.audit.v3.pseudonym';

/** `ext_` + 16 hex characters of HMAC-SHA256(audit key, label \n tenant \n id). */
export function pseudonymOf(auditKey: string, tenantId: string, externalId: string): string {
  const mac = createHmac('sha256', Buffer.from(auditKey, 'hex'))
    .update(`${PSEUDONYM_LABEL}\n${tenantId}\n${externalId}`)
    .digest('hex');
  return `ext_${mac.slice(0, 16)}`;
}

export interface Masker {
  readonly level: LogMaskingLevel;
  /** User-written text (a message, a reply) as a log line or span attribute may carry it. */
  text(value: string): string;
  /** An external (provider) user, chat, thread or message id. */
  externalId(value: string): string;
}

export function maskerFor(level: LogMaskingLevel, auditKey: string, tenantId: string): Masker {
  return {
    level,
    text: (value) => {
      if (level === 'none') {
        const chars = Array.from(value);
        return chars.length > UNMASKED_TEXT_CHARS
          ? `${chars.slice(0, UNMASKED_TEXT_CHARS).join('')}…`
          : value;
      }
      return level === 'basic' ? `[masked len=${Array.from(value).length}]` : '[masked]';
    },
    externalId: (value) => {
      if (level === 'none') return value;
      return level === 'basic' ? pseudonymOf(auditKey, tenantId, value) : '[masked]';
    },
  };
}
