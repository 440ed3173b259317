import { Context } from '@temporalio/activity';
import { z } from 'zod';
import type { AttachmentSpec, ToolExchange } from '../agents/messages';
import { consoleSend } from '../channels/console/client';
import { cleanFileName, sniffImage } from '../channels/media';
import type { SendResult } from '../channels/send-result';
import { TELEGRAM_API_BASE } from '../channels/telegram/client';
import { telegramSendMedia } from '../channels/telegram/media';
import { WECOM_API_BASE } from '../channels/wecom/client';
import { wecomSendMedia } from '../channels/wecom/media';
import { type ArtifactRow, attachmentOfSegment, eventArtifacts } from '../db/queries/artifacts';
import { extendSegmentLease } from '../db/queries/outbox';
import type { ClaimRow } from '../db/queries/steps';
import { withTenantTx } from '../db/tx';
import { maxBytesOf, typeAllowed } from '../lib/artifact-config';
import { StorageError } from '../lib/artifact-store';
import { EgressBodyTooLargeError, egressFetch } from '../lib/egress';
import { openStoreFor, storeArtifact } from './artifacts';
import type { ActivityDeps } from './deps';
import { SEND_LEASE_SECONDS } from './segment-lease';

// Media out: a reply may carry attachments — a scripted rule's `attachments`, or an accepted tool
// result's `attachments` field (`[{ url, kind?, file_name?, caption? }]`). The turn that decides the
// reply fetches each URL through the egress policy (capped, type-checked like inbound media),
// stores it as an outbound artifact (`art_<key>_out<i>`), and the commit adds one outbox segment
// per artifact after the text (`seg_<key>_<i>_att`, segment_kind image | file, payload_ref the
// artifact). Delivery uploads the artifact's bytes (Telegram sendPhoto / sendDocument, WeCom
// media/upload + an image / file message) under the same claim, lease and receipt rules as text.

export const MAX_REPLY_ATTACHMENTS = 10;

const specSchema = z.object({
  url: z.string().min(1).max(2000),
  kind: z.enum(['image', 'file']).optional(),
  file_name: z.string().min(1).max(255).optional(),
  caption: z.string().max(1024).optional(),
});

/** What a reply attaches: the decision's own, then those of accepted tool results, in order. */
export function attachmentSpecsOf(
  decision: { attachments?: AttachmentSpec[] },
  exchanges: readonly ToolExchange[],
): AttachmentSpec[] {
  const fromTools = exchanges.flatMap((x) => {
    if (x.result.status !== 'accepted') return [];
    const list = (x.result.body as { attachments?: unknown } | null)?.attachments;
    if (!Array.isArray(list)) return [];
    return list.flatMap((a) => {
      const parsed = specSchema.safeParse(a);
      return parsed.success ? [parsed.data as AttachmentSpec] : [];
    });
  });
  return [...(decision.attachments ?? []), ...fromTools].slice(0, MAX_REPLY_ATTACHMENTS);
}

export const outboundArtifactId = (eventId: string, i: number) => `art_${eventId.slice(4)}_out${i}`;

/**
 * Fetches and stores the reply's attachments (idempotent: an artifact stored by an earlier attempt
 * is not fetched again). One that cannot be fetched or is refused (too large, type not allowed)
 * is left out and logged; the text still goes. A store that refuses throws StorageError.
 */
