import { sleep } from '@temporalio/activity';
import type { InboundMessage } from '../channels/inbound';
import { bareType, type MediaDescriptor, type StagedArtifact, sniffImage } from '../channels/media';
import type { MediaFetch } from '../channels/multipart';
import { TELEGRAM_API_BASE } from '../channels/telegram/client';
import { telegramDownloadFile } from '../channels/telegram/media';
import { WECOM_API_BASE } from '../channels/wecom/client';
import { wecomDownloadMedia } from '../channels/wecom/media';
import {
  type ArtifactRow,
  artifactRowOf,
  artifactStoreInputs,
  bindingOfEvent,
  eventArtifacts,
  insertArtifact,
} from '../db/queries/artifacts';
import { withTenantTx } from '../db/tx';
import { maxBytesOf, typeAllowed } from '../lib/artifact-config';
import type { ArtifactStoreInputs, OpenedStore } from '../lib/artifact-open';
import { artifactKey, StorageError } from '../lib/artifact-store';
import { sha256Hex } from '../lib/digest';
import { secretAad } from '../lib/secret-box';
import type { ExecutionPlan } from '../workflows/shared';
import { openStore, storeArtifact } from './artifacts';
import type { ActivityDeps } from './deps';

// Media in (seeds: architecture §4, "media first lands as an Artifact, then is processed
// asynchronously"): the webhook recorded only the platform's descriptor; the first model turn of
// the execution downloads each attachment from the channel's file API, checks it (size cap, type
// allowlist, that a picture is a picture), stores it as an artifact and gives it to the agent. A
// later turn, or a retried attempt, finds the artifact row (ids derive from the event) and does
// not download again. Anything refused ends the turn with a clear reply and outcome
// `media_rejected` (reason in failure_reason), with no artifact kept. A console upload is already
// stored (the API had its bytes, api/admin/console-media.ts): its reference names the artifact and
// its digest, and it is read back and checked instead of downloaded. Every read is digest-checked.

export type MediaRejection =
  | 'too_large'
  | 'type_not_allowed'
  | 'type_mismatch'
  | 'provider_refused'
  | 'provider_unavailable'
  | 'channel_unsupported'
  // The artifact's row is marked by retention (its object may be gone already): as good as absent.
  | 'artifact_expired'
  // The store has no such object: a filesystem profile's object is in the data dir of the process
  // that wrote it (README "Artifacts": the API and the worker on different hosts), or it was removed.
  | 'artifact_missing';

export type InboundMedia =
  | { kind: 'none' }
  | {
      kind: 'ready';
      items: { artifact: ArtifactRow; bytes: Uint8Array | null }[];
      /** The caption and a one-line description of each attachment: what a text-only agent sees. */
      text: string;
    }
  | { kind: 'rejected'; reason: MediaRejection; reply: string };

/** Downloads of a provider that did not answer are tried this many times within the attempt. */
const DOWNLOAD_TRIES = 3;

export function inboundArtifactId(eventId: string, index: number): string {
  return `art_${eventId.slice(4)}_in${index}`;
}

/**
 * The message's attachments as artifacts (downloaded, checked and stored now, or found stored by
 * an earlier attempt). `withBytes`: read each image back for a vision model. Throws StorageError
 * when the store cannot take or give the bytes (after the client's retries).
 */
