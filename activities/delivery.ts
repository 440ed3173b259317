import { ApplicationFailure } from '@temporalio/activity';
import type { SendResult } from '../channels/send-result';
import { TELEGRAM_API_BASE, telegramSendMessage } from '../channels/telegram/client';
import { bindingSecret, type ClaimedSegment, claimSegment, recordSegmentOutcome } from '../db/queries/outbox';
import { withTenantTx } from '../db/tx';
import { secretAad } from '../lib/secret-box';
import type { ActivityDeps } from './deps';
import { attemptOwner } from './owner';

export interface SegmentDelivery {
  status: 'sent' | 'failed' | 'unknown';
  reasonClass?: string;
}

export function deliveryActivities(deps: ActivityDeps) {
  const app = (tenantId: string) => ({ role: 'tenant_app_writer' as const, tenantId });

  return {
    /**
     * Sends one outbox segment: claim (fence) → send → record. Retryable provider answers throw so
     * Temporal retries with back-off (honouring retry_after); permanent ones fail the segment.
     */
    async sendReplySegment(input: {
      tenantId: string;
      eventId: string;
      segmentId: string;
    }): Promise<SegmentDelivery> {
      const owner = attemptOwner(deps.workerId);
      const claim = await withTenantTx(deps.sql, app(input.tenantId), async (tx) => {
        const c = await claimSegment(tx, {
          tenantId: input.tenantId,
          segmentId: input.segmentId,
          owner,
          leaseSeconds: 60,
        });
        if (!c?.claimed) return { claim: c, secret: null };
        return { claim: c, secret: await bindingSecret(tx, input.tenantId, c.row.binding_id) };
      });
      if (!claim.claim)
        throw ApplicationFailure.nonRetryable(`segment ${input.segmentId} not found`, 'NotFound');
      const seg = claim.claim.row;
      if (!claim.claim.claimed) {
        if (seg.status === 'sent') return { status: 'sent' };
        if (seg.status === 'failed') return { status: 'failed', reasonClass: 'permanent' };
        // Another attempt holds a live lease; retry after it expires.
        throw ApplicationFailure.retryable(`segment ${input.segmentId} is ${seg.status}`, 'SegmentBusy');
      }
      if (!claim.secret)
        throw ApplicationFailure.nonRetryable('binding secret is missing', 'ConfigurationError');

      const secret = JSON.parse(
        deps.secrets.open(
          claim.secret.ciphertext,
          secretAad(input.tenantId, claim.secret.secret_ref),
          claim.secret.key_id,
        ),
      ) as Record<string, unknown>;
      const result = await send(deps, seg, claim.secret.config, secret);
      return record(deps, input.tenantId, seg, result);
    },
  };
}

async function send(
  deps: ActivityDeps,
  seg: ClaimedSegment,
  config: Record<string, unknown>,
  secret: Record<string, unknown>,
): Promise<SendResult> {
  switch (seg.channel) {
    case 'telegram':
      return telegramSendMessage({
        apiBaseUrl: typeof config.api_base_url === 'string' ? config.api_base_url : TELEGRAM_API_BASE,
        botToken: String(secret.bot_token ?? ''),
        chatId: seg.target.chatId,
        threadId: seg.target.threadId,
        text: seg.content,
        timeoutMs: deps.sendTimeoutMs,
      });
    case 'wecom':
      return { kind: 'permanent', reasonClass: 'channel_not_supported' };
    default: {
      const exhaustive: never = seg.channel;
      return exhaustive;
    }
  }
}

async function record(
  deps: ActivityDeps,
  tenantId: string,
  seg: ClaimedSegment,
  result: SendResult,
): Promise<SegmentDelivery> {
  const write = (outcome: Parameters<typeof recordSegmentOutcome>[1]['outcome']) =>
    withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, (tx) =>
      recordSegmentOutcome(tx, {
        tenantId,
        segmentId: seg.segment_id,
        fencingToken: seg.fencing_token,
        outcome,
      }),
    );
  switch (result.kind) {
    case 'sent':
      await write({ status: 'sent', providerMessageId: result.providerMessageId });
      return { status: 'sent' };
    case 'retryable':
      await write({ status: 'retryable', error: result.reasonClass, retryAfterMs: result.retryAfterMs });
      throw ApplicationFailure.create({
        message: `send failed: ${result.reasonClass}`,
        type: 'ProviderRetryable',
        nextRetryDelay: result.retryAfterMs,
      });
    case 'permanent':
      await write({ status: 'failed', error: result.reasonClass });
      return { status: 'failed', reasonClass: result.reasonClass };
    case 'unknown':
      await write({ status: 'unknown', error: result.reasonClass });
      return { status: 'unknown', reasonClass: `unknown_outcome:${result.reasonClass}` };
    default: {
      const exhaustive: never = result;
      return exhaustive;
    }
  }
}
