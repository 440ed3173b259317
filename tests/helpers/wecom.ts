import { randomBytes } from 'node:crypto';
import type { Sql } from 'postgres';
import { routeKeyDigest } from '../../api/ingress/candidate';
import { computeSignature, encrypt } from '../../channels/wecom/crypto';
import { newId } from '../../db/ids';
import { contentDigest } from '../../lib/digest';
import { type SecretBox, secretAad } from '../../lib/secret-box';

export interface SeededWecom {
  tenantId: string;
  appId: string;
  bindingId: string;
  routeKey: string;
  corpId: string;
  agentId: number;
  corpSecret: string;
  token: string;
  encodingAesKey: string;
}

let seq = 0;
const uniqueKey = (prefix: string) => `${prefix}-${process.pid}-${Date.now().toString(36)}-${seq++}`;

/** A 43-character EncodingAESKey as the WeCom console generates them (alphanumerics). */
export function randomEncodingAesKey(): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return Array.from(randomBytes(43), (b) => alphabet[b % alphabet.length]).join('');
}

/**
 * Seeds, as the schema owner, one tenant with everything a WeCom message needs: a scripted model
 * profile, a published revision, a default backend profile and a WeCom binding (active unless told
 * otherwise) whose secret `{ token, encoding_aes_key, corp_secret }` is sealed with the test master
 * key; config `{ corp_id, agent_id, api_base_url? }`. Modelled on seedTelegramTenant.
 */
export async function seedWecomTenant(
  sql: Sql,
  secrets: SecretBox,
  opts: {
    apiBaseUrl?: string;
    scripted?: unknown;
    tenantStatus?: 'active' | 'suspended' | 'disabled';
    bindingStatus?: 'draft' | 'active' | 'suspended' | 'disabled';
    config?: Record<string, unknown>;
  } = {},
): Promise<SeededWecom> {
  const tenantId = newId('t');
  const appId = newId('app');
  const mpId = newId('mp');
  const bpId = newId('bp');
  const secretRef = newId('sec');
  const bindingId = newId('cb');
  const corpId = `ww${randomBytes(8).toString('hex')}`;
  const agentId = 1000000 + Math.floor(Math.random() * 1e6);
  const corpSecret = randomBytes(24).toString('base64url');
  const token = randomBytes(12).toString('hex');
  const encodingAesKey = randomEncodingAesKey();
  const routeKey = randomBytes(16).toString('base64url');
  const scripted = opts.scripted ?? { rules: [], default_reply: 'You said: {{text}}' };
  const config = {
    corp_id: corpId,
    agent_id: agentId,
    ...(opts.apiBaseUrl === undefined ? {} : { api_base_url: opts.apiBaseUrl }),
    ...opts.config,
  };

  await sql.begin(async (tx) => {
    await tx`insert into tenant (tenant_id, tenant_key, display_name) values (${tenantId}, ${uniqueKey('t')}, 'WeCom test tenant')`;
    await tx`insert into secret (tenant_id, secret_ref, name, purpose)
             values (${tenantId}, ${secretRef}, ${uniqueKey('wc')}, 'wecom_app')`;
    const sealed = secrets.seal(
      JSON.stringify({ token, encoding_aes_key: encodingAesKey, corp_secret: corpSecret }),
      secretAad(tenantId, secretRef),
    );
    await tx`insert into secret_version (tenant_id, secret_ref, version, key_id, ciphertext)
             values (${tenantId}, ${secretRef}, 1, ${secrets.keyId}, ${sealed})`;
    await tx`insert into model_profile (tenant_id, model_profile_id, profile_key, provider, model, content_digest)
             values (${tenantId}, ${mpId}, 'scripted', 'scripted', 'rules', ${contentDigest({ provider: 'scripted' })})`;
    await tx`insert into backend_profile (tenant_id, profile_id, profile_key, provider, content_digest)
             values (${tenantId}, ${bpId}, 'main', 'postgres', ${contentDigest({ provider: 'postgres' })})`;
    await tx`insert into agent_app (tenant_id, app_id, app_key, display_name) values (${tenantId}, ${appId}, 'assistant', 'Assistant')`;
    await tx`insert into agent_app_revision (tenant_id, app_id, revision, model_profile_id, system_prompt, scripted, content_digest, created_by)
             values (${tenantId}, ${appId}, 1, ${mpId}, 'You are helpful.', ${tx.json(scripted as never)}, ${contentDigest(scripted)}, 'test')`;
    await tx`update agent_app set published_revision = 1 where tenant_id = ${tenantId} and app_id = ${appId}`;
    await tx`update tenant set default_backend_profile_id = ${bpId}, default_agent_app_id = ${appId},
             status = ${opts.tenantStatus ?? 'active'} where tenant_id = ${tenantId}`;
    await tx`insert into channel_binding (tenant_id, binding_id, channel, provider_account_id, public_route_key_digest,
                                          app_id, secret_ref, config, config_digest, status)
             values (${tenantId}, ${bindingId}, 'wecom', ${`${corpId}/${agentId}`}, ${routeKeyDigest(routeKey)}, ${appId},
                     ${secretRef}, ${tx.json(config as never)}, ${contentDigest(config)}, ${opts.bindingStatus ?? 'active'})`;
  });
  return { tenantId, appId, bindingId, routeKey, corpId, agentId, corpSecret, token, encodingAesKey };
}

