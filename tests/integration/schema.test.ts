import { createHash, randomBytes } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { newId } from '../../db/ids';
import {
  type CheckPattern,
  CLASS_PATTERN,
  matchesSql,
  runtimeIdPattern,
  SHA256_HEX_PATTERN,
  SLUG_PATTERN,
  ulidIdPattern,
} from '../../db/schema/columns';
import { withTenantTx } from '../../db/tx';

// The seed DDL is normative: these tests pin its CHECKs, the identity trigger, the two SECURITY
// DEFINER functions and the composite keys, against a real PostgreSQL migrated by db/migrate.ts.
// They connect as the schema owner (a superuser, which bypasses RLS) unless a role is named.

let sql: Sql;
beforeAll(() => {
  sql = postgres(inject('databaseUrl'), { onnotice: () => {}, max: 4 });
});
afterAll(async () => {
  await sql.end();
});

let counter = 0;
const uniqueKey = (prefix: string) => `${prefix}-${process.pid}-${Date.now().toString(36)}-${counter++}`;
const digest = (value: string) => createHash('sha256').update(value).digest('hex');

type TenantColumns = Record<string, string | number | null>;

async function insertTenant(columns: TenantColumns = {}): Promise<string> {
  const row = { tenant_id: newId('t'), tenant_key: uniqueKey('t'), display_name: 'Tenant', ...columns };
  await sql`insert into tenant ${sql(row)}`;
  return String(row.tenant_id);
}

async function tenantRow(tenantId: string) {
  const [row] =
    await sql`select status, version::int as version, display_name, rate_limit_rpm::int as rate_limit_rpm,
                                 default_agent_app_id, default_backend_profile_id
                          from tenant where tenant_id = ${tenantId}`;
  if (!row) throw new Error(`tenant ${tenantId} missing`);
  return row;
}

async function insertBackendProfile(tenantId: string, status = 'active'): Promise<string> {
  const profileId = newId('bp');
  await sql`insert into backend_profile (tenant_id, profile_id, profile_key, status, content_digest)
            values (${tenantId}, ${profileId}, ${uniqueKey('bp')}, ${status}, ${digest(profileId)})`;
  return profileId;
}

async function insertApp(tenantId: string): Promise<string> {
  const appId = newId('app');
  await sql`insert into agent_app (tenant_id, app_id, app_key, display_name)
            values (${tenantId}, ${appId}, ${uniqueKey('app')}, 'App')`;
  return appId;
}

async function insertModelProfile(tenantId: string): Promise<string> {
  const mpId = newId('mp');
  await sql`insert into model_profile (tenant_id, model_profile_id, profile_key, provider, model, content_digest)
            values (${tenantId}, ${mpId}, ${uniqueKey('mp')}, 'scripted', 'rules', ${digest(mpId)})`;
  return mpId;
}

async function insertRevision(tenantId: string, appId: string, mpId: string, revision = 1): Promise<void> {
  await sql`insert into agent_app_revision (tenant_id, app_id, revision, model_profile_id, system_prompt, content_digest, created_by)
            values (${tenantId}, ${appId}, ${revision}, ${mpId}, 'Be brief.', ${digest(`${appId}:${revision}`)}, 'test')`;
}

async function insertSecret(tenantId: string, purpose = 'telegram_bot'): Promise<string> {
  const secretRef = newId('sec');
  await sql`insert into secret (tenant_id, secret_ref, name, purpose)
            values (${tenantId}, ${secretRef}, ${uniqueKey('s')}, ${purpose})`;
  await sql`insert into secret_version (tenant_id, secret_ref, version, key_id, ciphertext)
            values (${tenantId}, ${secretRef}, 1, 'k1', ${randomBytes(40)})`;
  return secretRef;
}

async function insertBinding(
  tenantId: string,
  p: { appId: string; secretRef: string; account: string; status: string },
): Promise<string> {
  const bindingId = newId('cb');
  await sql`insert into channel_binding (tenant_id, binding_id, channel, provider_account_id, public_route_key_digest,
                                         app_id, secret_ref, config_digest, status)
            values (${tenantId}, ${bindingId}, 'telegram', ${p.account}, ${digest(bindingId)}, ${p.appId},
                    ${p.secretRef}, ${digest('{}')}, ${p.status})`;
  return bindingId;
}

