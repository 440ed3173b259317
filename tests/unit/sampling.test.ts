import { type context, trace } from '@opentelemetry/api';
import { node } from '@opentelemetry/sdk-node';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import {
  DEFERRED_SAMPLING,
  decideTenantSampling,
  keepRequestSpan,
  SampledOnlyProcessor,
  TenantSampler,
  tenantWorkContext,
} from '../../telemetry/sampling';

const spans = new InMemorySpanExporter();
const provider = new node.NodeTracerProvider({
  sampler: new TenantSampler(0),
  spanProcessors: [new SampledOnlyProcessor(new SimpleSpanProcessor(spans))],
});
provider.register();
const tracer = provider.getTracer('test');
const request = <T>(fn: () => T): T =>
  tracer.startActiveSpan('request', { attributes: { [DEFERRED_SAMPLING]: true } }, (span) => {
    try {
      return fn();
    } finally {
      span.end();
    }
  });
const sampledIn = (ctx: ReturnType<typeof context.active>) =>
  (trace.getSpanContext(ctx)!.traceFlags & 1) === 1;

describe('per-request sampling is decided once', () => {
  it('a second decision in the same request (a console send: admin request, then record) draws nothing', () => {
    let draws = 0;
    const random = () => {
      draws++;
      return 0.5;
    };
    request(() => {
      const first = decideTenantSampling(0.9, random);
      const second = decideTenantSampling(0.1, random); // would be "no" if it drew again
      expect(draws).toBe(1);
      expect([sampledIn(first), sampledIn(second)]).toEqual([true, true]);
      // Work started inside it on the same tenant's behalf follows the request as well.
      expect(sampledIn(tenantWorkContext(0, random))).toBe(true);
      expect(draws).toBe(1);
    });
  });

  it("the platform token's request is kept, and what it starts for a tenant follows that tenant's rate", () => {
    request(() => {
      keepRequestSpan();
      expect(sampledIn(tenantWorkContext(0))).toBe(false);
      expect(sampledIn(tenantWorkContext(1))).toBe(true);
    });
    expect(spans.getFinishedSpans().filter((s) => s.name === 'request')).toHaveLength(2);
  });
});
