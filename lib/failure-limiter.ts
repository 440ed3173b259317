/** How many failures a key may have per window, and how many keys are remembered at most. */
export interface FailureLimit {
  /** Failures allowed in a burst; the budget refills at `failures` per `windowMs`. */
  failures: number;
  windowMs: number;
  /** Keys kept at most; beyond this the least recently failed key is forgotten. */
  maxKeys: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/**
 * A token bucket per key (a source address, or address and route) that only failures draw from:
 * successes never touch it, so a busy legitimate client is never limited. In-process and bounded:
 * the map is an LRU capped at `maxKeys` (Map keeps insertion order; a touched key is re-inserted at
 * the end), and a bucket that has refilled is dropped, since a missing bucket means a full one.
 * Forgetting a key only ever forgives it, never blocks anyone. The clock is passed in (ms).
 */
export class FailureLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(readonly limit: FailureLimit) {}

  /** Milliseconds until `key` may fail again; 0 when it is not limited. */
  retryAfterMs(key: string, now: number): number {
    const bucket = this.buckets.get(key);
    if (!bucket) return 0;
    const tokens = this.refilled(bucket, now);
    if (tokens >= this.limit.failures) {
      this.buckets.delete(key);
      return 0;
    }
    return tokens >= 1 ? 0 : Math.ceil(((1 - tokens) * this.limit.windowMs) / this.limit.failures);
  }

  /** Counts one failure of `key`; true when this failure used up its budget. */
  fail(key: string, now: number): boolean {
    const bucket = this.buckets.get(key);
    const tokens = Math.max(0, (bucket ? this.refilled(bucket, now) : this.limit.failures) - 1);
    this.buckets.delete(key);
    this.buckets.set(key, { tokens, at: now });
    if (this.buckets.size > this.limit.maxKeys) {
      const oldest = this.buckets.keys().next().value;
      if (oldest !== undefined) this.buckets.delete(oldest);
    }
    return tokens < 1;
  }

  /** Keys currently remembered (for tests and metrics). */
  get size(): number {
    return this.buckets.size;
  }

  private refilled(b: Bucket, now: number): number {
    const refill = (Math.max(0, now - b.at) * this.limit.failures) / this.limit.windowMs;
    return Math.min(this.limit.failures, b.tokens + refill);
  }
}
