import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Worker } from '@temporalio/worker';
import type { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadEnv } from '../../config/env';
import { ensureHousekeepingSchedule, housekeepingScheduleId } from '../../runtime/housekeeping-schedule';
import { type ApiService, startApi, startWorkerService } from '../../runtime/services';
import { ensureSweeperSchedule, sweeperScheduleId } from '../../runtime/sweeper-schedule';
import type { WorkerHttp } from '../../runtime/worker-http';
import { createRegistry } from '../../telemetry/metrics';
import { SUITE_AUDIT_KEY } from '../helpers/db-logins';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';

// The deployment artefacts name metrics the code defines: every metric a Grafana panel or an alert
// rule queries must be served by the API's or the worker's /metrics, exactly as `npm run api` and
// `npm run worker` build them (runtime/services.ts startApi / startWorkerService), and the label
// matchers must use labels the metric has. A renamed metric fails here, not on a dark dashboard.

const deploy = join(import.meta.dirname, '../../deploy');

/**
 * Series Prometheus makes itself, or that come from a listener other than ours, allowed by name.
 * The Temporal SDK's metrics are served by its Core's own exporter on
 * SWITCHYARD_TEMPORAL_METRICS_PORT (runtime/temporal.ts installTemporalRuntime), never by our
 * registry; tests cannot install it (one process-wide Runtime is shared by every test). The names
 * were read from that exporter's /metrics with @temporalio/worker 1.24 after a workflow and an
 * activity ran (histograms in ms).
 */
const NOT_OURS = new Set([
  'up', // Prometheus: 1 if the last scrape of the target succeeded
  'temporal_workflow_task_schedule_to_start_latency',
  'temporal_activity_schedule_to_start_latency',
  'temporal_worker_task_slots_available',
  'temporal_num_pollers',
]);

/** A histogram's series name (`_bucket`, `_sum`, `_count`) → the metric's name. */
const histogramBase = (name: string) => name.replace(/_(bucket|sum|count)$/, '');
const notOurs = (name: string) => NOT_OURS.has(name) || NOT_OURS.has(histogramBase(name));

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);

/** Metric names and label matchers of one PromQL expression (functions, keywords, labels dropped). */
function promqlRefs(expr: string): { names: string[]; matchers: { metric: string; label: string }[] } {
  const noStrings = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  const matchers = [...noStrings.matchAll(/([A-Za-z_:][\w:]*)\s*\{([^}]*)\}/g)].flatMap(([, metric, body]) =>
    [...body!.matchAll(/([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)/g)].map(([, label]) => ({
      metric: metric!,
      label: label!,
    })),
  );
  const bare = noStrings
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = [...bare.matchAll(/(?<![\w.:$])([A-Za-z_:][\w:]*)(\s*\()?/g)]
    .filter(([, name, call]) => !call && !KEYWORDS.has(name!.toLowerCase()))
    .map(([, name]) => name!);
  return { names, matchers };
}

interface Panel {
  title?: string;
  targets?: { expr?: string }[];
  panels?: Panel[];
}

function dashboardExprs(): { where: string; expr: string }[] {
  const dir = join(deploy, 'grafana/dashboards');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .flatMap((f) => {
      const walk = (panels: Panel[] = []): { where: string; expr: string }[] =>
        panels.flatMap((p) => [
          ...(p.targets ?? []).flatMap((t) => (t.expr ? [{ where: `${f}: ${p.title}`, expr: t.expr }] : [])),
          ...walk(p.panels),
        ]);
      return walk((JSON.parse(readFileSync(join(dir, f), 'utf8')) as { panels: Panel[] }).panels);
    });
}

interface RuleFile {
  groups: { name: string; rules: { alert?: string; record?: string; expr: string }[] }[];
}

function alertExprs(): { where: string; expr: string }[] {
  const rules = parse(readFileSync(join(deploy, 'prometheus/alerts.yml'), 'utf8')) as RuleFile;
  return rules.groups.flatMap((g) =>
    g.rules.map((r) => ({ where: `alerts.yml: ${r.alert ?? r.record}`, expr: r.expr })),
  );
}

/** Name → type from the `# TYPE` lines: present for a labelled metric before its first sample. */
function exposition(text: string): Map<string, string> {
  return new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => [name!, type!]));
}

