import { describe, expect, it } from 'vitest';
import type { Sql } from '../../db/client';
import type { CandidateRow } from '../../db/queries/ingress';
import { createConfigRegistry, RegistryUnavailable } from '../../registry/cache';
import { parseRegistryEvent } from '../../registry/events';

const row = (tenantId: string, status: CandidateRow['tenant_status'] = 'active'): CandidateRow => ({
  tenant_id: tenantId,
  binding_id: 'cb_1',
  status: 'active',
  app_id: 'app_1',
  provider_account_id: '1',
  config: { nested: { a: 1 } },
  secret_ref: 'sec_1',
  secret_key_id: 'k1',
  secret_ciphertext: Buffer.alloc(32),
  tenant_status: status,
  tenant_rate_limit_rpm: null,
  tenant_trace_sampling_rate: 1,
  tenant_log_masking_level: 'basic',
});

/** A registry over a scripted read: each call takes the next answer (or waits for `release`). */
function scripted(ttlMs = 1_000) {
  let clock = 0;
  const answers: (() => Promise<CandidateRow | null>)[] = [];
  let reads = 0;
  const registry = createConfigRegistry({
    sql: null as unknown as Sql,
    ttlMs,
    now: () => clock,
    read: () => {
      reads++;
      const next = answers.shift();
      if (!next) throw new Error('no scripted answer');
      return next();
    },
  });
  return {
    registry,
    answer: (f: () => Promise<CandidateRow | null>) => answers.push(f),
    reads: () => reads,
    advance: (ms: number) => {
      clock += ms;
    },
  };
}

describe('configuration registry cache', () => {
  it('serves within the TTL without a read, re-reads past it, and frozen', async () => {
    const s = scripted();
    s.answer(async () => row('t_a'));
    const first = await s.registry.candidate('telegram', 'd1');
    expect(Object.isFrozen(first) && Object.isFrozen(first!.config.nested)).toBe(true);
    s.advance(999);
    expect(await s.registry.candidate('telegram', 'd1')).toBe(first);
    expect(s.reads()).toBe(1);
    s.advance(1);
    s.answer(async () => row('t_a', 'suspended'));
    expect((await s.registry.candidate('telegram', 'd1'))?.tenant_status).toBe('suspended');
    expect(s.reads()).toBe(2);
  });

  it('past the TTL a failing read throws RegistryUnavailable, never the old entry', async () => {
    const s = scripted();
    s.answer(async () => row('t_a'));
    await s.registry.candidate('telegram', 'd1');
    s.advance(1_000);
    s.answer(async () => {
      throw new Error('connection refused');
    });
    await expect(s.registry.candidate('telegram', 'd1')).rejects.toBeInstanceOf(RegistryUnavailable);
    expect(s.registry.stats().unavailable).toBe(1);
  });

  it('a read in flight when an event arrives is returned but not kept', async () => {
    const s = scripted();
    let release!: (r: CandidateRow) => void;
    s.answer(() => new Promise((resolve) => (release = resolve)));
    const pending = s.registry.candidate('telegram', 'd1');
    // Coalesced: a concurrent miss of the same key shares the read.
    const again = s.registry.candidate('telegram', 'd1');
    s.registry.apply(parseRegistryEvent(JSON.stringify({ k: 'tenant', t: 't_a', v: 2 })));
    release(row('t_a'));
    expect((await pending)?.tenant_id).toBe('t_a');
    expect(await again).toBe(await pending);
    s.answer(async () => row('t_a', 'disabled'));
    expect((await s.registry.candidate('telegram', 'd1'))?.tenant_status).toBe('disabled');
    expect(s.reads()).toBe(2);
  });

  it('a request arriving after an event never gets the answer of a read begun before it', async () => {
    const s = scripted();
    let release!: (r: CandidateRow) => void;
    s.answer(() => new Promise((resolve) => (release = resolve)));
    const before = s.registry.candidate('telegram', 'd1');
    s.registry.apply(parseRegistryEvent(JSON.stringify({ k: 'tenant', t: 't_a', v: 2 })));
    // Arrives after the tenant changed: must not share the read that began before.
    s.answer(async () => row('t_a', 'disabled'));
    const after = s.registry.candidate('telegram', 'd1');
    release(row('t_a'));
    expect((await before)?.tenant_status).toBe('active');
    expect((await after)?.tenant_status).toBe('disabled');
    expect(s.reads()).toBe(2);
  });

  it("another tenant's event does not disturb a read: it is shared and kept", async () => {
    const s = scripted();
    let release!: (r: CandidateRow) => void;
    s.answer(() => new Promise((resolve) => (release = resolve)));
    const first = s.registry.candidate('telegram', 'd1');
    s.registry.apply(parseRegistryEvent(JSON.stringify({ k: 'tenant', t: 't_other', v: 2 })));
    const joined = s.registry.candidate('telegram', 'd1');
    release(row('t_a'));
    expect(await joined).toBe(await first);
    expect(await s.registry.candidate('telegram', 'd1')).toBe(await first); // cached
    expect(s.reads()).toBe(1);
  });

  it('events drop their tenant only; a binding event forgets unknown routes; unknown tenants are counted', async () => {
    const s = scripted();
    s.answer(async () => row('t_a'));
    s.answer(async () => row('t_b'));
    s.answer(async () => null);
    await s.registry.candidate('telegram', 'a');
    await s.registry.candidate('telegram', 'b');
    expect(await s.registry.candidate('telegram', 'nowhere')).toBeNull();
    expect(await s.registry.candidate('telegram', 'nowhere')).toBeNull();
    expect(s.reads()).toBe(3);

    const apply = (e: unknown) => s.registry.apply(parseRegistryEvent(JSON.stringify(e)));
    expect(apply({ k: 'secret', t: 't_a', id: 'sec_1', v: 2 })).toBe('applied');
    expect(apply({ k: 'secret', t: 't_a', id: 'sec_1', v: 3 })).toBe('ignored'); // nothing cached any more
    expect(apply({ k: 'tenant', t: 't_unknown', v: 1 })).toBe('ignored');
    expect(apply({ k: 'app', t: 't_b', id: 'app_1', v: 2 })).toBe('ignored'); // not cached at ingress
    expect(s.registry.apply(parseRegistryEvent('{"k":"tenant"}'))).toBe('malformed');
    const outbox = { k: 'tenant_status', t: 't_b', v: 2, s: 'suspended', e: 41 };
    expect(apply(outbox)).toBe('applied');
    expect(apply(outbox)).toBe('duplicate');

    s.answer(async () => row('t_a'));
    await s.registry.candidate('telegram', 'a'); // t_a re-read
    expect(await s.registry.candidate('telegram', 'nowhere')).toBeNull(); // still remembered
    expect(apply({ k: 'binding', t: 't_other', id: 'cb_9', v: 1 })).toBe('ignored');
    s.answer(async () => null);
    expect(await s.registry.candidate('telegram', 'nowhere')).toBeNull(); // read again
    expect(s.reads()).toBe(5);
    expect(s.registry.stats().events).toEqual({ applied: 2, ignored: 4, duplicate: 1, malformed: 1 });
  });

  it('TTL 0 caches nothing', async () => {
    const s = scripted(0);
    s.answer(async () => row('t_a'));
    s.answer(async () => row('t_a'));
    await s.registry.candidate('telegram', 'a');
    await s.registry.candidate('telegram', 'a');
    expect(s.reads()).toBe(2);
  });
});
