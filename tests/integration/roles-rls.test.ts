import { createHash, randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createSql } from '../../db/client';
import { newId } from '../../db/ids';
import { recordInboundMessage } from '../../db/queries/ingress';
import * as schema from '../../db/schema';
import { type DbRole, setTxTenant, type TransactionSql, withTenantDb, withTenantTx } from '../../db/tx';
import { SUITE_AUDIT_KEY } from '../helpers/db-logins';

// The runtime roles and row-level security, exercised the way the application uses them: every
// transaction drops to a role with a tenant in context. This file connects as the suite's
// superuser (it seeds rows no runtime role may write); tests/integration/db-logins.test.ts
// connects as the API's and the worker's own logins.

const PERMISSION_DENIED = { code: '42501' };

let sql: Sql;
beforeAll(() => {
  sql = postgres(inject('databaseUrl'), {
    onnotice: () => {},
    max: 4,
    connection: { 'app.audit_key': SUITE_AUDIT_KEY } as Record<string, string>,
  });
});
afterAll(async () => {
  await sql.end();
});

let counter = 0;
const uniqueKey = (prefix: string) => `${prefix}-${process.pid}-${Date.now().toString(36)}-${counter++}`;
const digest = (value: string) => createHash('sha256').update(value).digest('hex');

interface Graph {
  tenantId: string;
  appId: string;
  secretRef: string;
  bindingId: string;
  routeKeyDigest: string;
  sessionId: string;
  eventId: string;
  keyDigest: string;
  ciphertext: Buffer;
}

/** One tenant with a row in most tenant-owned tables, written by the owner (which bypasses RLS). */
async function seedTenant(): Promise<Graph> {
  const g: Graph = {
    tenantId: newId('t'),
    appId: newId('app'),
    secretRef: newId('sec'),
    bindingId: newId('cb'),
    routeKeyDigest: digest(randomBytes(16).toString('hex')),
    sessionId: newId('ses'),
    eventId: newId('evt'),
    keyDigest: digest(randomBytes(16).toString('hex')),
    ciphertext: randomBytes(48),
  };
  const mpId = newId('mp');
  await sql.begin(async (tx) => {
    await tx`insert into tenant (tenant_id, tenant_key, display_name) values (${g.tenantId}, ${uniqueKey('t')}, 'T')`;
    await tx`insert into secret (tenant_id, secret_ref, name, purpose)
             values (${g.tenantId}, ${g.secretRef}, 'bot', 'telegram_bot')`;
    await tx`insert into secret_version (tenant_id, secret_ref, version, key_id, ciphertext)
             values (${g.tenantId}, ${g.secretRef}, 1, 'k1', ${g.ciphertext})`;
    await tx`insert into model_profile (tenant_id, model_profile_id, profile_key, provider, model, content_digest)
             values (${g.tenantId}, ${mpId}, 'scripted', 'scripted', 'rules', ${digest(mpId)})`;
    await tx`insert into agent_app (tenant_id, app_id, app_key, display_name) values (${g.tenantId}, ${g.appId}, 'bot', 'Bot')`;
    await tx`insert into agent_app_revision (tenant_id, app_id, revision, model_profile_id, system_prompt, content_digest, created_by)
             values (${g.tenantId}, ${g.appId}, 1, ${mpId}, 'Hi', ${digest(g.appId)}, 'test')`;
    await tx`insert into channel_binding (tenant_id, binding_id, channel, provider_account_id, public_route_key_digest,
                                          app_id, secret_ref, config, config_digest, status)
             values (${g.tenantId}, ${g.bindingId}, 'telegram', ${uniqueKey('bot')}, ${g.routeKeyDigest}, ${g.appId},
                     ${g.secretRef}, ${tx.json({ api_base_url: 'http://127.0.0.1:1' })}, ${digest('cfg')}, 'active')`;
    await tx`insert into session (tenant_id, session_id, binding_id, app_id, kind, external_user_id, identity_key)
             values (${g.tenantId}, ${g.sessionId}, ${g.bindingId}, ${g.appId}, 'direct', 'u1', 'direct:u1')`;
    await tx`insert into message_event (tenant_id, event_id, session_id, binding_id, external_message_id,
                                        idempotency_key, event_seq, kind, payload, payload_digest, request_id)
             values (${g.tenantId}, ${g.eventId}, ${g.sessionId}, ${g.bindingId}, 'm1', ${uniqueKey('idem')}, 1, 'text',
                     ${tx.json({ text: 'hi' })}, ${digest('hi')}, 'req-1')`;
    await tx`insert into admin_api_key (tenant_id, key_id, role, key_digest)
             values (${g.tenantId}, ${newId('key')}, 'tenant_admin', ${g.keyDigest})`;
    await setTxTenant(tx, g.tenantId);
    await tx`select audit_append(${JSON.stringify({ tenant_id: g.tenantId, audit_id: newId('aud'), action: 'tenant.created', actor_type: 'platform', actor_id: 'ops' })}::text::jsonb)`;
  });
  return g;
}