export async function prepareInboundMedia(
  deps: ActivityDeps,
  input: {
    tenantId: string;
    eventId: string;
    payload: InboundMessage;
    plan: ExecutionPlan;
    withBytes: boolean;
  },
): Promise<InboundMedia> {
  const media = input.payload.media ?? [];
  if (media.length === 0) return { kind: 'none' };
  const { tenantId, eventId } = input;
  // The plan's profile stores what is downloaded now; a staged attachment is in the store of the
  // profile that was the tenant's default when it was uploaded (named by its reference).
  const profileIds = [
    ...new Set([
      input.plan.backendProfile.id,
      ...media.flatMap((d) => (d.staged ? [d.staged.backendProfileId] : [])),
    ]),
  ];
  const loaded = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, async (tx) => {
    const stores = new Map<string, ArtifactStoreInputs | null>();
    for (const id of profileIds) stores.set(id, await artifactStoreInputs(tx, tenantId, id));
    return {
      stores,
      stored: await eventArtifacts(tx, tenantId, eventId),
      binding: await bindingOfEvent(tx, tenantId, eventId),
    };
  });
  const openedStores = new Map<string, OpenedStore>();
  const storeOf = (profileId: string): OpenedStore => {
    let opened = openedStores.get(profileId);
    if (!opened) {
      const inputs = loaded.stores.get(profileId);
      if (!inputs) throw new StorageError('storage_misconfigured', 'the backend profile is missing');
      opened = openStore(deps, tenantId, inputs);
      openedStores.set(profileId, opened);
    }
    return opened;
  };
  const items: { artifact: ArtifactRow; bytes: Uint8Array | null }[] = [];
  for (const [i, d] of media.entries()) {
    if (d.staged) {
      const staged = await stagedItem(deps, storeOf(d.staged.backendProfileId), {
        tenantId,
        eventId,
        d,
        staged: d.staged,
        found: loaded.stored.find((a) => a.artifact_id === d.staged?.artifactId),
        withBytes: input.withBytes,
      });
      if ('kind' in staged) return staged;
      items.push(staged);
      continue;
    }
    const opened = storeOf(input.plan.backendProfile.id);
    const cap = maxBytesOf(opened.config);
    const id = inboundArtifactId(eventId, i);
    const found = loaded.stored.find((a) => a.artifact_id === id);
    // Not downloaded again under a marked row's id: its object is being deleted under that id.
    if (found?.deleting) return rejected('artifact_expired', d, cap);
    if (found) {
      const bytes =
        input.withBytes && found.kind === 'image' ? await readOrMissing(opened, found, cap) : null;
      if (bytes === MISSING) return rejected('artifact_missing', d, cap);
      items.push({ artifact: found, bytes });
      continue;
    }
    if (d.sizeBytes !== null && d.sizeBytes > cap) return rejected('too_large', d, cap);
    if (d.mimeType && !typeAllowed(opened.config, bareType(d.mimeType) ?? d.mimeType))
      return rejected('type_not_allowed', d, cap);
    const fetched = await download(deps, input.payload.channel, loaded.binding, tenantId, d, cap);
    if (fetched.kind === 'too_large') return rejected('too_large', d, cap);
    if (fetched.kind === 'refused') return rejected('provider_refused', d, cap);
    if (fetched.kind === 'unavailable') return rejected('provider_unavailable', d, cap);
    if (fetched.kind === 'unsupported') return rejected('channel_unsupported', d, cap);
    const contentType = contentTypeOf(d, fetched);
    if (!typeAllowed(opened.config, contentType))
      return rejected('type_not_allowed', { ...d, mimeType: contentType }, cap);
    if (d.kind === 'image' && sniffImage(fetched.bytes) === null) return rejected('type_mismatch', d, cap);
    const artifact = await storeArtifact(deps, opened, {
      tenantId,
      eventId,
      artifactId: id,
      direction: 'inbound',
      kind: d.kind,
      contentType,
      bytes: fetched.bytes,
      fileName: d.fileName ?? fetched.fileName,
      sourceRef: d.fileId,
    });
    items.push({ artifact, bytes: input.withBytes && d.kind === 'image' ? fetched.bytes : null });
  }
  const caption = input.payload.caption ?? '';
  const text = [caption, ...items.map((it) => describeArtifact(it.artifact))]
    .filter((s) => s !== '')
    .join('\n');
  return { kind: 'ready', items, text };
}

/** `[image attached: photo.jpg, image/jpeg, 12.3 KB]` — what an agent without vision is told. */
export function describeArtifact(
  a: Pick<ArtifactRow, 'kind' | 'file_name' | 'content_type' | 'size_bytes'>,
): string {
  const size =
    a.size_bytes >= 1024 * 1024
      ? `${(a.size_bytes / 1024 / 1024).toFixed(1)} MB`
      : `${(a.size_bytes / 1024).toFixed(1)} KB`;
  return `[${a.kind} attached: ${[a.file_name, a.content_type, size].filter(Boolean).join(', ')}]`;
}

