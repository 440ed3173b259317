import { z } from '@hono/zod-openapi';
import type { MediaKind } from '../../channels/capabilities';
import { bareType, cleanFileName, type MediaDescriptor, mediaKindOf, sniffImage } from '../../channels/media';
import {
  artifactRowOf,
  artifactStoreInputs,
  eventStagedArtifactIds,
  insertArtifact,
  stagedArtifactIdsOfKey,
} from '../../db/queries/artifacts';
import { type TransactionSql, withTenantTx } from '../../db/tx';
import { maxBytesOf, typeAllowed } from '../../lib/artifact-config';
import { ArtifactConfigError, type OpenedStore, openArtifactStore } from '../../lib/artifact-open';
import { artifactKey, StorageError } from '../../lib/artifact-store';
import { encodeTuple, sha256Hex } from '../../lib/digest';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';

// Console uploads (media in for the built-in channel). A console message carries its attachments
// in the body, so — the seeds' "media first lands as an Artifact, then is processed
// asynchronously" — the API checks each against the tenant's default backend profile (its size
// cap and type allowlist, the same as a Telegram or WeCom attachment meets in media in) and stores
// it in that profile's store *before* the message is recorded; the message's payload then names
// the artifact (id, digest, profile) and the execution reads it back, digest checked, like any
// channel's media (activities/media-in.ts). Refused at the boundary: 400 media_rejected, nothing
// stored, recorded or started. The artifact rows are written right after the record (the row
// references the message); the execution writes one itself when it runs first.

/** Attachments one console message may carry. */
export const MAX_CONSOLE_ATTACHMENTS = 4;
/**
 * The body cap of the console send route (every other route has MAX_BODY_BYTES): what its
 * attachments may add up to, base64 and all. Checked before authentication like the other cap.
 */
export const MAX_CONSOLE_BODY_BYTES = 8 * 1024 * 1024;

/** `type/subtype` without parameters (the stored type is the bare, lower-case one). */
const CONTENT_TYPE = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$/;
/** Standard base64 with padding: decoding it is exact (Buffer.from would skip anything else). */
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export const ConsoleAttachment = z
  .object({
    content_type: z
      .string()
      .regex(CONTENT_TYPE, 'content_type must be type/subtype (no parameters)')
      .openapi({
        example: 'image/png',
        description:
          "Checked against the tenant's default backend profile's allowed_types (default: common image, " +
          'audio, video, PDF and plain text types); a picture must be one (its bytes are sniffed)',
      }),
    file_name: z.string().min(1).max(255).optional(),
    data_base64: z
      .string()
      .min(4)
      .max(MAX_CONSOLE_BODY_BYTES)
      .regex(BASE64, 'data_base64 must be standard base64')
      .refine((s) => s.length % 4 === 0, 'data_base64 must be padded base64')
      .openapi({
        description:
          "The file's bytes; at most the profile's max_bytes (default 20 MiB) each, and the whole body at " +
          `most ${MAX_CONSOLE_BODY_BYTES} bytes (413 payload_too_large)`,
      }),
  })
  .strict()
  .openapi('ConsoleAttachment');
export type ConsoleAttachment = z.infer<typeof ConsoleAttachment>;

/** Why an upload is refused: the reasons media in gives other channels' attachments. */
export type UploadRejection = 'too_large' | 'type_not_allowed' | 'type_mismatch';

interface Checked {
  kind: MediaKind;
  contentType: string;
  fileName: string | null;
  bytes: Buffer;
  digest: string;
}

/**
 * Each attachment decoded and checked against the profile, all before anything is stored: one
 * refused attachment refuses the message (400 media_rejected, details.index names it).
 */
function checkAll(opened: OpenedStore, attachments: readonly ConsoleAttachment[]): Checked[] {
  const cap = maxBytesOf(opened.config);
  return attachments.map((a, index) => {
    const refuse = (reason: UploadRejection, message: string): never => {
      throw new ApiError('media_rejected', message, {
        reason,
        index,
        ...(reason === 'too_large' ? { max_bytes: cap } : {}),
      });
    };
    const declared =
      bareType(a.content_type) ?? refuse('type_not_allowed', 'The content_type is not a type.');
    const bytes = Buffer.from(a.data_base64, 'base64');
    if (bytes.byteLength > cap) refuse('too_large', `Attachment ${index} is larger than ${cap} bytes.`);
    const kind = mediaKindOf(declared);
    // A picture is stored as what its bytes are (as media in does), and must be a picture.
    const contentType =
      kind === 'image'
        ? (sniffImage(bytes) ??
          refuse('type_mismatch', `Attachment ${index} is not the picture it claims to be.`))
        : declared;
    if (!typeAllowed(opened.config, contentType))
      refuse(
        'type_not_allowed',
        `Attachment ${index} is of a type this tenant does not accept (${contentType}).`,
      );
    return { kind, contentType, fileName: cleanFileName(a.file_name), bytes, digest: sha256Hex(bytes) };
  });
}

/**
 * A staged upload's artifact id: derived from the message's identity, its place and its bytes, so
 * a client's retry of one message stores the same objects again (same keys, same bytes) instead
 * of new ones, and other bytes under a reused client_message_id never overwrite the first's.
 */
