import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_BYTES } from '../../api/app';
import { ERROR_CODES, type ErrorCode, statusOf } from '../../api/errors';
import { newId } from '../../db/ids';
import { sha256Hex } from '../../lib/digest';
import {
  type AdminTenant,
  api,
  configurationOf,
  type Json,
  newTelegramBot,
  ok,
  SCRIPTED,
  seedRefusedPendingAudit,
  seedRuntimeRows,
  setupTwoTenants,
  snapshotTenant,
  tenantPath,
  uniqueKey,
} from '../helpers/admin';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';

// OWASP API Top 10 (API1 object-level, API3 property-level, API5 function-level authorization)
// as a matrix generated from /openapi.json: every admin operation × every kind of caller must get
// the answer the contract gives that caller, with a status the document lists for the operation,
// in the one error envelope, without a trace of tenant A in what another tenant is told, and —
// for every caller that may not write — without a byte of tenant A (or B) changing.

/** The closed set of api/errors.ts. */
const CLOSED_CODES: ReadonlySet<string> = new Set(ERROR_CODES);

interface Operation {
  method: string;
  template: string;
  /** `METHOD template` with the tenant prefix dropped, as the body fixtures are keyed */
  key: string;
  params: string[];
  documented: Set<number>;
  success: number;
  hasBody: boolean;
  platformOnly: boolean;
  security: unknown;
}

/**
 * The objects of tenant A a caller's paths name: one kit for the callers that are refused, one of
 * its own for each caller that may write (their successes must not depend on each other).
 */
interface Kit {
  label: string;
  tenantId: string;
  appId: string;
  revision: number;
  modelProfileId: string;
  backendProfileId: string;
  bindingId: string;
  /** an active console binding, for the console routes */
  consoleBindingId: string;
  secretName: string;
  keyId: string;
  /** a message to repair, its manual tool invocation and its open segment dead letter */
  eventId: string;
  invocationId: string;
  deadLetterId: string;
  /** a second unfinished message, to fail */
  failEventId: string;
  /** a failed message's open segment letter (retryable) and a call awaiting approval */
  retryDeadLetterId: string;
  approvalInvocationId: string;
  /** a pending audit entry written without the key (refused), to quarantine */
  pendingId: number;
}

interface Expected {
  status: number;
  code?: ErrorCode;
}

interface Caller {
  name: string;
  authorization: () => string | null;
  /** What the caller must get for `op`; null: the caller is not tried on it. */
  expect: (op: Operation) => Expected | null;
  /** The tenant its paths name (default: the kit's, tenant A). */
  pathTenant?: () => string;
  /**
   * Also tried with a minimal body `{}`: a caller refused for who it is must be refused before the
   * body is looked at. Not so for B on its own tenant, which may be told its body is invalid.
   */
  minimalBodies: boolean;
  /** Not of tenant A: nothing of A may appear, and real ids must answer as unknown ones do. */
  foreign: boolean;
}

type Reply = { status: number; text: string; body: Json; requestId: string | null };

const REASON = 'owasp matrix';
/** Outside every tenant and open to every valid token: it tells the caller who it is, nothing else. */
const ANY_PRINCIPAL: ReadonlySet<string> = new Set(['GET /v1/admin/whoami']);
/** Secret values written in this file: write-only, so no answer to anyone may carry one. */
const SECRET_VALUE = `tool-cred-${randomBytes(12).toString('hex')}`;
const ROTATED_VALUE = `rotated-${randomBytes(12).toString('hex')}`;
const MODEL_KEY_VALUE = `sk-owasp-${randomBytes(12).toString('hex')}`;
const MUTATION_RANK: Record<string, number> = {
  publish: 2,
  'status-transitions': 3,
  revoke: 3,
  discard: 3,
  retry: 3,
  repair: 3,
  fail: 3,
  resolution: 3,
  approval: 3,
};

