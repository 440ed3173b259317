import type { Context, MiddlewareHandler } from 'hono';
import { channelLabel, type WebhookOutcome } from '../../telemetry/labels';
import type { Metrics } from '../../telemetry/metrics';

declare module 'hono' {
  interface ContextVariableMap {
    /** What a webhook request came to, set by its handler; unset: judged by the status. */
    webhookOutcome: WebhookOutcome | undefined;
  }
}

export function setWebhookOutcome(c: Context, outcome: WebhookOutcome): void {
  c.set('webhookOutcome', outcome);
}

/**
 * Counts every request under /v1/webhooks by channel and outcome, and how long its answer took
 * (the provider's ack: Telegram and WeCom retry a slow or failed one). Registered before the body
 * limit and the failure limiter, so their 413 and 429 are counted too. The channel is the path's
 * segment when it is a known channel (else `other`); the route key is never read.
 */
export function webhookMetrics(metrics: Metrics): MiddlewareHandler {
  return async (c, next) => {
    const started = performance.now();
    await next();
    const labels = {
      channel: channelLabel(c.req.path.split('/')[3]),
      outcome: c.get('webhookOutcome') ?? outcomeOfStatus(c.res.status),
    };
    metrics.webhookRequests.inc(labels);
    metrics.webhookAck.observe(labels, (performance.now() - started) / 1000);
  };
}

function outcomeOfStatus(status: number): WebhookOutcome {
  if (status === 401) return 'unverified';
  if (status === 429) return 'throttled';
  if (status >= 500) return 'error';
  if (status >= 400) return 'invalid';
  return 'ignored';
}