let msgSeq = 0;
/** A fresh, exact-decimal MsgId (WeCom's exceed 2^53). */
export function nextMsgId(): string {
  return `7${String(Date.now()).padStart(13, '0')}${String(process.pid % 1000).padStart(3, '0')}${String(msgSeq++).padStart(3, '0')}`;
}

const cdata = (s: string) => `<![CDATA[${s}]]>`;

/** The decrypted inner XML of a callback message (text by default; image / event for the others). */
export function wecomInnerXml(p: {
  corpId: string;
  agentId: number;
  from: string;
  msgType?: string;
  content?: string;
  msgId?: string | null;
  chatId?: string;
  event?: string;
  createTime?: number;
}): string {
  const msgType = p.msgType ?? 'text';
  const parts = [
    `<ToUserName>${cdata(p.corpId)}</ToUserName>`,
    `<FromUserName>${cdata(p.from)}</FromUserName>`,
    `<CreateTime>${p.createTime ?? Math.floor(Date.now() / 1000)}</CreateTime>`,
    `<MsgType>${cdata(msgType)}</MsgType>`,
  ];
  if (p.content !== undefined) parts.push(`<Content>${cdata(p.content)}</Content>`);
  if (msgType === 'image')
    parts.push(
      `<PicUrl>${cdata('https://example.invalid/p.png')}</PicUrl><MediaId>${cdata('media-1')}</MediaId>`,
    );
  if (p.event !== undefined) parts.push(`<Event>${cdata(p.event)}</Event>`);
  if (p.chatId !== undefined) parts.push(`<ChatId>${cdata(p.chatId)}</ChatId>`);
  if (p.msgId !== null) parts.push(`<MsgId>${p.msgId ?? nextMsgId()}</MsgId>`);
  parts.push(`<AgentID>${p.agentId}</AgentID>`);
  return `<xml>${parts.join('')}</xml>`;
}

export function envelopeXml(p: { corpId: string; agentId: number; encrypt: string }): string {
  return `<xml><ToUserName>${cdata(p.corpId)}</ToUserName><Encrypt>${cdata(p.encrypt)}</Encrypt><AgentID>${cdata(String(p.agentId))}</AgentID></xml>`;
}

export interface SignedPost {
  /** path with query string */
  path: string;
  body: string;
  query: { msg_signature: string; timestamp: string; nonce: string };
  encrypt: string;
}

/**
 * A signed POST callback as WeCom sends it. Overrides craft the negative cases: `encrypt` replaces
 * the ciphertext (still signed unless `signature` is given), `receiveId` encrypts for another corp.
 */
export function signedPost(
  w: SeededWecom,
  innerXml: string,
  o: {
    timestamp?: string;
    nonce?: string;
    encrypt?: string;
    receiveId?: string;
    signature?: string;
    routeKey?: string;
  } = {},
): SignedPost {
  const timestamp = o.timestamp ?? String(Math.floor(Date.now() / 1000));
  const nonce = o.nonce ?? randomNonce();
  const enc =
    o.encrypt ??
    encrypt({ encodingAesKey: w.encodingAesKey, message: innerXml, receiveId: o.receiveId ?? w.corpId });
  const msg_signature = o.signature ?? computeSignature(w.token, timestamp, nonce, enc);
  const qs = `msg_signature=${encodeURIComponent(msg_signature)}&timestamp=${encodeURIComponent(timestamp)}&nonce=${encodeURIComponent(nonce)}`;
  return {
    path: `/v1/webhooks/wecom/${o.routeKey ?? w.routeKey}?${qs}`,
    body: envelopeXml({ corpId: w.corpId, agentId: w.agentId, encrypt: enc }),
    query: { msg_signature, timestamp, nonce },
    encrypt: enc,
  };
}

export function randomNonce(): string {
  return String(1_000_000_000 + Math.floor(Math.random() * 8_999_999_999));
}