const as = <T>(role: DbRole, tenantId: string | null, fn: (tx: TransactionSql) => Promise<T>) =>
  withTenantTx(sql, { role, tenantId }, fn);

let a: Graph;
let b: Graph;
beforeAll(async () => {
  a = await seedTenant();
  b = await seedTenant();
});

describe('withTenantTx', () => {
  it('switches role and tenant for the transaction only', async () => {
    const single = postgres(inject('databaseUrl'), { onnotice: () => {}, max: 1 });
    try {
      const [owner] = await single`select current_user as role`;
      const [inside] = await withTenantTx(
        single,
        { role: 'tenant_app_writer', tenantId: a.tenantId },
        (tx) => tx`select current_user as role, current_setting('app.tenant_id', true) as tenant`,
      );
      expect(inside).toEqual({ role: 'tenant_app_writer', tenant: a.tenantId });
      const [after] =
        await single`select current_user as role, current_setting('app.tenant_id', true) as tenant`;
      expect(after?.role).toBe(owner?.role);
      expect(after?.tenant ?? '').toBe('');
    } finally {
      await single.end();
    }
  });

  it('runs the first statement an async callback awaits under the role and tenant too', async () => {
    // postgres.js queues a query when it is first awaited: a callback that awaits its first
    // statement before returning must still be behind the role switch, never ahead of it.
    const seen = await withTenantTx(sql, { role: 'tenant_app_writer', tenantId: a.tenantId }, async (tx) => {
      const [first] = await tx<{ role: string; tenant: string }[]>`
        select current_user as role, current_setting('app.tenant_id', true) as tenant`;
      return first;
    });
    expect(seen).toEqual({ role: 'tenant_app_writer', tenant: a.tenantId });
  });

  it('refuses a role outside the closed set', async () => {
    await expect(
      withTenantTx(sql, { role: 'postgres' as DbRole, tenantId: null }, async () => 1),
    ).rejects.toThrow('unknown database role');
  });
});