/** Runs `fn` over `items` with at most `n` in flight (two shared cores: moderate). */
async function inPool<T>(items: T[], n: number, fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

describe('admin API: OWASP authorization matrix (generated from /openapi.json)', () => {
  let h: Harness;
  let a: AdminTenant;
  let b: AdminTenant;
  let ops: Operation[];
  let deny: Kit;
  const allowedKits: Record<string, Kit> = {};
  let revokedKey: string;
  let modelSecretRefA: string;
  /** [what, value] of every id, key and token of tenant A: nothing another tenant may see */
  let aSecrets: [string, string][];
  /** [what, value] of what no caller may ever be shown again: secret values and API keys */
  let neverShown: [string, string][];
  const startedWorkflows: string[] = [];

  const send = async (method: string, path: string, authorization: string | null, body?: Json) => {
    const headers: Record<string, string> = {};
    if (authorization !== null) headers.authorization = authorization;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await h.app.request(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: Json = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = text;
    }
    return { status: res.status, text, body: parsed, requestId: res.headers.get('x-request-id') } as Reply;
  };
  const platform = `Bearer ${TEST_ADMIN_TOKEN}`;
  const read = (tenantId: string, rest: string) => ok(api(h.app, 'GET', tenantPath(tenantId, rest)));

  /** Builds one kit through the API (as A's admin) plus seeded runtime rows. */
  async function createKit(label: string): Promise<Kit> {
    const t = a.tenantId;
    const as = { token: a.adminKey };
    const post = (rest: string, body: Json) =>
      ok(api(h.app, 'POST', tenantPath(t, rest), { ...as, body }), 201);
    const key = await post('/api-keys', { role: 'tenant_viewer' });
    const secret = await post('/secrets', {
      name: `kit-${label}`,
      purpose: 'tool_credential',
      value: SECRET_VALUE,
    });
    const mp = await post('/model-profiles', {
      profile_key: `kit-${label}`,
      provider: 'scripted',
      model: 'm',
    });
    const bp = await post('/backend-profiles', { profile_key: `kit-${label}`, provider: 'postgres' });
    const app = await post('/apps', { app_key: `kit-${label}`, display_name: 'Kit' });
    const rev = await post(`/apps/${app.app_id}/revisions`, {
      model_profile_id: mp.model_profile_id,
      system_prompt: 'x',
      scripted: SCRIPTED,
    });
    // Three draft bindings: seeded messages are unique per binding and external id, and the
    // seeding helper always writes external id '1'.
    const [binding, ...seedBindings] = await Promise.all(
      [1, 2, 3].map(() =>
        post('/bindings', {
          channel: 'telegram',
          provider_account_id: newTelegramBot().botId,
          app_id: a.appId,
          secret_ref: a.secretRef,
        }),
      ),
    );
    const consoleBinding = await post('/bindings', { channel: 'console', app_id: a.appId, activate: true });
    const [repair, fail, retry] = await Promise.all(
      [binding, ...seedBindings].map((bd) => seedRuntimeRows(h.sql, { ...a, bindingId: bd.binding_id })),
    );
    const approvalInvocationId = newId('inv');
    await h.sql.begin(async (tx) => {
      await tx`update message_event set status = 'failed' where tenant_id = ${t} and event_id = ${retry!.eventId}`;
      await tx`insert into tool_invocation (tenant_id, invocation_id, event_id, session_id, tool_name, tool_capability_digest,
                                            idempotency_key, request_digest, status, requires_approval, approval_deadline)
               values (${t}, ${approvalInvocationId}, ${retry!.eventId}, ${retry!.sessionId}, 'refund', ${sha256Hex('cap')},
                       ${`idem-${approvalInvocationId}`}, ${sha256Hex('req')}, 'awaiting_approval', true, now() + interval '1 hour')`;
    });
    const pendingId = await seedRefusedPendingAudit(h.sql, t);
    return {
      label,
      tenantId: t,
      appId: app.app_id,
      revision: rev.revision,
      modelProfileId: mp.model_profile_id,
      backendProfileId: bp.profile_id,
      bindingId: binding.binding_id,
      consoleBindingId: consoleBinding.binding_id,
      secretName: secret.name,
      keyId: key.key_id,
      eventId: repair!.eventId,
      invocationId: repair!.invocationId,
      deadLetterId: repair!.deadLetterId,
      failEventId: fail!.eventId,
      retryDeadLetterId: retry!.deadLetterId,
      approvalInvocationId,
      pendingId,
    };
  }

  /** The path of `op` naming the kit's objects (tenant: `tenantId`), or why there is none. */
  function fill(op: Operation, k: Kit, tenantId = k.tenantId): string | Error {
    const ids: Record<string, string> = {
      tenant_id: tenantId,
      app_id: k.appId,
      revision: String(k.revision),
      model_profile_id: k.modelProfileId,
      profile_id: k.backendProfileId,
      binding_id: op.template.includes('/console/') ? k.consoleBindingId : k.bindingId,
      name: k.secretName,
      key_id: k.keyId,
      event_id: op.key.endsWith('/fail') ? k.failEventId : k.eventId,
      invocation_id: op.key.endsWith('/approval') ? k.approvalInvocationId : k.invocationId,
      dead_letter_id: op.key.endsWith('/retry') ? k.retryDeadLetterId : k.deadLetterId,
      pending_id: String(k.pendingId),
    };
    const missing = op.params.filter((p) => ids[p] === undefined);
    if (missing.length > 0) return new Error(`no fixture id for path parameter(s) ${missing.join(', ')}`);
    const path = op.template.replace(/\{([a-z_]+)\}/g, (_m, p: string) => ids[p]!);
    // The one operation with a required query parameter.
    return op.key === 'GET /bindings/{binding_id}/console/messages' ? `${path}?conversation_id=owasp` : path;
  }

  /** The same path with every id of A replaced by one that names nothing. */
  const unknownTwin = (op: Operation, path: string, keepTenant: boolean) => {
    const parts = path.split('/');
    return op.template
      .split('/')
      .map((seg, i) =>
        !seg.startsWith('{') || (keepTenant && seg === '{tenant_id}')
          ? parts[i]
          : seg === '{revision}'
            ? '999999'
            : `nope_${seg.slice(1, -1).replace(/_/g, '')}`,
      )
      .join('/');
  };

  /** Valid bodies, so that an answer is about the caller and not the body (a leak would write). */
  const BODIES: Record<string, (k: Kit) => Json | Promise<Json>> = {
    'POST /v1/admin/tenants': () => ({ tenant_key: uniqueKey('owasp'), display_name: 'Matrix tenant' }),
    'PUT /configuration': async (k) => configurationOf(await read(k.tenantId, '')),
    'POST /status-transitions': async (k) => ({
      expected_version: (await read(k.tenantId, '')).version,
      next_status: 'suspended',
      reason: REASON,
    }),
    'POST /api-keys': () => ({ role: 'tenant_admin' }),
    'POST /secrets': () => ({ name: uniqueKey('s'), purpose: 'tool_credential', value: SECRET_VALUE }),
    'PUT /secrets/{name}': () => ({ value: ROTATED_VALUE }),
    'POST /model-profiles': () => ({ profile_key: uniqueKey('mp'), provider: 'scripted', model: 'rules' }),
    'PUT /model-profiles/{model_profile_id}': async (k) => ({
      expected_version: (await read(k.tenantId, `/model-profiles/${k.modelProfileId}`)).version,
      provider: 'scripted',
      model: 'other',
    }),
    'POST /backend-profiles': () => ({ profile_key: uniqueKey('bp'), provider: 'postgres' }),
    'POST /backend-profiles/{profile_id}/status-transitions': async (k) => ({
      expected_version: (await read(k.tenantId, `/backend-profiles/${k.backendProfileId}`)).version,
      next_status: 'suspended',
    }),
    'POST /apps': () => ({ app_key: uniqueKey('app'), display_name: 'Matrix' }),
    'POST /apps/{app_id}/publish': async (k) => ({
      revision: k.revision,
      expected_version: (await read(k.tenantId, `/apps/${k.appId}`)).version,
    }),
    'POST /apps/{app_id}/status-transitions': async (k) => ({
      expected_version: (await read(k.tenantId, `/apps/${k.appId}`)).version,
      next_status: 'disabled',
    }),
    'POST /apps/{app_id}/revisions': (k) => ({
      model_profile_id: k.modelProfileId,
      system_prompt: 'x',
      scripted: SCRIPTED,
    }),
    'POST /bindings': () => ({
      channel: 'telegram',
      provider_account_id: newTelegramBot().botId,
      app_id: a.appId,
      secret_ref: a.secretRef,
    }),
    'POST /bindings/{binding_id}/status-transitions': async (k) => ({
      expected_version: (await read(k.tenantId, `/bindings/${k.bindingId}`)).version,
      next_status: 'disabled',
    }),
    'POST /bindings/{binding_id}/console/messages': () => ({ conversation_id: 'owasp', text: 'matrix' }),
    'POST /messages/{event_id}/repair': () => ({ reason: REASON }),
    'POST /messages/{event_id}/fail': () => ({ reason: REASON }),
    'POST /tool-invocations/{invocation_id}/resolution': () => ({ outcome: 'rejected', reason: REASON }),
    'POST /tool-invocations/{invocation_id}/approval': () => ({ decision: 'deny', reason: REASON }),
    'POST /dead-letters/{dead_letter_id}/discard': () => ({ reason: REASON }),
    'POST /dead-letters/{dead_letter_id}/retry': () => ({ reason: REASON }),
    'POST /audit-events/pending/{pending_id}/quarantine': () => ({ reason: REASON }),
  };
  const bodyOf = async (op: Operation, k: Kit): Promise<Json | Error> => {
    const build = BODIES[op.key];
    return build ? build(k) : new Error('no valid body fixture for this operation');
  };

  /** Everything wrong with `reply` for `op` when `expected` was due. */
  function judge(op: Operation, reply: Reply, expected: Expected, foreign: boolean): string[] {
    const problems: string[] = [];
    const code: unknown = reply.body?.error?.code;
    if (reply.status !== expected.status || (expected.code && code !== expected.code)) {
      problems.push(`expected ${expected.status}${expected.code ? ` ${expected.code}` : ''}`);
    }
    if (!op.documented.has(reply.status)) problems.push(`status ${reply.status} is not in the document`);
    if (reply.status >= 400) {
      const e = reply.body?.error;
      const extra =
        e && typeof e === 'object'
          ? Object.keys(e).filter((k) => !/^(code|message|request_id|details)$/.test(k))
          : [];
      if (
        !e ||
        typeof e.message !== 'string' ||
        !e.message ||
        typeof e.request_id !== 'string' ||
        extra.length > 0
      ) {
        problems.push('not the {error:{code,message,request_id}} envelope');
      } else if (e.request_id !== reply.requestId) problems.push('request_id is not the x-request-id header');
      if (typeof code !== 'string' || !CLOSED_CODES.has(code)) problems.push('code outside the closed set');
      else if (statusOf(code as ErrorCode) !== reply.status)
        problems.push(`code ${code} maps to ${statusOf(code as ErrorCode)}`);
    }
    for (const [what, value] of [...neverShown, ...(foreign ? aSecrets : [])]) {
      if (reply.text.includes(value)) problems.push(`body carries A's ${what}`);
    }
    return problems;
  }

  const line = (op: Operation, variant: string, reply: Reply, problems: string[]) =>
    `${op.method} ${op.template}${variant} → ${reply.status} ${reply.body?.error?.code ?? ''}: ${problems.join('; ')}` +
    ` | ${reply.text.slice(0, 160)}`;

  beforeAll(async () => {
    h = await createHarness();
    ({ a, b } = await setupTwoTenants(h.app));
    const doc = (await ok(api(h.app, 'GET', '/openapi.json', { token: null }))) as {
      paths: Record<string, Record<string, Json>>;
    };
    ops = Object.entries(doc.paths)
      .filter(([path]) => path.startsWith('/v1/admin/'))
      .flatMap(([template, methods]) =>
        Object.entries(methods)
          .filter(([m]) => ['get', 'post', 'put', 'patch', 'delete'].includes(m))
          .map(([m, op]) => {
            const documented = new Set(Object.keys(op.responses).map(Number));
            const method = m.toUpperCase();
            return {
              method,
              template,
              key: `${method} ${template.replace('/v1/admin/tenants/{tenant_id}', '')}`,
              params: [...template.matchAll(/\{([a-z_]+)\}/g)].map((x) => x[1]!),
              documented,
              success: [...documented].find((s) => s >= 200 && s < 300) ?? 0,
              hasBody: op.requestBody !== undefined,
              platformOnly: /platform only/i.test(op.summary ?? ''),
              security: op.security,
            };
          }),
      );
    const kits = await Promise.all(['deny', 'admin', 'platform'].map(createKit));
    [deny] = kits as [Kit];
    allowedKits.admin = kits[1]!;
    allowedKits.platform = kits[2]!;
    const revocable = await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, '/api-keys'), { body: { role: 'tenant_admin' } }),
      201,
    );
    await ok(api(h.app, 'POST', tenantPath(a.tenantId, `/api-keys/${revocable.key_id}/revoke`)));
    revokedKey = revocable.key;
    modelSecretRefA = (
      await ok(
        api(h.app, 'POST', tenantPath(a.tenantId, '/secrets'), {
          token: a.adminKey,
          body: { name: 'model-key', purpose: 'model_api_key', value: MODEL_KEY_VALUE },
        }),
        201,
      )
    ).secret_ref;
    neverShown = [
      ['bot token', a.bot.botToken],
      ['webhook secret token', a.bot.webhookSecret],
      ['model API key value', MODEL_KEY_VALUE],
      ['tool credential value', SECRET_VALUE],
      ['rotated secret value', ROTATED_VALUE],
      ['tenant_admin API key', a.adminKey],
      ['tenant_viewer API key', a.viewerKey],
      ['revoked API key', revokedKey],
    ];
    const { telegram: _t, bot: _b, revision: _r, secretName: _s, ...rest } = a;
    aSecrets = [
      ...Object.entries(rest).filter(([, v]) => typeof v === 'string'),
      ['bot id', a.bot.botId],
      ['model secret_ref', modelSecretRefA],
      ...kits.flatMap((k) =>
        Object.entries(k)
          .filter(([f, v]) => typeof v === 'string' && /Id$/.test(f))
          .map(([f, v]) => [`${k.label} ${f}`, v as string] as [string, string]),
      ),
    ];
  });
  afterAll(async () => {
    // The repair and retry runs have no worker here; end them rather than leave them waiting.
    await Promise.all(
      startedWorkflows.map((id) =>
        h.temporal.workflow
          .getHandle(id)
          .terminate('owasp matrix done')
          .catch(() => undefined),
      ),
    );
    await h?.close();
  });

  it('the document puts every admin operation behind the bearer scheme and lists its refusals', () => {
    expect(ops.length).toBeGreaterThanOrEqual(45);
    const problems = ops.flatMap((op) => {
      const p: string[] = [];
      if (JSON.stringify(op.security) !== JSON.stringify([{ bearerAuth: [] }])) p.push('no bearerAuth');
      if (!op.documented.has(401)) p.push('401 undocumented');
      if (op.success === 0) p.push('no 2xx');
      if ((op.method !== 'GET' || op.platformOnly) && !op.documented.has(403)) p.push('403 undocumented');
      if (op.params.includes('tenant_id') && !op.documented.has(404)) p.push('404 undocumented');
      return p.map((x) => `${op.method} ${op.template}: ${x}`);
    });
    expect(problems).toEqual([]);
    expect(ops.filter((op) => op.platformOnly).map((op) => op.key)).toEqual([
      'POST /v1/admin/tenants',
      'GET /v1/admin/tenants',
      'PUT /configuration',
      'POST /status-transitions',
      'POST /audit-events/pending/{pending_id}/quarantine',
    ]);
  });

  const unauthenticated = (name: string, authorization: () => string | null): Caller => ({
    name,
    authorization,
    expect: () => ({ status: 401, code: 'unauthenticated' }),
    minimalBodies: true,
    foreign: true,
  });
  const otherTenant = (name: string, key: () => string): Caller => ({
    name,
    authorization: () => `Bearer ${key()}`,
    expect: (op) =>
      op.params.includes('tenant_id')
        ? { status: 404, code: 'not_found' }
        : ANY_PRINCIPAL.has(op.key)
          ? { status: op.success }
          : { status: 403, code: 'forbidden' },
    minimalBodies: true,
    foreign: true,
  });
  const READ_ONLY_CALLERS: Caller[] = [
    unauthenticated('no Authorization header', () => null),
    unauthenticated('malformed: Bearer x', () => 'Bearer x'),
    unauthenticated('malformed: Bearer sy_short', () => 'Bearer sy_short'),
    unauthenticated('malformed: empty bearer', () => 'Bearer '),
    unauthenticated('malformed: 2 KB garbage bearer', () => `Bearer ${randomBytes(1536).toString('base64')}`),
    unauthenticated(
      'malformed: Basic with the platform token',
      () => `Basic ${Buffer.from(`admin:${TEST_ADMIN_TOKEN}`).toString('base64')}`,
    ),
    unauthenticated('malformed: the platform token without a scheme', () => TEST_ADMIN_TOKEN),
    unauthenticated('malformed: the platform token with one more character', () => `${platform}x`),
    unauthenticated(
      'well-shaped tenant key that was never minted',
      () => `Bearer sy_${randomBytes(32).toString('base64url')}`,
    ),
    unauthenticated('revoked tenant_admin key of A', () => `Bearer ${revokedKey}`),
    otherTenant('tenant_admin key of B (other tenant)', () => b.adminKey),
    otherTenant('tenant_viewer key of B (other tenant)', () => b.viewerKey),
    {
      name: "tenant_admin key of B on its own tenant path naming A's objects",
      authorization: () => `Bearer ${b.adminKey}`,
      pathTenant: () => b.tenantId,
      minimalBodies: false,
      // Secret names and revision numbers are per tenant, not ids: B has its own of each. A
      // platform-only operation refuses B's key for what it is, before any id is looked at.
      expect: (op) =>
        !op.params.some((p) => !['tenant_id', 'name', 'revision'].includes(p))
          ? null
          : op.platformOnly
            ? { status: 403, code: 'forbidden' }
            : { status: 404, code: 'not_found' },
      foreign: true,
    },
    {
      name: 'tenant_viewer key of A',
      authorization: () => `Bearer ${a.viewerKey}`,
      expect: (op) =>
        op.method === 'GET' && !op.platformOnly ? { status: op.success } : { status: 403, code: 'forbidden' },
      minimalBodies: true,
      foreign: false,
    },
  ];

  describe('callers that may not write: the documented refusal everywhere, nothing of A or B changes', () => {
    it.each(READ_ONLY_CALLERS)('$name', async (caller) => {
      const bodies = new Map<string, Json | Error>();
      for (const op of ops) if (op.hasBody) bodies.set(op.key, await bodyOf(op, deny));
      const jobs = ops.flatMap((op) => {
        const expected = caller.expect(op);
        if (!expected) return [];
        const variants: [string, Json | Error | undefined][] = !op.hasBody
          ? [['', undefined]]
          : caller.minimalBodies
            ? [
                [' [valid body]', bodies.get(op.key)],
                [' [minimal body {}]', {}],
              ]
            : [[' [valid body]', bodies.get(op.key)]];
        return variants.map(([variant, body]) => ({ op, expected, variant, body }));
      });
      const before = [await snapshotTenant(h.sql, a.tenantId), await snapshotTenant(h.sql, b.tenantId)];

      const problems: string[] = [];
      await inPool(jobs, 8, async ({ op, expected, variant, body }) => {
        const path = fill(op, deny, caller.pathTenant?.());
        const unusable = [path, body].find((x): x is Error => x instanceof Error);
        if (unusable) {
          problems.push(`${op.method} ${op.template}${variant}: ${unusable.message}`);
          return;
        }
        const reply = await send(op.method, path as string, caller.authorization(), body);
        const found = judge(op, reply, expected, caller.foreign);
        if (caller.foreign) {
          // An id of A must be answered exactly as an id that names nothing: no existence oracle.
          const twinPath = unknownTwin(op, path as string, caller.pathTenant !== undefined);
          const twin = await send(op.method, twinPath, caller.authorization(), body);
          const sig = (r: Reply) => `${r.status} ${r.body?.error?.code} ${r.body?.error?.message}`;
          if (sig(twin) !== sig(reply)) found.push(`an unknown id is answered differently: ${sig(twin)}`);
        }
        if (found.length > 0) problems.push(line(op, variant, reply, found));
      });

      expect(problems.sort()).toEqual([]);
      expect([await snapshotTenant(h.sql, a.tenantId), await snapshotTenant(h.sql, b.tenantId)]).toEqual(
        before,
      );
      const created = bodies.get('POST /v1/admin/tenants') as Json;
      const rows = await h.sql`select 1 from tenant where tenant_key = ${created.tenant_key}`;
      expect(rows, 'no tenant was created').toHaveLength(0);
    });

    it("spellings of A's paths that might slip past the tenant check: B reads nothing, the viewer writes nothing", async () => {
      const A = a.tenantId;
      const spellings = [
        `/v1/admin/tenants/${A}/apps/`,
        `/v1/admin//tenants/${A}/apps`,
        `/v1//admin/tenants/${A}/apps`,
        `/V1/admin/tenants/${A}/apps`,
        `/v1/admin/Tenants/${A}/apps`,
        `/v1/admin/tenants/%74${A.slice(1)}/apps`,
        `/v1/admin/./tenants/${A}/apps`,
        `/v1/admin/tenants/${b.tenantId}/../${A}/apps`,
        `/v1/admin/tenants/${b.tenantId}/..%2F${A}/apps`,
        `/v1/admin/tenants/${A}%2Fapps`,
        `/v1/admin/tenants/${A};x/apps`,
        `/v1/admin/tenants/${A}/apps?tenant_id=${b.tenantId}`,
      ];
      const tries: [string, string, string, boolean][] = [
        ['B admin', `Bearer ${b.adminKey}`, 'GET', true],
        ['B admin', `Bearer ${b.adminKey}`, 'POST', true],
        ['A viewer', `Bearer ${a.viewerKey}`, 'POST', false],
      ];
      const before = [await snapshotTenant(h.sql, a.tenantId), await snapshotTenant(h.sql, b.tenantId)];
      const problems: string[] = [];
      for (const path of spellings) {
        for (const [who, authorization, method, foreign] of tries) {
          const body = method === 'POST' ? { app_key: uniqueKey('slip'), display_name: 'Slip' } : undefined;
          const reply = await send(method, path, authorization, body);
          const found: string[] = [];
          if (reply.status < 400) found.push('not refused');
          if (!CLOSED_CODES.has(String(reply.body?.error?.code))) found.push('not the envelope');
          for (const [what, value] of foreign ? aSecrets : []) {
            if (reply.text.includes(value)) found.push(`body carries A's ${what}`);
          }
          if (found.length > 0)
            problems.push(`${who} ${method} ${path} → ${reply.status}: ${found.join('; ')}`);
        }
      }
      expect(problems).toEqual([]);
      expect([await snapshotTenant(h.sql, a.tenantId), await snapshotTenant(h.sql, b.tenantId)]).toEqual(
        before,
      );
    });
  });

  describe('request shapes the document does not describe', () => {
    // Found by this matrix: the app answers 415 for a body that is not JSON (@hono/zod-openapi's
    // media-type gate) and 413 past MAX_BODY_BYTES (api/app.ts bodyLimit); every admin operation
    // now documents both (api/admin/schemas.ts errorResponses).
    it('a non-JSON or oversized body gets a status its operation documents', async () => {
      const problems: string[] = [];
      const shapes: [string, string, string][] = [
        ['text/plain body', 'text/plain', 'x'],
        ['body over MAX_BODY_BYTES', 'application/json', JSON.stringify({ pad: 'x'.repeat(MAX_BODY_BYTES) })],
      ];
      for (const op of ops.filter((o) => o.hasBody)) {
        for (const [what, contentType, body] of shapes) {
          const res = await h.app.request(fill(op, deny) as string, {
            method: op.method,
            headers: { authorization: platform, 'content-type': contentType },
            body,
          });
          if (!op.documented.has(res.status))
            problems.push(`${op.method} ${op.template} [${what}] → ${res.status}`);
        }
      }
      expect(problems).toEqual([]);
    });
  });

  describe("references to A's objects inside B's requests are refused and write nothing", () => {
    interface Attempt {
      name: string;
      method: string;
      template: string;
      path: () => string;
      authorization: () => string;
      body: () => Json | Promise<Json>;
      expected: number[];
    }
    const asB = () => `Bearer ${b.adminKey}`;
    const bPath = (rest: string) => () => tenantPath(b.tenantId, rest);
    const bindingOf = (appId: () => string, secretRef: () => string, activate: boolean) => () => ({
      channel: 'telegram',
      provider_account_id: newTelegramBot().botId,
      app_id: appId(),
      secret_ref: secretRef(),
      activate,
    });
    const T = '/v1/admin/tenants/{tenant_id}';
    const ATTEMPTS: Attempt[] = [
      {
        name: "a revision of B's app on A's model profile",
        method: 'POST',
        template: `${T}/apps/{app_id}/revisions`,
        path: () => tenantPath(b.tenantId, `/apps/${b.appId}/revisions`),
        authorization: asB,
        body: () => ({ model_profile_id: a.modelProfileId, system_prompt: 'x', scripted: SCRIPTED }),
        expected: [400, 404],
      },
      ...(
        [
          ["B's app, A's secret_ref", () => b.appId, () => a.secretRef, false],
          ["A's app_id, B's secret", () => a.appId, () => b.secretRef, false],
          ["A's app_id and secret_ref, activating", () => a.appId, () => a.secretRef, true],
          ["B's app, A's secret_ref, activating", () => b.appId, () => a.secretRef, true],
        ] as const
      ).map(
        ([what, appId, secretRef, activate]): Attempt => ({
          name: `a binding with ${what}`,
          method: 'POST',
          template: `${T}/bindings`,
          path: bPath('/bindings'),
          authorization: asB,
          body: bindingOf(appId, secretRef, activate),
          expected: [400, 404],
        }),
      ),
      ...(
        [
          ['model_api_key', () => modelSecretRefA],
          ['telegram_bot', () => a.secretRef],
        ] as const
      ).flatMap(([purpose, ref]): Attempt[] => [
        {
          name: `a model profile with A's ${purpose} secret`,
          method: 'POST',
          template: `${T}/model-profiles`,
          path: bPath('/model-profiles'),
          authorization: asB,
          body: () => ({
            profile_key: uniqueKey('steal'),
            provider: 'openai_compatible',
            model: 'gpt',
            base_url: 'https://llm.example.com/v1',
            api_key_secret_ref: ref(),
          }),
          expected: [400, 404],
        },
        {
          name: `B's model profile updated to A's ${purpose} secret`,
          method: 'PUT',
          template: `${T}/model-profiles/{model_profile_id}`,
          path: () => tenantPath(b.tenantId, `/model-profiles/${b.modelProfileId}`),
          authorization: asB,
          body: async () => ({
            expected_version: (await read(b.tenantId, `/model-profiles/${b.modelProfileId}`)).version,
            provider: 'openai_compatible',
            model: 'gpt',
            base_url: 'https://llm.example.com/v1',
            api_key_secret_ref: ref(),
          }),
          expected: [400, 404],
        },
      ]),
      ...(
        [
          ['default_agent_app_id', () => a.appId],
          ['default_backend_profile_id', () => a.backendProfileId],
        ] as const
      ).map(
        ([field, id]): Attempt => ({
          name: `the platform setting B's ${field} to A's object`,
          method: 'PUT',
          template: `${T}/configuration`,
          path: bPath('/configuration'),
          authorization: () => platform,
          body: async () => configurationOf(await read(b.tenantId, ''), { [field]: id() }),
          expected: [400, 404],
        }),
      ),
      {
        name: "B's key displacing A's active binding (platform arbitration only)",
        method: 'POST',
        template: `${T}/bindings/{binding_id}/status-transitions`,
        path: () => tenantPath(b.tenantId, `/bindings/${b.bindingId}/status-transitions`),
        authorization: asB,
        body: async () => ({
          expected_version: (await read(b.tenantId, `/bindings/${b.bindingId}`)).version,
          next_status: 'active',
          reason: 'take over',
          displace_binding: { tenant_id: a.tenantId, binding_id: a.bindingId },
        }),
        expected: [403],
      },
      ...(
        [
          ['resolving', 'resolution', () => deny.invocationId, { outcome: 'accepted', reason: REASON }],
          ['approving', 'approval', () => deny.approvalInvocationId, { decision: 'approve', reason: REASON }],
        ] as const
      ).map(
        ([verb, action, id, body]): Attempt => ({
          name: `${verb} A's tool invocation through B's tenant`,
          method: 'POST',
          template: `${T}/tool-invocations/{invocation_id}/${action}`,
          path: () => tenantPath(b.tenantId, `/tool-invocations/${id()}/${action}`),
          authorization: asB,
          body: () => body,
          expected: [404],
        }),
      ),
      {
        name: "retrying A's dead letter through B's tenant",
        method: 'POST',
        template: `${T}/dead-letters/{dead_letter_id}/retry`,
        path: () => tenantPath(b.tenantId, `/dead-letters/${deny.retryDeadLetterId}/retry`),
        authorization: asB,
        body: () => ({ reason: REASON }),
        expected: [404],
      },
    ];

    it.each(ATTEMPTS)('$name', async (attempt) => {
      const op = ops.find((o) => o.method === attempt.method && o.template === attempt.template);
      expect(op, `${attempt.method} ${attempt.template} is in the document`).toBeDefined();
      const body = await attempt.body();
      const before = [await snapshotTenant(h.sql, a.tenantId), await snapshotTenant(h.sql, b.tenantId)];
      const reply = await send(attempt.method, attempt.path(), attempt.authorization(), body);
      const expected = {
        status: attempt.expected.includes(reply.status) ? reply.status : attempt.expected[0]!,
      };
      expect(judge(op!, reply, expected, true), reply.text).toEqual([]);
      // A's ids must be refused exactly as ids that name nothing (details included): no oracle.
      const unknown = (text: string) => aSecrets.reduce((t, [, v]) => t.replaceAll(v, 'nope_0'), text);
      const twin = await send(
        attempt.method,
        unknown(attempt.path()),
        attempt.authorization(),
        JSON.parse(unknown(JSON.stringify(body))),
      );
      const { request_id: _r, ...refusal } = reply.body.error;
      const { request_id: _t, ...twinRefusal } = twin.body.error;
      expect([twin.status, twinRefusal]).toEqual([reply.status, refusal]);
      expect([await snapshotTenant(h.sql, a.tenantId), await snapshotTenant(h.sql, b.tenantId)]).toEqual(
        before,
      );
    });
  });

  // Last: these write to A (the platform's run ends by suspending it).
  describe("callers that may write: every operation passes authorization on A's objects", () => {
    const rank = (op: Operation) => {
      if (op.method === 'GET') return 0;
      if (op.key === 'POST /status-transitions') return 4;
      if (op.method === 'PUT') return 2;
      return MUTATION_RANK[op.template.split('/').at(-1)!] ?? 1;
    };
    const WRITERS: (Caller & { kit: string })[] = [
      {
        name: 'tenant_admin key of A',
        kit: 'admin',
        authorization: () => `Bearer ${a.adminKey}`,
        expect: (op) => (op.platformOnly ? { status: 403, code: 'forbidden' } : { status: op.success }),
        minimalBodies: false,
        foreign: false,
      },
      {
        name: 'platform token',
        kit: 'platform',
        authorization: () => platform,
        expect: (op) => ({ status: op.success }),
        minimalBodies: false,
        foreign: false,
      },
    ];

    it.each(WRITERS)('$name', async (caller) => {
      const kit = allowedKits[caller.kit]!;
      const problems: string[] = [];
      // In order (reads, creations, updates, transitions, the tenant's own last): each answer must
      // be the success the document lists, so the state each needs is arranged by the ones before.
      for (const op of [...ops].sort((x, y) => rank(x) - rank(y))) {
        const path = fill(op, kit);
        const body = op.hasBody ? await bodyOf(op, kit) : undefined;
        const unusable = [path, body].find((x): x is Error => x instanceof Error);
        if (unusable) {
          problems.push(`${op.method} ${op.template}: ${unusable.message}`);
          continue;
        }
        const reply = await send(op.method, path as string, caller.authorization(), body);
        for (const id of [reply.body?.workflow_id, reply.body?.retry_workflow_id]) {
          if (reply.status < 300 && typeof id === 'string') startedWorkflows.push(id);
        }
        const found = judge(op, reply, caller.expect(op)!, false);
        if (found.length > 0) problems.push(line(op, '', reply, found));
      }
      expect(problems).toEqual([]);
    });
  });
});
