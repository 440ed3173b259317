import { z } from 'zod';

/** The NOTIFY channel migration 0028's triggers announce version events on. */
export const REGISTRY_CHANNEL = 'switchyard_registry';

const id = z.string().min(1).max(200);
const version = z.number().int().nonnegative();

/**
 * One version event (db/migrations/0028_registry_invalidation.sql). Ids and versions only: the
 * payload never carries a value, a digest of a route key or a secret.
 */
export const registryEventSchema = z.discriminatedUnion('k', [
  /** A tenant_status_change_outbox row: `e` is its event id, applied once per process. */
  z.object({ k: z.literal('tenant_status'), t: id, v: version, s: z.string(), e: z.number().int() }),
  z.object({ k: z.literal('tenant'), t: id, v: version }),
  z.object({
    k: z.enum(['binding', 'secret', 'app', 'model_profile', 'backend_profile']),
    t: id,
    id,
    v: version.nullable(),
  }),
]);

export type RegistryEvent = z.infer<typeof registryEventSchema>;

/** Parses a notification payload; null for anything that is not a version event. */
export function parseRegistryEvent(payload: string): RegistryEvent | null {
  let json: unknown;
  try {
    json = JSON.parse(payload);
  } catch {
    return null;
  }
  const parsed = registryEventSchema.safeParse(json);
  return parsed.success ? parsed.data : null;
}
