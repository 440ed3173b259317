import { createHash } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { newId } from '../../db/ids';
import { assertRuntimeLogin } from '../../db/provision';
import { verifyAuditChain } from '../../db/queries/audit';
import { withTenantTx } from '../../db/tx';
import { SUITE_AUDIT_KEY, testLoginUrl } from '../helpers/db-logins';

// The API and the worker log in as switchyard_api / switchyard_worker (migration 0021). Each
// check here is refused by PostgreSQL itself, not by application code.

const DENIED = { code: '42501' };
const digest = (v: string) => createHash('sha256').update(v).digest('hex');
const open = (url: string) =>
  postgres(url, {
    max: 2,
    onnotice: () => undefined,
    connection: { 'app.audit_key': SUITE_AUDIT_KEY } as Record<string, string>,
  });

let su: Sql;
let api: Sql;
let worker: Sql;
let n = 0;
const slug = () => `logins-${process.pid}-${Date.now().toString(36)}-${n++}`;
const tenantA = newId('t');
const tenantB = newId('t');

beforeAll(async () => {
  su = open(inject('databaseUrl'));
  api = open(testLoginUrl(inject('databaseUrl'), 'api'));
  worker = open(testLoginUrl(inject('databaseUrl'), 'worker'));
  for (const t of [tenantA, tenantB]) {
    await su.begin(async (tx) => {
      await tx`insert into tenant (tenant_id, tenant_key, display_name) values (${t}, ${slug()}, 'T')`;
      await tx`select set_config('app.tenant_id', ${t}, true)`;
      for (let i = 0; i < 3; i++) {
        await tx`select audit_append(${JSON.stringify({ tenant_id: t, audit_id: newId('aud'), action: 'x.y', actor_type: 'system', actor_id: 'test' })}::text::jsonb)`;
      }
    });
  }
});
afterAll(async () => {
  await Promise.all([su.end(), api.end(), worker.end()]);
});

describe('the runtime logins', () => {
  it.each([
    ['api', () => api],
    ['worker', () => worker],
  ] as const)('%s owns nothing and cannot become the owner', async (_kind, conn) => {
    const sql = conn();
    await expect(assertRuntimeLogin(sql)).resolves.toBeUndefined();
    await expect(sql`set role switchyard_owner`).rejects.toMatchObject(DENIED);
    await expect(sql`set role switchyard_lookup`).rejects.toMatchObject(DENIED);
    await expect(sql`set role postgres`).rejects.toMatchObject(DENIED);
    await expect(sql`alter table message_event add column x int`).rejects.toMatchObject(DENIED);
    await expect(sql`drop table audit_log`).rejects.toMatchObject(DENIED);
    await expect(sql`create table public.mine (x int)`).rejects.toMatchObject(DENIED);
    await expect(sql`create temporary table mine (x int)`).rejects.toMatchObject(DENIED);
    await expect(
      sql`insert into audit_log (tenant_id, audit_id, seq, action, actor_type, actor_id, digest)
          values (${tenantA}, ${newId('aud')}, 99, 'x', 'system', 'm', ${digest('x')})`,
    ).rejects.toMatchObject(DENIED);
    await expect(sql`select * from tenant`).rejects.toMatchObject(DENIED);
  });

  it('the worker cannot take the control-plane role', async () => {
    await expect(
      withTenantTx(worker, { role: 'tenant_admin_writer', tenantId: tenantA }, (tx) => tx`select 1`),
    ).rejects.toMatchObject(DENIED);
  });

  it('outside a transaction with a tenant, RLS hides every tenant row (FORCEd, also for the owner)', async () => {
    expect(await api`select tenant_id from audit_log where tenant_id in (${tenantA}, ${tenantB})`).toEqual(
      [],
    );
    const forced = await su<{ relname: string }[]>`
      select relname from pg_class
      where relnamespace = 'public'::regnamespace and relrowsecurity and not relforcerowsecurity`;
    expect(forced).toEqual([]);
  });

  it('a transaction of tenant A cannot read or write tenant B', async () => {
    const rows = await withTenantTx(
      api,
      { role: 'tenant_admin_writer', tenantId: tenantA },
      (tx) => tx<{ tenant_id: string }[]>`select distinct tenant_id from audit_log`,
    );
    expect(rows).toEqual([{ tenant_id: tenantA }]);
    await expect(
      withTenantTx(
        api,
        { role: 'tenant_admin_writer', tenantId: tenantA },
        (tx) =>
          tx`select audit_append(${JSON.stringify({ tenant_id: tenantB, audit_id: newId('aud'), action: 'x', actor_type: 'system', actor_id: 'm' })}::text::jsonb)`,
      ),
    ).rejects.toMatchObject(DENIED);
    // Setting the tenant by hand is the only way in, and then only that tenant is visible.
    const other = await withTenantTx(
      worker,
      { role: 'tenant_app_writer', tenantId: tenantB },
      (tx) => tx<{ n: number }[]>`select count(*)::int as n from audit_log where tenant_id = ${tenantA}`,
    );
    expect(other).toEqual([{ n: 0 }]);
  });

  it('EXECUTE is granted to no function for PUBLIC, and CREATE on public to no one of ours', async () => {
    const open = await su<{ proname: string }[]>`
      select p.proname from pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
      where p.pronamespace = 'public'::regnamespace and a.grantee = 0 and a.privilege_type = 'EXECUTE'`;
    expect(open).toEqual([]);
    const [create] = await su<{ api: boolean; worker: boolean; pub: boolean }[]>`
      select has_schema_privilege('switchyard_api', 'public', 'CREATE') as api,
             has_schema_privilege('switchyard_worker', 'public', 'CREATE') as worker,
             has_schema_privilege('tenant_app_writer', 'public', 'CREATE') as pub`;
    expect(create).toEqual({ api: false, worker: false, pub: false });
  });
});

