import { sql } from 'drizzle-orm';
import {
  check,
  foreignKey,
  integer,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
} from 'drizzle-orm/pg-core';
import { bytea, checkNotBlank, createdAt } from './columns';
import { secret } from './secret';

/**
 * Append-only ciphertexts of a secret. The application encrypts (AES-256-GCM, stored as
 * nonce | tag | ciphertext under master key `key_id`); the database never sees plaintext.
 * A trigger rejects UPDATE and DELETE, and no role is granted either.
 */
export const secretVersion = pgTable(
  'secret_version',
  {
    tenantId: text('tenant_id').notNull(),
    secretRef: text('secret_ref').notNull(),
    version: integer('version').notNull(),
    keyId: text('key_id').notNull(),
    ciphertext: bytea('ciphertext').notNull(),
    createdAt: createdAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'secret_version_pkey', columns: [t.tenantId, t.secretRef, t.version] }),
    check('secret_version_version_check', sql`version >= 1`),
    checkNotBlank('secret_version_key_id_check', 'key_id', 200),
    // 12-byte GCM nonce + 16-byte tag + at least one byte of ciphertext.
    check('secret_version_ciphertext_check', sql`octet_length(ciphertext) >= 29`),
    foreignKey({
      name: 'fk_secret_version_secret',
      columns: [t.tenantId, t.secretRef],
      foreignColumns: [secret.tenantId, secret.secretRef],
    }),
  ],
);