function stagedArtifactId(p: {
  bindingId: string;
  externalMessageId: string;
  index: number;
  digest: string;
}) {
  const h = sha256Hex(encodeTuple([p.bindingId, p.externalMessageId, String(p.index), p.digest]));
  return `art_cu${h.slice(0, 40)}_in${p.index}`;
}

export interface StagedUploads {
  /** What the message's payload carries (kind media): one descriptor per stored upload. */
  media: MediaDescriptor[];
  /**
   * After the record: the artifact rows of the event, for the uploads its payload names; objects
   * it does not name (a duplicate whose first send carried other bytes) are removed.
   */
  settle(eventId: string): Promise<void>;
  /** Nothing was recorded (the tenant was not routed): remove the objects. */
  discard(): Promise<void>;
  /**
   * The record failed (threw): a concurrent retry with the same client_message_id may have
   * recorded the message naming these objects, so only those no message under `idempotencyKey`
   * names are removed, and none when that cannot be read (an object left over beats a message
   * whose media is gone).
   */
  abandon(idempotencyKey: string): Promise<void>;
}

/**
 * Checks the uploads against the tenant's default backend profile and stores them in its store,
 * before the message is recorded. 409 conflict when the tenant has no default backend profile or
 * its store cannot be opened; 400 media_rejected when one is refused; 503 unavailable when the
 * store did not take them (nothing is left stored then).
 */
export async function stageConsoleUploads(
  deps: AppDeps,
  p: {
    tenantId: string;
    bindingId: string;
    backendProfileId: string | null;
    externalMessageId: string;
    attachments: readonly ConsoleAttachment[];
  },
): Promise<StagedUploads> {
  const { tenantId } = p;
  if (!p.backendProfileId)
    throw new ApiError('conflict', 'The tenant has no default backend profile to store attachments in.', {
      reason: 'no_backend_profile',
    });
  const profileId = p.backendProfileId;
  const appTx = <T>(fn: (tx: TransactionSql) => Promise<T>) =>
    withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, fn);
  // The data plane's role reads the profile and, for S3, only an object_storage secret.
  const inputs = await appTx((tx) => artifactStoreInputs(tx, tenantId, profileId));
  if (!inputs)
    throw new ApiError('conflict', 'The default backend profile is gone.', { reason: 'no_backend_profile' });
  let opened: OpenedStore;
  try {
    opened = openArtifactStore(
      { secrets: deps.secrets, artifacts: deps.artifacts, timeoutMs: 10_000 },
      tenantId,
      inputs,
    );
  } catch (err) {
    if (!(err instanceof ArtifactConfigError)) throw err;
    throw new ApiError('conflict', `Attachments cannot be stored: ${err.message}.`, {
      reason: 'artifact_store_misconfigured',
    });
  }
  const checked = checkAll(opened, p.attachments);
  const staged = checked.map((c, index) => {
    const artifactId = stagedArtifactId({ ...p, index, digest: c.digest });
    return { ...c, artifactId, key: artifactKey(tenantId, artifactId) };
  });
  const remove = (keys: readonly string[]) =>
    Promise.all(keys.map((k) => opened.store.delete(k).catch(() => undefined)));
  const stored: string[] = [];
  try {
    for (const s of staged) {
      stored.push(s.key);
      await opened.store.put(s.key, s.bytes, s.contentType);
    }
  } catch (err) {
    await remove(stored);
    if (!(err instanceof StorageError)) throw err;
    deps.log.warn({ tenantId, reason_class: err.reasonClass }, 'console upload: the artifact store refused');
    throw new ApiError('unavailable', 'The artifact store did not take the attachments; send again later.', {
      reason_class: err.reasonClass,
    });
  }
  const media: MediaDescriptor[] = staged.map((s) => ({
    kind: s.kind,
    fileId: s.artifactId,
    sizeBytes: s.bytes.byteLength,
    mimeType: s.contentType,
    fileName: s.fileName,
    platformType: 'upload',
    staged: { artifactId: s.artifactId, contentDigest: s.digest, backendProfileId: opened.profileId },
  }));
  return {
    media,
    async settle(eventId) {
      const named = new Set(await appTx((tx) => eventStagedArtifactIds(tx, tenantId, eventId)));
      await remove(staged.filter((s) => !named.has(s.artifactId)).map((s) => s.key));
      const rows = staged.filter((s) => named.has(s.artifactId));
      if (rows.length === 0) return;
      await appTx(async (tx) => {
        for (const s of rows)
          await insertArtifact(
            tx,
            tenantId,
            artifactRowOf(opened, {
              tenantId,
              artifactId: s.artifactId,
              eventId,
              direction: 'inbound',
              kind: s.kind,
              contentType: s.contentType,
              sizeBytes: s.bytes.byteLength,
              contentDigest: s.digest,
              fileName: s.fileName,
              sourceRef: null,
            }),
          );
      });
    },
    async discard() {
      await remove(staged.map((s) => s.key));
    },
    async abandon(idempotencyKey) {
      let named: Set<string>;
      try {
        named = new Set(await appTx((tx) => stagedArtifactIdsOfKey(tx, tenantId, idempotencyKey)));
      } catch (err) {
        deps.log.warn(
          { tenantId, err: (err as Error)?.name },
          'console upload: the record failed and its message cannot be read; the objects are kept',
        );
        return;
      }
      await remove(staged.filter((s) => !named.has(s.artifactId)).map((s) => s.key));
    },
  };
}