describe('tenant root table', () => {
  it('is neither readable nor writable by tenant_app_writer', async () => {
    await expect(as('tenant_app_writer', a.tenantId, (tx) => tx`select * from tenant`)).rejects.toMatchObject(
      PERMISSION_DENIED,
    );
    await expect(
      as(
        'tenant_app_writer',
        a.tenantId,
        (tx) => tx`update tenant set display_name = 'x' where tenant_id = ${a.tenantId}`,
      ),
    ).rejects.toMatchObject(PERMISSION_DENIED);
    await expect(
      as(
        'tenant_app_writer',
        a.tenantId,
        (tx) => tx`select transition_tenant_status(${a.tenantId}, 1, 'suspended', 'w', 'w', 'r', 'c')`,
      ),
    ).rejects.toMatchObject(PERMISSION_DENIED);
  });

  it('gives tenant_app_writer exactly one tenant through tenant_runtime_snapshot', async () => {
    const rows = await as(
      'tenant_app_writer',
      a.tenantId,
      (tx) =>
        tx`select tenant_id, status, version::int as version, rate_limit_rpm from tenant_runtime_snapshot(${a.tenantId})`,
    );
    expect(rows).toEqual([{ tenant_id: a.tenantId, status: 'active', version: 1, rate_limit_rpm: null }]);
    // Another tenant's root row is not returned, whatever the argument says.
    const foreign = await as(
      'tenant_app_writer',
      a.tenantId,
      (tx) => tx`select tenant_id from tenant_runtime_snapshot(${b.tenantId})`,
    );
    expect(foreign).toEqual([]);
  });

  it('is readable and insertable, but not updatable, by tenant_admin_writer', async () => {
    const rows = await as(
      'tenant_admin_writer',
      null,
      (tx) => tx`select tenant_id from tenant where tenant_id in (${a.tenantId}, ${b.tenantId})`,
    );
    expect(rows).toHaveLength(2);
    await expect(
      as(
        'tenant_admin_writer',
        a.tenantId,
        (tx) => tx`update tenant set status = 'suspended' where tenant_id = ${a.tenantId}`,
      ),
    ).rejects.toMatchObject(PERMISSION_DENIED);
    await expect(
      as('tenant_admin_writer', a.tenantId, (tx) => tx`delete from tenant where tenant_id = ${a.tenantId}`),
    ).rejects.toMatchObject(PERMISSION_DENIED);

    // Tenant creation plus its first audit entry, switching the tenant midway.
    const tenantId = newId('t');
    await as('tenant_admin_writer', null, async (tx) => {
      await tx`insert into tenant (tenant_id, tenant_key, display_name) values (${tenantId}, ${uniqueKey('new')}, 'New')`;
      await setTxTenant(tx, tenantId);
      await tx`select audit_append(${JSON.stringify({ tenant_id: tenantId, audit_id: newId('aud'), action: 'tenant.created', actor_type: 'platform', actor_id: 'ops' })}::text::jsonb)`;
    });
    // …and every later change goes through the functions.
    await as(
      'tenant_admin_writer',
      tenantId,
      (tx) => tx`select transition_tenant_status(${tenantId}, 1, 'suspended', 'platform', 'ops', 'r', 'c')`,
    );
    const [row] = await sql`select status from tenant where tenant_id = ${tenantId}`;
    expect(row?.status).toBe('suspended');
  });
});

