import { randomBytes } from 'node:crypto';
import { z } from '@hono/zod-openapi';
import { CHANNEL_CAPABILITIES } from '../../channels/capabilities';
import { newId } from '../../db/ids';
import { getAppStatus } from '../../db/queries/admin/apps';
import {
  type BindingRow,
  type BindingStatus,
  getBinding,
  insertBinding,
  listBindings,
  setBindingStatus,
} from '../../db/queries/admin/bindings';
import type { TransactionSql } from '../../db/tx';
import { contentDigest } from '../../lib/digest';
import type { Channel } from '../../workflows/shared';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { routeKeyDigest } from '../ingress/candidate';
import { scopedTenant } from './auth';
import { activationWrite, displaceBinding, refuseTenantDuplicate } from './binding-activation';
import {
  type ActivationTarget,
  type CheckedSecret,
  checkActivation,
  proveOwnership,
  sameSecret,
} from './binding-checks';
import { adminTx, audit, requireTenant, requireWritableTenant, tenantTx } from './context';
import type { AdminApp } from './env';
import { fieldError } from './errors';
import { pageBody, pageParams } from './pagination';
import { adminRoute } from './route';
import {
  ExpectedVersion,
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
import { CHANNEL_PURPOSE, requireSecretPurpose } from './secret-purpose';

const Status = z.enum(['draft', 'active', 'suspended', 'disabled']);
const apiBaseUrl = z.url({ protocol: /^https?$/, error: 'api_base_url must be an http(s) URL' }).max(2000);
const unknownSendPolicy = z.enum(['dlq', 'resend_possible_duplicate']);

/**
 * `live_drafts` (default false): the reply is shown while the model writes it, as one message edited
 * in place (activities/live-drafts.ts). Only a channel whose capabilities have `drafts` takes it.
 */
function liveDrafts(channel: Channel) {
  const ok = CHANNEL_CAPABILITIES[channel].drafts;
  return (
    z
      .boolean()
      .optional()
      // Only turning it on needs drafts: `false` (the default, said explicitly) is fine anywhere.
      .refine((v) => v !== true || ok, {
        message: `live_drafts needs a channel that supports drafts (telegram); ${channel} does not`,
      })
      .openapi({
        description:
          'Show the reply while it is written (one message edited as text arrives; needs a model ' +
          'profile with stream: true). Only channels whose capabilities have drafts (telegram).',
      })
  );
}

const TelegramConfig = z
  .object({
    api_base_url: apiBaseUrl.optional(),
    unknown_send_policy: unknownSendPolicy.optional(),
    live_drafts: liveDrafts('telegram'),
  })
  .strict();
const WecomConfig = z
  .object({
    corp_id: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,64}$/, 'corp_id must be 1-64 characters of A-Z, a-z, 0-9, _ and -'),
    agent_id: z.number().int().min(0),
    api_base_url: apiBaseUrl.optional(),
    unknown_send_policy: unknownSendPolicy.optional(),
    live_drafts: liveDrafts('wecom'),
  })
  .strict();

const common = {
  app_id: z.string().min(1).max(200),
  secret_ref: z.string().min(1).max(200),
  activate: z.boolean().optional(),
};

const CreateBody = z
  .discriminatedUnion('channel', [
    z
      .object({
        channel: z.literal('telegram'),
        provider_account_id: z
          .string()
          .regex(/^[1-9]\d{0,19}$/, "for telegram, provider_account_id is the bot's numeric id"),
        config: TelegramConfig.optional(),
        ...common,
      })
      .strict(),
    z
      .object({
        channel: z.literal('wecom'),
        provider_account_id: z.string().min(3).max(200),
        config: WecomConfig,
        ...common,
      })
      .strict(),
    // The operator console's chat preview: no provider, so no account, secret or config. Its
    // provider_account_id is its own binding id (one active binding per "account" holds trivially).
    // A `config` given anyway (live_drafts, say) is refused with a message saying why.
    z.strictObject(
      { channel: z.literal('console'), app_id: common.app_id, activate: common.activate },
      {
        error: (iss) =>
          iss.code === 'unrecognized_keys' && iss.keys.includes('config')
            ? 'a console binding takes no config (live_drafts needs a channel with drafts: telegram)'
            : undefined,
      },
    ),
  ])
  .openapi('CreateBinding');

