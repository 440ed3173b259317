// Label values of the Prometheus metrics (telemetry/metrics.ts). Every value comes from a closed
// set defined here, so a series can never be keyed by a message, session, user, tenant, URL or a
// provider's free text: anything outside its set is `other`. Growing a set is a deliberate edit.

import { CHANNELS } from '../db/schema/channel-binding';

/** Every channel a binding may have (console included). */
export const CHANNEL_LABELS = CHANNELS;
export type ChannelLabel = (typeof CHANNEL_LABELS)[number] | 'other';

/** What a webhook request came to (api/webhooks/metrics.ts). */
export type WebhookOutcome =
  /** a new message, recorded and its workflow started */
  | 'recorded'
  /** a provider's re-delivery of a message recorded before */
  | 'duplicate'
  /** over the tenant's rate_limit_rpm: recorded as failed, never executed */
  | 'rate_limited'
  /** recorded, but Temporal did not take the start (the sweeper starts it) */
  | 'start_failed'
  /** verified, but nothing to record (an edit, a callback…) */
  | 'ignored'
  /** WeCom's URL verification (echostr) answered */
  | 'url_verified'
  /** the fixed 401: unknown route, bad signature, inactive binding, disabled tenant */
  | 'unverified'
  /** the failed-authentication limiter's 429 */
  | 'throttled'
  /** a request-shape error: 400, 413, 415 */
  | 'invalid'
  /** a 5xx */
  | 'error';

/** Message outcomes as the database stores them (message_event.outcome), plus `none` for NULL. */
const MESSAGE_OUTCOMES = new Set([
  'none',
  'unsupported_message',
  'rate_limited',
  'tenant_suspended',
  'configuration_error',
  'empty_reply',
  'budget_exhausted',
  'model_failed',
  'delivery_failed',
  'operator_failed',
  'start_expired',
  'workflow_terminated',
  'workflow_failed',
  'workflow_timed_out',
  'workflow_cancelled',
  'workflow_completed',
  'workflow_missing',
  'lease_expired',
]);

/**
 * The `outcome` label of a finished message: its stored outcome (`none` when NULL), or
 * `unreported` when the step that finished it was not told (see recordFinish).
 */
export function messageOutcomeLabel(outcome: string | null | undefined): string {
  if (outcome === undefined) return 'unreported';
  return closed(outcome ?? 'none', MESSAGE_OUTCOMES);
}

/** The sweeper's reason classes (activities/sweeper.ts), plus `never_started` for a first start. */
const SWEEP_REASONS = new Set([
  'never_started',
  'start_expired',
  'workflow_terminated',
  'workflow_failed',
  'workflow_timed_out',
  'workflow_cancelled',
  'workflow_completed',
  'workflow_missing',
  'lease_expired',
]);

export function sweepReasonLabel(reasonClass: string): string {
  return closed(reasonClass, SWEEP_REASONS);
}

/** ModelError reason classes (agents/openai.ts); `http_<status>` of an unlisted 4xx is `other`. */
const MODEL_REASONS = new Set([
  'none',
  'rate_limited',
  'server_error',
  'timeout',
  'network',
  'malformed_response',
  'egress_denied',
  'egress_unavailable',
  'redirect_refused',
  'response_too_large',
  'invalid_prompt',
  'provider_error',
  'bad_request',
  'unauthorized',
  'forbidden',
  'not_found',
  'payload_too_large',
  'unprocessable',
  // streamed calls (live drafts): a stream cut before its finish, an answer without token counts
  'stream_interrupted',
  'usage_missing',
]);

export function modelReasonLabel(reasonClass: string): string {
  return closed(reasonClass, MODEL_REASONS);
}

/**
 * A model name (tenant-configured free text) reduced to its family, so the label set stays small
 * whatever tenants configure: `gpt-4o-mini-2024-07-18` → `gpt-4o`, `meta-llama/Llama-3.1-8B` → `llama`.
 * First match wins; anything unknown is `other`.
 */
const MODEL_FAMILIES: readonly (readonly [string, RegExp])[] = [
  ['gpt-5', /gpt-?5/],
  ['gpt-4.1', /gpt-?4\.1/],
  ['gpt-4o', /gpt-?4o/],
  ['gpt-4', /gpt-?4/],
  ['gpt-3.5', /gpt-?3\.5/],
  ['o-series', /(^|\/)o[134](-|$)/],
  ['claude', /claude/],
  ['gemini', /gemini/],
  ['gemma', /gemma/],
  ['llama', /llama/],
  ['mistral', /mistral|mixtral|codestral|ministral/],
  ['qwen', /qwen|qwq/],
  ['deepseek', /deepseek/],
  ['glm', /glm|chatglm/],
  ['kimi', /kimi|moonshot/],
  ['phi', /(^|\/)phi-?\d/],
  ['command', /command-?r|cohere/],
];

export function modelFamilyLabel(model: string): string {
  const m = model.toLowerCase();
  return MODEL_FAMILIES.find(([, re]) => re.test(m))?.[0] ?? 'other';
}

export function channelLabel(channel: string | undefined): ChannelLabel {
  return (CHANNEL_LABELS as readonly string[]).includes(channel ?? '') ? (channel as ChannelLabel) : 'other';
}

function closed(value: string, allowed: ReadonlySet<string>): string {
  return allowed.has(value) ? value : 'other';
}
