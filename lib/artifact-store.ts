import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { EgressBodyTooLargeError, egressErrorOf, egressFetch } from './egress';

// Where artifact bytes live: the backend profile's `artifacts` (api/admin/artifact-config.ts).
// `filesystem` keeps them under the data dir (the embedded default); `s3` in any S3-compatible
// service through @aws-sdk/client-s3. Keys are `<tenant_id>/<artifact_id>`, checked here so no
// key can leave its tenant's prefix or the store's root. Every S3 request goes through the egress
// client (lib/egress.ts): an endpoint the operator listed in SWITCHYARD_ARTIFACT_ENDPOINTS may be
// an internal address, any other is held to the process's egress policy like a tenant's URL.
// Errors carry a reason class and never a credential, a signed URL or a response body.

/**
 * `digest_mismatch`: the stored bytes are not those the artifact's row (or reference) names.
 * `not_found`: the store answered, and has no such object (a retry does not make it appear).
 */
export type StorageReason =
  | 'not_found'
  | 'storage_unavailable'
  | 'storage_refused'
  | 'storage_misconfigured'
  | 'too_large'
  | 'digest_mismatch';

export class StorageError extends Error {
  override name = 'StorageError';
  constructor(
    readonly reasonClass: StorageReason,
    message: string,
  ) {
    super(message);
  }
}

export interface ArtifactStore {
  readonly storage: 'filesystem' | 's3';
  /**
   * Where the objects are, as recorded on the artifact row (store_location): an S3 store's
   * `s3:<endpoint or aws>/<bucket>`; null for the filesystem (each process's own data dir).
   */
  readonly location: string | null;
  put(key: string, bytes: Uint8Array, contentType: string): Promise<void>;
  /** The object's bytes; StorageError too_large when it is over maxBytes. */
  get(key: string, maxBytes: number): Promise<Uint8Array>;
  /** Size of the object, null when there is none. */
  head(key: string): Promise<number | null>;
  delete(key: string): Promise<void>;
}

/** `<tenant_id>/<artifact_id>`: two plain segments, nothing a path or URL could reinterpret. */
const KEY_PATTERN = /^[A-Za-z0-9_-]{1,200}\/[A-Za-z0-9_-]{1,200}$/;

export function artifactKey(tenantId: string, artifactId: string): string {
  const key = `${tenantId}/${artifactId}`;
  checkKey(key);
  return key;
}

function checkKey(key: string): void {
  if (!KEY_PATTERN.test(key)) throw new StorageError('storage_misconfigured', 'invalid artifact key');
}

export function filesystemStore(root: string): ArtifactStore {
  const base = resolve(root);
  const pathOf = (key: string) => {
    checkKey(key);
    const p = resolve(join(base, key));
    if (!p.startsWith(base + sep)) throw new StorageError('storage_misconfigured', 'invalid artifact key');
    return p;
  };
  const io = (err: unknown): never => {
    const code = (err as { code?: string }).code ?? 'error';
    throw new StorageError('storage_unavailable', `artifact store (filesystem) failed: ${code}`);
  };
  return {
    storage: 'filesystem',
    location: null,
    async put(key, bytes) {
      const p = pathOf(key);
      // Written aside, then renamed: a reader never sees half an object.
      const tmp = `${p}.${randomUUID()}.tmp`;
      try {
        await mkdir(dirname(p), { recursive: true, mode: 0o700 });
        await writeFile(tmp, bytes, { mode: 0o600 });
        await rename(tmp, p);
      } catch (err) {
        await rm(tmp, { force: true }).catch(() => undefined);
        io(err);
      }
    },
    async get(key, maxBytes) {
      const p = pathOf(key);
      try {
        const s = await stat(p);
        if (s.size > maxBytes) throw new StorageError('too_large', 'artifact is over the size limit');
        return new Uint8Array(await readFile(p));
      } catch (err) {
        if (err instanceof StorageError) throw err;
        // No such file: written by another host's process (a filesystem profile is each
        // process's own data dir, README "Artifacts"), or deleted by retention.
        if ((err as { code?: string }).code === 'ENOENT')
          throw new StorageError('not_found', 'artifact store (filesystem) has no such object');
        return io(err);
      }
    },
    async head(key) {
      try {
        return (await stat(pathOf(key))).size;
      } catch (err) {
        if ((err as { code?: string }).code === 'ENOENT') return null;
        return io(err);
      }
    },
    async delete(key) {
      await rm(pathOf(key), { force: true }).catch(io);
    },
  };
}

