import { sql } from 'drizzle-orm';
import {
  check,
  foreignKey,
  integer,
  jsonb,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  uniqueIndex,
} from 'drizzle-orm/pg-core';
import { agentApp } from './agent-app';
import {
  checkIn,
  checkJsonObject,
  checkMatches,
  checkNotBlank,
  checkUlidId,
  checkVersion,
  createdAt,
  SHA256_HEX_PATTERN,
  updatedAt,
  version,
} from './columns';
import { secret } from './secret';

/** `console`: the operator console's chat preview, a binding with no provider and no secret. */
export const CHANNELS = ['telegram', 'wecom', 'console'] as const;
export type Channel = (typeof CHANNELS)[number];
export const CHANNEL_BINDING_STATUSES = ['draft', 'active', 'suspended', 'disabled'] as const;
export type ChannelBindingStatus = (typeof CHANNEL_BINDING_STATUSES)[number];

/**
 * An IM account wired to an agent app. The public route key only finds a candidate binding (via
 * its digest, through find_binding_candidate()); it never authorises anything. Credentials are a
 * secret reference, never a value.
 */
export const channelBinding = pgTable(
  'channel_binding',
  {
    tenantId: text('tenant_id').notNull(),
    bindingId: text('binding_id').notNull(),
    channel: text('channel', { enum: CHANNELS }).notNull(),
    providerAccountId: text('provider_account_id').notNull(),
    publicRouteKeyDigest: text('public_route_key_digest')
      .notNull()
      .unique('channel_binding_public_route_key_digest_unique'),
    appId: text('app_id').notNull(),
    /** Null only for `console` bindings, which have no provider to authenticate (check below). */
    secretRef: text('secret_ref'),
    config: jsonb('config').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
    configDigest: text('config_digest').notNull(),
    status: text('status', { enum: CHANNEL_BINDING_STATUSES }).notNull().default('draft'),
    /** What the channel's protocol supports (channels/capabilities.ts), recorded when the binding is written. */
    capabilityVersion: integer('capability_version').notNull().default(1),
    capabilities: jsonb('capabilities').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
    version: version(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'channel_binding_pkey', columns: [t.tenantId, t.bindingId] }),
    checkUlidId('channel_binding_binding_id_check', 'binding_id', 'cb'),
    checkIn('channel_binding_channel_check', 'channel', CHANNELS),
    checkNotBlank('channel_binding_provider_account_id_check', 'provider_account_id', 200),
    checkMatches('channel_binding_route_key_digest_check', 'public_route_key_digest', SHA256_HEX_PATTERN),
    check('channel_binding_secret_ref_check', sql`(channel = 'console') = (secret_ref IS NULL)`),
    checkJsonObject('channel_binding_config_check', 'config'),
    checkMatches('channel_binding_config_digest_check', 'config_digest', SHA256_HEX_PATTERN),
    checkIn('channel_binding_status_check', 'status', CHANNEL_BINDING_STATUSES),
    checkVersion('channel_binding_version_check'),
    checkJsonObject('channel_binding_capabilities_check', 'capabilities'),
    check('channel_binding_capability_version_check', sql`capability_version >= 1`),
    foreignKey({
      name: 'fk_channel_binding_app',
      columns: [t.tenantId, t.appId],
      foreignColumns: [agentApp.tenantId, agentApp.appId],
    }),
    foreignKey({
      name: 'fk_channel_binding_secret',
      columns: [t.tenantId, t.secretRef],
      foreignColumns: [secret.tenantId, secret.secretRef],
    }),
    // One active binding per IM account across all tenants (seed: a shared account would need an
    // explicit sharing model, never the removal of this constraint).
    uniqueIndex('channel_binding_active_account_unique')
      .on(t.channel, t.providerAccountId)
      .where(sql`status = 'active'`),
  ],
);
