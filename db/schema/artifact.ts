import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  foreignKey,
  index,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from 'drizzle-orm/pg-core';
import { backendProfile } from './backend-profile';
import {
  checkIn,
  checkMatches,
  checkNotBlank,
  checkRuntimeId,
  createdAt,
  SHA256_HEX_PATTERN,
} from './columns';
import { messageEvent } from './message-event';

export const ARTIFACT_KINDS = ['image', 'audio', 'video', 'file'] as const;
export type ArtifactKind = (typeof ARTIFACT_KINDS)[number];
/** inbound: media a user sent (downloaded from the channel); outbound: an attachment of a reply. */
export const ARTIFACT_DIRECTIONS = ['inbound', 'outbound'] as const;
export type ArtifactDirection = (typeof ARTIFACT_DIRECTIONS)[number];
export const ARTIFACT_STORAGES = ['filesystem', 's3'] as const;
export type ArtifactStorage = (typeof ARTIFACT_STORAGES)[number];

/**
 * Metadata of one stored object (seeds: "media first lands as an Artifact"; object storage holds
 * the bytes, SQL the tenant, digest, size and where it is). `content_ref` is the object key in the
 * backend profile's store and always starts with `<tenant_id>/`. A row is written only after the
 * object is stored, so a row always names an object with that digest — until retention marks it:
 * housekeeping sets `deleting_at` first, then deletes the object, then the row (migration 0040), so
 * a row whose object may be gone is always a marked one, and readers take a marked row as gone.
 */
export const artifact = pgTable(
  'artifact',
  {
    tenantId: text('tenant_id').notNull(),
    artifactId: text('artifact_id').notNull(),
    eventId: text('event_id').notNull(),
    direction: text('direction', { enum: ARTIFACT_DIRECTIONS }).notNull(),
    kind: text('kind', { enum: ARTIFACT_KINDS }).notNull(),
    contentType: text('content_type').notNull(),
    sizeBytes: bigint('size_bytes', { mode: 'number' }).notNull(),
    contentDigest: text('content_digest').notNull(),
    contentRef: text('content_ref').notNull(),
    storage: text('storage', { enum: ARTIFACT_STORAGES }).notNull(),
    backendProfileId: text('backend_profile_id').notNull(),
    fileName: text('file_name'),
    /** The platform's id of the file (Telegram file_id, WeCom MediaId), or the URL it came from. */
    sourceRef: text('source_ref'),
    createdAt: createdAt(),
    /** Set by retention before the object is deleted; the row goes once the object has. */
    deletingAt: timestamp('deleting_at', { withTimezone: true }),
    /**
     * Where the object was written, for an S3 store `s3:<endpoint or aws>/<bucket>` (lib/
     * artifact-store.ts storeLocation): retention refuses to delete through a profile that now
     * points elsewhere. null on rows written before it was recorded.
     */
    storeLocation: text('store_location'),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'artifact_pkey', columns: [t.tenantId, t.artifactId] }),
    checkRuntimeId('artifact_artifact_id_check', 'artifact_id', 'art'),
    checkIn('artifact_direction_check', 'direction', ARTIFACT_DIRECTIONS),
    checkIn('artifact_kind_check', 'kind', ARTIFACT_KINDS),
    checkIn('artifact_storage_check', 'storage', ARTIFACT_STORAGES),
    checkNotBlank('artifact_content_type_check', 'content_type', 200),
    check('artifact_size_bytes_check', sql`size_bytes >= 0`),
    checkMatches('artifact_content_digest_check', 'content_digest', SHA256_HEX_PATTERN),
    // Tenant-prefixed keys: an artifact row can only name an object under its own tenant.
    check('artifact_content_ref_check', sql`left(content_ref, length(tenant_id) + 1) = tenant_id || '/'`),
    check('artifact_file_name_check', sql`file_name IS NULL OR length(file_name) BETWEEN 1 AND 255`),
    foreignKey({
      name: 'fk_artifact_event',
      columns: [t.tenantId, t.eventId],
      foreignColumns: [messageEvent.tenantId, messageEvent.eventId],
    }),
    foreignKey({
      name: 'fk_artifact_backend_profile',
      columns: [t.tenantId, t.backendProfileId],
      foreignColumns: [backendProfile.tenantId, backendProfile.profileId],
    }),
    index('artifact_tenant_event_idx').on(t.tenantId, t.eventId),
    index('artifact_created_idx').on(t.createdAt),
    index('artifact_tenant_created_idx').on(t.tenantId, t.createdAt),
  ],
);