const TransitionBody = z
  .object({
    expected_version: ExpectedVersion,
    next_status: Status,
    reason: z.string().trim().min(1).max(1000).optional(),
    displace_binding: z
      .object({ tenant_id: z.string().min(1).max(200), binding_id: z.string().min(1).max(200) })
      .strict()
      .optional()
      .openapi({
        description:
          'Platform token only, with next_status active and a reason: once this binding has proven ' +
          'ownership of its account, the named active binding of the same channel account (in any ' +
          'tenant) is suspended in the same transaction, audited in its tenant with the reason.',
      }),
  })
  .strict()
  .openapi('BindingStatusTransition');

const BindingSchema = z
  .object({
    binding_id: z.string(),
    channel: z.enum(['telegram', 'wecom', 'console']),
    provider_account_id: z.string().openapi({ description: 'For console: the binding id' }),
    app_id: z.string(),
    secret_ref: z.string().nullable().openapi({ description: 'null exactly for a console binding' }),
    config: JsonObject,
    config_digest: z.string(),
    status: Status,
    version: z.number(),
    capability_version: z.number().openapi({ description: 'Version of the capability vocabulary' }),
    capabilities: z
      .object({
        typing: z.boolean(),
        drafts: z.boolean(),
        media_in: z.array(z.string()),
        media_out: z.array(z.string()),
        text_limit: z.object({ unit: z.string(), max: z.number() }),
      })
      .passthrough()
      .openapi({
        description:
          'What the channel supports: typing indicator, live drafts, attachment kinds received ' +
          "(downloaded and given to the agent) and sent, and one text segment's limit.",
      }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('Binding');

const NewBindingSchema = BindingSchema.extend({
  route_key: z
    .string()
    .nullable()
    .openapi({ description: 'Shown once: only its digest is stored. null for console (no webhook).' }),
  webhook_path: z
    .string()
    .nullable()
    .openapi({ example: '/v1/webhooks/telegram/<route_key>', description: 'null for console' }),
}).openapi('NewBinding');

/** What activating `b` must check and prove; null for a console binding, which has no provider. */
function activationTargetOf(b: BindingRow): ActivationTarget | null {
  if (b.channel === 'console' || b.secret_ref === null) return null;
  return {
    channel: b.channel,
    provider_account_id: b.provider_account_id,
    secret_ref: b.secret_ref,
    config: b.config,
  };
}

const toJson = (r: BindingRow): z.infer<typeof BindingSchema> => ({
  binding_id: r.binding_id,
  channel: r.channel,
  provider_account_id: r.provider_account_id,
  app_id: r.app_id,
  secret_ref: r.secret_ref,
  config: r.config,
  config_digest: r.config_digest,
  status: r.status,
  version: r.version,
  capability_version: r.capability_version,
  capabilities: r.capabilities as z.infer<typeof BindingSchema>['capabilities'],
  created_at: isoNN(r.created_at),
  updated_at: isoNN(r.updated_at),
});

/** draft → active; active ⇄ suspended; anything but disabled → disabled (terminal). */
const ALLOWED: Readonly<Record<BindingStatus, readonly BindingStatus[]>> = {
  draft: ['active', 'disabled'],
  active: ['suspended', 'disabled'],
  suspended: ['active', 'disabled'],
  disabled: [],
};
const ACTION: Readonly<Record<BindingStatus, string>> = {
  draft: 'binding.draft',
  active: 'binding.activate',
  suspended: 'binding.suspend',
  disabled: 'binding.disable',
};

const tags = ['bindings'];
const BindingParams = TenantParams.extend({ binding_id: pathId('binding_id') });

const createBindingRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/bindings',
  tags,
  summary: 'Create a channel binding (route key returned once)',
  description:
    'With `activate: true` it is created active, which requires its secret to exist in this tenant ' +
    'with the channel purpose (telegram_bot, wecom_app; else 400), be active and have the channel ' +
    'shape (else 409 conflict), and the provider to confirm that it controls the account (Telegram ' +
    'getMe answers provider_account_id, WeCom gettoken succeeds for corp_id; else 409 conflict with ' +
    'details.reason `ownership_not_proven`). An active binding of another tenant for the account ' +
    'gives that same 409; one of this tenant is named. A `console` binding (the operator ' +
    "console's chat preview) takes no provider_account_id, secret_ref or config (400 if given): " +
    'its provider_account_id is its binding id, and activating it needs no secret and no proof.',
  request: { params: TenantParams, body: jsonBody(CreateBody) },
  errors: [400, 403, 404, 409],
  responses: { 201: jsonResponse(NewBindingSchema, 'The binding') },
});

const listBindingsRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/bindings',
  tags,
  summary: 'List bindings (never route keys)',
  request: { params: TenantParams, query: ListQuery },
  errors: [400, 404],
  responses: { 200: jsonResponse(pageOf(BindingSchema), 'A page') },
});

const getBindingRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/bindings/{binding_id}',
  tags,
  summary: 'One binding',
  request: { params: BindingParams },
  errors: [404],
  responses: { 200: jsonResponse(BindingSchema, 'The binding') },
});

const transitionRoute = adminRoute({
  method: 'post',
  path: '/v1/admin/tenants/{tenant_id}/bindings/{binding_id}/status-transitions',
  tags,
  summary: 'Activate, suspend or disable a binding (activation runs the secret and ownership checks)',
  description:
    'Activation runs the checks of a create with `activate: true`, the proof of ownership included; ' +
    'a failure changes nothing.',
  request: { params: BindingParams, body: jsonBody(TransitionBody) },
  errors: [400, 403, 404, 409],
  responses: { 200: jsonResponse(BindingSchema, 'The binding') },
});

export function registerBindingRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(createBindingRoute, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const body = c.req.valid('json');
    const config: Record<string, unknown> = body.channel === 'console' ? {} : (body.config ?? {});
    if (
      body.channel === 'wecom' &&
      body.provider_account_id !== `${body.config.corp_id}/${body.config.agent_id}`
    ) {
      throw fieldError(
        'provider_account_id',
        'for wecom, provider_account_id is "{corp_id}/{agent_id}" of config',
      );
    }
    // 192 random bits, base64url: the shape ingress accepts (/^[A-Za-z0-9_-]{22,128}$/).
    const routeKey = randomBytes(24).toString('base64url');
    const status: BindingStatus = body.activate ? 'active' : 'draft';
    const bindingId = newId('cb');
    const target: ActivationTarget | null = body.channel === 'console' ? null : { ...body, config };
    /** Every check of the create, in the order their errors take precedence. */
    const checks = async (tx: TransactionSql): Promise<CheckedSecret | null> => {
      await requireWritableTenant(tx, tenantId);
      const appStatus = await getAppStatus(tx, tenantId, body.app_id);
      if (!appStatus) throw fieldError('app_id', 'no such app in this tenant');
      if (appStatus !== 'active') throw new ApiError('conflict', 'The app is disabled.');
      if (!target) return null; // console: no secret to check, no provider to ask
      await requireSecretPurpose(tx, tenantId, {
        field: 'secret_ref',
        secretRef: target.secret_ref,
        expected: CHANNEL_PURPOSE[target.channel],
      });
      return status === 'active' ? checkActivation(tx, deps, tenantId, target) : null;
    };
    // Activating: the checks, then the provider's proof outside any transaction, then the write,
    // which checks again and refuses if the secret was rotated in between.
    let proven: CheckedSecret | null = null;
    if (status === 'active' && target) {
      proven = await adminTx(deps, tenantId, checks);
      if (proven) await proveOwnership(deps, target, proven);
    }
    const row = await activationWrite(c, () =>
      adminTx(deps, tenantId, async (tx) => {
        const current = await checks(tx);
        if (proven && current && target) {
          sameSecret(proven, current);
          await refuseTenantDuplicate(tx, tenantId, target, null);
        }
        const created = await insertBinding(tx, {
          tenantId,
          bindingId,
          channel: body.channel,
          providerAccountId: target ? target.provider_account_id : bindingId,
          // A console binding has no webhook, but the column is unique and required: the digest
          // of a random key that is never shown.
          routeKeyDigest: routeKeyDigest(routeKey),
          appId: body.app_id,
          secretRef: target ? target.secret_ref : null,
          config,
          configDigest: contentDigest(config),
          status,
        });
        await audit(c, tx, tenantId, {
          action: 'binding.create',
          bindingId: created.binding_id,
          channel: created.channel,
          agentAppId: created.app_id,
          afterVersion: created.version,
          details: { binding_id: created.binding_id, secret_ref: created.secret_ref, status },
        });
        return created;
      }),
    );
    if (row.channel === 'console')
      return c.json({ ...toJson(row), route_key: null, webhook_path: null }, 201);
    const webhookPath = `/v1/webhooks/${row.channel}/${routeKey}`;
    return c.json({ ...toJson(row), route_key: routeKey, webhook_path: webhookPath }, 201);
  });

  admin.openapi(listBindingsRoute, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const params = pageParams(c.req.valid('query'));
    const page = await adminTx(deps, tenantId, async (tx) => {
      await requireTenant(tx, tenantId);
      return listBindings(tx, { tenantId, ...params });
    });
    return c.json(pageBody(page, toJson), 200);
  });

  admin.openapi(getBindingRoute, async (c) => {
    const { binding_id } = c.req.valid('param');
    const row = await tenantTx(c, deps, (tx, tenantId) => getBinding(tx, tenantId, binding_id));
    if (!row) throw new ApiError('not_found', 'No such binding.');
    return c.json(toJson(row), 200);
  });

  admin.openapi(transitionRoute, async (c) => {
    const { tenant_id, binding_id } = c.req.valid('param');
    const tenantId = scopedTenant(c, tenant_id);
    const body = c.req.valid('json');
    const activating = body.next_status === 'active';
    let arbitration: { target: { tenant_id: string; binding_id: string }; reason: string } | null = null;
    if (body.displace_binding) {
      if (c.get('principal').kind !== 'platform') {
        throw new ApiError('forbidden', 'Only the platform token may displace another binding.');
      }
      if (!activating || !body.reason) {
        throw fieldError('displace_binding', 'only with next_status active and a reason');
      }
      arbitration = { target: body.displace_binding, reason: body.reason };
    }
    /** Every check of the transition, in the order their errors take precedence. */
    const checks = async (tx: TransactionSql) => {
      await requireWritableTenant(tx, tenantId);
      const before = await getBinding(tx, tenantId, binding_id);
      if (!before) throw new ApiError('not_found', 'No such binding.');
      if (!ALLOWED[before.status].includes(body.next_status)) {
        throw new ApiError(
          'invalid_transition',
          `A binding cannot go from ${before.status} to ${body.next_status}.`,
        );
      }
      if (before.version !== body.expected_version) {
        throw new ApiError('optimistic_conflict', 'The binding has changed; re-read it and retry.');
      }
      if (!activating) return { before, target: null, secret: null };
      if ((await getAppStatus(tx, tenantId, before.app_id)) !== 'active') {
        throw new ApiError('conflict', 'The app is disabled.');
      }
      const target = activationTargetOf(before);
      if (!target) {
        // console: nothing to prove, and no provider account another binding could serve
        if (arbitration) throw fieldError('displace_binding', 'a console binding serves no provider account');
        return { before, target, secret: null };
      }
      return { before, target, secret: await checkActivation(tx, deps, tenantId, target) };
    };
    // Activating: the checks, then the provider's proof outside any transaction, then the write,
    // which checks again and refuses if the secret was rotated in between.
    let proven: CheckedSecret | null = null;
    if (activating) {
      const first = await adminTx(deps, tenantId, checks);
      proven = first.secret;
      if (proven && first.target) await proveOwnership(deps, first.target, proven);
    }
    const row = await activationWrite(c, () =>
      adminTx(deps, tenantId, async (tx) => {
        const { before, target, secret } = await checks(tx);
        if (proven && secret && target) {
          sameSecret(proven, secret);
          if (arbitration) {
            await displaceBinding(c, tx, tenantId, before, arbitration.target, arbitration.reason);
          } else {
            await refuseTenantDuplicate(tx, tenantId, target, binding_id);
          }
        }
        const updated = await setBindingStatus(tx, {
          tenantId,
          bindingId: binding_id,
          from: before.status,
          status: body.next_status,
          expectedVersion: body.expected_version,
        });
        if (!updated)
          throw new ApiError('optimistic_conflict', 'The binding has changed; re-read it and retry.');
        await audit(c, tx, tenantId, {
          action: ACTION[body.next_status],
          bindingId: binding_id,
          channel: before.channel,
          reason: body.reason ?? null,
          beforeVersion: before.version,
          afterVersion: updated.version,
          details: {
            binding_id,
            previous_status: before.status,
            next_status: body.next_status,
            ...(arbitration ? { displaced_other_binding: true } : {}),
          },
        });
        return updated;
      }),
    );
    return c.json(toJson(row), 200);
  });
}