/** Runs the seed's transition function as the Admin API would: as tenant_admin_writer. */
function transition(
  tenantId: string,
  expectedVersion: number,
  next: string,
  overrides: Record<string, string> = {},
) {
  const a = {
    actor_type: 'platform',
    actor_id: 'ops',
    reason: 'test',
    correlation_id: 'corr-1',
    ...overrides,
  };
  return withTenantTx(
    sql,
    { role: 'tenant_admin_writer', tenantId },
    (tx) =>
      tx`select transition_tenant_status(${tenantId}, ${expectedVersion}, ${next}, ${a.actor_type}, ${a.actor_id},
                                       ${a.reason}, ${a.correlation_id})`,
  );
}

interface Config {
  display_name: string;
  rate_limit_rpm: number | null;
  max_concurrent_executions: number | null;
  monthly_token_budget: number | null;
  monthly_spend_limit_minor: number | null;
  billing_currency: string | null;
  audit_retention_days: number;
  log_masking_level: string;
  trace_sampling_rate: number;
  default_agent_app_id: string | null;
  default_backend_profile_id: string | null;
}

const baseConfig: Config = {
  display_name: 'Renamed',
  rate_limit_rpm: 60,
  max_concurrent_executions: 4,
  monthly_token_budget: 100000,
  monthly_spend_limit_minor: 5000,
  billing_currency: 'EUR',
  audit_retention_days: 30,
  log_masking_level: 'strict',
  trace_sampling_rate: 0.25,
  default_agent_app_id: null,
  default_backend_profile_id: null,
};

async function configure(
  tenantId: string,
  expectedVersion: number,
  overrides: Partial<Config> = {},
): Promise<number> {
  const c = { ...baseConfig, ...overrides };
  const [row] = await withTenantTx(
    sql,
    { role: 'tenant_admin_writer', tenantId },
    (tx) =>
      tx`select update_tenant_configuration(
         ${tenantId}, ${expectedVersion}, ${c.display_name}, ${c.rate_limit_rpm}, ${c.max_concurrent_executions},
         ${c.monthly_token_budget}, ${c.monthly_spend_limit_minor}, ${c.billing_currency}, ${c.audit_retention_days},
         ${c.log_masking_level}, ${c.trace_sampling_rate}, ${c.default_agent_app_id}, ${c.default_backend_profile_id}
       )::int as version`,
  );
  return Number(row?.version);
}

