import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { decodeTime } from 'ulidx';
import { DEAD_LETTER_KINDS } from '../db/schema/dead-letter';
import type { Logger } from '../lib/log';
import type { Channel, MessageStatus } from '../workflows/shared';
import { channelLabel, messageOutcomeLabel } from './labels';

// Every Prometheus metric of Switchyard, defined once. The API and the worker each scrape one
// registry (createRegistry); with `npm start` both run in one process and share it. Labels take
// values from the closed sets of ./labels.ts only: never a message, session, user, tenant or URL.

/** One process's registry, with the Node.js process metrics (prom-client's defaults). */
export function createRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

export interface Metrics {
  /** API: webhook requests by channel and outcome (api/webhooks/metrics.ts). */
  webhookRequests: Counter<'channel' | 'outcome'>;
  /** API: time to answer a webhook (the provider's ack), by channel and outcome. */
  webhookAck: Histogram<'channel' | 'outcome'>;
  /** Worker: terminal transitions (replied / failed) by outcome. */
  messagesFinished: Counter<'status' | 'outcome'>;
  /** Worker: webhook received → last segment sent, for replied messages. */
  replyLatency: Histogram<'channel'>;
  /** Worker: webhook received → running (the session lane, and the tenant's permit when capped). */
  executionWait: Histogram<'permit_limited'>;
  /** Worker: how often a message was told to wait for its turn, by reason. */
  executionWaits: Counter<'reason'>;
  /** Worker: remote model calls. */
  modelCalls: Counter<'provider' | 'model_family' | 'outcome' | 'reason_class'>;
  modelCallSeconds: Histogram<'provider' | 'model_family' | 'outcome'>;
  modelTokens: Counter<'provider' | 'model_family' | 'direction'>;
  /** Worker: tool invocations reaching a settled or operator state, by that state. */
  toolInvocations: Counter<'outcome'>;
  /** Worker: tool provider requests by what the provider answered. */
  toolDispatches: Counter<'result'>;
  toolDispatchSeconds: Histogram<'result'>;
  /** Worker: reply segment sends to a channel by result class (channels/send-result.ts). */
  segmentSends: Counter<'channel' | 'result'>;
  segmentSendSeconds: Histogram<'channel' | 'result'>;
  /** Worker: what the repair sweeper did, by action and reason class. */
  sweeperActions: Counter<'action' | 'reason_class'>;
  /** Worker: housekeeping runs, by whether audit retention had to leave a tenant alone. */
  housekeepingRuns: Counter<'outcome'>;
  /** Worker: what housekeeping removed, by part (activities/housekeeping.ts). */
  housekeepingRemoved: Counter<'part'>;
  /** Worker: artifact retention batches stopped by a store failure, by reason class (activities/artifact-retention.ts). */
  housekeepingArtifactFailures: Counter<'reason_class'>;
  /** Worker: audit entries sealed into their chain, and pending entries refused (runtime/audit-sealer.ts). */
  auditSealed: Counter<'outcome'>;
}

const made = new WeakMap<Registry, Metrics>();

/**
 * The metrics, registered in `registry`. One set per registry: called again with the same
 * registry it returns the same handles (prom-client refuses a second registration of a name, and
 * tests build several apps on one registry).
 */