export async function storeReplyAttachments(
  deps: ActivityDeps,
  p: { tenantId: string; eventId: string; backendProfileId: string; specs: readonly AttachmentSpec[] },
): Promise<ArtifactRow[]> {
  if (p.specs.length === 0) return [];
  const stored = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId: p.tenantId }, (tx) =>
    eventArtifacts(tx, p.tenantId, p.eventId),
  );
  const opened = await openStoreFor(deps, p.tenantId, p.backendProfileId);
  const cap = maxBytesOf(opened.config);
  const rows: ArtifactRow[] = [];
  for (const [i, spec] of p.specs.entries()) {
    const id = outboundArtifactId(p.eventId, i);
    const found = stored.find((a) => a.artifact_id === id);
    // Marked by retention: its object is being deleted under this id, so it is neither sent nor
    // fetched again (it would be stored under the same, doomed id).
    if (found?.deleting) {
      deps.log.warn(
        { tenantId: p.tenantId, eventId: p.eventId, reason: 'artifact_expired' },
        'reply attachment left out',
      );
      continue;
    }
    if (found) {
      rows.push(found);
      continue;
    }
    const fetched = await fetchAttachment(spec.url, cap, deps.sendTimeoutMs);
    if (!fetched.ok) {
      deps.log.warn(
        { tenantId: p.tenantId, eventId: p.eventId, reason: fetched.reason },
        'reply attachment left out',
      );
      continue;
    }
    const image = sniffImage(fetched.bytes);
    const contentType = image ?? fetched.contentType;
    if (!typeAllowed(opened.config, contentType)) {
      deps.log.warn(
        { tenantId: p.tenantId, eventId: p.eventId, reason: 'type_not_allowed' },
        'reply attachment left out',
      );
      continue;
    }
    const kind = spec.kind === 'file' || !image ? 'file' : 'image';
    const fileName =
      cleanFileName(spec.file_name) ??
      cleanFileName(new URL(spec.url).pathname.split('/').at(-1)) ??
      `attachment-${i}`;
    rows.push(
      await storeArtifact(deps, opened, {
        tenantId: p.tenantId,
        eventId: p.eventId,
        artifactId: id,
        direction: 'outbound',
        kind,
        contentType,
        bytes: fetched.bytes,
        fileName,
        // The caption travels with the artifact to the commit (source_ref holds the URL's origin only).
        sourceRef: spec.caption ? `caption:${spec.caption}` : new URL(spec.url).origin,
      }),
    );
  }
  return rows;
}

async function fetchAttachment(
  url: string,
  cap: number,
  timeoutMs: number,
): Promise<{ ok: true; bytes: Uint8Array; contentType: string } | { ok: false; reason: string }> {
  try {
    const res = await egressFetch(url, {
      signal: AbortSignal.timeout(Math.max(timeoutMs, 5000)),
      maxResponseBytes: cap,
    });
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      return { ok: false, reason: `http_${res.status}` };
    }
    const contentType = (res.headers.get('content-type') ?? 'application/octet-stream')
      .split(';')[0]!
      .trim()
      .toLowerCase();
    return { ok: true, bytes: new Uint8Array(await res.arrayBuffer()), contentType };
  } catch (err) {
    if (err instanceof EgressBodyTooLargeError) return { ok: false, reason: 'too_large' };
    return {
      ok: false,
      reason: (err as Error).name === 'EgressDeniedError' ? 'egress_denied' : 'fetch_failed',
    };
  }
}

export const ATTACHMENT_SEGMENT = /_att$/;
export const isAttachmentSegment = (segmentId: string) => ATTACHMENT_SEGMENT.test(segmentId);

export function captionOf(a: Pick<ArtifactRow, 'source_ref'>): string {
  return a.source_ref?.startsWith('caption:') ? a.source_ref.slice('caption:'.length) : '';
}

/**
 * Sends an attachment segment: its artifact's bytes read back from the store, then uploaded.
 * Nothing reached the provider when the artifact cannot be read: retryable, never unknown.
 */