/** Label names of every metric of a registry, as registered. */
function registeredLabels(registry: Registry): Map<string, readonly string[]> {
  // prom-client keeps a metric's configuration on the object (not in its public type).
  const metrics = registry.getMetricsAsArray() as unknown as {
    name: string;
    labelNames?: readonly string[];
  }[];
  return new Map(metrics.map((m) => [m.name, m.labelNames ?? []]));
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

describe('deployment artefacts use only metrics that exist', () => {
  let h: Harness;
  let api: ApiService;
  let worker: { worker: Worker; done: Promise<void>; http: WorkerHttp | null };
  /** Metric name → type, from both /metrics. */
  let scraped: Map<string, string>;
  let labelNames: Map<string, readonly string[]>;

  beforeAll(async () => {
    h = await createHarness();
    const env = loadEnv({
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
      SWITCHYARD_WORKER_PORT: String(await freePort()),
      TEMPORAL_NAMESPACE: 'default',
      TEMPORAL_TASK_QUEUE: h.taskQueue,
      SWITCHYARD_SWEEP_EVERY_S: '3600',
      SWITCHYARD_HOUSEKEEPING_EVERY_S: '86400',
    });
    // The worker service creates its Schedules (one per task queue). Made and paused first, they
    // never start a sweep or a housekeeping run on this test's worker: the service keeps a
    // Schedule's paused state. Deleted in afterAll.
    await ensureSweeperSchedule(h.temporal, {
      taskQueue: h.taskQueue,
      everySeconds: env.SWITCHYARD_SWEEP_EVERY_S,
      passSeconds: env.SWITCHYARD_SWEEP_PASS_S,
      options: {},
    });
    await ensureHousekeepingSchedule(h.temporal, {
      taskQueue: h.taskQueue,
      everySeconds: env.SWITCHYARD_HOUSEKEEPING_EVERY_S,
    });
    for (const id of scheduleIds()) await h.temporal.schedule.getHandle(id).pause('deploy-metrics test');
    const common = { env, temporal: h.temporal, secrets: h.secrets, log: h.appDeps.log };
    // What the entry points do (each service makes its createRegistry() when given none); passed
    // in only to read the registered label names.
    const registries = { api: createRegistry(), worker: createRegistry() };
    api = await startApi({
      ...common,
      registry: registries.api,
      sql: h.apiSql,
      adminToken: TEST_ADMIN_TOKEN,
      auditKey: SUITE_AUDIT_KEY,
      temporalUiUrl: 'http://127.0.0.1:8233',
    });
    worker = await startWorkerService({
      ...common,
      registry: registries.worker,
      connection: h.nativeConnection,
      sql: h.workerSql,
    });
    expect(worker.http, 'SWITCHYARD_WORKER_PORT is set').not.toBeNull();
    for (const id of scheduleIds())
      expect((await h.temporal.schedule.getHandle(id).describe()).state.paused).toBe(true);

    const texts = await Promise.all(
      [`${api.url}/metrics`, `${worker.http!.url}/metrics`].map(async (url) => {
        const res = await fetch(url);
        expect(res.status, url).toBe(200);
        return res.text();
      }),
    );
    scraped = new Map([...exposition(texts[0]!), ...exposition(texts[1]!)]);
    labelNames = new Map([...registeredLabels(registries.api), ...registeredLabels(registries.worker)]);
  }, 120_000);

  afterAll(async () => {
    if (worker) {
      if (worker.worker.getState() === 'RUNNING') worker.worker.shutdown();
      await worker.done;
      await worker.http?.close();
    }
    await api?.close({ drainMs: 0 });
    if (h) {
      for (const id of scheduleIds()) {
        await h.temporal.schedule
          .getHandle(id)
          .delete()
          .catch(() => undefined);
      }
      await h.close();
    }
  });

  const scheduleIds = () => [sweeperScheduleId(h.taskQueue), housekeepingScheduleId(h.taskQueue)];

  /** The scraped metric a PromQL name refers to (a histogram's _bucket/_sum/_count → its base). */
  function resolve(name: string): string | undefined {
    if (scraped.has(name)) return name;
    const m = /^(.*)_(bucket|sum|count)$/.exec(name);
    if (!m) return undefined;
    const base = scraped.get(m[1]!);
    if (base === 'histogram' || (base === 'summary' && m[2] !== 'bucket')) return m[1];
    return undefined;
  }

  it('reads expressions from the dashboard and the alert rules', () => {
    expect(dashboardExprs().length).toBeGreaterThan(20);
    expect(alertExprs().map((r) => r.where)).toEqual(
      expect.arrayContaining([
        'alerts.yml: SwitchyardDeadLettersGrowing',
        'alerts.yml: SwitchyardWebhookAckSlow',
        'alerts.yml: SwitchyardRepliesStopped',
        'alerts.yml: SwitchyardSweeperRepairsSpiking',
        'alerts.yml: SwitchyardWorkersDown',
      ]),
    );
    // The extractor itself: functions, keywords, label lists, ranges and strings are not metrics.
    expect(
      promqlRefs(
        'histogram_quantile(0.99, sum by (le, channel) (rate(a_seconds_bucket{x="y"}[5m]))) > 1 and on (channel) b_total offset 1h or vector(0)',
      ),
    ).toEqual({
      names: ['a_seconds_bucket', 'b_total'],
      matchers: [{ metric: 'a_seconds_bucket', label: 'x' }],
    });
  });

  it('every metric used is served by /metrics of the API or the worker', () => {
    const missing: string[] = [];
    const used = new Set<string>();
    for (const { where, expr } of [...dashboardExprs(), ...alertExprs()]) {
      for (const name of promqlRefs(expr).names) {
        used.add(name);
        if (notOurs(name)) continue;
        if (!resolve(name)) missing.push(`${where}: ${name}`);
      }
    }
    expect(missing).toEqual([]);
    // Every business metric of telemetry/metrics.ts is on the dashboard or in a rule (so a new
    // one gets a panel); the Node.js process defaults need not all be.
    const onBoard = new Set([...used].map((n) => resolve(n) ?? n));
    const ours = [...scraped.keys()].filter((n) => n.startsWith('switchyard_'));
    expect(ours.filter((n) => !onBoard.has(n))).toEqual([]);
    // The allow-list holds only names still used.
    const usedBases = new Set([...used].map(histogramBase));
    expect([...NOT_OURS].filter((n) => !usedBases.has(n))).toEqual([]);
  });

  it('label matchers name labels the metric has', () => {
    const wrong: string[] = [];
    for (const { where, expr } of [...dashboardExprs(), ...alertExprs()]) {
      for (const { metric, label } of promqlRefs(expr).matchers) {
        if (label === 'job' || label === 'instance') continue; // target labels, added by Prometheus
        if (notOurs(metric)) continue;
        const base = resolve(metric);
        if (!base) continue; // reported by the test above
        const known = labelNames.get(base) ?? [];
        if (!known.includes(label)) wrong.push(`${where}: ${metric}{${label}} (has ${known.join(', ')})`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('the jobs the rules and the dashboard select are the ones Prometheus and the chart scrape', () => {
    const jobs = new Set<string>();
    for (const { expr } of [...dashboardExprs(), ...alertExprs()]) {
      for (const [, op, value] of expr.matchAll(/\bjob\s*(=~|=)\s*"([^"]*)"/g)) {
        for (const j of op === '=~' ? value!.split('|') : [value!]) jobs.add(j);
      }
    }
    const config = parse(readFileSync(join(deploy, 'prometheus/prometheus.yml'), 'utf8')) as {
      scrape_configs: { job_name: string }[];
    };
    const scrapedJobs = new Set(config.scrape_configs.map((c) => c.job_name));
    expect([...jobs].filter((j) => !scrapedJobs.has(j))).toEqual([]);
    const chart = ['templates/services.yaml', 'templates/servicemonitor.yaml']
      .map((f) => readFileSync(join(deploy, 'helm/switchyard', f), 'utf8'))
      .join('\n');
    expect([...jobs].filter((j) => !chart.includes(j))).toEqual([]);
  });

  it("the chart's PrometheusRule carries deploy/prometheus/alerts.yml unchanged", () => {
    expect(readFileSync(join(deploy, 'helm/switchyard/files/alerts.yml'), 'utf8')).toBe(
      readFileSync(join(deploy, 'prometheus/alerts.yml'), 'utf8'),
    );
  });
});
