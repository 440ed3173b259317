import type { TransactionSql } from 'postgres';
import type { ArtifactStoreInputs, OpenedStore } from '../../lib/artifact-open';
import { artifactKey } from '../../lib/artifact-store';
import type { ArtifactDirection, ArtifactKind, ArtifactStorage } from '../schema/artifact';

// Artifact metadata (the bytes are in the backend profile's store, lib/artifact-store.ts). A row is
// inserted only after its object is stored; ids are derived from the event, so a retried attempt
// finds its own row instead of writing a second one.

export interface ArtifactRow {
  artifact_id: string;
  event_id: string;
  direction: ArtifactDirection;
  kind: ArtifactKind;
  content_type: string;
  size_bytes: number;
  content_digest: string;
  content_ref: string;
  storage: ArtifactStorage;
  backend_profile_id: string;
  file_name: string | null;
  source_ref: string | null;
  /** Where the object was written (ArtifactStore.location); null for filesystem and older rows. */
  store_location: string | null;
  created_at: Date;
  /**
   * Marked by retention (deleting_at set): its object may already be gone. Readers take such a
   * row as absent (media in refuses the attachment clearly; the admin API shows it as deleting).
   */
  deleting: boolean;
}

export type NewArtifact = Omit<ArtifactRow, 'created_at' | 'deleting'>;

/**
 * The row of an object just stored (or found stored) in `opened` under `<tenant>/<artifact id>`:
 * the one place a new row's key, storage, location and profile are derived from the store.
 */
export function artifactRowOf(
  opened: Pick<OpenedStore, 'profileId' | 'store'>,
  a: {
    tenantId: string;
    artifactId: string;
    eventId: string;
    direction: ArtifactDirection;
    kind: ArtifactKind;
    contentType: string;
    sizeBytes: number;
    contentDigest: string;
    fileName: string | null;
    sourceRef: string | null;
  },
): NewArtifact {
  return {
    artifact_id: a.artifactId,
    event_id: a.eventId,
    direction: a.direction,
    kind: a.kind,
    content_type: a.contentType,
    size_bytes: a.sizeBytes,
    content_digest: a.contentDigest,
    content_ref: artifactKey(a.tenantId, a.artifactId),
    storage: opened.store.storage,
    store_location: opened.store.location,
    backend_profile_id: opened.profileId,
    file_name: a.fileName,
    source_ref: a.sourceRef,
  };
}

const columns = (tx: TransactionSql) => tx`
  artifact_id, event_id, direction, kind, content_type, size_bytes, content_digest, content_ref, storage,
  store_location, backend_profile_id, file_name, source_ref, created_at, deleting_at is not null as deleting`;

export async function insertArtifact(
  tx: TransactionSql,
  tenantId: string,
  a: NewArtifact,
): Promise<ArtifactRow> {
  const [row] = await tx<ArtifactRow[]>`
    insert into artifact (tenant_id, artifact_id, event_id, direction, kind, content_type, size_bytes,
                          content_digest, content_ref, storage, store_location, backend_profile_id, file_name,
                          source_ref)
    values (${tenantId}, ${a.artifact_id}, ${a.event_id}, ${a.direction}, ${a.kind}, ${a.content_type},
            ${a.size_bytes}, ${a.content_digest}, ${a.content_ref}, ${a.storage}, ${a.store_location},
            ${a.backend_profile_id}, ${a.file_name}, ${a.source_ref})
    on conflict (tenant_id, artifact_id) do nothing
    returning ${columns(tx)}`;
  return row ?? (await getArtifact(tx, tenantId, a.artifact_id))!;
}

export async function getArtifact(
  tx: TransactionSql,
  tenantId: string,
  artifactId: string,
): Promise<ArtifactRow | null> {
  const rows = await tx<ArtifactRow[]>`
    select ${columns(tx)} from artifact where tenant_id = ${tenantId} and artifact_id = ${artifactId}`;
  return rows[0] ?? null;
}

