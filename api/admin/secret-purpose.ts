import { z } from '@hono/zod-openapi';
import { getSecretMeta, type SecretPurpose, type SecretStatus } from '../../db/queries/admin/secrets';
import type { TransactionSql } from '../../db/tx';
import { ApiError } from '../errors';
import { fieldError } from './errors';

// Purpose-bound secrets (API contract "Secrets"): a secret's purpose is fixed when it is created,
// its value must have that purpose's shape on creation and on every rotation, and every reference
// to it must be one its purpose allows. The database enforces the references too (migration 0023).
// Messages name fields and rules, never values.

export const SECRET_PURPOSES = [
  'model_api_key',
  'telegram_bot',
  'wecom_app',
  'tool_credential',
  'object_storage',
] as const satisfies readonly SecretPurpose[];

export const Purpose = z.enum(SECRET_PURPOSES).openapi({
  description:
    'What the secret may be used for; fixed at creation. telegram_bot: `{bot_token, ' +
    'webhook_secret_token}`; wecom_app: `{corp_secret, token, encoding_aes_key}`; model_api_key: ' +
    'the key, or an object carrying it as `api_key`, `key` or `token`; tool_credential: any value; ' +
    'object_storage: `{access_key_id, secret_access_key, session_token?}` for an S3 artifact store.',
});

export const TelegramSecret = z.object({
  bot_token: z
    .string()
    .regex(/^[1-9]\d{0,19}:[A-Za-z0-9_-]{1,200}$/, 'must be a Telegram bot token: "<bot id>:<secret>"'),
  // Telegram's own alphabet and length for setWebhook's secret_token: an empty one would let an
  // empty header verify.
  webhook_secret_token: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,256}$/, "must be 1-256 characters of A-Z, a-z, 0-9, '_' and '-'"),
});
export type TelegramSecret = z.infer<typeof TelegramSecret>;

// Printable ASCII without spaces: each goes into a URL query or a signature base string verbatim.
const wecomField = (max: number) =>
  z.string().regex(new RegExp(`^[\\x21-\\x7e]{1,${max}}$`), `must be 1-${max} printable ASCII characters`);

export const WecomSecret = z.object({
  token: wecomField(128),
  encoding_aes_key: z.string().regex(/^[A-Za-z0-9]{43}$/, 'must be 43 characters of A-Z, a-z and 0-9'),
  corp_secret: wecomField(512),
});
export type WecomSecret = z.infer<typeof WecomSecret>;

const nonBlank = (v: unknown): v is string => typeof v === 'string' && v.trim() !== '';

/** The key itself, or an object carrying it the way the model activity reads it (activities/model.ts). */
const ModelApiKey = z.unknown().superRefine((v, ctx) => {
  if (nonBlank(v)) return;
  if (
    v &&
    typeof v === 'object' &&
    ['api_key', 'key', 'token'].some((k) => nonBlank((v as Record<string, unknown>)[k]))
  ) {
    return;
  }
  ctx.addIssue({
    code: 'custom',
    message: 'must be a non-empty key, or an object with a non-empty api_key, key or token',
  });
});

/** S3 credentials for a backend profile's artifact store (activities/artifacts.ts reads them). */
export const ObjectStorageSecret = z.object({
  access_key_id: z.string().regex(/^[\x21-\x7e]{1,256}$/, 'must be 1-256 printable ASCII characters'),
  secret_access_key: z.string().regex(/^[\x21-\x7e]{1,512}$/, 'must be 1-512 printable ASCII characters'),
  session_token: z.string().min(1).max(4096).optional(),
});

const SHAPES: Readonly<Record<SecretPurpose, z.ZodType>> = {
  telegram_bot: TelegramSecret,
  wecom_app: WecomSecret,
  model_api_key: ModelApiKey,
  tool_credential: z.unknown(),
  object_storage: ObjectStorageSecret,
};

/** The fields of `value` that do not fit `purpose` (empty when it fits), as `value.<field>` paths. */
export function shapeIssues(purpose: SecretPurpose, value: unknown): { path: string; message: string }[] {
  const parsed = SHAPES[purpose].safeParse(value);
  if (parsed.success) return [];
  return parsed.error.issues.map((i) => ({
    path: ['value', ...i.path.map(String)].join('.'),
    message: i.message,
  }));
}

/** 400 unless `value` has the shape of `purpose`: create and rotate share this check. */
export function requireShape(purpose: SecretPurpose, value: unknown): void {
  const fields = shapeIssues(purpose, value);
  if (fields.length > 0) {
    throw new ApiError('validation_failed', `The value does not have the ${purpose} shape.`, { fields });
  }
}

export const CHANNEL_PURPOSE: Readonly<Record<'telegram' | 'wecom', SecretPurpose>> = {
  telegram: 'telegram_bot',
  wecom: 'wecom_app',
};

/**
 * The status of the secret a request references through `field`, after checking that it exists in
 * this tenant and has the purpose the reference needs (400 naming the field and the purpose).
 */
export async function requireSecretPurpose(
  tx: TransactionSql,
  tenantId: string,
  ref: { field: string; secretRef: string; expected: SecretPurpose },
): Promise<SecretStatus> {
  const meta = await getSecretMeta(tx, tenantId, ref.secretRef);
  if (!meta) throw fieldError(ref.field, 'no such secret in this tenant');
  if (meta.purpose !== ref.expected) {
    throw new ApiError(
      'validation_failed',
      `${ref.field} must reference a secret of purpose ${ref.expected}; this one is ${meta.purpose}.`,
      { fields: [{ path: ref.field, message: `must reference a secret of purpose ${ref.expected}` }] },
    );
  }
  return meta.status;
}