/** An artifact's bytes read back, refused unless they are the bytes its row's digest names. */
async function readChecked(
  opened: OpenedStore,
  a: Pick<ArtifactRow, 'content_ref' | 'content_digest'>,
  cap: number,
): Promise<Uint8Array> {
  const bytes = await opened.store.get(a.content_ref, cap);
  if (sha256Hex(bytes) !== a.content_digest)
    throw new StorageError('digest_mismatch', 'the stored artifact does not match its digest');
  return bytes;
}

const MISSING = Symbol('missing');

/**
 * readChecked, with an object the store does not have as MISSING: no retry brings it back, so the
 * message is refused clearly (artifact_missing) instead of failing the attempt over and over.
 */
async function readOrMissing(
  opened: OpenedStore,
  a: Pick<ArtifactRow, 'content_ref' | 'content_digest'>,
  cap: number,
): Promise<Uint8Array | typeof MISSING> {
  try {
    return await readChecked(opened, a, cap);
  } catch (err) {
    if (err instanceof StorageError && err.reasonClass === 'not_found') return MISSING;
    throw err;
  }
}

/**
 * An attachment the API stored before it recorded the message (console uploads). Its row is
 * written by the API right after the record, or here when that did not happen (the execution ran
 * first, or the API stopped in between): from the object itself, read back and checked against
 * the reference's digest, type allowlist and cap, as a downloaded one is checked.
 */
async function stagedItem(
  deps: ActivityDeps,
  opened: OpenedStore,
  p: {
    tenantId: string;
    eventId: string;
    d: MediaDescriptor;
    staged: StagedArtifact;
    found: ArtifactRow | undefined;
    withBytes: boolean;
  },
): Promise<{ artifact: ArtifactRow; bytes: Uint8Array | null } | Rejected> {
  const { d, staged, found } = p;
  const cap = maxBytesOf(opened.config);
  if (found?.deleting) return rejected('artifact_expired', d, cap);
  if (found) {
    if (found.content_digest !== staged.contentDigest)
      throw new StorageError('digest_mismatch', 'the artifact row does not match the message');
    const bytes = p.withBytes && found.kind === 'image' ? await readOrMissing(opened, found, cap) : null;
    if (bytes === MISSING) return rejected('artifact_missing', d, cap);
    return { artifact: found, bytes };
  }
  const key = artifactKey(p.tenantId, staged.artifactId);
  let read: Uint8Array | typeof MISSING;
  try {
    read = await readOrMissing(opened, { content_ref: key, content_digest: staged.contentDigest }, cap);
  } catch (err) {
    if (err instanceof StorageError && err.reasonClass === 'too_large') return rejected('too_large', d, cap);
    throw err;
  }
  if (read === MISSING) {
    deps.log.warn(
      {
        tenantId: p.tenantId,
        eventId: p.eventId,
        storage: opened.store.storage,
        reason_class: 'artifact_missing',
      },
      opened.store.storage === 'filesystem'
        ? 'console upload not in this process\'s data dir: a filesystem profile needs the API and the worker on one host (README "Artifacts")'
        : 'console upload not in the artifact store',
    );
    return rejected('artifact_missing', d, cap);
  }
  const bytes = read;
  const contentType = bareType(d.mimeType) ?? 'application/octet-stream';
  if (!typeAllowed(opened.config, contentType)) return rejected('type_not_allowed', d, cap);
  if (d.kind === 'image' && sniffImage(bytes) !== contentType) return rejected('type_mismatch', d, cap);
  const artifact = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId: p.tenantId }, (tx) =>
    insertArtifact(
      tx,
      p.tenantId,
      artifactRowOf(opened, {
        tenantId: p.tenantId,
        artifactId: staged.artifactId,
        eventId: p.eventId,
        direction: 'inbound',
        kind: d.kind,
        contentType,
        sizeBytes: bytes.byteLength,
        contentDigest: staged.contentDigest,
        fileName: d.fileName,
        sourceRef: null,
      }),
    ),
  );
  return { artifact, bytes: p.withBytes && d.kind === 'image' ? bytes : null };
}

