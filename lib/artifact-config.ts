import { z } from 'zod';

// A backend profile's `artifacts`: where the tenant's artifacts (inbound media, reply attachments)
// are stored, and the limits media must meet. Parsed by the admin API (400 on anything else) and
// again by the worker (a row that no longer parses is a configuration error, never a guess).

/** Media larger than this are refused unless the profile sets a lower `max_bytes`. */
export const DEFAULT_MEDIA_MAX_BYTES = 20 * 1024 * 1024;
/** The highest `max_bytes` a profile may set (Telegram's getFile serves up to 20 MB anyway). */
export const MAX_MEDIA_MAX_BYTES = 50 * 1024 * 1024;

/**
 * Content types accepted by default: pictures, voice notes and common audio, video, PDF and plain
 * text documents. A profile may narrow or widen this with `allowed_types` (`type/subtype` or
 * `type/*`); executables, archives and unknown types stay out unless named.
 */
export const DEFAULT_ALLOWED_TYPES = [
  'image/jpeg',
  'image/png',
  'image/gif',
  'image/webp',
  'audio/ogg',
  'audio/mpeg',
  'audio/mp4',
  'audio/amr',
  'video/mp4',
  'video/quicktime',
  'application/pdf',
  'text/plain',
] as const;

const MIME_PATTERN = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/(\*|[a-z0-9][a-z0-9!#$&^_.+-]{0,126})$/;

const endpointSchema = z
  .url({ protocol: /^https?$/, error: 'endpoint must be an http(s) URL' })
  .max(2000)
  .refine((u) => {
    const url = new URL(u);
    return url.username === '' && url.password === '' && url.search === '' && url.hash === '';
  }, 'endpoint must carry no credentials, query or fragment (credentials go in credentials_secret_ref)');

export const ArtifactsConfig = z
  .object({
    provider: z.enum(['filesystem', 's3']),
    endpoint: endpointSchema.optional(),
    bucket: z
      .string()
      .regex(
        /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/,
        'bucket must be an S3 bucket name (3-63 of a-z, 0-9, . and -)',
      )
      .optional(),
    region: z
      .string()
      .regex(/^[a-z0-9-]{1,40}$/, 'region must be 1-40 of a-z, 0-9 and -')
      .optional(),
    force_path_style: z.boolean().optional(),
    credentials_secret_ref: z.string().min(1).max(200).optional(),
    max_bytes: z.number().int().min(1).max(MAX_MEDIA_MAX_BYTES).optional(),
    allowed_types: z
      .array(z.string().regex(MIME_PATTERN, 'must be type/subtype or type/*'))
      .min(1)
      .max(50)
      .optional(),
  })
  .strict()
  .superRefine((v, ctx) => {
    if (v.provider === 's3' && !v.bucket)
      ctx.addIssue({ code: 'custom', path: ['bucket'], message: 's3 requires bucket' });
    if (v.provider === 'filesystem') {
      for (const k of [
        'endpoint',
        'bucket',
        'region',
        'force_path_style',
        'credentials_secret_ref',
      ] as const) {
        if (v[k] !== undefined)
          ctx.addIssue({ code: 'custom', path: [k], message: `${k} applies to provider s3 only` });
      }
    }
  });
export type ArtifactsConfig = z.infer<typeof ArtifactsConfig>;

export const DEFAULT_ARTIFACTS: ArtifactsConfig = { provider: 'filesystem' };

/** Whether `contentType` (parameters ignored) is allowed by the profile. */
export function typeAllowed(config: ArtifactsConfig, contentType: string): boolean {
  const bare = contentType.split(';')[0]!.trim().toLowerCase();
  const allowed: readonly string[] = config.allowed_types ?? DEFAULT_ALLOWED_TYPES;
  return allowed.some((a) => a === bare || (a.endsWith('/*') && bare.startsWith(a.slice(0, -1))));
}

export function maxBytesOf(config: ArtifactsConfig): number {
  return config.max_bytes ?? DEFAULT_MEDIA_MAX_BYTES;
}