describe('row-level security', () => {
  const tenantTables = [
    'agent_app',
    'agent_app_revision',
    'model_profile',
    'channel_binding',
    'secret',
    'secret_version',
    'session',
    'message_event',
  ];

  it('enables the tenant_isolation policy on every tenant-owned table', async () => {
    const rows = await sql`
      select c.relname, c.relrowsecurity, exists (
               select 1 from pg_policy p where p.polrelid = c.oid and p.polname = 'tenant_isolation') as has_policy
      from pg_class c
      join pg_namespace n on n.oid = c.relnamespace and n.nspname = 'public'
      where c.relkind = 'r' and c.relname <> 'tenant'
        and exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped)`;
    expect(rows.length).toBeGreaterThanOrEqual(20);
    for (const row of rows)
      expect(row, String(row.relname)).toMatchObject({ relrowsecurity: true, has_policy: true });
  });

  it.each(['tenant_app_writer', 'tenant_admin_writer'] as const)(
    'shows %s nothing when no tenant is set',
    async (role) => {
      for (const table of tenantTables) {
        const rows = await as(role, null, (tx) => tx`select tenant_id from ${tx(table)}`);
        expect(rows, table).toHaveLength(0);
      }
    },
  );

  it('shows tenant A only its own rows', async () => {
    for (const table of tenantTables) {
      const rows = await as(
        'tenant_app_writer',
        a.tenantId,
        (tx) => tx`select distinct tenant_id from ${tx(table)}`,
      );
      expect(
        rows.map((r) => r.tenant_id),
        table,
      ).toEqual([a.tenantId]);
    }
    const byId = await as(
      'tenant_app_writer',
      a.tenantId,
      (tx) =>
        tx`select event_id from message_event where tenant_id = ${b.tenantId} and event_id = ${b.eventId}`,
    );
    expect(byId).toHaveLength(0);
  });

  it('rejects writing a row of tenant B while tenant A is set, and cannot touch B’s rows', async () => {
    await expect(
      as(
        'tenant_app_writer',
        a.tenantId,
        (tx) =>
          tx`insert into session (tenant_id, session_id, binding_id, app_id, kind, external_user_id, identity_key)
           values (${b.tenantId}, ${newId('ses')}, ${b.bindingId}, ${b.appId}, 'direct', 'u2', 'direct:u2')`,
      ),
    ).rejects.toMatchObject({ code: '42501', message: expect.stringContaining('row-level security') });

    const updated = await as(
      'tenant_app_writer',
      a.tenantId,
      (tx) =>
        tx`update message_event set failure_reason = 'x' where tenant_id = ${b.tenantId} returning event_id`,
    );
    expect(updated).toHaveLength(0);

    // Moving a visible row into another tenant is a WITH CHECK violation.
    await expect(
      as(
        'tenant_admin_writer',
        a.tenantId,
        (tx) =>
          tx`update agent_app set tenant_id = ${b.tenantId} where tenant_id = ${a.tenantId} and app_id = ${a.appId}`,
      ),
    ).rejects.toMatchObject({ code: '42501' });
  });

  it('works the same through the Drizzle variant', async () => {
    const db = drizzle({ client: sql, schema });
    const apps = await withTenantDb(db, { role: 'tenant_app_writer', tenantId: a.tenantId }, (tx) =>
      tx.select({ tenantId: schema.agentApp.tenantId }).from(schema.agentApp),
    );
    expect(apps).toEqual([{ tenantId: a.tenantId }]);
    const foreign = await withTenantDb(db, { role: 'tenant_app_writer', tenantId: a.tenantId }, (tx) =>
      tx.select().from(schema.channelBinding).where(eq(schema.channelBinding.tenantId, b.tenantId)),
    );
    expect(foreign).toHaveLength(0);
    await expect(
      withTenantDb(db, { role: 'tenant_app_writer', tenantId: a.tenantId }, (tx) =>
        tx.select().from(schema.tenant),
      ),
    ).rejects.toMatchObject({ cause: PERMISSION_DENIED });
  });
});