describe('tenant CHECK constraints (seed DDL)', () => {
  const rejected: [string, TenantColumns, string][] = [
    [
      'a tenant_id whose ULID starts above 7',
      { tenant_id: `t_8${'0'.repeat(25)}` },
      'tenant_tenant_id_check',
    ],
    ['a tenant_id with the wrong prefix', { tenant_id: newId('tn') }, 'tenant_tenant_id_check'],
    ['a lower-case tenant_id', { tenant_id: newId('t').toLowerCase() }, 'tenant_tenant_id_check'],
    ['an upper-case tenant_key', { tenant_key: 'Acme' }, 'tenant_tenant_key_check'],
    ['a tenant_key starting with a digit', { tenant_key: '1acme' }, 'tenant_tenant_key_check'],
    ['a one-character tenant_key', { tenant_key: 'a' }, 'tenant_tenant_key_check'],
    ['a tenant_key with an underscore', { tenant_key: 'ac_me' }, 'tenant_tenant_key_check'],
    ['a tenant_key longer than 64', { tenant_key: `a${'b'.repeat(64)}` }, 'tenant_tenant_key_check'],
    ['a blank display_name', { display_name: '   ' }, 'tenant_display_name_check'],
    ['a display_name longer than 200', { display_name: 'x'.repeat(201) }, 'tenant_display_name_check'],
    ['an unknown status', { status: 'deleted' }, 'tenant_status_check'],
    ['a negative rate_limit_rpm', { rate_limit_rpm: -1 }, 'tenant_rate_limit_rpm_check'],
    [
      'max_concurrent_executions = 0',
      { max_concurrent_executions: 0 },
      'tenant_max_concurrent_executions_check',
    ],
    ['a negative monthly_token_budget', { monthly_token_budget: -1 }, 'tenant_monthly_token_budget_check'],
    [
      'a negative monthly_spend_limit_minor',
      { monthly_spend_limit_minor: -1, billing_currency: 'USD' },
      'tenant_monthly_spend_limit_minor_check',
    ],
    [
      'a spend limit without a currency',
      { monthly_spend_limit_minor: 100 },
      'tenant_spend_limit_currency_check',
    ],
    ['a lower-case currency', { billing_currency: 'usd' }, 'tenant_billing_currency_check'],
    ['a numeric currency', { billing_currency: '978' }, 'tenant_billing_currency_check'],
    ['audit_retention_days = 0', { audit_retention_days: 0 }, 'tenant_audit_retention_days_check'],
    ['an unknown log_masking_level', { log_masking_level: 'verbose' }, 'tenant_log_masking_level_check'],
    ['trace_sampling_rate > 1', { trace_sampling_rate: 1.5 }, 'tenant_trace_sampling_rate_check'],
    ['trace_sampling_rate < 0', { trace_sampling_rate: -0.1 }, 'tenant_trace_sampling_rate_check'],
    ['version = 0', { version: 0 }, 'tenant_version_check'],
  ];

  it.each(rejected)('rejects %s', async (_label, columns, constraint) => {
    await expect(insertTenant(columns)).rejects.toMatchObject({ code: '23514', constraint_name: constraint });
  });

  it('accepts zero quotas, NULL limits and the seed defaults', async () => {
    const tenantId = await insertTenant({
      rate_limit_rpm: 0,
      monthly_token_budget: 0,
      trace_sampling_rate: 0,
    });
    const [row] = await sql`select status, version::int as version, audit_retention_days, log_masking_level,
                                   max_concurrent_executions, billing_currency
                            from tenant where tenant_id = ${tenantId}`;
    expect(row).toEqual({
      status: 'active',
      version: 1,
      audit_retention_days: 90,
      log_masking_level: 'basic',
      max_concurrent_executions: null,
      billing_currency: null,
    });
    await insertTenant({
      monthly_spend_limit_minor: 0,
      billing_currency: 'JPY',
      max_concurrent_executions: 1,
    });
  });

  it('keeps tenant_key unique', async () => {
    const key = uniqueKey('dup');
    await insertTenant({ tenant_key: key });
    await expect(insertTenant({ tenant_key: key })).rejects.toMatchObject({ code: '23505' });
  });
});

describe('tenant identity trigger', () => {
  it('rejects changing tenant_id or tenant_key, even for the owner', async () => {
    const tenantId = await insertTenant();
    await expect(
      sql`update tenant set tenant_key = ${uniqueKey('new')} where tenant_id = ${tenantId}`,
    ).rejects.toThrow('tenant identity is immutable');
    await expect(
      sql`update tenant set tenant_id = ${newId('t')} where tenant_id = ${tenantId}`,
    ).rejects.toThrow('tenant identity is immutable');
  });

  it('allows other columns to change', async () => {
    const tenantId = await insertTenant();
    await sql`update tenant set display_name = 'Still me' where tenant_id = ${tenantId}`;
    expect((await tenantRow(tenantId)).display_name).toBe('Still me');
  });
});

