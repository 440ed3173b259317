import { sleep } from '@temporalio/activity';
import type { InboundMessage } from '../channels/inbound';
import type { MediaDescriptor } from '../channels/media';
import type { MediaFetch } from '../channels/multipart';
import { TELEGRAM_API_BASE } from '../channels/telegram/client';
import { telegramDownloadFile } from '../channels/telegram/media';
import { WECOM_API_BASE } from '../channels/wecom/client';
import { wecomDownloadMedia } from '../channels/wecom/media';
import { type ArtifactRow, bindingOfEvent, eventArtifacts } from '../db/queries/artifacts';
import { withTenantTx } from '../db/tx';
import { maxBytesOf, typeAllowed } from '../lib/artifact-config';
import { StorageError } from '../lib/artifact-store';
import { secretAad } from '../lib/secret-box';
import type { ExecutionPlan } from '../workflows/shared';
import { loadStoreInputs, openStore, storeArtifact } from './artifacts';
import type { ActivityDeps } from './deps';

// Media in (seeds: architecture §4, "media first lands as an Artifact, then is processed
// asynchronously"): the webhook recorded only the platform's descriptor; the first model turn of
// the execution downloads each attachment from the channel's file API, checks it (size cap, type
// allowlist, that a picture is a picture), stores it as an artifact and gives it to the agent. A
// later turn, or a retried attempt, finds the artifact row (ids derive from the event) and does
// not download again. Anything refused ends the turn with a clear reply and outcome
// `media_rejected` (reason in failure_reason), with no artifact kept.

export type MediaRejection =
  | 'too_large'
  | 'type_not_allowed'
  | 'type_mismatch'
  | 'provider_refused'
  | 'provider_unavailable'
  | 'channel_unsupported';

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
  const loaded = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, async (tx) => ({
    store: await loadStoreInputs(tx, tenantId, input.plan.backendProfile.id),
    stored: await eventArtifacts(tx, tenantId, eventId),
    binding: await bindingOfEvent(tx, tenantId, eventId),
  }));
  if (!loaded.store) throw new StorageError('storage_misconfigured', 'the backend profile is missing');
  const opened = openStore(deps, tenantId, loaded.store);
  const cap = maxBytesOf(opened.config);
  const items: { artifact: ArtifactRow; bytes: Uint8Array | null }[] = [];
  for (const [i, d] of media.entries()) {
    const id = inboundArtifactId(eventId, i);
    const found = loaded.stored.find((a) => a.artifact_id === id);
    if (found) {
      const bytes =
        input.withBytes && found.kind === 'image' ? await opened.store.get(found.content_ref, cap) : null;
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

const REJECTION_TEXT: Readonly<Record<MediaRejection, (d: MediaDescriptor, cap: number) => string>> = {
  too_large: (_d, cap) => `is larger than the ${Math.floor(cap / 1024 / 1024) || 1} MB this service accepts`,
  type_not_allowed: (d) => `is of a type this service does not accept (${d.mimeType ?? 'unknown'})`,
  type_mismatch: () => 'does not contain the picture it claims to be',
  provider_refused: () => 'could not be fetched from the messaging service',
  provider_unavailable: () =>
    'could not be fetched from the messaging service right now; please send it again later',
  channel_unsupported: () => 'cannot be received on this channel',
};

function rejected(reason: MediaRejection, d: MediaDescriptor, cap: number): InboundMedia {
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

/** A type as we keep it: `type/subtype` only, lower case; anything else is no type at all. */
const BARE_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/;
const bareType = (t: string | null | undefined): string | null => {
  const bare = (t ?? '').split(';')[0]!.trim().toLowerCase();
  return BARE_TYPE.test(bare) ? bare : null;
};

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

/** The image type the bytes' signature says, or null when they are not a picture we know. */
export function sniffImage(bytes: Uint8Array): string | null {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, 16));
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (b.length >= 8 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])))
    return 'image/png';
  if (
    b.length >= 6 &&
    (b.subarray(0, 6).toString('latin1') === 'GIF87a' || b.subarray(0, 6).toString('latin1') === 'GIF89a')
  )
    return 'image/gif';
  if (
    b.length >= 12 &&
    b.subarray(0, 4).toString('latin1') === 'RIFF' &&
    b.subarray(8, 12).toString('latin1') === 'WEBP'
  )
    return 'image/webp';
  return null;
}