const REJECTION_TEXT: Readonly<Record<MediaRejection, (d: MediaDescriptor, cap: number) => string>> = {
  too_large: (_d, cap) => `is larger than the ${Math.floor(cap / 1024 / 1024) || 1} MB this service accepts`,
  type_not_allowed: (d) => `is of a type this service does not accept (${d.mimeType ?? 'unknown'})`,
  type_mismatch: () => 'does not contain the picture it claims to be',
  provider_refused: () => 'could not be fetched from the messaging service',
  provider_unavailable: () =>
    'could not be fetched from the messaging service right now; please send it again later',
  channel_unsupported: () => 'cannot be received on this channel',
  artifact_expired: () => 'is no longer kept by this service; please send it again',
  artifact_missing: () => 'could not be found in storage; please send it again',
};

type Rejected = Extract<InboundMedia, { kind: 'rejected' }>;

function rejected(reason: MediaRejection, d: MediaDescriptor, cap: number): Rejected {
  const what =
    d.kind === 'image'
      ? 'picture'
      : d.kind === 'audio'
        ? 'voice message'
        : d.kind === 'video'
          ? 'video'
          : 'file';
  return { kind: 'rejected', reason, reply: `Sorry, your ${what} ${REJECTION_TEXT[reason](d, cap)}.` };
}

type Fetched = MediaFetch | { kind: 'unsupported' };

async function download(
  deps: ActivityDeps,
  channel: InboundMessage['channel'],
  binding: Awaited<ReturnType<typeof bindingOfEvent>>,
  tenantId: string,
  d: MediaDescriptor,
  cap: number,
): Promise<Fetched> {
  if (!binding?.secret_ref || !binding.ciphertext || !binding.key_id) return { kind: 'unsupported' };
  const secret = JSON.parse(
    deps.secrets.open(binding.ciphertext, secretAad(tenantId, binding.secret_ref), binding.key_id),
  ) as Record<string, unknown>;
  const config = binding.config;
  const base = (fallback: string) =>
    typeof config.api_base_url === 'string' ? config.api_base_url : fallback;
  const timeoutMs = Math.max(deps.sendTimeoutMs, 5000);
  const once = (): Promise<Fetched> => {
    switch (channel) {
      case 'telegram':
        return telegramDownloadFile({
          apiBaseUrl: base(TELEGRAM_API_BASE),
          botToken: String(secret.bot_token ?? ''),
          fileId: d.fileId,
          maxBytes: cap,
          timeoutMs,
        });
      case 'wecom':
        return wecomDownloadMedia({
          apiBaseUrl: base(WECOM_API_BASE),
          corpId: String(config.corp_id ?? ''),
          corpSecret: String(secret.corp_secret ?? ''),
          agentId: Number(config.agent_id),
          timeoutMs,
          mediaId: d.fileId,
          maxBytes: cap,
        });
      case 'console':
        return Promise.resolve({ kind: 'unsupported' });
      default: {
        const exhaustive: never = channel;
        return exhaustive;
      }
    }
  };
  let result = await once();
  for (let tries = 1; result.kind === 'unavailable' && tries < DOWNLOAD_TRIES; tries++) {
    await sleep(250 * 2 ** tries);
    result = await once();
  }
  return result;
}

const GENERIC_TYPES = new Set(['application/octet-stream', 'binary/octet-stream', '']);

/**
 * The declared type, else the served one, else what the bytes look like — always bare (no
 * parameters: the sender writes them, and the type becomes a storage header). Images are sniffed;
 * for other kinds the sender's declaration stands (the allowlist is about kinds, not a scanner).
 */
function contentTypeOf(d: MediaDescriptor, f: Extract<MediaFetch, { kind: 'ok' }>): string {
  const served = bareType(f.contentType) ?? '';
  const declared = bareType(d.mimeType);
  if (d.kind === 'image') return sniffImage(f.bytes) ?? declared ?? (served || 'application/octet-stream');
  if (declared) return declared;
  if (!GENERIC_TYPES.has(served)) return served;
  if (Buffer.from(f.bytes.subarray(0, 5)).toString('latin1') === '%PDF-') return 'application/pdf';
  return 'application/octet-stream';
}