describe('transition_tenant_status', () => {
  const allowed: [string, string][] = [
    ['active', 'suspended'],
    ['active', 'disabled'],
    ['suspended', 'active'],
    ['suspended', 'disabled'],
  ];

  it.each(allowed)('allows %s -> %s and writes the outbox row in the same transaction', async (from, to) => {
    const tenantId = await insertTenant();
    let version = 1;
    if (from === 'suspended') {
      await transition(tenantId, 1, 'suspended');
      version = 2;
    }
    await transition(tenantId, version, to, {
      actor_id: 'alice',
      reason: 'because',
      correlation_id: 'req-42',
    });
    expect(await tenantRow(tenantId)).toMatchObject({ status: to, version: version + 1 });
    const outbox =
      await sql`select previous_status, next_status, actor_type, actor_id, reason, correlation_id,
                                    previous_version::int as previous_version, next_version::int as next_version
                             from tenant_status_change_outbox where tenant_id = ${tenantId} order by event_id`;
    expect(outbox.at(-1)).toEqual({
      previous_status: from,
      next_status: to,
      actor_type: 'platform',
      actor_id: 'alice',
      reason: 'because',
      correlation_id: 'req-42',
      previous_version: version,
      next_version: version + 1,
    });
  });

  const forbidden: [string, string][] = [
    ['active', 'active'],
    ['suspended', 'suspended'],
    ['active', 'archived'],
  ];

  it.each(forbidden)('rejects %s -> %s', async (from, to) => {
    const tenantId = await insertTenant();
    let version = 1;
    if (from === 'suspended') {
      await transition(tenantId, 1, 'suspended');
      version = 2;
    }
    await expect(transition(tenantId, version, to)).rejects.toThrow(
      `invalid tenant status transition: ${from} -> ${to}`,
    );
    expect(await tenantRow(tenantId)).toMatchObject({ status: from, version });
  });

  it.each(['active', 'suspended', 'disabled'])(
    'treats disabled as terminal (disabled -> %s rejected)',
    async (to) => {
      const tenantId = await insertTenant();
      await transition(tenantId, 1, 'disabled');
      await expect(transition(tenantId, 2, to)).rejects.toThrow('disabled tenant cannot be re-enabled');
      expect(await tenantRow(tenantId)).toMatchObject({ status: 'disabled', version: 2 });
    },
  );

  it('rejects a stale expected version without changing anything', async () => {
    const tenantId = await insertTenant();
    await expect(transition(tenantId, 7, 'suspended')).rejects.toThrow('tenant version conflict');
    expect(await tenantRow(tenantId)).toMatchObject({ status: 'active', version: 1 });
    const [count] =
      await sql`select count(*)::int as n from tenant_status_change_outbox where tenant_id = ${tenantId}`;
    expect(count?.n).toBe(0);
  });

  it('requires a non-blank actor and correlation id, and an existing tenant', async () => {
    const tenantId = await insertTenant();
    await expect(transition(tenantId, 1, 'suspended', { actor_id: ' ' })).rejects.toThrow('non-blank actor');
    await expect(transition(tenantId, 1, 'suspended', { actor_type: '' })).rejects.toThrow('non-blank actor');
    await expect(transition(tenantId, 1, 'suspended', { correlation_id: '' })).rejects.toThrow(
      'non-blank correlation ID',
    );
    await expect(transition(newId('t'), 1, 'suspended')).rejects.toThrow('does not exist');
  });

  it('rolls the status change back when the outbox row cannot be written', async () => {
    const tenantId = await insertTenant();
    // A blank reason passes the function's own checks but violates the outbox CHECK.
    await expect(transition(tenantId, 1, 'suspended', { reason: ' ' })).rejects.toMatchObject({
      constraint_name: 'tscho_reason_check',
    });
    expect(await tenantRow(tenantId)).toMatchObject({ status: 'active', version: 1 });
  });

  it('rolls the outbox row back with the caller transaction', async () => {
    const tenantId = await insertTenant();
    await expect(
      withTenantTx(sql, { role: 'tenant_admin_writer', tenantId }, async (tx) => {
        await tx`select transition_tenant_status(${tenantId}, 1, 'suspended', 'platform', 'ops', 'r', 'c')`;
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect(await tenantRow(tenantId)).toMatchObject({ status: 'active', version: 1 });
    const [count] =
      await sql`select count(*)::int as n from tenant_status_change_outbox where tenant_id = ${tenantId}`;
    expect(count?.n).toBe(0);
  });
});

describe('update_tenant_configuration', () => {
  it('applies a full snapshot and bumps the version once', async () => {
    const tenantId = await insertTenant();
    const profileId = await insertBackendProfile(tenantId);
    const appId = await insertApp(tenantId);
    const next = await configure(tenantId, 1, {
      default_backend_profile_id: profileId,
      default_agent_app_id: appId,
    });
    expect(next).toBe(2);
    expect(await tenantRow(tenantId)).toMatchObject({
      version: 2,
      display_name: 'Renamed',
      rate_limit_rpm: 60,
      default_agent_app_id: appId,
      default_backend_profile_id: profileId,
    });
  });

  it('rejects a stale version', async () => {
    const tenantId = await insertTenant();
    await expect(configure(tenantId, 2)).rejects.toThrow('version conflict');
  });

  it('rejects a backend profile of another tenant', async () => {
    const tenantId = await insertTenant();
    const other = await insertTenant();
    const foreignProfile = await insertBackendProfile(other);
    await expect(configure(tenantId, 1, { default_backend_profile_id: foreignProfile })).rejects.toThrow(
      'default backend profile must exist in the tenant and be active',
    );
  });

  it.each(['disabled', 'suspended'])('rejects a %s backend profile', async (status) => {
    const tenantId = await insertTenant();
    const profileId = await insertBackendProfile(tenantId, status);
    await expect(configure(tenantId, 1, { default_backend_profile_id: profileId })).rejects.toThrow(
      'default backend profile must exist in the tenant and be active',
    );
  });

  it('rejects a disabled tenant', async () => {
    const tenantId = await insertTenant();
    await transition(tenantId, 1, 'disabled');
    await expect(configure(tenantId, 2)).rejects.toThrow('tenant is disabled');
  });

  it('still enforces the table CHECKs', async () => {
    const tenantId = await insertTenant();
    await expect(configure(tenantId, 1, { billing_currency: null })).rejects.toMatchObject({
      constraint_name: 'tenant_spend_limit_currency_check',
    });
  });

  it('rejects, by composite FK, a default agent app of another tenant', async () => {
    const tenantId = await insertTenant();
    const foreignApp = await insertApp(await insertTenant());
    await expect(configure(tenantId, 1, { default_agent_app_id: foreignApp })).rejects.toMatchObject({
      code: '23503',
      constraint_name: 'fk_tenant_default_agent',
    });
    // The same holds for a direct write by the owner.
    await expect(
      sql`update tenant set default_agent_app_id = ${foreignApp} where tenant_id = ${tenantId}`,
    ).rejects.toMatchObject({ constraint_name: 'fk_tenant_default_agent' });
  });

  it('rejects, by composite FK, a default backend profile of another tenant written directly', async () => {
    const tenantId = await insertTenant();
    const foreignProfile = await insertBackendProfile(await insertTenant());
    await expect(
      sql`update tenant set default_backend_profile_id = ${foreignProfile} where tenant_id = ${tenantId}`,
    ).rejects.toMatchObject({ constraint_name: 'fk_tenant_default_backend' });
  });
});

describe('channel_binding: one active binding per IM account across tenants', () => {
  it('rejects a second active binding for the same channel account in another tenant', async () => {
    const account = String(Date.now()) + String(counter++);
    const a = await insertTenant();
    const b = await insertTenant();
    const appA = await insertApp(a);
    const appB = await insertApp(b);
    const secretA = await insertSecret(a);
    const secretB = await insertSecret(b);
    const first = await insertBinding(a, { appId: appA, secretRef: secretA, account, status: 'active' });
    await expect(
      insertBinding(b, { appId: appB, secretRef: secretB, account, status: 'active' }),
    ).rejects.toMatchObject({ code: '23505', constraint_name: 'channel_binding_active_account_unique' });

    // Inactive bindings for the account may coexist; activation is possible once the first is off.
    const draft = await insertBinding(b, { appId: appB, secretRef: secretB, account, status: 'draft' });
    await expect(
      sql`update channel_binding set status = 'active' where tenant_id = ${b} and binding_id = ${draft}`,
    ).rejects.toMatchObject({ constraint_name: 'channel_binding_active_account_unique' });
    await sql`update channel_binding set status = 'disabled' where tenant_id = ${a} and binding_id = ${first}`;
    await sql`update channel_binding set status = 'active' where tenant_id = ${b} and binding_id = ${draft}`;
  });

  it('rejects a binding whose app or secret belongs to another tenant', async () => {
    const a = await insertTenant();
    const b = await insertTenant();
    const appB = await insertApp(b);
    const secretA = await insertSecret(a);
    const secretB = await insertSecret(b);
    const appA = await insertApp(a);
    await expect(
      insertBinding(a, { appId: appB, secretRef: secretA, account: uniqueKey('acct'), status: 'draft' }),
    ).rejects.toMatchObject({ constraint_name: 'fk_channel_binding_app' });
    await expect(
      insertBinding(a, { appId: appA, secretRef: secretB, account: uniqueKey('acct'), status: 'draft' }),
    ).rejects.toMatchObject({ constraint_name: 'fk_channel_binding_secret' });
  });
});

describe('agent_app_revision', () => {
  it('is immutable: UPDATE and DELETE are rejected even for the owner', async () => {
    const tenantId = await insertTenant();
    const appId = await insertApp(tenantId);
    await insertRevision(tenantId, appId, await insertModelProfile(tenantId));
    await expect(
      sql`update agent_app_revision set system_prompt = 'changed' where tenant_id = ${tenantId} and app_id = ${appId}`,
    ).rejects.toThrow('agent_app_revision is append-only: UPDATE is not allowed');
    await expect(
      sql`delete from agent_app_revision where tenant_id = ${tenantId} and app_id = ${appId}`,
    ).rejects.toThrow('agent_app_revision is append-only: DELETE is not allowed');
  });

  it('can only be published when it exists for that very app', async () => {
    const tenantId = await insertTenant();
    const appId = await insertApp(tenantId);
    const otherApp = await insertApp(tenantId);
    const mpId = await insertModelProfile(tenantId);
    await insertRevision(tenantId, otherApp, mpId, 1);
    await expect(
      sql`update agent_app set published_revision = 1 where tenant_id = ${tenantId} and app_id = ${appId}`,
    ).rejects.toMatchObject({ constraint_name: 'fk_agent_app_published_revision' });
    await insertRevision(tenantId, appId, mpId, 1);
    await sql`update agent_app set published_revision = 1 where tenant_id = ${tenantId} and app_id = ${appId}`;
  });

  it('cannot use a model profile of another tenant', async () => {
    const tenantId = await insertTenant();
    const appId = await insertApp(tenantId);
    const foreignMp = await insertModelProfile(await insertTenant());
    await expect(insertRevision(tenantId, appId, foreignMp)).rejects.toMatchObject({
      constraint_name: 'fk_agent_app_revision_model_profile',
    });
  });
});

describe('audit_log', () => {
  async function appendAudit(tenantId: string, seq: number, previousDigest: string | null) {
    const auditId = newId('aud');
    await sql`insert into audit_log (tenant_id, audit_id, seq, action, actor_type, actor_id, previous_digest, digest)
              values (${tenantId}, ${auditId}, ${seq}, 'tenant.created', 'platform', 'ops', ${previousDigest},
                      ${digest(auditId)})`;
    return auditId;
  }

  it('is append-only: UPDATE, DELETE and TRUNCATE are rejected even for the owner', async () => {
    const tenantId = await insertTenant();
    const auditId = await appendAudit(tenantId, 1, null);
    await expect(
      sql`update audit_log set actor_id = 'mallory' where tenant_id = ${tenantId} and audit_id = ${auditId}`,
    ).rejects.toThrow('audit_log is append-only: UPDATE is not allowed');
    await expect(sql`delete from audit_log where tenant_id = ${tenantId}`).rejects.toThrow(
      'audit_log is append-only: DELETE is not allowed',
    );
    await expect(sql`truncate audit_log`).rejects.toThrow(
      'audit_log is append-only: TRUNCATE is not allowed',
    );
    const [row] =
      await sql`select actor_id from audit_log where tenant_id = ${tenantId} and audit_id = ${auditId}`;
    expect(row?.actor_id).toBe('ops');
  });

  it('keeps one chain position per tenant and exactly one chain start', async () => {
    const tenantId = await insertTenant();
    await appendAudit(tenantId, 1, null);
    await expect(appendAudit(tenantId, 1, null)).rejects.toMatchObject({
      constraint_name: 'audit_log_tenant_seq_unique',
    });
    await expect(appendAudit(tenantId, 2, null)).rejects.toMatchObject({
      constraint_name: 'audit_log_chain_start_check',
    });
    await appendAudit(tenantId, 2, digest('previous'));
  });
});

/** A tenant with an app and a draft binding: what a session and its messages hang on. */
async function insertChatScope() {
  const tenantId = await insertTenant();
  const appId = await insertApp(tenantId);
  const secretRef = await insertSecret(tenantId);
  const bindingId = await insertBinding(tenantId, {
    appId,
    secretRef,
    account: uniqueKey('acct'),
    status: 'draft',
  });
  return {
    tenantId,
    bindingId,
    session: (sessionId: string) =>
      sql`insert into session (tenant_id, session_id, binding_id, app_id, kind, external_user_id, identity_key)
          values (${tenantId}, ${sessionId}, ${bindingId}, ${appId}, 'direct', 'u1', ${uniqueKey('id')})`,
    event: (sessionId: string, eventId: string, payloadDigest = digest('hi')) =>
      sql`insert into message_event (tenant_id, event_id, session_id, binding_id, external_message_id,
                                     idempotency_key, event_seq, kind, payload, payload_digest, request_id)
          values (${tenantId}, ${eventId}, ${sessionId}, ${bindingId}, ${uniqueKey('m')}, ${uniqueKey('k')}, 1,
                  'text', ${sql.json({ text: 'hi' })}, ${payloadDigest}, 'req-1')`,
  };
}

describe('message_event and reply_outbox', () => {
  async function seedEvent() {
    const scope = await insertChatScope();
    const sessionId = newId('ses');
    await scope.session(sessionId);
    const eventId = newId('evt');
    await scope.event(sessionId, eventId);
    return { tenantId: scope.tenantId, eventId };
  }

  it('refuses an unknown status or a negative counter on UPDATE and keeps the row', async () => {
    // The single-column rules are domains (migration 0049): an UPDATE checks those it assigns.
    const { tenantId, eventId } = await seedEvent();
    await expect(
      sql`update message_event set status = 'deleted' where tenant_id = ${tenantId} and event_id = ${eventId}`,
    ).rejects.toMatchObject({ code: '23514', constraint_name: 'message_event_status_check' });
    await expect(
      sql`update message_event set repair_count = -1 where tenant_id = ${tenantId} and event_id = ${eventId}`,
    ).rejects.toMatchObject({ code: '23514', constraint_name: 'message_event_repair_count_check' });
    const [row] = await sql<{ status: string; repair_count: number }[]>`
      select status, repair_count from message_event where tenant_id = ${tenantId} and event_id = ${eventId}`;
    expect(row).toEqual({ status: 'received', repair_count: 0 });
  });

  it('requires a pinned reply before completed', async () => {
    const { tenantId, eventId } = await seedEvent();
    await expect(
      sql`update message_event set status = 'completed' where tenant_id = ${tenantId} and event_id = ${eventId}`,
    ).rejects.toMatchObject({ constraint_name: 'message_event_pinned_reply_check' });
  });

  it('requires a claimed execution while running', async () => {
    const { tenantId, eventId } = await seedEvent();
    await expect(
      sql`update message_event set status = 'running' where tenant_id = ${tenantId} and event_id = ${eventId}`,
    ).rejects.toMatchObject({ constraint_name: 'message_event_running_claim_check' });
    await sql`update message_event
              set status = 'running', execution_owner = 'w1', execution_claim_token = 'c1',
                  execution_lease_expires_at = now() + interval '1 minute', execution_fencing_token = 1
              where tenant_id = ${tenantId} and event_id = ${eventId}`;
  });

  it('ties every outbox segment to its event’s pinned reply_id and segment_count', async () => {
    const { tenantId, eventId } = await seedEvent();
    const replyId = newId('rep');
    await sql`insert into reply_cache (tenant_id, reply_id, event_id, content, content_digest)
              values (${tenantId}, ${replyId}, ${eventId}, 'hello', ${digest('hello')})`;
    await sql`update message_event set reply_id = ${replyId}, reply_cache_ref = ${replyId}, segment_count = 1,
                                       status = 'completed'
              where tenant_id = ${tenantId} and event_id = ${eventId}`;
    const segment = (replyIdValue: string, segmentCount: number) =>
      sql`insert into reply_outbox (tenant_id, segment_id, event_id, reply_id, idempotency_key, segment_index,
                                    segment_count, channel, target, content)
          values (${tenantId}, ${newId('seg')}, ${eventId}, ${replyIdValue}, ${uniqueKey('out')}, 0, ${segmentCount},
                  'telegram', ${sql.json({ chat_id: '1' })}, 'hello')`;
    await expect(segment(newId('rep'), 1)).rejects.toMatchObject({
      constraint_name: 'fk_reply_outbox_pinned_reply',
    });
    await expect(segment(replyId, 2)).rejects.toMatchObject({
      constraint_name: 'fk_reply_outbox_pinned_reply',
    });
    await segment(replyId, 1);
    await expect(segment(replyId, 1)).rejects.toMatchObject({
      constraint_name: 'reply_outbox_reply_segment_unique',
    });
  });
});

describe('CHECK patterns (migration 0047: no counted repetition)', () => {
  // The seed DDL's spellings, which the cheaper forms must accept and refuse exactly as they did.
  const seed: [string, CheckPattern, string][] = [
    ['runtime id', runtimeIdPattern('evt'), '^evt_[0-9A-Za-z_-]{1,100}$'],
    ['SHA-256 hex', SHA256_HEX_PATTERN, '^[0-9a-f]{64}$'],
    ['slug', SLUG_PATTERN, '^[a-z][a-z0-9-]{1,63}$'],
    ['classification', CLASS_PATTERN, '^[a-z][a-z0-9_.:-]{0,127}$'],
    ['control-plane id', ulidIdPattern('t'), '^t_[0-7][0-9A-HJKMNP-TV-Z]{25}$'],
  ];
  const samples = (n: number) => [
    '',
    '\n',
    'evt_',
    'evt_a',
    'evt__-',
    `evt_${'a'.repeat(99)}`,
    `evt_${'a'.repeat(100)}`,
    `evt_${'a'.repeat(101)}`,
    'evt_a b',
    'evt_é',
    'evt_a\n',
    'EVT_a',
    'xevt_a',
    'evtx_a',
    'a',
    'ab',
    'Ab',
    '1a',
    'a_b',
    'a:b.c_d-e',
    `a${'b'.repeat(62)}`,
    `a${'b'.repeat(63)}`,
    `a${'b'.repeat(64)}`,
    `a${'b'.repeat(127)}`,
    `a${'b'.repeat(128)}`,
    digest('x'),
    digest('x').slice(1),
    `${digest('x')}0`,
    digest('x').toUpperCase(),
    `${digest('x').slice(1)}g`,
    `${digest('x')}\n`,
    newId('t'),
    newId('t').slice(0, -1),
    `${newId('t')}0`,
    `t_8${'0'.repeat(25)}`,
    newId('t').toLowerCase(),
    `t_0${'I'.repeat(25)}`,
    ...Array.from({ length: n }, () => randomBytes(1 + (counter++ % 90)).toString('base64url')),
  ];

  it.each(seed)(
    'the %s check accepts exactly what the counted repetition did',
    async (_label, pattern, old) => {
      const values = samples(200);
      const rows = await sql<{ x: string; now: boolean; before: boolean }[]>`
      select x, (${sql.unsafe(matchesSql('x', pattern))}) as now, x ~ ${old} as before
      from unnest(${values}::text[]) as x`;
      expect(rows).toHaveLength(values.length);
      const differing = rows.filter((r) => r.now !== r.before).map((r) => r.x);
      expect(differing).toEqual([]);
      // Each pattern meets accepted and refused samples (the bounds are in the list above).
      expect(rows.some((r) => r.before)).toBe(true);
      expect(rows.some((r) => !r.before)).toBe(true);
    },
  );

  it('leaves no counted repetition in any CHECK the database holds', async () => {
    const rows = await sql<{ name: string; def: string }[]>`
      select conname as name, pg_get_constraintdef(oid) as def from pg_constraint
      where contype = 'c' and connamespace = 'public'::regnamespace and pg_get_constraintdef(oid) ~ '~'`;
    expect(rows.length).toBeGreaterThan(40);
    // [A-Z]{3} (currencies) unrolls into three states: cheap, left as the seed wrote it.
    expect(
      rows.filter((r) => /\{\d+(,\d*)?\}/.test(r.def.replace("'^[A-Z]{3}$'", ''))).map((r) => r.name),
    ).toEqual([]);
  });

  it('is what the tables enforce: a 101-character runtime id body and a 63-digit digest are refused', async () => {
    const scope = await insertChatScope();
    await expect(scope.session(`ses_${'a'.repeat(101)}`)).rejects.toMatchObject({
      code: '23514',
      constraint_name: 'session_session_id_check',
    });
    const sessionId = `ses_${'a'.repeat(100)}`;
    await scope.session(sessionId);
    await expect(scope.event(sessionId, newId('evt'), digest('hi').slice(1))).rejects.toMatchObject({
      code: '23514',
      constraint_name: 'message_event_payload_digest_check',
    });
    await scope.event(sessionId, newId('evt'));
  });
});
