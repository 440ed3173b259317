import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../db/ids';
import { api, createTenant, type Json, ok, tenantPath } from '../helpers/admin';
import { createHarness, type Harness } from '../helpers/harness';

// Verification hands back a checkpoint (the verified head, signed with the audit key, which the
// database never holds); a later verification can start after it.
describe('audit chain checkpoints', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const verify = (tenantId: string, query = ''): Promise<Json> =>
    ok(api(h.app, 'GET', tenantPath(tenantId, `/audit-events/verification${query}`)));
  const from = (c: Json) => `?from_seq=${c.seq}&from_digest=${c.digest}&from_signature=${c.signature}`;
  const transition = (tenantId: string, version: number, next: string) =>
    ok(
      api(h.app, 'POST', tenantPath(tenantId, '/status-transitions'), {
        body: { expected_version: version, next_status: next, reason: 'checkpoint test' },
      }),
    );

  it('verifies from a signed checkpoint, and refuses a forged or mismatched one', async () => {
    const t = (await createTenant(h.app)).tenant_id as string;
    await transition(t, 1, 'suspended');
    const full = await verify(t);
    expect(full).toMatchObject({ valid: true, checked: 2, checkpoint: { seq: 2 } });
    await transition(t, 2, 'active');

    const incremental = await verify(t, from(full.checkpoint));
    expect(incremental).toMatchObject({ valid: true, checked: 1, checkpoint: { seq: 3 } });

    // A signature that is not the key holder's: 400, nothing verified.
    const forged = { ...full.checkpoint, signature: 'a'.repeat(64) };
    const refused = await api(h.app, 'GET', tenantPath(t, `/audit-events/verification${from(forged)}`));
    expect(refused.status).toBe(400);
    expect(refused.body.error.code).toBe('validation_failed');
    // Another tenant's checkpoint is bound to its tenant.
    const other = (await createTenant(h.app)).tenant_id as string;
    const borrowed = await api(
      h.app,
      'GET',
      tenantPath(other, `/audit-events/verification${from(full.checkpoint)}`),
    );
    expect(borrowed.status).toBe(400);
    // Only part of a checkpoint: 400.
    const partial = await api(h.app, 'GET', tenantPath(t, `/audit-events/verification?from_seq=1`));
    expect(partial.status).toBe(400);

    // A row appended later by the superuser, bypassing audit_append: found after the checkpoint.
    const [head] = await h.sql<{ digest: string }[]>`
      select digest from audit_log where tenant_id = ${t} order by seq desc limit 1`;
    const forgedId = newId('aud');
    await h.sql`insert into audit_log (tenant_id, audit_id, seq, action, actor_type, actor_id, previous_digest, digest)
                values (${t}, ${forgedId}, 4, 'tenant.disable', 'platform', 'mallory', ${head!.digest}, ${'0'.repeat(64)})`;
    expect(await verify(t, from(incremental.checkpoint))).toMatchObject({
      valid: false,
      checked: 1,
      first_invalid: forgedId,
    });
  });
});
