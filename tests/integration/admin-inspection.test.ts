import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../db/ids';
import {
  type AdminTenant,
  api,
  type Json,
  ok,
  type RuntimeRows,
  seedRuntimeRows,
  setupTwoTenants,
  tenantPath,
} from '../helpers/admin';
import { createHarness, type Harness } from '../helpers/harness';

// Read-mostly inspection routes (messages, tool invocations, dead letters, usage) and list paging.
describe('admin API: inspection', () => {
  let h: Harness;
  let a: AdminTenant;
  let b: AdminTenant;
  let as: { token: string };

  beforeAll(async () => {
    h = await createHarness();
    ({ a, b } = await setupTwoTenants(h.app));
    as = { token: a.adminKey };
  });
  afterAll(async () => {
    await h?.close();
  });

  const at = (rest: string) => tenantPath(a.tenantId, rest);

  describe('inspection', () => {
    let rows: RuntimeRows;
    beforeAll(async () => {
      rows = await seedRuntimeRows(h.sql, b);
    });
    const bt = (rest: string) => tenantPath(b.tenantId, rest);
    const bv = () => ({ token: b.viewerKey });

    it('lists messages with filters and shows one with invocations, segments and plan', async () => {
      const list = await ok(api(h.app, 'GET', bt('/messages?status=reply_pending'), bv()));
      expect(list.items).toHaveLength(1);
      expect(list.items[0]).toMatchObject({
        event_id: rows.eventId,
        session_id: rows.sessionId,
        event_seq: 1,
        status: 'reply_pending',
        segment_count: 1,
        workflow_id: `message-${rows.eventId}`,
        temporal_ui_url: `http://127.0.0.1:8233/namespaces/default/workflows/message-${rows.eventId}`,
      });
      expect((await ok(api(h.app, 'GET', bt('/messages?status=failed'), bv()))).items).toHaveLength(0);
      expect(
        (await ok(api(h.app, 'GET', bt(`/messages?session_id=${rows.sessionId}`), bv()))).items,
      ).toHaveLength(1);
      expect((await api(h.app, 'GET', bt('/messages?status=bogus'), bv())).status).toBe(400);
      // By the binding's channel, and by when it was received (ISO 8601; a malformed one is a 400).
      const all = (await ok(api(h.app, 'GET', bt('/messages'), bv()))).items;
      expect(all.length).toBeGreaterThan(0);
      expect((await ok(api(h.app, 'GET', bt('/messages?channel=telegram'), bv()))).items).toEqual(all);
      expect((await ok(api(h.app, 'GET', bt('/messages?channel=wecom'), bv()))).items).toHaveLength(0);
      const oldest = all.at(-1).created_at as string;
      const since = (q: string) => api(h.app, 'GET', bt(`/messages?${q}`), bv());
      expect((await ok(since(`received_from=${encodeURIComponent(oldest)}`))).items).toHaveLength(all.length);
      expect((await ok(since(`received_before=${encodeURIComponent(oldest)}`))).items).toHaveLength(0);
      for (const bad of ['received_from=yesterday', 'received_before=2026-13-01T00:00:00Z', 'channel=fax'])
        expect((await since(bad)).status, bad).toBe(400);

      const detail = await ok(api(h.app, 'GET', bt(`/messages/${rows.eventId}`), bv()));
      expect(detail.plan).toEqual({ tenant: { id: b.tenantId, version: 2 } });
      expect(detail.tool_invocations).toEqual([
        expect.objectContaining({
          invocation_id: rows.invocationId,
          status: 'manual',
          attempts: 2,
          tool_name: 'create_ticket',
        }),
      ]);
      expect(detail.reply_segments).toEqual([
        expect.objectContaining({
          segment_id: rows.segmentId,
          segment_index: 0,
          status: 'unknown',
          attempts: 1,
        }),
      ]);
      expect((await api(h.app, 'GET', bt('/messages/evt_nope'), bv())).status).toBe(404);
    });

    it('lists tool invocations and dead letters; discards an open dead letter once, audited', async () => {
      const inv = await ok(api(h.app, 'GET', bt('/tool-invocations?status=manual'), bv()));
      expect(inv.items.map((i: { invocation_id: string }) => i.invocation_id)).toEqual([rows.invocationId]);
      expect(inv.items[0]).toMatchObject({ idempotency_key: `idem-${rows.invocationId}`, resolved_at: null });

      const dls = await ok(api(h.app, 'GET', bt('/dead-letters?status=open'), bv()));
      expect(dls.items).toEqual([
        expect.objectContaining({
          dead_letter_id: rows.deadLetterId,
          kind: 'segment',
          reason_class: 'unknown_outcome',
        }),
      ]);
      const path = bt(`/dead-letters/${rows.deadLetterId}/discard`);
      expect((await api(h.app, 'POST', path, { ...bv(), body: { reason: 'x' } })).status).toBe(403);
      const discarded = await ok(
        api(h.app, 'POST', path, { token: b.adminKey, body: { reason: 'customer informed' } }),
      );
      expect(discarded).toMatchObject({
        status: 'discarded',
        resolution_reason: 'customer informed',
        resolved_by: b.adminKeyId,
      });
      const again = await api(h.app, 'POST', path, { token: b.adminKey, body: { reason: 'again' } });
      expect(again.status).toBe(409);
      expect(again.body.error.code).toBe('invalid_transition');
      const audit = await ok(api(h.app, 'GET', bt('/audit-events?action=dead_letter.discard'), bv()));
      expect(audit.items[0]).toMatchObject({
        actor_type: 'api_key',
        actor_id: b.adminKeyId,
        reason: 'customer informed',
      });
    });

    it('sums usage per month, zeros when none, in the billing currency', async () => {
      const month = new Date().toISOString().slice(0, 7);
      expect(await ok(api(h.app, 'GET', bt(`/usage?month=${month}`), bv()))).toEqual({
        month,
        tokens_in: 120,
        tokens_out: 30,
        cost_minor: 7,
        currency: null,
      });
      expect(await ok(api(h.app, 'GET', bt('/usage?month=2001-01'), bv()))).toMatchObject({
        tokens_in: 0,
        cost_minor: 0,
      });
      expect((await api(h.app, 'GET', bt('/usage?month=2001-13'), bv())).status).toBe(400);
    });
  });

  describe('lists', () => {
    it('page through rows sharing one timestamp exactly once each, and clamp limits', async () => {
      const rows = await seedRuntimeRows(h.sql, a);
      const ids = Array.from({ length: 6 }, () => newId('dl'));
      // One transaction: every row gets the same created_at, so only the id breaks ties.
      await h.sql.begin(async (tx) => {
        for (const id of ids) {
          await tx`insert into dead_letter (tenant_id, dead_letter_id, event_id, kind, reason_class)
                   values (${a.tenantId}, ${id}, ${rows.eventId}, 'execution', 'configuration_error')`;
        }
      });
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const q: string = cursor ? `&cursor=${cursor}` : '';
        const page: Json = await ok(api(h.app, 'GET', at(`/dead-letters?kind=execution&limit=4${q}`), as));
        expect(page.items.length).toBeLessThanOrEqual(4);
        seen.push(...page.items.map((d: { dead_letter_id: string }) => d.dead_letter_id));
        cursor = page.next_cursor;
      } while (cursor);
      expect(seen).toEqual([...ids].sort().reverse());

      expect((await ok(api(h.app, 'GET', at('/dead-letters?limit=0'), as))).items).toHaveLength(1);
      expect((await ok(api(h.app, 'GET', at('/dead-letters?limit=-5'), as))).items).toHaveLength(1);
      expect((await ok(api(h.app, 'GET', at('/dead-letters?limit=5000'), as))).items).toHaveLength(7);
      expect((await api(h.app, 'GET', at('/dead-letters?limit=ten'), as)).status).toBe(400);
      const bogus = Buffer.from(JSON.stringify(['yesterday', 'x'])).toString('base64url');
      const bad = await api(h.app, 'GET', at(`/dead-letters?cursor=${bogus}`), as);
      expect(bad.status).toBe(400);
      expect(bad.body.error.details.fields[0].path).toBe('cursor');
    });
  });
});