describe('the keyed audit chain', () => {
  const verify = (tenantId: string) =>
    withTenantTx(api, { role: 'tenant_admin_writer', tenantId }, (tx) =>
      verifyAuditChain(tx, tenantId, SUITE_AUDIT_KEY),
    );

  it('verifies rows appended through audit_append', async () => {
    expect(await verify(tenantA)).toMatchObject({ valid: true, checked: 3 });
  });

  it('a row inserted by the owner bypassing the function, with an unkeyed digest, is first_invalid', async () => {
    const t = newId('t');
    await su.begin(async (tx) => {
      await tx`insert into tenant (tenant_id, tenant_key, display_name) values (${t}, ${slug()}, 'T')`;
      await tx`select set_config('app.tenant_id', ${t}, true)`;
      await tx`select audit_append(${JSON.stringify({ tenant_id: t, audit_id: newId('aud'), action: 'x.y', actor_type: 'system', actor_id: 'test' })}::text::jsonb)`;
    });
    // The superuser computes what the v2 chain would have (sha256 over the same canonical text):
    // without the key it cannot produce the HMAC.
    const [head] = await su<
      { digest: string }[]
    >`select digest from audit_log where tenant_id = ${t} and seq = 1`;
    const forged = newId('aud');
    await su`insert into audit_log (tenant_id, audit_id, seq, action, actor_type, actor_id, previous_digest, digest)
             values (${t}, ${forged}, 2, 'tenant.disabled', 'platform', 'mallory', ${head!.digest}, ${digest(forged)})`;
    expect(await verify(t)).toMatchObject({ valid: false, first_invalid: forged });
  });

  // Verification recomputes each HMAC in the application from the stored columns, so replacing
  // audit_digest (which only appends use) cannot make an edited row verify.
  it('an edited row is found by the application, whatever the database functions say', async () => {
    const t = newId('t');
    await su.begin(async (tx) => {
      await tx`insert into tenant (tenant_id, tenant_key, display_name) values (${t}, ${slug()}, 'T')`;
      await tx`select set_config('app.tenant_id', ${t}, true)`;
      for (let i = 0; i < 2; i++) {
        await tx`select audit_append(${JSON.stringify({ tenant_id: t, audit_id: newId('aud'), action: 'x.y', actor_type: 'system', actor_id: 'test' })}::text::jsonb)`;
      }
    });
    const [victim] = await su<
      { audit_id: string }[]
    >`select audit_id from audit_log where tenant_id = ${t} and seq = 1`;
    await su.begin(async (tx) => {
      await tx`alter table audit_log disable trigger user`;
      await tx`update audit_log set actor_id = 'mallory' where tenant_id = ${t} and seq = 1`;
      await tx`alter table audit_log enable trigger user`;
    });
    expect(await verify(t)).toMatchObject({ valid: false, first_invalid: victim!.audit_id });
    // A checkpoint at the edited row does not vouch for it either: the anchor is recomputed.
    const [row] = await su<
      { digest: string }[]
    >`select digest from audit_log where tenant_id = ${t} and seq = 1`;
    const fromEdited = await withTenantTx(api, { role: 'tenant_admin_writer', tenantId: t }, (tx) =>
      verifyAuditChain(tx, t, SUITE_AUDIT_KEY, { seq: 1, digest: row!.digest }),
    );
    expect(fromEdited).toMatchObject({ valid: false, first_invalid: victim!.audit_id });
  });

  it('the chain key never leaves the connection that set it', async () => {
    const plain = postgres(testLoginUrl(inject('databaseUrl'), 'api'), { max: 1, onnotice: () => undefined });
    try {
      await expect(
        withTenantTx(
          plain,
          { role: 'tenant_admin_writer', tenantId: tenantA },
          (tx) =>
            tx`select audit_append(${JSON.stringify({ tenant_id: tenantA, audit_id: newId('aud'), action: 'x', actor_type: 'system', actor_id: 'm' })}::text::jsonb)`,
        ),
      ).rejects.toThrow(/audit chain key/);
    } finally {
      await plain.end();
    }
  });
});
