import { randomBytes } from 'node:crypto';
import { type Context, context, isSpanContextValid, TraceFlags, trace } from '@opentelemetry/api';
import {
  type ReadableSpan,
  type Sampler,
  SamplingDecision,
  type SamplingResult,
  type Span,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';

// Per-tenant sampling, decided after the tenant is trusted. A request's span starts before anyone
// knows whose it is (the webhook must verify first), and a sampling decision is normally fixed at
// span start. So a request span starts *deferred*: always recorded, provisionally sampled at the
// untrusted rate; once the tenant is trusted, decideTenantSampling() replaces that decision with
// one at the tenant's trace_sampling_rate, and the work the request starts (the workflow, its
// activities) continues under a context flagged accordingly. SampledOnlyProcessor drops request
// spans decided "no" when they end. Audit rows are written regardless: audit is never sampled.

/** Set at span start on request spans whose sampling is decided later. */
export const DEFERRED_SAMPLING = 'switchyard.sampling.deferred';
/** The decision on a deferred span, read when it ends. */
export const SAMPLED = 'switchyard.sampled';

export type Random = () => number;

const draw = (rate: number, random: Random) => rate >= 1 || (rate > 0 && random() < rate);

/**
 * Children follow their parent (a propagated context included); deferred request spans are
 * recorded with a provisional decision at the untrusted rate; other roots are sampled.
 */
export class TenantSampler implements Sampler {
  constructor(
    private readonly untrustedRate: number,
    private readonly random: Random = Math.random,
  ) {}

  shouldSample(
    ctx: Context,
    _traceId: string,
    _name: string,
    _kind: unknown,
    attributes: Record<string, unknown>,
  ): SamplingResult {
    const parent = trace.getSpanContext(ctx);
    if (parent && isSpanContextValid(parent)) {
      const sampled = (parent.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED;
      return { decision: sampled ? SamplingDecision.RECORD_AND_SAMPLED : SamplingDecision.NOT_RECORD };
    }
    if (attributes[DEFERRED_SAMPLING] === true) {
      return {
        decision: SamplingDecision.RECORD_AND_SAMPLED,
        attributes: { [SAMPLED]: draw(this.untrustedRate, this.random) },
      };
    }
    return { decision: SamplingDecision.RECORD_AND_SAMPLED };
  }

  toString(): string {
    return `TenantSampler{untrusted=${this.untrustedRate}}`;
  }
}

/** Passes every span on but deferred ones decided "no". */
export class SampledOnlyProcessor implements SpanProcessor {
  constructor(private readonly inner: SpanProcessor) {}
  onStart(span: Span, parentContext: Context): void {
    this.inner.onStart(span, parentContext);
  }
  onEnd(span: ReadableSpan): void {
    if (span.attributes[SAMPLED] === false) return;
    this.inner.onEnd(span);
  }
  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }
  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

/**
 * Decides the active request span by the trusted tenant's rate and returns the context to continue
 * its work in: the active one when sampled, else one whose span context is flagged unsampled, so
 * spans started under it (the workflow start, the workflow, its activities) are not recorded.
 * The trace id stays the same either way (it is stored on the message and audit rows).
 */
export function decideTenantSampling(rate: number, random: Random = Math.random): Context {
  const active = context.active();
  const span = trace.getSpan(active);
  if (!span) return active;
  const sc = span.spanContext();
  // Tracing off, or already unsampled: nothing to export either way.
  if (!isSpanContextValid(sc) || (sc.traceFlags & TraceFlags.SAMPLED) !== TraceFlags.SAMPLED) return active;
  // Decided once per request: a console send is both an admin request and a recorded message.
  if (decided.has(span)) return active;
  const sampled = draw(rate, random);
  decided.add(span);
  if (span.isRecording()) span.setAttribute(SAMPLED, sampled);
  return sampled ? active : trace.setSpanContext(active, { ...sc, traceFlags: TraceFlags.NONE });
}

/**
 * Keeps the active request span (a trusted caller with no tenant: the platform token) without
 * deciding for any tenant, so work it starts for one follows that tenant's rate.
 */
export function keepRequestSpan(): Context {
  const active = context.active();
  const span = trace.getSpan(active);
  if (span?.isRecording()) span.setAttribute(SAMPLED, true);
  return active;
}

/** Request spans whose tenant already decided their sampling (kept: the rest of the request follows). */
const decided = new WeakSet<object>();

/**
 * A context under which nothing is recorded or exported: spans started in it see an unsampled
 * parent (the trace id of `base` is kept when it has one).
 */
export function unsampledContext(base: Context = context.active()): Context {
  const parent = trace.getSpanContext(base);
  return trace.setSpanContext(base, {
    traceId: parent && isSpanContextValid(parent) ? parent.traceId : randomBytes(16).toString('hex'),
    spanId: randomBytes(8).toString('hex'),
    traceFlags: TraceFlags.NONE,
  });
}

/**
 * The context for work started on a tenant's behalf outside its own request — a repair run, an
 * operator's retry, a late start by the sweeper: the tenant's trace_sampling_rate decides, as it
 * does at ingress (sampled: the caller's context, so the run joins its trace). Inside a request
 * already decided by that tenant the request's decision stands.
 */
export function tenantWorkContext(rate: number | null | undefined, random: Random = Math.random): Context {
  const active = context.active();
  const span = trace.getSpan(active);
  // Unknown rate, or inside a request its tenant already decided (an operator's retry): as it is.
  if (rate === null || rate === undefined || (span && decided.has(span))) return active;
  return draw(rate, random) ? active : unsampledContext();
}