export interface S3Settings {
  endpoint: string | null;
  bucket: string;
  region: string;
  forcePathStyle: boolean;
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } | null;
  /** The endpoint is the operator's own (SWITCHYARD_ARTIFACT_ENDPOINTS): no egress address check. */
  operatorTrusted: boolean;
  /** Attempts per request (the SDK's standard retry with back-off); default 3. */
  maxAttempts?: number;
  timeoutMs?: number;
}

/** The largest S3 answer read that is not an object body (XML errors, listings): 1 MiB. */
const S3_META_MAX_BYTES = 1024 * 1024;

export function s3Store(settings: S3Settings): ArtifactStore {
  let bodyCap = S3_META_MAX_BYTES;
  const client = new S3Client({
    region: settings.region,
    ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
    forcePathStyle: settings.forcePathStyle,
    maxAttempts: settings.maxAttempts ?? 3,
    // No credential chain from the environment or instance metadata: only the profile's secret.
    credentials: settings.credentials ?? { accessKeyId: '', secretAccessKey: '' },
    requestHandler: egressHandler(settings, () => bodyCap) as never,
  });
  const bucket = settings.bucket;
  const fail = (err: unknown): never => {
    throw storageErrorOf(err);
  };
  return {
    storage: 's3',
    location: s3Location(settings),
    async put(key, bytes, contentType) {
      checkKey(key);
      await client
        .send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: bytes, ContentType: contentType }))
        .catch(fail);
    },
    async get(key, maxBytes) {
      checkKey(key);
      // The one place a large body is read: the caller's cap (the activity runs one get at a time).
      bodyCap = Math.max(maxBytes, S3_META_MAX_BYTES);
      try {
        const res = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
        if (res.ContentLength !== undefined && res.ContentLength > maxBytes)
          throw new StorageError('too_large', 'artifact is over the size limit');
        const bytes = await res.Body!.transformToByteArray();
        if (bytes.byteLength > maxBytes)
          throw new StorageError('too_large', 'artifact is over the size limit');
        return bytes;
      } catch (err) {
        return fail(err);
      } finally {
        bodyCap = S3_META_MAX_BYTES;
      }
    },
    async head(key) {
      checkKey(key);
      try {
        const res = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
        return res.ContentLength ?? 0;
      } catch (err) {
        if (err instanceof S3ServiceException && err.$metadata.httpStatusCode === 404) return null;
        return fail(err);
      }
    },
    async delete(key) {
      checkKey(key);
      await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key })).catch(fail);
    },
  };
}

/** An S3 store's location (ArtifactStore.location): the endpoint's origin, or AWS's, and the bucket. */
export function s3Location(s: Pick<S3Settings, 'endpoint' | 'bucket'>): string {
  return `s3:${s.endpoint ? new URL(s.endpoint).origin : 'aws'}/${s.bucket}`;
}

