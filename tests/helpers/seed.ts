import { randomBytes } from 'node:crypto';
import type { Sql } from 'postgres';
import { routeKeyDigest } from '../../api/ingress/candidate';
import { newId } from '../../db/ids';
import { contentDigest } from '../../lib/digest';
import { type SecretBox, secretAad } from '../../lib/secret-box';

export interface SeededTelegram {
  tenantId: string;
  appId: string;
  bindingId: string;
  routeKey: string;
  botToken: string;
  webhookSecret: string;
  botId: string;
}

let seq = 0;
const uniqueKey = (prefix: string) => `${prefix}-${process.pid}-${Date.now().toString(36)}-${seq++}`;

/**
 * Seeds, as the schema owner, one tenant with everything a Telegram message needs: a scripted model
 * profile, a published revision, a default backend profile and an active binding whose secret is
 * sealed with the test master key. Lower-layer tests use it; admin API tests go through the API.
 */
export async function seedTelegramTenant(
  sql: Sql,
  secrets: SecretBox,
  opts: {
    apiBaseUrl: string;
    scripted?: unknown;
    tools?: unknown[];
    maxConcurrentExecutions?: number;
    tenantStatus?: 'active' | 'suspended';
    config?: Record<string, unknown>;
  },
): Promise<SeededTelegram> {
  const tenantId = newId('t');
  const appId = newId('app');
  const mpId = newId('mp');
  const bpId = newId('bp');
  const secretRef = newId('sec');
  const bindingId = newId('cb');
  const botId = String(100000 + Math.floor(Math.random() * 1e9));
  const botToken = `${botId}:TEST${randomBytes(12).toString('hex')}`;
  const webhookSecret = randomBytes(16).toString('hex');
  const routeKey = randomBytes(16).toString('base64url');
  const scripted = opts.scripted ?? { rules: [], default_reply: 'You said: {{text}}' };
  const config = { api_base_url: opts.apiBaseUrl, ...opts.config };

  await sql.begin(async (tx) => {
    await tx`insert into tenant (tenant_id, tenant_key, display_name) values (${tenantId}, ${uniqueKey('t')}, 'Test tenant')`;
    await tx`insert into secret (tenant_id, secret_ref, name, purpose)
             values (${tenantId}, ${secretRef}, ${uniqueKey('tg')}, 'telegram_bot')`;
    const sealed = secrets.seal(
      JSON.stringify({ bot_token: botToken, webhook_secret_token: webhookSecret }),
      secretAad(tenantId, secretRef),
    );
    await tx`insert into secret_version (tenant_id, secret_ref, version, key_id, ciphertext)
             values (${tenantId}, ${secretRef}, 1, ${secrets.keyId}, ${sealed})`;
    await tx`insert into model_profile (tenant_id, model_profile_id, profile_key, provider, model, content_digest)
             values (${tenantId}, ${mpId}, 'scripted', 'scripted', 'rules', ${contentDigest({ provider: 'scripted' })})`;
    await tx`insert into backend_profile (tenant_id, profile_id, profile_key, provider, content_digest)
             values (${tenantId}, ${bpId}, 'main', 'postgres', ${contentDigest({ provider: 'postgres' })})`;
    await tx`insert into agent_app (tenant_id, app_id, app_key, display_name) values (${tenantId}, ${appId}, 'assistant', 'Assistant')`;
    const tools = opts.tools ?? [];
    await tx`insert into agent_app_revision (tenant_id, app_id, revision, model_profile_id, system_prompt, scripted, tools, content_digest, created_by)
             values (${tenantId}, ${appId}, 1, ${mpId}, 'You are helpful.', ${tx.json(scripted as never)}, ${tx.json(tools as never)},
                     ${contentDigest({ scripted, tools })}, 'test')`;
    await tx`update agent_app set published_revision = 1 where tenant_id = ${tenantId} and app_id = ${appId}`;
    await tx`update tenant set default_backend_profile_id = ${bpId}, default_agent_app_id = ${appId},
             status = ${opts.tenantStatus ?? 'active'}, max_concurrent_executions = ${opts.maxConcurrentExecutions ?? null}
             where tenant_id = ${tenantId}`;
    await tx`insert into channel_binding (tenant_id, binding_id, channel, provider_account_id, public_route_key_digest,
                                          app_id, secret_ref, config, config_digest, status)
             values (${tenantId}, ${bindingId}, 'telegram', ${botId}, ${routeKeyDigest(routeKey)}, ${appId}, ${secretRef},
                     ${tx.json(config as never)}, ${contentDigest(config)}, 'active')`;
  });
  return { tenantId, appId, bindingId, routeKey, botToken, webhookSecret, botId };
}

let updateId = 1000;
let messageId = 1;

/** A Telegram Update for a private text message (or in a group/topic when chat options say so). */
export function telegramTextUpdate(p: {
  chatId: number;
  text: string;
  fromId?: number;
  messageId?: number;
  threadId?: number;
  chatType?: 'private' | 'supergroup';
}) {
  const id = p.messageId ?? messageId++;
  return {
    update_id: updateId++,
    message: {
      message_id: id,
      date: Math.floor(Date.now() / 1000),
      chat: { id: p.chatId, type: p.chatType ?? 'private' },
      from: { id: p.fromId ?? p.chatId, is_bot: false, first_name: 'Test' },
      text: p.text,
      ...(p.threadId === undefined ? {} : { message_thread_id: p.threadId, is_topic_message: true }),
    },
  };
}

/**
 * A scripted agent whose `order <item>` calls a side-effecting `order` tool at `base` (idempotent
 * by provider key, with a receipt URL), for seedTelegramTenant's `scripted` and `tools`.
 */
export function orderToolAgent(base: string): { scripted: unknown; tools: unknown[] } {
  return {
    scripted: {
      rules: [
        {
          match: '^order (\\w+)$',
          tool_call: { name: 'order', arguments: { item: '{{1}}' } },
          reply: 'ordered {{1}}',
        },
      ],
      default_reply: '?',
    },
    tools: [
      {
        name: 'order',
        description: 'places an order',
        parameters: { type: 'object', properties: { item: { type: 'string' } }, required: ['item'] },
        endpoint_url: `${base}/tools/order`,
        side_effect: true,
        idempotency: 'provider_key',
        receipt_url: `${base}/receipts/{key}`,
      },
    ],
  };
}