export function createMetrics(registry: Registry): Metrics {
  const existing = made.get(registry);
  if (existing) return existing;
  const registers = [registry];
  const counter = <T extends string>(name: string, help: string, labelNames: readonly T[]) =>
    new Counter<T>({ name, help, labelNames, registers });
  const histogram = <T extends string>(
    name: string,
    help: string,
    labelNames: readonly T[],
    buckets: number[],
  ) => new Histogram<T>({ name, help, labelNames, buckets, registers });

  const metrics: Metrics = {
    webhookRequests: counter('switchyard_webhook_requests_total', 'Webhook requests by channel and outcome', [
      'channel',
      'outcome',
    ]),
    webhookAck: histogram(
      'switchyard_webhook_ack_seconds',
      'Time to answer a webhook request (the provider waits for it)',
      ['channel', 'outcome'],
      [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    ),
    messagesFinished: counter(
      'switchyard_messages_finished_total',
      'Messages that reached a terminal status (replied or failed), by outcome',
      ['status', 'outcome'],
    ),
    replyLatency: histogram(
      'switchyard_message_reply_seconds',
      'Webhook received to the last reply segment sent, for replied messages',
      ['channel'],
      [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900],
    ),
    executionWait: histogram(
      'switchyard_execution_wait_seconds',
      'Webhook received to running: the session lane, plus the tenant permit when the tenant caps concurrency',
      ['permit_limited'],
      [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300],
    ),
    executionWaits: counter(
      'switchyard_execution_waits_total',
      'Times a message was told to wait for its turn, by reason',
      ['reason'],
    ),
    modelCalls: counter('switchyard_model_calls_total', 'Remote model calls by outcome', [
      'provider',
      'model_family',
      'outcome',
      'reason_class',
    ]),
    modelCallSeconds: histogram(
      'switchyard_model_call_seconds',
      'Duration of remote model calls',
      ['provider', 'model_family', 'outcome'],
      [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120],
    ),
    modelTokens: counter('switchyard_model_tokens_total', 'Tokens of remote model calls, by direction', [
      'provider',
      'model_family',
      'direction',
    ]),
    toolInvocations: counter(
      'switchyard_tool_invocations_total',
      'Tool invocations reaching a settled or operator state',
      ['outcome'],
    ),
    toolDispatches: counter('switchyard_tool_dispatches_total', 'Requests to tool providers by answer', [
      'result',
    ]),
    toolDispatchSeconds: histogram(
      'switchyard_tool_dispatch_seconds',
      'Duration of requests to tool providers',
      ['result'],
      [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    ),
    segmentSends: counter('switchyard_segment_sends_total', 'Reply segment sends by channel and result', [
      'channel',
      'result',
    ]),
    segmentSendSeconds: histogram(
      'switchyard_segment_send_seconds',
      'Duration of reply segment sends to the channel API',
      ['channel', 'result'],
      [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    ),
    sweeperActions: counter(
      'switchyard_sweeper_actions_total',
      'Repair sweeper actions: started (never started), repaired, dead_lettered',
      ['action', 'reason_class'],
    ),
    housekeepingRuns: counter(
      'switchyard_housekeeping_runs_total',
      'Housekeeping runs: ok, or audit_refused (a tenant whose retention boundary row does not verify)',
      ['outcome'],
    ),
    housekeepingRemoved: counter(
      'switchyard_housekeeping_removed_total',
      'Rows removed by housekeeping: audit_rows, security_events, rate_limit_windows, replay_guards, artifacts (row and object)',
      ['part'],
    ),
    housekeepingArtifactFailures: counter(
      'switchyard_housekeeping_artifact_failures_total',
      'Artifact stores skipped by a retention run (the store failed: storage_unavailable, storage_refused, storage_misconfigured, …; or store_moved: the profile now points at another bucket or endpoint); their marked rows are retried next run',
      ['reason_class'],
    ),
    auditSealed: counter(
      'switchyard_audit_sealed_total',
      "Audit entries sealed into the tenant's chain (sealed), pending entries refused because their mac does not hold (refused), and tenants whose sealing raised in a housekeeping run (failed)",
      ['outcome'],
    ),
  };
  made.set(registry, metrics);
  return metrics;
}

/**
 * Seconds since the webhook received the message, from the time in its event id (`evt_<ULID>`,
 * minted by the API at ingress: no database read); null for an id without one (written by hand).
 * Clocks of API and worker hosts are assumed to agree to within a few milliseconds (NTP).
 */
export function secondsSinceReceived(eventId: string, nowMs: number = Date.now()): number | null {
  if (!/^evt_[0-7][0-9A-HJKMNP-TV-Z]{25}$/.test(eventId)) return null;
  const seconds = (nowMs - decodeTime(eventId.slice(4))) / 1000;
  return seconds >= 0 && seconds < 90 * 86_400 ? seconds : null;
}

/**
 * A terminal transition made by this step (not one it merely found made). `outcome` undefined:
 * the step was not told the stored outcome (label `unreported`). A replied message with its
 * channel known also records the received → replied latency.
 */
export function recordFinish(
  m: Metrics | undefined,
  p: { status: MessageStatus; outcome: string | null | undefined; eventId: string; channel?: Channel },
): void {
  if (!m || (p.status !== 'replied' && p.status !== 'failed')) return;
  m.messagesFinished.inc({ status: p.status, outcome: messageOutcomeLabel(p.outcome) });
  if (p.status !== 'replied' || !p.channel) return;
  const seconds = secondsSinceReceived(p.eventId);
  if (seconds !== null) m.replyLatency.observe({ channel: channelLabel(p.channel) }, seconds);
}

/** How long a scrape waits for the DLQ count before it reports without it. */
const DLQ_QUERY_TIMEOUT_MS = 2000;
const WARN_EVERY_MS = 60_000;

/**
 * `switchyard_dlq_depth{kind}`: open dead letters across tenants, counted on each scrape by
 * `depth` (dead_letter_depth(), migration 0025: a SECURITY DEFINER function, the worker's role
 * cannot count across tenants under RLS). A failed or slow count leaves the gauge empty for that
 * scrape (the series disappears rather than showing a stale value) and logs a warning; a
 * database without the function (0025 not applied) logs that once.
 */
export function registerDlqDepth(
  registry: Registry,
  /** Counts within the timeout it is given, or rejects (cancelling its query). */
  depth: (timeoutMs: number) => Promise<readonly { kind: string; n: number }[]>,
  log: Logger,
): Gauge<'kind'> {
  let missingLogged = false;
  let lastWarn = 0;
  return new Gauge<'kind'>({
    name: 'switchyard_dlq_depth',
    help: 'Open dead letters by kind, across tenants',
    labelNames: ['kind'],
    registers: [registry],
    async collect() {
      this.reset();
      try {
        const rows = await depth(DLQ_QUERY_TIMEOUT_MS);
        for (const kind of DEAD_LETTER_KINDS) this.set({ kind }, 0);
        for (const r of rows) {
          if ((DEAD_LETTER_KINDS as readonly string[]).includes(r.kind)) this.set({ kind: r.kind }, r.n);
        }
      } catch (err) {
        if ((err as { code?: string }).code === '42883') {
          if (!missingLogged)
            log.warn('dead_letter_depth() is missing (migration 0025): no DLQ depth metric');
          missingLogged = true;
        } else if (Date.now() - lastWarn > WARN_EVERY_MS) {
          lastWarn = Date.now();
          log.warn({ err: (err as Error).message }, 'DLQ depth not counted for this scrape');
        }
      }
    },
  });
}

/**
 * `switchyard_worker_ready`: 1 while the worker takes work (running, not draining), else 0 — what
 * /readyz answers, as a series an alert can watch across every worker (deploy/prometheus).
 */
export function registerWorkerReady(registry: Registry, ready: () => boolean): Gauge {
  return new Gauge({
    name: 'switchyard_worker_ready',
    help: 'Whether this worker takes work (1) or not (0: starting, stopped or draining)',
    registers: [registry],
    collect() {
      this.set(ready() ? 1 : 0);
    },
  });
}
