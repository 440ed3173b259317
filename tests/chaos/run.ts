import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { createSql } from '../../db/client';
import { runMigrations } from '../../db/migrate';
import { loginUrl, provisionLogins } from '../../db/provision';
import { auditKeyFrom } from '../../lib/audit-key';

// This run's own cluster: test-only login passwords.
const LOGIN_PASSWORDS = { api: 'chaos-login-api-0123456789', worker: 'chaos-login-worker-0123456789' };

import { createSecretBox } from '../../lib/secret-box';
import { seededRandom } from '../fakes/http';
import { type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { type FakeWecom, startFakeWecom } from '../fakes/wecom';
import type { AdminTenant, Json, RequestApp } from '../helpers/admin';
import { createOpenAIProfile, publishRevision } from '../helpers/execution-flow';
import { type AckRecord, check, type MessageState, type Report, verdict } from './checker';
import {
  apiProcess,
  type Database,
  type Proc,
  startCluster,
  startDatabase,
  startDevServer,
  type TemporalService,
  workerProcess,
} from './topology';
import {
  type PlannedMessage,
  planChats,
  planMessages,
  type SeededTenants,
  seedTenants,
  toolDefinition,
  webhookRequest,
} from './workload';

// The release gate (npm run chaos; a short version runs in npm test): 2 API and 2 worker processes
// on one PostgreSQL and one Temporal, the harness playing Telegram and WeCom (re-delivering as they
// do), provider and tool faults, process kills, a PostgreSQL restart, a Temporal restart and freeze,
// operator terminates and a reset — then the checker accounts for every message from what the
// fakes received and the admin API shows. Bounded: it stops by itself at its deadline.

export interface FaultPlan {
  workerKills: number;
  apiKills: number;
  dbRestarts: number;
  temporalRestarts: number;
  /** a period in which Temporal does not answer (SIGSTOP), ms; 0: none */
  temporalFreezeMs: number;
  terminates: number;
  resets: number;
  /** provider and tool fault rates */
  providerFaults: boolean;
  /** cluster mode: kill the history and the matching service once each */
  clusterServiceKills: boolean;
}

export const FULL_FAULTS: FaultPlan = {
  workerKills: 3,
  apiKills: 1,
  dbRestarts: 1,
  temporalRestarts: 1,
  temporalFreezeMs: 30_000,
  terminates: 2,
  resets: 1,
  providerFaults: true,
  clusterServiceKills: true,
};

export const SMOKE_FAULTS: FaultPlan = {
  workerKills: 1,
  apiKills: 0,
  dbRestarts: 1,
  temporalRestarts: 0,
  temporalFreezeMs: 0,
  terminates: 1,
  resets: 0,
  providerFaults: true,
  clusterServiceKills: false,
};

export interface ChaosOptions {
  messages: number;
  chats: number;
  seed: number;
  faults: FaultPlan;
  /** the whole run stops by itself after this long */
  deadlineMs: number;
  /** where logs and the JSON report go */
  dir: string;
  /** `dev`: a dev server of our own (default); `cluster`: a real cluster (temporal-dev.sh cluster) */
  temporal?: 'dev' | 'cluster';
  log?: (line: string) => void;
}

export interface ChaosResult {
  report: Report;
  pass: boolean;
  failures: string[];
  file: string;
  durationMs: number;
  faultsInjected: Record<string, number>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ADMIN_TOKEN = `chaos-admin-${randomBytes(16).toString('hex')}`;

export async function runChaos(o: ChaosOptions): Promise<ChaosResult> {
  const started = Date.now();
  const log =
    o.log ?? ((l: string) => console.log(`[chaos ${((Date.now() - started) / 1000).toFixed(0)}s] ${l}`));
  mkdirSync(o.dir, { recursive: true });
  const masterKey = randomBytes(32).toString('base64');
  const taskQueue = `chaos-${randomUUID().slice(0, 8)}`;
  const injected: Record<string, number> = {};
  const count = (k: string) => {
    injected[k] = (injected[k] ?? 0) + 1;
  };
  const cleanups: (() => Promise<unknown>)[] = [];
  const procs: Proc[] = [];
  let db: Database | undefined;
  let temporal: TemporalService | undefined;
  const fakes: { telegram?: FakeTelegram; wecom?: FakeWecom; openai?: FakeOpenAI; tools?: FakeToolProvider } =
    {};

  try {
    db = await startDatabase(join(o.dir, 'db'));
    cleanups.push(() => db!.stop());
    await runMigrations(db.url);
    await provisionLogins(db.url, LOGIN_PASSWORDS);
    temporal = o.temporal === 'cluster' ? await startCluster(o.dir) : await startDevServer(o.dir);
    cleanups.push(() => temporal!.stop());
    log(`PostgreSQL ${db.url.replace(/:[^:@]+@/, ':***@')}, Temporal ${temporal.address}`);

    fakes.telegram = await startFakeTelegram();
    fakes.wecom = await startFakeWecom();
    fakes.openai = await startFakeOpenAI();
    fakes.tools = await startFakeToolProvider();
    const { telegram, wecom, openai, tools } = fakes as Required<typeof fakes>;
    cleanups.push(() => Promise.all([telegram.close(), wecom.close(), openai.close(), tools.close()]));

    const owner = createSql(db.url, { max: 4, auditKey: auditKeyFrom(masterKey) });
    const tenants = await seedTenants(
      owner,
      createSecretBox(masterKey),
      { telegram: telegram.url, wecom: wecom.url },
      tools,
    );
    await owner.end();
    telegram.addBot(tenants.scripted_tg.botToken);
    telegram.addBot(tenants.model_tg.botToken);
    wecom.addApp({
      corpId: tenants.wecom.corpId,
      corpSecret: tenants.wecom.corpSecret,
      agentId: tenants.wecom.agentId,
    });
    modelBehaviour(openai);
    if (o.faults.providerFaults) injectProviderFaults(o.seed, telegram, wecom, tools);

    const settings = {
      // The processes log in as their own roles, as a deployment's do (migration 0021).
      databaseUrl: loginUrl(db.url, 'api', LOGIN_PASSWORDS.api),
      workerDatabaseUrl: loginUrl(db.url, 'worker', LOGIN_PASSWORDS.worker),
      temporalAddress: temporal.address,
      taskQueue,
      masterKey,
      adminToken: ADMIN_TOKEN,
      dir: o.dir,
      env: { SWITCHYARD_SWEEP_EVERY_S: '10', SWITCHYARD_SWEEP_PASS_S: '1', SWITCHYARD_REPAIR_AFTER_S: '10' },
    };
    const apis = await Promise.all([apiProcess(settings, 1), apiProcess(settings, 2)]);
    const workers = await Promise.all([workerProcess(settings, 1), workerProcess(settings, 2)]);
    procs.push(...apis.map((a) => a.proc), ...workers);
    cleanups.push(() => Promise.all(procs.map((p) => p.kill('SIGTERM'))));
    log(`2 API and 2 worker processes up (task queue ${taskQueue})`);

    // The checker reads through any live API process, as behind a load balancer: a crashed one
    // fails the run by itself (Proc.crashes) and must not also cut the report short.
    const admin = httpApp(apis.map((a) => a.url));
    await useOpenAIModel(admin, tenants, openai, tools);

    const client = new Client({ connection: await Connection.connect({ address: temporal.address }) });
    cleanups.push(() => client.connection.close());

    // Send, with the fault schedule running beside it.
    const chats = planChats(o.chats);
    const planned = planMessages(chats, o.messages, o.seed);
    const acks: AckRecord[] = [];
    let dbDown = false;
    let sent = 0;
    const sentTokens = new Set<string>();
    const deadline = started + o.deadlineMs;
    const monkey = runFaults(o.faults, () => sent / planned.length, deadline, {
      killWorker: async (i) => {
        count('worker_sigkill');
        log(`SIGKILL ${workers[i % 2]!.name}`);
        await workers[i % 2]!.kill('SIGKILL');
        await sleep(2000);
        await workers[i % 2]!.start();
      },
      killApi: async () => {
        count('api_sigkill');
        log('SIGKILL api-2');
        await apis[1]!.proc.kill('SIGKILL');
        await sleep(3000);
        await apis[1]!.proc.start();
      },
      restartDb: async () => {
        count('postgres_restart');
        log('PostgreSQL restart');
        dbDown = true;
        try {
          await db!.restart(4000);
        } finally {
          // A webhook answered within a few seconds after the restart still met the outage.
          setTimeout(() => {
            dbDown = false;
          }, 5000);
        }
      },
      killService: async (service) => {
        if (!temporal!.killService) return;
        count(`temporal_${service}_sigkill`);
        log(`SIGKILL Temporal ${service}`);
        await temporal!.killService(service);
      },
      restartTemporal: async () => {
        count('temporal_restart');
        log('Temporal restart');
        await temporal!.restart();
      },
      freezeTemporal: async (ms) => {
        count('temporal_freeze');
        log(`Temporal frozen (SIGSTOP) for ${ms / 1000} s`);
        await temporal!.freeze(ms);
      },
      terminate: async () => {
        const id = await pickWorkflow(admin, tenants, ['running', 'reply_pending', 'received']);
        if (!id) return;
        count('operator_terminate');
        log(`terminate ${id}`);
        await client.workflow
          .getHandle(id)
          .terminate('chaos: operator terminate')
          .catch(() => undefined);
      },
      reset: async () => {
        const id = await pickWorkflow(admin, tenants, ['running', 'reply_pending']);
        if (!id) return;
        count('operator_reset');
        log(`reset ${id} to its first workflow task`);
        await resetToFirstTask(client, id).catch((e: unknown) =>
          log(`reset failed: ${(e as Error).message}`),
        );
      },
    });

    const rnd = seededRandom(o.seed + 1);
    const runStartedPerf = performance.now() - (Date.now() - started);
    const byChat = new Map<number, PlannedMessage[]>();
    for (const m of planned) byChat.set(m.chat.id, [...(byChat.get(m.chat.id) ?? []), m]);
    let telegramMessageId = 1_000;
    let wecomMsgId = 7_000_000_000_000_000_000n;
    await Promise.all(
      [...byChat.values()].map(async (messages) => {
        for (const m of messages) {
          if (Date.now() > deadline) return;
          const ids = { telegramMessageId: telegramMessageId++, wecomMsgId: String(wecomMsgId++) };
          await deliver(
            m,
            ids,
            apis.map((a) => a.url),
            tenants,
            acks,
            () => dbDown,
            rnd,
            deadline,
            runStartedPerf,
          );
          sent++;
          sentTokens.add(m.token);
          await sleep(Math.floor(rnd() * 400));
        }
      }),
    );
    log(`sent ${sent}/${planned.length} messages (${acks.length} webhook deliveries)`);
    await monkey;

    // Drain: every message terminal, or the deadline.
    let states: MessageState[] = [];
    while (Date.now() < deadline) {
      states = await messageStates(admin, tenants, planned);
      const open = states.filter((s) => s.status !== 'replied' && s.status !== 'failed').length;
      if (open === 0 && states.length >= sent) break;
      await sleep(3000);
    }
    states = await messageStates(admin, tenants, planned, true);
    log('drained; stopping processes');
    for (const p of procs) await p.kill('SIGTERM');
    const processesLeft = procs.filter((p) => p.running).map((p) => `${p.name} (${p.pid})`);
    const crashes = (await Promise.all(procs.map((p) => p.crashReports()))).flat();

    const chatOf = new Map(chats.map((c) => [`${c.channel}/${c.target}`, c.id]));
    const report = check({
      planned: planned.filter((m) => sentTokens.has(m.token)),
      delivered: [
        ...telegram.sent.map((s) => ({
          chatId: chatOf.get(`telegram/${s.chatId}`) ?? -1,
          text: s.text,
          at: s.at,
        })),
        ...wecom.delivered.map((d) => ({
          chatId: chatOf.get(`wecom/${d.touser}`) ?? -1,
          text: d.content,
          at: d.at,
        })),
      ],
      effects: tools.effects.map((e) => ({ ref: String(e.args.ref) })),
      acks,
      messages: states,
      allStates: states,
      plannedCount: planned.length,
      // Unconfirmable sends (applied-then-dropped, a worker killed mid-send) under the DLQ policy.
      allowedReasons: ['unknown_outcome'],
      processesLeft,
      crashes,
    });
    const { pass, failures } = verdict(report);
    const file = join(o.dir, 'report.json');
    const result = {
      report,
      pass,
      failures,
      file,
      durationMs: Date.now() - started,
      faultsInjected: injected,
    };
    writeFileSync(file, JSON.stringify({ options: o, ...result }, null, 2));
    return result;
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  }
}

/**
 * A RequestApp over HTTP (the admin helpers' interface) to the first of the API processes that
 * takes the request: a refused connection tries the next, and so does a GET whose connection was
 * reset (a process dying mid-request; a read is safe to repeat), for up to 15 s in all.
 */
function httpApp(bases: string[]): RequestApp {
  const RESET = new Set(['ECONNRESET', 'UND_ERR_SOCKET']);
  return {
    request: async (path, init) => {
      const until = Date.now() + 15_000;
      const read = (init?.method ?? 'GET').toUpperCase() === 'GET';
      for (let i = 0; ; i++) {
        try {
          return await fetch(`${bases[i % bases.length]}${path}`, init);
        } catch (err) {
          const code = (err as { cause?: { code?: string } }).cause?.code ?? '';
          const retry = code === 'ECONNREFUSED' || (read && RESET.has(code));
          if (!retry || Date.now() > until) throw err;
          if (i % bases.length === bases.length - 1) await sleep(250);
        }
      }
    },
  };
}

async function adminGet(app: RequestApp, path: string): Promise<Json> {
  const res = await app.request(path, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  if (!res.ok) throw new Error(`GET ${path} → ${res.status}`);
  return res.json();
}

/** The model tenant answers through the OpenAI-compatible fake (with the same tool). */
async function useOpenAIModel(
  app: RequestApp,
  t: SeededTenants,
  openai: FakeOpenAI,
  tools: FakeToolProvider,
) {
  const admin = { ...t.model_tg, adminKey: ADMIN_TOKEN, modelProfileId: '' } as unknown as AdminTenant;
  const profile = await createOpenAIProfile(app, admin, { baseUrl: openai.baseURL, apiKey: openai.apiKey });
  await publishRevision(
    app,
    { ...admin, modelProfileId: profile.model_profile_id },
    {
      tools: [toolDefinition(tools)],
    },
  );
}

/** The fake model: `book <ref>` calls the tool (a new call id every time), then confirms; else echoes. */
function modelBehaviour(openai: FakeOpenAI) {
  openai.setResponder((req) => {
    const users = req.messages.filter((m) => m.role === 'user');
    const last = users.at(-1);
    const text = typeof last?.content === 'string' ? last.content : '';
    const booking = /^book (\S+)$/.exec(text);
    const lastIndex = req.messages.lastIndexOf(last!);
    const answered = req.messages.slice(lastIndex).some((m) => m.role === 'tool');
    if (booking && !answered)
      return { toolCalls: [{ id: `call_${randomUUID()}`, name: 'book', arguments: { ref: booking[1]! } }] };
    if (booking) return `Booked ${booking[1]}`;
    return `echo: ${text}`;
  });
}

/** Provider 10% 5xx, 5% 429 with retry_after, 2% applied-then-dropped; WeCom -1 and 45009; tool answers dropped. */
function injectProviderFaults(
  seed: number,
  telegram: FakeTelegram,
  wecom: FakeWecom,
  tools: FakeToolProvider,
) {
  telegram.failRandomly({
    rate: 0.17,
    seed,
    fault: [
      ...Array.from({ length: 10 }, () => ({ kind: 'status' as const, status: 500 })),
      ...Array.from({ length: 5 }, () => ({ kind: 'rate_limit' as const, retryAfterSeconds: 1 })),
      { kind: 'apply_then_drop' },
      { kind: 'apply_then_drop' },
    ],
  });
  wecom.failRandomly({
    rate: 0.15,
    seed: seed + 2,
    fault: [
      ...Array.from({ length: 10 }, () => ({ kind: 'status' as const, status: 200 })),
      ...Array.from({ length: 5 }, () => ({ kind: 'rate_limit' as const, retryAfterSeconds: 1 })),
    ],
  });
  tools.failRandomly({ rate: 0.2, seed: seed + 3, fault: { kind: 'apply_then_drop' } });
}

/**
 * One message as the provider delivers it: the first copy retried until it is answered 200
 * (Telegram retries a non-2xx; WeCom a failed or slower than 5 s callback), some copies at the same
 * time, some to the other API process, some after.
 */
async function deliver(
  m: PlannedMessage,
  ids: { telegramMessageId: number; wecomMsgId: string },
  apis: string[],
  t: SeededTenants,
  acks: AckRecord[],
  dbDown: () => boolean,
  rnd: () => number,
  deadline: number,
  runStarted: number,
) {
  const once = async (api: string): Promise<boolean> => {
    const { path, init } = webhookRequest(m, t, ids);
    const outage = dbDown();
    const startedAt = performance.now();
    let status: number | 'error' = 'error';
    try {
      const res = await fetch(`${api}${path}`, {
        ...init,
        signal: AbortSignal.timeout(m.chat.channel === 'wecom' ? 5000 : 30_000),
      });
      await res.arrayBuffer();
      status = res.status;
    } catch {
      status = 'error';
    }
    acks.push({
      token: m.token,
      at: startedAt - runStarted,
      api: apis.indexOf(api) + 1,
      status,
      ms: performance.now() - startedAt,
      duringDbOutage: outage || dbDown(),
    });
    return status === 200;
  };
  const first = Math.floor(rnd() * apis.length);
  const untilOk = async (start: number) => {
    for (let attempt = 0; Date.now() < deadline; attempt++) {
      if (await once(apis[(start + attempt) % apis.length]!)) return;
      await sleep(Math.min(8000, 500 * 2 ** attempt));
    }
  };
  const copies: Promise<unknown>[] = [untilOk(first)];
  for (let c = 1; c < m.copies; c++) {
    const concurrent = rnd() < 0.5;
    const other = (first + (rnd() < 0.5 ? 1 : 0)) % apis.length;
    copies.push(concurrent ? once(apis[other]!) : copies[0]!.then(() => once(apis[other]!)));
  }
  await Promise.all(copies);
}

interface FaultActions {
  killWorker(i: number): Promise<void>;
  killService(service: 'history' | 'matching'): Promise<void>;
  killApi(): Promise<void>;
  restartDb(): Promise<void>;
  restartTemporal(): Promise<void>;
  freezeTemporal(ms: number): Promise<void>;
  terminate(): Promise<void>;
  reset(): Promise<void>;
}

/** Fires each fault when the share of messages sent passes its mark; one at a time. */
async function runFaults(p: FaultPlan, progress: () => number, deadline: number, a: FaultActions) {
  const marks: [number, () => Promise<void>][] = [];
  const spread = (n: number, from: number, to: number, f: (i: number) => () => Promise<void>) => {
    for (let i = 0; i < n; i++) marks.push([from + ((to - from) * (i + 0.5)) / n, f(i)]);
  };
  spread(p.workerKills, 0.1, 0.8, (i) => () => a.killWorker(i));
  spread(p.apiKills, 0.35, 0.45, () => () => a.killApi());
  spread(p.dbRestarts, 0.2, 0.3, () => () => a.restartDb());
  spread(p.temporalRestarts, 0.5, 0.55, () => () => a.restartTemporal());
  if (p.temporalFreezeMs > 0) marks.push([0.62, () => a.freezeTemporal(p.temporalFreezeMs)]);
  spread(p.terminates, 0.3, 0.7, () => () => a.terminate());
  spread(p.resets, 0.45, 0.5, () => () => a.reset());
  if (p.clusterServiceKills) {
    marks.push([0.4, () => a.killService('history')]);
    marks.push([0.75, () => a.killService('matching')]);
  }
  marks.sort((x, y) => x[0] - y[0]);
  for (const [at, fire] of marks) {
    while (progress() < at && Date.now() < deadline) await sleep(200);
    if (Date.now() >= deadline) return;
    await fire().catch((e: unknown) => console.error(`[chaos] fault failed: ${(e as Error).message}`));
  }
}

/** A workflow of a message that is not finished yet (an operator picking a victim in the Web UI). */
async function pickWorkflow(app: RequestApp, t: SeededTenants, statuses: string[]): Promise<string | null> {
  for (let tries = 0; tries < 20; tries++) {
    const id = await pickOnce(app, t, statuses);
    if (id) return id;
    await sleep(500);
  }
  return null;
}

async function pickOnce(app: RequestApp, t: SeededTenants, statuses: string[]): Promise<string | null> {
  for (const tenant of [t.scripted_tg, t.model_tg, t.wecom]) {
    for (const status of statuses) {
      const page = await adminGet(
        app,
        `/v1/admin/tenants/${tenant.tenantId}/messages?status=${status}&limit=20`,
      ).catch(() => ({ items: [] }));
      const m = page.items.find((x: { workflow_id: string | null }) => x.workflow_id?.startsWith('msg-'));
      if (m) return m.workflow_id as string;
    }
  }
  return null;
}

async function resetToFirstTask(client: Client, workflowId: string) {
  const handle = client.workflow.getHandle(workflowId);
  const history = await handle.fetchHistory();
  const firstTask = history.events?.find((e) => e.workflowTaskCompletedEventAttributes);
  if (!firstTask) return;
  const { runId } = await handle.describe();
  await client.workflowService.resetWorkflowExecution({
    namespace: 'default',
    workflowExecution: { workflowId, runId },
    workflowTaskFinishEventId: firstTask.eventId,
    requestId: randomUUID(),
    reason: 'chaos: operator reset to the first workflow task',
  });
}

/** Every message of the run as the admin API shows it: status, dead letters, flagged duplicates. */
async function messageStates(
  app: RequestApp,
  t: SeededTenants,
  planned: PlannedMessage[],
  details = false,
): Promise<MessageState[]> {
  const tokenOf = (text: string) => /c\d+-m\d+/.exec(text)?.[0] ?? '';
  const out: MessageState[] = [];
  for (const tenant of [t.scripted_tg, t.model_tg, t.wecom]) {
    const base = `/v1/admin/tenants/${tenant.tenantId}`;
    const messages: Json[] = [];
    for (let cursor: string | null = null, first = true; first || cursor; first = false) {
      const page: Json = await adminGet(
        app,
        `${base}/messages?limit=200${cursor ? `&cursor=${cursor}` : ''}`,
      );
      messages.push(...page.items);
      cursor = page.next_cursor;
    }
    const letters: Json[] = [];
    if (details) {
      for (let cursor: string | null = null, first = true; first || cursor; first = false) {
        const page: Json = await adminGet(
          app,
          `${base}/dead-letters?limit=200${cursor ? `&cursor=${cursor}` : ''}`,
        );
        letters.push(...page.items);
        cursor = page.next_cursor;
      }
    }
    for (const m of messages) {
      let text = '';
      let flagged = false;
      if (details || m.status === 'failed') {
        const d = await adminGet(app, `${base}/messages/${m.event_id}`);
        text = String(d.payload?.text ?? '');
        flagged = (d.reply_segments as { last_error: string | null }[]).some((s) =>
          (s.last_error ?? '').startsWith('possible_duplicate'),
        );
      }
      out.push({
        token: text ? tokenOf(text) : m.event_id,
        status: m.status,
        outcome: m.outcome,
        deadLetters: letters.filter((l) => l.event_id === m.event_id).map((l) => l.reason_class),
        flaggedDuplicate: flagged,
      });
    }
  }
  void planned;
  return out;
}

function table(r: Report, result: Omit<ChaosResult, 'report'>): string {
  const rows: [string, string | number, string][] = [
    ['messages sent', r.messages, ''],
    ['answered (every part delivered)', r.answered, ''],
    ['lost', r.lost.length, 'target 0'],
    ['dead-lettered', r.deadLettered.length, 'each names an injected fault'],
    ['dead letters with another reason', r.unexpectedReasons.length, 'target 0'],
    ['duplicated replies', r.duplicatedReplies.length, 'only resend_possible_duplicate, flagged'],
    ['duplicated effects', r.duplicatedEffects.length, 'target 0'],
    ['tool replies without exactly one effect', r.missingEffects.length, 'target 0'],
    ['messages recorded twice', r.recordedTwice.length, 'target 0'],
    ['not sent within the deadline', r.notSent, 'target 0'],
    ['unexpected replies', r.unexpected.length, 'target 0'],
    ['chats with order violations', r.orderViolations.length, 'target 0'],
    ['acks > 5 s (outside the PG outage)', r.slowAcks, 'target 0'],
    ['acks > 5 s during the PG outage', r.slowAcksDuringDbOutage, 'counted apart'],
    ['webhook answers not 200 (retried)', r.failedAcks, ''],
    ['ack p99', `${Math.round(r.ackP99Ms)} ms`, ''],
    ['not terminal at the end', r.notTerminal.length, 'target 0'],
    ['processes left running', r.processesLeft.length, 'target 0'],
    ['processes crashed or not stopped cleanly', r.crashes.length, 'target 0'],
    ['duration', `${(result.durationMs / 1000).toFixed(0)} s`, ''],
  ];
  const w = Math.max(...rows.map((x) => x[0].length));
  return [
    ...rows.map(([k, v, note]) => `  ${k.padEnd(w)}  ${String(v).padStart(8)}  ${note}`),
    `  faults injected: ${JSON.stringify(result.faultsInjected)}`,
    `  ${result.pass ? 'PASS' : `FAIL: ${result.failures.join('; ')}`}`,
    `  report: ${result.file}`,
  ].join('\n');
}

export function printReport(result: ChaosResult): void {
  const { report, ...rest } = result;
  console.log(`\nRelease gate\n${table(report, rest)}`);
  const show = (label: string, items: unknown[]) => {
    if (items.length)
      console.log(`  ${label}: ${JSON.stringify(items.slice(0, 10))}${items.length > 10 ? ' …' : ''}`);
  };
  show('lost', report.lost);
  show('duplicated replies', report.duplicatedReplies);
  show('duplicated effects', report.duplicatedEffects);
  show('unexpected', report.unexpected);
  show('order violations', report.orderViolations);
  show('dead letters with another reason', report.unexpectedReasons);
  show('not terminal', report.notTerminal);
  show('tool replies without exactly one effect', report.missingEffects);
  show('recorded twice', report.recordedTwice);
  show('slow acks', report.slowAckDetails);
  for (const crash of report.crashes) console.log(`  process ${crash}`);
}

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const smoke = process.argv.includes('--smoke');
  const temporalMode = flag('temporal', 'dev');
  const dataDir = resolve(process.env.SWITCHYARD_DATA_DIR ?? '.data');
  const dir = join(dataDir, 'chaos', new Date().toISOString().replace(/[:.]/g, '-'));
  const result = await runChaos({
    messages: Number(flag('messages', smoke ? '60' : '1000')),
    chats: Number(flag('chats', smoke ? '12' : '50')),
    seed: Number(flag('seed', '1')),
    faults: smoke ? SMOKE_FAULTS : FULL_FAULTS,
    deadlineMs: Number(flag('minutes', smoke ? '3' : '15')) * 60_000,
    dir,
    temporal: temporalMode === 'cluster' ? 'cluster' : 'dev',
  });
  printReport(result);
  process.exit(result.pass ? 0 : 1);
}
