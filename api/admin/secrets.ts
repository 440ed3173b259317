import { z } from '@hono/zod-openapi';
import { newId } from '../../db/ids';
import {
  bumpSecretVersion,
  insertSecret,
  insertSecretVersion,
  listSecrets,
  type SecretRow,
} from '../../db/queries/admin/secrets';
import type { TransactionSql } from '../../db/tx';
import { secretAad } from '../../lib/secret-box';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { scopedTenant } from './auth';
import { adminTx, audit, requireTenant, requireWritableTenant, tenantTx } from './context';
import type { AdminApp } from './env';
import { pageBody, pageParams } from './pagination';
import { adminRoute } from './route';
import {
  isoNN,
  JsonObject,
  jsonBody,
  jsonResponse,
  ListQuery,
  pageOf,
  pathId,
  TenantParams,
  Timestamp,
} from './schemas';
import { Purpose, requireShape } from './secret-purpose';

// Secrets are write-only: values are sealed on the way in and never leave through this API, a
// log line, an audit entry or an error. The value schema's messages name the rule only (zod
// does not quote input), so a rejected request does not echo what it carried. A secret's purpose
// is fixed at creation (the rotate body has no such field, and a trigger refuses the change); its
// value must have that purpose's shape on creation and on every rotation.

const MAX_VALUE_CHARS = 64 * 1024;

const SecretValue = z
  .union([z.string().min(1, 'value must not be empty').max(MAX_VALUE_CHARS), JsonObject])
  .openapi({ description: 'A string or a JSON object. Never returned.', writeOnly: true });

const SecretName = z
  .string()
  .regex(
    /^[a-z][a-z0-9_-]{0,63}$/,
    "name must be 1-64 characters of a-z, 0-9, '_' and '-', starting with a letter",
  );

const CreateSecretBody = z
  .object({ name: SecretName, purpose: Purpose, value: SecretValue })
  .strict()
  .openapi('CreateSecret');
const RotateSecretBody = z.object({ value: SecretValue }).strict().openapi('RotateSecret');

const SecretSchema = z
  .object({
    secret_ref: z.string(),
    name: z.string(),
    purpose: Purpose,
    version: z.number(),
    status: z.enum(['active', 'disabled']),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('SecretMetadata');

const toJson = (r: SecretRow): z.infer<typeof SecretSchema> => ({
  secret_ref: r.secret_ref,
  name: r.name,
  purpose: r.purpose,
  version: r.current_version,
  status: r.status,
  created_at: isoNN(r.created_at),
  updated_at: isoNN(r.updated_at),
});

const tags = ['secrets'];

const createSecret = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/secrets',
  tags,
  summary: 'Store a secret (write-only) for one purpose',
  description:
    'The value must have the shape of its purpose (else 400 naming the fields); the purpose never ' +
    'changes afterwards and decides what may reference the secret.',
  request: { params: TenantParams, body: jsonBody(CreateSecretBody) },
  errors: [400, 403, 404, 409],
  responses: { 201: jsonResponse(SecretSchema, 'Its reference and version 1') },
});

const rotateSecret = adminRoute({
  method: 'put',
  path: '/v1/admin/tenants/{tenant_id}/secrets/{name}',
  tags,
  summary: 'Rotate a secret: its value becomes a new version',
  description: "The new value must have the shape of the secret's purpose (else 400 naming the fields).",
  request: { params: TenantParams.extend({ name: pathId('name') }), body: jsonBody(RotateSecretBody) },
  errors: [400, 403, 404, 409],
  responses: { 200: jsonResponse(SecretSchema, 'The new current version') },
});

const listSecretsRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/secrets',
  tags,
  summary: 'Secret metadata (never values)',
  request: { params: TenantParams, query: ListQuery },
  errors: [400, 404],
  responses: { 200: jsonResponse(pageOf(SecretSchema), 'A page of secrets') },
});

/** Sealed under AAD = tenant + ref: a ciphertext copied to another tenant or ref does not open. */
function seal(deps: AppDeps, tenantId: string, secretRef: string, value: string | Record<string, unknown>) {
  return deps.secrets.seal(JSON.stringify(value), secretAad(tenantId, secretRef));
}

export function registerSecretRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(createSecret, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const { name, purpose, value } = c.req.valid('json');
    requireShape(purpose, value);
    const secretRef = newId('sec');
    const row = await adminTx(deps, tenantId, async (tx) => {
      await requireWritableTenant(tx, tenantId);
      const created = await insertSecret(tx, {
        tenantId,
        secretRef,
        name,
        purpose,
        keyId: deps.secrets.keyId,
        sealed: seal(deps, tenantId, secretRef, value),
      });
      await audit(c, tx, tenantId, {
        action: 'secret.create',
        afterVersion: 1,
        details: { secret_ref: secretRef, name, purpose },
      });
      return created;
    });
    return c.json(toJson(row), 201);
  });

  admin.openapi(rotateSecret, async (c) => {
    const { name } = c.req.valid('param');
    const { value } = c.req.valid('json');
    const row = await tenantTx(c, deps, async (tx, tenantId) => {
      await requireWritableTenant(tx, tenantId);
      // The UPDATE locks the secret row, so concurrent rotations get consecutive versions.
      const bumped = await bumpSecretVersion(tx, { tenantId, name });
      if (!bumped) throw new ApiError('not_found', 'No such secret.');
      if (bumped.status !== 'active') throw new ApiError('conflict', 'The secret is disabled.');
      // Checked against the locked row's purpose; a refusal rolls the bump back.
      requireShape(bumped.purpose, value);
      if (bumped.purpose === 'telegram_bot') await requireSameBot(tx, tenantId, bumped.secret_ref, value);
      await insertSecretVersion(tx, {
        tenantId,
        secretRef: bumped.secret_ref,
        version: bumped.current_version,
        keyId: deps.secrets.keyId,
        sealed: seal(deps, tenantId, bumped.secret_ref, value),
      });
      await audit(c, tx, tenantId, {
        action: 'secret.rotate',
        beforeVersion: bumped.current_version - 1,
        afterVersion: bumped.current_version,
        details: { secret_ref: bumped.secret_ref, name },
      });
      return bumped;
    });
    return c.json(toJson(row), 200);
  });

  admin.openapi(listSecretsRoute, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const params = pageParams(c.req.valid('query'));
    const page = await adminTx(deps, tenantId, async (tx) => {
      await requireTenant(tx, tenantId);
      return listSecrets(tx, { tenantId, ...params });
    });
    return c.json(pageBody(page, toJson), 200);
  });
}

/**
 * A Telegram secret serving active bindings may only be rotated to a token of the bot they serve:
 * the bot id is the token's prefix, and the ownership proved at activation was of that bot. Another
 * bot's token is a new binding (activated, so proven), not a rotation. 409 otherwise.
 */
async function requireSameBot(tx: TransactionSql, tenantId: string, secretRef: string, value: unknown) {
  const token = (value as { bot_token?: unknown } | null)?.bot_token;
  const botId = typeof token === 'string' ? token.split(':')[0] : '';
  const serving = await tx<{ binding_id: string; provider_account_id: string }[]>`
    select binding_id, provider_account_id from channel_binding
    where tenant_id = ${tenantId} and secret_ref = ${secretRef} and status = 'active'`;
  const other = serving.filter((b) => b.provider_account_id !== botId);
  if (other.length > 0) {
    throw new ApiError(
      'conflict',
      `The new bot token is not for the bot the active binding(s) ${other.map((b) => b.binding_id).join(', ')} serve; rotate to a token of that bot, or suspend them first.`,
    );
  }
}