/** A reason class for what the store answered; the message names no key, credential or URL. */
function storageErrorOf(err: unknown): StorageError {
  if (err instanceof StorageError) return err;
  const egress = egressErrorOf(err);
  if (egress instanceof EgressBodyTooLargeError)
    return new StorageError('too_large', 'artifact store answer over the size limit');
  if (egress?.name === 'EgressDeniedError' || egress?.name === 'EgressRedirectError')
    return new StorageError(
      'storage_misconfigured',
      `artifact store refused by egress policy (${egress.name})`,
    );
  if (err instanceof S3ServiceException) {
    const status = err.$metadata.httpStatusCode ?? 0;
    if (status === 403 || status === 401 || err.name === 'NoSuchBucket' || err.name === 'InvalidAccessKeyId')
      return new StorageError('storage_refused', `artifact store refused the request (${err.name})`);
    if (status === 404 || err.name === 'NoSuchKey')
      return new StorageError('not_found', 'artifact store has no such object');
    return new StorageError('storage_unavailable', `artifact store answered ${status || err.name}`);
  }
  return new StorageError('storage_unavailable', 'artifact store unreachable');
}

/** A smithy request handler over egressFetch (the shape @smithy/protocol-http's HttpHandler has). */
function egressHandler(settings: S3Settings, cap: () => number) {
  return {
    metadata: { handlerProtocol: 'http/1.1' },
    updateHttpClientConfig() {},
    httpHandlerConfigs: () => ({}),
    destroy() {},
    async handle(
      request: {
        method: string;
        protocol: string;
        hostname: string;
        port?: number;
        path: string;
        query?: Record<string, string | string[] | null>;
        headers: Record<string, string>;
        body?: unknown;
      },
      options: { abortSignal?: AbortSignal } = {},
    ) {
      const query = Object.entries(request.query ?? {})
        .flatMap(([k, v]) =>
          v === null
            ? [escapeUri(k)]
            : (Array.isArray(v) ? v : [v]).map((x) => `${escapeUri(k)}=${escapeUri(x)}`),
        )
        .join('&');
      const port = request.port ? `:${request.port}` : '';
      const url = `${request.protocol}//${request.hostname}${port}${request.path}${query ? `?${query}` : ''}`;
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(request.headers)) {
        // fetch sets these itself from the URL and the body.
        if (
          !['host', 'content-length', 'transfer-encoding', 'connection', 'expect'].includes(k.toLowerCase())
        )
          headers[k] = v;
      }
      const signals = [AbortSignal.timeout(settings.timeoutMs ?? 30_000)];
      if (options.abortSignal) signals.push(options.abortSignal as AbortSignal);
      // Trust is for the listed endpoint itself: the SDK may address another host (virtual-hosted
      // `<bucket>.<endpoint host>`), and a tenant names the bucket — that one is checked like any URL.
      const trusted = settings.operatorTrusted === true && sameOrigin(url, settings.endpoint);
      const res = await egressFetch(url, {
        method: request.method,
        headers,
        body: await bodyOf(request.body),
        signal: AbortSignal.any(signals),
        maxResponseBytes: cap(),
        operatorTrusted: trusted,
      });
      const out: Record<string, string> = {};
      res.headers.forEach((v, k) => {
        out[k] = v;
      });
      return {
        response: {
          statusCode: res.status,
          reason: res.statusText,
          headers: out,
          body: res.body ? Readable.fromWeb(res.body as never) : Readable.from([]),
        },
      };
    },
  };
}

async function bodyOf(body: unknown): Promise<Uint8Array | string | undefined> {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string' || body instanceof Uint8Array) return body;
  if (body instanceof Readable) {
    const chunks: Buffer[] = [];
    for await (const c of body) chunks.push(Buffer.from(c as Uint8Array));
    return Buffer.concat(chunks);
  }
  throw new StorageError('storage_misconfigured', 'unsupported request body');
}

/** RFC 3986 escaping, as SigV4's canonical query string has it. */
function escapeUri(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** Whether `url` is on exactly the origin of `endpoint` (scheme, host, port). */
function sameOrigin(url: string, endpoint: string | null | undefined): boolean {
  if (!endpoint) return false;
  try {
    return new URL(url).origin === new URL(endpoint).origin;
  } catch {
    return false;
  }
}
