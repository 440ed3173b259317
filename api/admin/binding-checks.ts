import { z } from '@hono/zod-openapi';
import { lockSealedSecret } from '../../db/queries/admin/secrets';
import type { TransactionSql } from '../../db/tx';
import { secretAad } from '../../lib/secret-box';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { fieldError } from './errors';

// What activating a binding requires of its secret (API contract "Channel secrets"). The value
// is opened here, in the admin path, only to check its shape; it is never returned or logged,
// and refusals name the missing fields, never their content.

const TelegramSecret = z.object({
  bot_token: z.string().regex(/^[1-9]\d{0,19}:[A-Za-z0-9_-]{1,200}$/),
  // Telegram's own alphabet and length for setWebhook's secret_token.
  webhook_secret_token: z.string().regex(/^[A-Za-z0-9_-]{1,256}$/),
});

const WecomSecret = z.object({
  token: z.string().min(1).max(128),
  encoding_aes_key: z.string().regex(/^[A-Za-z0-9]{43}$/),
  corp_secret: z.string().min(1).max(512),
});

export interface ActivationTarget {
  channel: 'telegram' | 'wecom';
  provider_account_id: string;
  secret_ref: string;
}

/**
 * Throws unless the binding may be active: its secret exists in this tenant (400 otherwise),
 * is active, opens under the current master key and has the channel's shape, and for Telegram
 * the bot token belongs to provider_account_id (409 conflict otherwise). The secret stays
 * share-locked until the transaction ends, so it cannot be rotated underneath the check.
 */
export async function checkActivation(
  tx: TransactionSql,
  deps: AppDeps,
  tenantId: string,
  b: ActivationTarget,
): Promise<void> {
  const sealed = await lockSealedSecret(tx, tenantId, b.secret_ref);
  if (!sealed) throw fieldError('secret_ref', 'no such secret in this tenant');
  if (sealed.status !== 'active') throw new ApiError('conflict', 'The binding secret is disabled.');
  let value: unknown;
  try {
    value = JSON.parse(
      deps.secrets.open(sealed.ciphertext, secretAad(tenantId, b.secret_ref), sealed.key_id),
    );
  } catch {
    throw new ApiError(
      'conflict',
      'The binding secret cannot be read as a JSON object under the current master key.',
    );
  }
  const shape = b.channel === 'telegram' ? TelegramSecret.safeParse(value) : WecomSecret.safeParse(value);
  if (!shape.success) {
    const fields = [...new Set(shape.error.issues.map((i) => i.path.join('.') || '(value)'))];
    throw new ApiError('conflict', `The binding secret does not have the ${b.channel} shape.`, {
      secret_fields: fields,
    });
  }
  if (b.channel === 'telegram') {
    const botId = (shape.data as z.infer<typeof TelegramSecret>).bot_token.split(':')[0];
    if (botId !== b.provider_account_id) {
      throw new ApiError('conflict', "provider_account_id is not the id of the secret's bot token.");
    }
  }
}