describe('pre-verification lookups', () => {
  it('find_binding_candidate resolves a route-key digest across tenants with no tenant set', async () => {
    const rows = await as(
      'tenant_app_writer',
      null,
      (tx) => tx`select * from find_binding_candidate('telegram', ${b.routeKeyDigest})`,
    );
    expect(rows).toEqual([
      expect.objectContaining({
        tenant_id: b.tenantId,
        binding_id: b.bindingId,
        status: 'active',
        secret_ref: b.secretRef,
        app_id: b.appId,
        config: { api_base_url: 'http://127.0.0.1:1' },
        secret_key_id: 'k1',
        secret_ciphertext: b.ciphertext,
      }),
    ]);
    const wrongChannel = await as(
      'tenant_app_writer',
      null,
      (tx) => tx`select * from find_binding_candidate('wecom', ${b.routeKeyDigest})`,
    );
    expect(wrongChannel).toHaveLength(0);
  });

  it('authenticate_admin_api_key finds an active key by digest for the admin writer only', async () => {
    const rows = await as(
      'tenant_admin_writer',
      null,
      (tx) => tx`select * from authenticate_admin_api_key(${a.keyDigest})`,
    );
    expect(rows).toEqual([expect.objectContaining({ tenant_id: a.tenantId, role: 'tenant_admin' })]);
    await expect(
      as('tenant_app_writer', null, (tx) => tx`select * from authenticate_admin_api_key(${a.keyDigest})`),
    ).rejects.toMatchObject(PERMISSION_DENIED);
  });

  it('lets the app writer record a security event, prune it only through its function, and use the replay guard', async () => {
    const routeKeyDigest = digest(uniqueKey('route'));
    await as('tenant_app_writer', null, async (tx) => {
      await tx`insert into ingress_security_event (request_id, channel, route_key_digest, failure_class)
               values ('req-x', 'wecom', ${routeKeyDigest}, 'bad_signature')`;
      await tx`insert into ingress_replay_guard (route_key_digest, nonce) values (${routeKeyDigest}, 'n1')`;
    });
    await expect(
      as(
        'tenant_app_writer',
        null,
        (tx) =>
          tx`insert into ingress_replay_guard (route_key_digest, nonce) values (${routeKeyDigest}, 'n1')`,
      ),
    ).rejects.toMatchObject({ code: '23505' });
    await expect(
      as('tenant_app_writer', null, (tx) => tx`select * from ingress_security_event`),
    ).rejects.toMatchObject(PERMISSION_DENIED);
    await expect(
      as('tenant_app_writer', null, (tx) => tx`delete from ingress_security_event`),
    ).rejects.toMatchObject(PERMISSION_DENIED);
    // An event older than the retention is removed by the function; the fresh one stays.
    await sql`insert into ingress_security_event (request_id, channel, route_key_digest, failure_class, occurred_at)
              values ('req-old', 'wecom', ${routeKeyDigest}, 'bad_signature', now() - interval '3 days')`;
    const [pruned] = await as(
      'tenant_app_writer',
      null,
      (tx) => tx<{ n: number }[]>`select ingress_security_prune(86400, 10000) as n`,
    );
    expect(pruned?.n).toBeGreaterThanOrEqual(1);
    expect(
      await sql`select request_id from ingress_security_event where route_key_digest = ${routeKeyDigest} order by request_id`,
    ).toEqual([{ request_id: 'req-x' }]);
  });

  it('list_unstarted_message_events finds recorded messages whose workflow never started', async () => {
    const rows = await as(
      'tenant_app_writer',
      null,
      (tx) => tx`select tenant_id, event_id from list_unstarted_message_events(interval '0 seconds', 1000)`,
    );
    expect(rows).toEqual(expect.arrayContaining([{ tenant_id: a.tenantId, event_id: a.eventId }]));
  });
});

