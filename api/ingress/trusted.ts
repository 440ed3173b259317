import type { Channel } from '../../workflows/shared';

/** Created only after a request's signature verified: the one source of tenant identity at ingress. */
export interface TrustedContext {
  readonly tenantId: string;
  readonly bindingId: string;
  readonly appId: string;
  readonly channel: Channel;
  readonly bindingConfig: Readonly<Record<string, unknown>>;
  /** Tenant gates, read with the candidate and trusted only now. */
  readonly tenantStatus: 'active' | 'suspended' | 'disabled';
  /** NULL = unlimited, 0 = reject every new message. */
  readonly rateLimitRpm: number | null;
  /** The tenant's share of requests whose spans are exported (telemetry/sampling.ts). */
  readonly traceSamplingRate: number;
  /** What the request's logs and spans may show of user text and external ids (lib/masking.ts). */
  readonly logMaskingLevel: 'none' | 'basic' | 'strict';
}