export async function sendAttachment(
  deps: ActivityDeps,
  tenantId: string,
  seg: ClaimRow,
  config: Record<string, unknown>,
  secret: Record<string, unknown>,
): Promise<SendResult> {
  let bytes: Uint8Array;
  let art: Awaited<ReturnType<typeof attachmentOfSegment>>;
  try {
    art = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, (tx) =>
      attachmentOfSegment(tx, tenantId, seg.segment_id),
    );
    if (!art) return { kind: 'permanent', reasonClass: 'artifact_missing' };
    const opened = await openStoreFor(deps, tenantId, art.backend_profile_id);
    bytes = await opened.store.get(art.content_ref, art.size_bytes);
  } catch (err) {
    return {
      kind: 'retryable',
      reasonClass: err instanceof StorageError ? err.reasonClass : 'artifact_unavailable',
    };
  }
  const kind = art.segment_kind === 'image' ? 'image' : 'file';
  const base = (fallback: string) =>
    typeof config.api_base_url === 'string' ? config.api_base_url : fallback;
  const fileName = art.file_name ?? `${art.artifact_id}`;
  switch (seg.channel) {
    case 'telegram':
      return telegramSendMedia({
        apiBaseUrl: base(TELEGRAM_API_BASE),
        botToken: String(secret.bot_token ?? ''),
        chatId: seg.target.chatId,
        threadId: seg.target.threadId,
        kind,
        bytes,
        contentType: art.content_type,
        fileName,
        caption: seg.content,
        timeoutMs: deps.sendTimeoutMs,
      });
    case 'wecom': {
      // Upload, send and the resend of a possibly applied send (each possibly after a token
      // refresh) are more calls than the lease delivery holds for a WeCom send (worstCaseSendMs):
      // extended first under the claim's fence, so no retry takes the segment over while it is on
      // the wire; and the calls are bounded by that extension (deadlineMs).
      const budgetMs = wecomMediaBudgetMs(deps.sendTimeoutMs, attemptTimeLeftMs());
      // Not the time for an upload, a send and its resend (a quickSends attempt): nothing sent yet.
      if (budgetMs < 3 * deps.sendTimeoutMs) return { kind: 'retryable', reasonClass: 'send_deadline' };
      if (!(await holdMediaLease(deps, tenantId, seg, budgetMs)))
        return { kind: 'retryable', reasonClass: 'lease_lost' };
      return wecomSendMedia({
        apiBaseUrl: base(WECOM_API_BASE),
        corpId: String(config.corp_id ?? ''),
        corpSecret: String(secret.corp_secret ?? ''),
        agentId: Number(config.agent_id),
        timeoutMs: deps.sendTimeoutMs,
        target: seg.target,
        kind,
        bytes,
        contentType: art.content_type,
        fileName,
        deadlineMs: performance.now() + budgetMs,
      });
    }
    case 'console':
      // Recorded as every console segment is (channels/console/client.ts).
      return consoleSend({ segmentId: seg.segment_id });
    default: {
      const exhaustive: never = seg.channel;
      return exhaustive;
    }
  }
}

/**
 * WeCom calls of one attachment send at worst, each up to sendTimeoutMs: the upload (token +
 * upload, and again after a rejected token: 4), the send (token + send, and again after a rejected
 * token: 4) and its resend with the same media_id (4 again).
 */
export const WECOM_MEDIA_CALLS = 12;
/** Left on the lease for recording the receipt (as segment-lease.ts keeps). */
const MEDIA_LEASE_MARGIN_MS = 5000;

/**
 * How long the WeCom calls of one attachment may take: the worst case, cut to what is left of the
 * activity attempt (12 × the 10 s send timeout is more than the `sends` activity's 1 minute and
 * the `quickSends` 20 s StartToClose, workflows/options.ts) less the receipt's margin. The lease is
 * extended by this much and wecomSendMedia stops at it (deadlineMs), so the calls never outlive
 * the attempt or the lease; what does not fit is left to the next attempt before the image is
 * sent, or is unknown after it (channels/wecom/media.ts).
 */
export function wecomMediaBudgetMs(sendTimeoutMs: number, attemptLeftMs: number): number {
  return Math.max(0, Math.min(WECOM_MEDIA_CALLS * sendTimeoutMs, attemptLeftMs - MEDIA_LEASE_MARGIN_MS));
}

/** What is left of this activity attempt's StartToClose; outside an activity, the send lease. */
function attemptTimeLeftMs(): number {
  try {
    const info = Context.current().info;
    return info.currentAttemptScheduledTimestampMs + info.startToCloseTimeoutMs - Date.now();
  } catch {
    return SEND_LEASE_SECONDS * 1000;
  }
}

async function holdMediaLease(
  deps: ActivityDeps,
  tenantId: string,
  seg: ClaimRow,
  ms: number,
): Promise<boolean> {
  // Nothing was sent yet: a database blip here is a retry, like a lost fence (the retry sees it).
  return withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, (tx) =>
    extendSegmentLease(tx, {
      tenantId,
      segmentId: seg.segment_id,
      fencingToken: seg.fencing_token,
      ms: ms + MEDIA_LEASE_MARGIN_MS,
    }),
  ).catch(() => false);
}
