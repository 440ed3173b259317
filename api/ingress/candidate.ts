import type { CandidateRow } from '../../db/queries/ingress';
import { sha256Hex } from '../../lib/digest';
import { addLogFields } from '../../lib/log-context';
import { type SecretBox, secretAad } from '../../lib/secret-box';
import type { ConfigRegistry } from '../../registry/cache';
import type { Channel } from '../../workflows/shared';
import type { TrustedContext } from './trusted';

/**
 * An opaque candidate binding found by route key. It exposes no tenant id and no secret; the
 * only thing it can do is hand out a verifier, once, for the purpose "webhook verification".
 */
export interface Candidate {
  readonly routeKeyDigest: string;
  readonly active: boolean;
  verifier(purpose: 'webhook_verification'): Verifier;
}

export interface Verifier {
  /** The binding's channel secret, parsed; available to the verification code only. */
  readonly secret: Readonly<Record<string, unknown>>;
  readonly bindingConfig: Readonly<Record<string, unknown>>;
  /** Mints the trusted context; call only after the request verified. */
  trust(): TrustedContext;
}

export function routeKeyDigest(routeKey: string): string {
  return sha256Hex(`route-key:${routeKey}`);
}

/**
 * Finds the candidate through the registry (registry/cache.ts): on a warm entry no statement at
 * all; otherwise the one find_binding_candidate read. Throws RegistryUnavailable when PostgreSQL
 * cannot be read and no entry within its TTL is cached (the webhook answers 503).
 */
export async function resolveCandidate(
  deps: { registry: ConfigRegistry; secrets: SecretBox },
  channel: Channel,
  routeKey: string,
): Promise<{ digest: string; candidate: Candidate | null }> {
  const digest = routeKeyDigest(routeKey);
  // Route keys are ≥128-bit random tokens in base64url; anything else cannot match.
  if (!/^[A-Za-z0-9_-]{22,128}$/.test(routeKey)) return { digest, candidate: null };
  const row = await deps.registry.candidate(channel, digest);
  if (!row?.secret_ciphertext || !row.secret_key_id) return { digest, candidate: null };
  return { digest, candidate: makeCandidate(row, digest, channel, deps.secrets) };
}

function makeCandidate(row: CandidateRow, digest: string, channel: Channel, secrets: SecretBox): Candidate {
  let handedOut = false;
  return {
    routeKeyDigest: digest,
    active: row.status === 'active',
    verifier(purpose) {
      if (purpose !== 'webhook_verification' || handedOut) throw new Error('verifier already used');
      handedOut = true;
      const plaintext = secrets.open(
        row.secret_ciphertext!,
        secretAad(row.tenant_id, row.secret_ref),
        row.secret_key_id!,
      );
      const secret = JSON.parse(plaintext) as Record<string, unknown>;
      return {
        secret,
        bindingConfig: row.config,
        trust: () => {
          // From here on the request's log lines may name the tenant (lib/log-context.ts).
          addLogFields({ tenant_id: row.tenant_id });
          return {
            tenantId: row.tenant_id,
            bindingId: row.binding_id,
            appId: row.app_id,
            channel,
            bindingConfig: row.config,
            tenantStatus: row.tenant_status,
            rateLimitRpm: row.tenant_rate_limit_rpm,
            traceSamplingRate: row.tenant_trace_sampling_rate,
            logMaskingLevel: row.tenant_log_masking_level,
          };
        },
      };
    },
  };
}