describe('record_inbound_message', () => {
  const params = (g: Graph, externalMessageId: string) => ({
    tenantId: g.tenantId,
    bindingId: g.bindingId,
    appId: g.appId,
    sessionId: newId('ses'),
    identity: {
      kind: 'direct' as const,
      externalUserId: 'u-rec',
      externalChatId: 'c-rec',
      externalThreadId: null,
    },
    eventId: newId('evt'),
    idempotencyKey: uniqueKey('idem'),
    workflowId: uniqueKey('wf'),
    message: {
      channel: 'telegram' as const,
      externalMessageId,
      kind: 'text' as const,
      text: 'hi',
      platformType: 'text',
      senderId: 'u-rec',
      chatId: 'c-rec',
      chatType: 'direct' as const,
      threadId: null,
      sentAt: new Date().toISOString(),
    },
    payloadDigest: digest(externalMessageId),
    requestId: 'req-rec',
    traceId: null,
    outcome: null,
    rateLimitRpm: null,
  });

  it('records under the tenant and leaves the owner connection without a role or tenant', async () => {
    const single = postgres(inject('databaseUrl'), { onnotice: () => {}, max: 1 });
    try {
      const [owner] = await single`select current_user as role`;
      const first = await recordInboundMessage(single, params(a, 'rec-1'));
      const again = await recordInboundMessage(single, params(a, 'rec-1'));
      expect(first).toEqual({ kind: 'recorded', event_id: expect.any(String), status: 'received' });
      expect(again).toEqual({ kind: 'duplicate', event_id: first.event_id, status: 'received' });
      const [after] =
        await single`select current_user as role, current_setting('app.tenant_id', true) as tenant`;
      expect(after?.role).toBe(owner?.role);
      expect(after?.tenant ?? '').toBe('');
      const rows = await as(
        'tenant_app_writer',
        a.tenantId,
        (tx) => tx`select tenant_id from message_event where event_id = ${first.event_id}`,
      );
      expect(rows).toEqual([{ tenant_id: a.tenantId }]);
    } finally {
      await single.end();
    }
  });

  it('records a message delivered twice at once only once, and its session keeps counting without a gap', async () => {
    // The application's client (its json serializer is what recordInboundMessage relies on).
    const single = createSql(inject('databaseUrl'), { max: 2 });
    const seqOf = async () => {
      const [row] = await sql<{ last_event_seq: number; events: number }[]>`
        select s.last_event_seq::int as last_event_seq,
               (select count(*)::int from message_event e
                 where e.tenant_id = s.tenant_id and e.session_id = s.session_id) as events
        from session s
        where s.tenant_id = ${a.tenantId} and s.binding_id = ${a.bindingId} and s.external_user_id = 'u-rec'`;
      return row!;
    };
    try {
      await recordInboundMessage(single, params(a, 'race-0')); // the session exists
      const before = await seqOf();
      // The first delivery holds the session's row lock until its transaction commits; the second,
      // started meanwhile, cannot see it yet and waits for that lock.
      let commit!: () => void;
      const held = new Promise<void>((resolve) => {
        commit = resolve;
      });
      let recorded!: (r: Awaited<ReturnType<typeof recordInboundMessage>>) => void;
      const firstRecorded = new Promise<Awaited<ReturnType<typeof recordInboundMessage>>>((resolve) => {
        recorded = resolve;
      });
      const first = single.begin(async (tx) => {
        recorded(await recordInboundMessage(tx as unknown as Sql, params(a, 'race-1')));
        await held;
      });
      const one = await firstRecorded;
      const second = recordInboundMessage(single, params(a, 'race-1'));
      await new Promise((r) => setTimeout(r, 200));
      commit();
      await first;
      expect(one.kind).toBe('recorded');
      expect(await second).toEqual({ kind: 'duplicate', event_id: one.event_id, status: 'received' });
      expect(await seqOf()).toEqual({
        last_event_seq: before.last_event_seq + 1,
        events: before.events + 1,
      });
      const next = await recordInboundMessage(single, params(a, 'race-2'));
      const [row] = await sql<{ event_seq: number }[]>`
        select event_seq::int as event_seq from message_event
        where tenant_id = ${a.tenantId} and event_id = ${next.event_id}`;
      expect(row?.event_seq).toBe(before.last_event_seq + 2);
    } finally {
      await single.end();
    }
  });

  it('is executable by the data plane only, not by the control plane nor PUBLIC', async () => {
    const rows = await sql<{ role: string; allowed: boolean }[]>`
      select r.role, has_function_privilege(r.role, p.oid, 'EXECUTE') as allowed
      from pg_proc p, (values ('tenant_app_writer'), ('tenant_admin_writer'), (current_user::text)) as r(role)
      where p.proname = 'record_inbound_message' and p.pronamespace = 'public'::regnamespace
      order by r.role`;
    const [owner] = await sql<{ role: string }[]>`select current_user::text as role`;
    expect(rows).toEqual(
      [
        { role: 'tenant_admin_writer', allowed: false },
        { role: 'tenant_app_writer', allowed: true },
        { role: owner!.role, allowed: true },
      ].sort((x, y) => (x.role < y.role ? -1 : 1)),
    );
  });
});

