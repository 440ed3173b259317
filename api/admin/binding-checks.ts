import { type OwnershipFailure, proveTelegramBot, proveWecomApp } from '../../channels/ownership';
import { TELEGRAM_API_BASE } from '../../channels/telegram/client';
import { WECOM_API_BASE } from '../../channels/wecom/client';
import { lockSealedSecret } from '../../db/queries/admin/secrets';
import type { TransactionSql } from '../../db/tx';
import { secretAad } from '../../lib/secret-box';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { fieldError } from './errors';
import { CHANNEL_PURPOSE, TelegramSecret, WecomSecret } from './secret-purpose';

// What activating a binding requires (API contract "Channel secrets"): a secret of the channel's
// purpose and shape, and proof from the provider that it controls the binding's account. The value
// is opened here, in the admin path, only for these checks; it is never returned or logged, and
// refusals name the missing fields or the class of failure, never their content.

export interface ActivationTarget {
  channel: 'telegram' | 'wecom';
  provider_account_id: string;
  secret_ref: string;
  config?: Record<string, unknown>;
}

/** The binding secret as checked: its version (to detect a rotation in between) and its value. */
export type CheckedSecret =
  | { channel: 'telegram'; version: number; value: TelegramSecret }
  | { channel: 'wecom'; version: number; value: WecomSecret };

/**
 * Throws unless the binding's secret allows activation: it exists in this tenant (400 otherwise),
 * has the channel's purpose (400), is active, opens under the current master key and has the
 * channel's shape, and for Telegram the bot token names provider_account_id (409 conflict
 * otherwise). The secret stays share-locked until the transaction ends, so it cannot be rotated
 * underneath the check.
 */
export async function checkActivation(
  tx: TransactionSql,
  deps: AppDeps,
  tenantId: string,
  b: ActivationTarget,
): Promise<CheckedSecret> {
  const sealed = await lockSealedSecret(tx, tenantId, b.secret_ref);
  if (!sealed) throw fieldError('secret_ref', 'no such secret in this tenant');
  const purpose = CHANNEL_PURPOSE[b.channel];
  if (sealed.purpose !== purpose) {
    throw new ApiError(
      'validation_failed',
      `secret_ref must reference a secret of purpose ${purpose}; this one is ${sealed.purpose}.`,
      { fields: [{ path: 'secret_ref', message: `must reference a secret of purpose ${purpose}` }] },
    );
  }
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
  // Values stored before purposes existed were not shape-checked when written: checked here again.
  const shape = b.channel === 'telegram' ? TelegramSecret.safeParse(value) : WecomSecret.safeParse(value);
  if (!shape.success) {
    const fields = [...new Set(shape.error.issues.map((i) => i.path.join('.') || '(value)'))];
    throw new ApiError('conflict', `The binding secret does not have the ${b.channel} shape.`, {
      secret_fields: fields,
    });
  }
  if (b.channel === 'telegram') {
    const telegram = shape.data as TelegramSecret;
    if (telegram.bot_token.split(':')[0] !== b.provider_account_id) {
      throw new ApiError('conflict', "provider_account_id is not the id of the secret's bot token.");
    }
    return { channel: 'telegram', version: sealed.version, value: telegram };
  }
  return { channel: 'wecom', version: sealed.version, value: shape.data as WecomSecret };
}

/** Bounds each provider call of an activation; the proof runs outside any transaction. */
const PROOF_TIMEOUT_MS = 5000;

const FAILURE_TEXT: Readonly<Record<OwnershipFailure, string>> = {
  token_rejected: "the provider rejected the binding secret's credentials",
  // Also the answer when another tenant's active binding serves the account (see bindings.ts):
  // that binding is not revealed, so the text holds for both.
  account_mismatch:
    'the provider did not confirm these credentials for this provider account; if they are right, ' +
    'ask the platform operator',
  provider_unreachable: 'the provider could not be reached or did not answer as expected; retry later',
  egress_denied: "the binding's api_base_url is refused by the egress policy",
  api_base_not_allowed:
    "the binding's api_base_url is not the provider's own; proofs go only to it or to bases the platform allows (SWITCHYARD_PROOF_API_BASES)",
};

/** 409 conflict, reason `ownership_not_proven`, for one class of failure. */
export function ownershipNotProven(failure: OwnershipFailure): ApiError {
  return new ApiError(
    'conflict',
    `Ownership of the provider account was not proven: ${FAILURE_TEXT[failure]}.`,
    {
      reason: 'ownership_not_proven',
      failure,
    },
  );
}

/**
 * Asks the provider, at the binding's api base URL, whether the checked secret controls the
 * binding's account: Telegram getMe must answer provider_account_id; WeCom gettoken must succeed
 * for config.corp_id. Throws ownershipNotProven otherwise. Call it outside a transaction (it waits
 * on the network), then check again in the writing transaction that the secret version is the
 * one proven (sameSecret).
 */
export async function proveOwnership(
  deps: Pick<AppDeps, 'proofApiBases'>,
  b: ActivationTarget,
  secret: CheckedSecret,
): Promise<void> {
  const config = b.config ?? {};
  const base = (fallback: string) =>
    typeof config.api_base_url === 'string' ? config.api_base_url : fallback;
  // A proof answered by a server the tenant chose proves nothing (it can claim any bot id): only
  // the provider's own API, or a base the platform operator allows (a sandbox, a regional proxy),
  // may answer it.
  const official = secret.channel === 'telegram' ? TELEGRAM_API_BASE : WECOM_API_BASE;
  const asked = base(official).replace(/\/+$/, '');
  const allowed = deps.proofApiBases ?? [];
  if (asked !== official && allowed !== 'any' && !allowed.includes(asked)) {
    throw ownershipNotProven('api_base_not_allowed');
  }
  const result =
    secret.channel === 'telegram'
      ? await proveTelegramBot({
          apiBaseUrl: base(TELEGRAM_API_BASE),
          botToken: secret.value.bot_token,
          botId: b.provider_account_id,
          timeoutMs: PROOF_TIMEOUT_MS,
        })
      : await proveWecomApp({
          apiBaseUrl: base(WECOM_API_BASE),
          corpId: String(config.corp_id ?? ''),
          corpSecret: secret.value.corp_secret,
          agentId: Number(config.agent_id),
          timeoutMs: PROOF_TIMEOUT_MS,
        });
  if (!result.ok) throw ownershipNotProven(result.failure);
}

/** 409 when the secret was rotated between the proof and the write: the proof was of another value. */
export function sameSecret(proven: CheckedSecret, current: CheckedSecret): void {
  if (proven.version !== current.version) {
    throw new ApiError('conflict', 'The binding secret was rotated during activation; retry.');
  }
}