export async function eventArtifacts(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<ArtifactRow[]> {
  return tx<ArtifactRow[]>`
    select ${columns(tx)} from artifact where tenant_id = ${tenantId} and event_id = ${eventId}
    order by artifact_id`;
}

/** The artifacts a message's payload names as already stored (console uploads: media[].staged). */
export async function eventStagedArtifactIds(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<string[]> {
  const rows = await tx<{ artifact_id: string }[]>`
    select m -> 'staged' ->> 'artifactId' as artifact_id
    from message_event e
    cross join lateral jsonb_array_elements(
      case when jsonb_typeof(e.payload -> 'media') = 'array' then e.payload -> 'media' else '[]'::jsonb end) m
    where e.tenant_id = ${tenantId} and e.event_id = ${eventId}
      and jsonb_typeof(m -> 'staged' -> 'artifactId') = 'string'`;
  return rows.map((r) => r.artifact_id);
}

/**
 * The artifacts named as already stored by the message recorded under `idempotencyKey`, if any
 * (a console send whose record failed: a concurrent retry may have recorded it naming them).
 */
export async function stagedArtifactIdsOfKey(
  tx: TransactionSql,
  tenantId: string,
  idempotencyKey: string,
): Promise<string[]> {
  const [row] = await tx<{ event_id: string }[]>`
    select event_id from message_event where tenant_id = ${tenantId} and idempotency_key = ${idempotencyKey}`;
  return row ? eventStagedArtifactIds(tx, tenantId, row.event_id) : [];
}

/** The artifacts of a session's messages (what a reply may attach besides its own). */
export async function sessionArtifact(
  tx: TransactionSql,
  p: { tenantId: string; eventId: string; artifactId: string },
): Promise<ArtifactRow | null> {
  const rows = await tx<ArtifactRow[]>`
    select ${columns(tx)} from artifact a
    where a.tenant_id = ${p.tenantId} and a.artifact_id = ${p.artifactId} and a.deleting_at is null
      and exists (select 1 from message_event e join message_event m
                    on m.tenant_id = e.tenant_id and m.session_id = e.session_id
                  where e.tenant_id = a.tenant_id and e.event_id = ${p.eventId} and m.event_id = a.event_id)`;
  return rows[0] ?? null;
}

export interface BackendArtifacts {
  profile_id: string;
  artifacts: Record<string, unknown>;
}

export async function backendArtifacts(
  tx: TransactionSql,
  tenantId: string,
  profileId: string,
): Promise<BackendArtifacts | null> {
  const rows = await tx<BackendArtifacts[]>`
    select profile_id, artifacts from backend_profile where tenant_id = ${tenantId} and profile_id = ${profileId}`;
  return rows[0] ?? null;
}

/**
 * What opening a backend profile's artifact store needs (lib/artifact-open.ts): its `artifacts` and,
 * for S3 with credentials, the sealed object_storage secret. Null when the profile is missing.
 */
export async function artifactStoreInputs(
  tx: TransactionSql,
  tenantId: string,
  profileId: string,
): Promise<ArtifactStoreInputs | null> {
  const backend = await backendArtifacts(tx, tenantId, profileId);
  if (!backend) return null;
  const ref = (backend.artifacts as { credentials_secret_ref?: unknown }).credentials_secret_ref;
  const sealed = typeof ref === 'string' ? await objectStorageSecret(tx, tenantId, ref) : null;
  return { backend, secretRef: typeof ref === 'string' ? ref : null, sealed };
}

/** An object_storage secret's current version, still sealed; null when missing or disabled. */
export async function objectStorageSecret(
  tx: TransactionSql,
  tenantId: string,
  secretRef: string,
): Promise<{ key_id: string; ciphertext: Buffer } | null> {
  const rows = await tx<{ key_id: string; ciphertext: Buffer }[]>`
    select v.key_id, v.ciphertext
    from secret s
    join secret_version v on v.tenant_id = s.tenant_id and v.secret_ref = s.secret_ref
                         and v.version = s.current_version
    where s.tenant_id = ${tenantId} and s.secret_ref = ${secretRef} and s.status = 'active'
      and s.purpose = 'object_storage'`;
  return rows[0] ?? null;
}

/** The binding a message came through: its channel config and sealed channel secret. */
export async function bindingOfEvent(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<{
  binding_id: string;
  channel: string;
  config: Record<string, unknown>;
  secret_ref: string | null;
  key_id: string | null;
  ciphertext: Buffer | null;
} | null> {
  const rows = await tx<
    {
      binding_id: string;
      channel: string;
      config: Record<string, unknown>;
      secret_ref: string | null;
      key_id: string | null;
      ciphertext: Buffer | null;
    }[]
  >`
    select b.binding_id, b.channel, b.config, b.secret_ref, v.key_id, v.ciphertext
    from message_event e
    join channel_binding b on b.tenant_id = e.tenant_id and b.binding_id = e.binding_id
    left join secret s on s.tenant_id = b.tenant_id and s.secret_ref = b.secret_ref and s.status = 'active'
    left join secret_version v on v.tenant_id = s.tenant_id and v.secret_ref = s.secret_ref
                              and v.version = s.current_version
    where e.tenant_id = ${tenantId} and e.event_id = ${eventId}`;
  return rows[0] ?? null;
}

/** An attachment segment's kind and artifact (delivery reads it only for attachment segments). */
export async function attachmentOfSegment(
  tx: TransactionSql,
  tenantId: string,
  segmentId: string,
): Promise<(ArtifactRow & { segment_kind: 'text' | 'image' | 'file' }) | null> {
  const rows = await tx<(ArtifactRow & { segment_kind: 'text' | 'image' | 'file' })[]>`
    select o.segment_kind, a.artifact_id, a.event_id, a.direction, a.kind, a.content_type, a.size_bytes,
           a.content_digest, a.content_ref, a.storage, a.store_location, a.backend_profile_id, a.file_name,
           a.source_ref, a.created_at, false as deleting
    from reply_outbox o
    -- A row marked by retention may have lost its object already: as good as gone.
    join artifact a on a.tenant_id = o.tenant_id and a.artifact_id = o.payload_ref and a.deleting_at is null
    where o.tenant_id = ${tenantId} and o.segment_id = ${segmentId}`;
  return rows[0] ?? null;
}

/**
 * The user's memory entry of a media message: its caption and attachment descriptions (the commit
 * writes none for it, its text being empty). Same id as the commit's, so written once.
 */
export async function insertMediaUserMemory(
  tx: TransactionSql,
  p: { tenantId: string; eventId: string; sessionId: string; userId: string; content: string },
): Promise<void> {
  if (p.content === '') return;
  await tx`
    insert into memory_entry (tenant_id, memory_id, user_id, session_id, source_event_id, role, content,
                              content_digest)
    values (${p.tenantId}, ${`mem_${p.eventId.slice(4)}_u`}, ${p.userId}, ${p.sessionId}, ${p.eventId}, 'user',
            ${p.content}, encode(sha256(convert_to(${p.content}::text, 'UTF8')), 'hex'))
    on conflict do nothing`;
}

/** A media message refused: a clear reply follows, and this outcome and reason stay on the message. */
export async function markMediaRejected(
  tx: TransactionSql,
  p: { tenantId: string; eventId: string; reason: string },
): Promise<void> {
  await tx`
    update message_event set outcome = 'media_rejected', failure_reason = ${p.reason}, updated_at = now()
    where tenant_id = ${p.tenantId} and event_id = ${p.eventId} and outcome is null`;
}

/** A just-committed reply's attachment segments get their kind and artifact (same transaction). */
export async function markAttachmentSegments(
  tx: TransactionSql,
  p: { tenantId: string; segments: { segmentId: string; kind: 'image' | 'file'; artifactId: string }[] },
): Promise<void> {
  for (const s of p.segments) {
    await tx`
      update reply_outbox set segment_kind = ${s.kind}, payload_ref = ${s.artifactId}
      where tenant_id = ${p.tenantId} and segment_id = ${s.segmentId} and status = 'pending'`;
  }
}