describe('append-only tables', () => {
  const roles = ['tenant_app_writer', 'tenant_admin_writer'] as const;

  it.each(roles)('%s can neither UPDATE nor DELETE audit_log', async (role) => {
    await expect(
      as(
        role,
        a.tenantId,
        (tx) => tx`update audit_log set actor_id = 'mallory' where tenant_id = ${a.tenantId}`,
      ),
    ).rejects.toMatchObject(PERMISSION_DENIED);
    await expect(
      as(role, a.tenantId, (tx) => tx`delete from audit_log where tenant_id = ${a.tenantId}`),
    ).rejects.toMatchObject(PERMISSION_DENIED);
  });

  it.each(roles)(
    '%s cannot INSERT into audit_log, only append through audit_append in its tenant',
    async (role) => {
      const seq = 100 + counter++;
      await expect(
        as(
          role,
          a.tenantId,
          (tx) =>
            tx`insert into audit_log (tenant_id, audit_id, seq, action, actor_type, actor_id, previous_digest, digest)
           values (${a.tenantId}, ${newId('aud')}, ${seq}, 'x.y', 'system', 'test', ${digest('p')}, ${digest(String(seq))})`,
        ),
      ).rejects.toMatchObject(PERMISSION_DENIED);
      const entry = { audit_id: newId('aud'), action: 'x.y', actor_type: 'system', actor_id: 'test' };
      const [row] = await as(
        role,
        a.tenantId,
        (tx) =>
          tx<
            { seq: number }[]
          >`select (audit_append(${JSON.stringify({ ...entry, tenant_id: a.tenantId })}::text::jsonb)).seq`,
      );
      expect(Number(row?.seq)).toBeGreaterThan(0);
      await expect(
        as(
          role,
          a.tenantId,
          (tx) =>
            tx`select audit_append(${JSON.stringify({ ...entry, tenant_id: b.tenantId })}::text::jsonb)`,
        ),
      ).rejects.toMatchObject(PERMISSION_DENIED);
    },
  );

  it('the owner cannot UPDATE or DELETE audit_log either (trigger)', async () => {
    await expect(
      sql`update audit_log set actor_id = 'mallory' where tenant_id = ${a.tenantId}`,
    ).rejects.toThrow('append-only');
    await expect(sql`delete from audit_log where tenant_id = ${a.tenantId}`).rejects.toThrow('append-only');
  });

  it.each([
    ['usage_event', 'tenant_app_writer'],
    ['secret_version', 'tenant_admin_writer'],
    ['agent_app_revision', 'tenant_admin_writer'],
    ['model_profile_version', 'tenant_admin_writer'],
    ['model_profile_version', 'tenant_app_writer'],
  ] as const)('no role may UPDATE or DELETE %s (%s)', async (table, role) => {
    await expect(
      as(
        role,
        a.tenantId,
        (tx) => tx`update ${tx(table)} set tenant_id = tenant_id where tenant_id = ${a.tenantId}`,
      ),
    ).rejects.toMatchObject(PERMISSION_DENIED);
    await expect(
      as(role, a.tenantId, (tx) => tx`delete from ${tx(table)} where tenant_id = ${a.tenantId}`),
    ).rejects.toMatchObject(PERMISSION_DENIED);
  });

  it('the runtime roles cannot DELETE runtime state', async () => {
    await expect(
      as(
        'tenant_app_writer',
        a.tenantId,
        (tx) => tx`delete from message_event where tenant_id = ${a.tenantId}`,
      ),
    ).rejects.toMatchObject(PERMISSION_DENIED);
    await expect(
      as(
        'tenant_admin_writer',
        a.tenantId,
        (tx) => tx`delete from channel_binding where tenant_id = ${a.tenantId}`,
      ),
    ).rejects.toMatchObject(PERMISSION_DENIED);
  });
});
