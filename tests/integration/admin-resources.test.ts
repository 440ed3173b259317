import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AdminTenant, api, ok, setupTwoTenants, tenantPath } from '../helpers/admin';
import { createHarness, type Harness } from '../helpers/harness';

// Profiles, apps and revisions, and secrets through the admin API, end to end on real PostgreSQL.
describe('admin API: resources', () => {
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

  describe('model and backend profiles', () => {
    it('digests equal content equally, validates references and versions updates', async () => {
      const content = {
        provider: 'openai_compatible',
        model: 'gpt-test',
        base_url: 'https://llm.example.test/v1',
        parameters: { temperature: 0.2, top_p: 1 },
        pricing: { input_per_mtok_minor: 150, output_per_mtok_minor: 600 },
      };
      const p1 = await ok(
        api(h.app, 'POST', at('/model-profiles'), { ...as, body: { profile_key: 'llm-one', ...content } }),
        201,
      );
      const p2 = await ok(
        api(h.app, 'POST', at('/model-profiles'), {
          ...as,
          body: { ...content, parameters: { top_p: 1, temperature: 0.2 }, profile_key: 'llm-two' },
        }),
        201,
      );
      expect(p1).toMatchObject({
        version: 1,
        provider: 'openai_compatible',
        pricing: content.pricing,
        status: 'active',
      });
      expect(p1.content_digest).toMatch(/^[0-9a-f]{64}$/);
      expect(p2.content_digest).toBe(p1.content_digest);

      const noUrl = await api(h.app, 'POST', at('/model-profiles'), {
        ...as,
        body: { profile_key: 'llm-three', provider: 'openai_compatible', model: 'm' },
      });
      expect(noUrl.status).toBe(400);
      expect(noUrl.body.error.details.fields[0].path).toBe('base_url');
      const foreignSecret = await api(h.app, 'POST', at('/model-profiles'), {
        ...as,
        body: { profile_key: 'llm-four', ...content, api_key_secret_ref: b.secretRef },
      });
      expect(foreignSecret.status).toBe(400);
      expect(foreignSecret.body.error.details.fields[0].path).toBe('api_key_secret_ref');
      const dup = await api(h.app, 'POST', at('/model-profiles'), {
        ...as,
        body: { profile_key: 'llm-one', ...content },
      });
      expect(dup.status).toBe(409);

      const key = await ok(
        api(h.app, 'POST', at('/secrets'), {
          ...as,
          body: { name: 'llm-key', purpose: 'model_api_key', value: `sk-${randomBytes(8).toString('hex')}` },
        }),
        201,
      );
      const updated = await ok(
        api(h.app, 'PUT', at(`/model-profiles/${p1.model_profile_id}`), {
          ...as,
          body: { expected_version: 1, ...content, model: 'gpt-test-2', api_key_secret_ref: key.secret_ref },
        }),
      );
      expect(updated).toMatchObject({ version: 2, model: 'gpt-test-2', api_key_secret_ref: key.secret_ref });
      expect(updated.content_digest).not.toBe(p1.content_digest);
      const stale = await api(h.app, 'PUT', at(`/model-profiles/${p1.model_profile_id}`), {
        ...as,
        body: { expected_version: 1, ...content },
      });
      expect(stale.status).toBe(409);
      expect(stale.body.error.code).toBe('optimistic_conflict');
      expect(await ok(api(h.app, 'GET', at(`/model-profiles/${p1.model_profile_id}`), as))).toEqual(updated);
      const list = await ok(api(h.app, 'GET', at('/model-profiles'), as));
      expect(list.items.map((p: { profile_key: string }) => p.profile_key)).toEqual([
        'llm-two',
        'llm-one',
        'scripted',
      ]);
    });

    it('creates backend profiles with a content digest and reads them back', async () => {
      const bp = await ok(
        api(h.app, 'POST', at('/backend-profiles'), {
          ...as,
          body: { profile_key: 'archive', provider: 'postgres', config: { schema: 'archive' } },
        }),
        201,
      );
      expect(bp).toMatchObject({
        status: 'active',
        version: 1,
        provider: 'postgres',
        config: { schema: 'archive' },
      });
      expect(await ok(api(h.app, 'GET', at(`/backend-profiles/${bp.profile_id}`), as))).toEqual(bp);
      const redis = await api(h.app, 'POST', at('/backend-profiles'), {
        ...as,
        body: { profile_key: 'r', provider: 'redis' },
      });
      expect(redis.status).toBe(400);
    });
  });

  describe('apps and revisions', () => {
    it('numbers immutable revisions, digests content and publishes under optimistic locking', async () => {
      const agent = await ok(
        api(h.app, 'POST', at('/apps'), { ...as, body: { app_key: 'support', display_name: 'Support' } }),
        201,
      );
      expect(agent).toMatchObject({ version: 1, status: 'active', published_revision: null });
      const tools = [
        {
          name: 'create_ticket',
          description: 'Open a ticket',
          parameters: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] },
          endpoint_url: 'https://tools.example.test/tickets',
          side_effect: true,
          idempotency: 'provider_key',
          receipt_url: 'https://tools.example.test/tickets/{key}',
        },
      ];
      const scripted = {
        rules: [
          {
            match: '^ticket (.+)$',
            tool_call: { name: 'create_ticket', arguments: { title: '{{1}}' } },
            reply: 'ok',
          },
        ],
        default_reply: '{{text}}',
      };
      const body = {
        model_profile_id: a.modelProfileId,
        system_prompt: 'Be brief.',
        tools,
        scripted,
        limits: { max_steps: 4 },
      };
      const revs = await Promise.all(
        [1, 2, 3].map(() =>
          ok(api(h.app, 'POST', at(`/apps/${agent.app_id}/revisions`), { ...as, body }), 201),
        ),
      );
      expect(revs.map((r) => r.revision).sort()).toEqual([1, 2, 3]);
      expect(new Set(revs.map((r) => r.content_digest)).size).toBe(1);
      const r1 = await ok(api(h.app, 'GET', at(`/apps/${agent.app_id}/revisions/1`), as));
      expect(r1.tools[0]).toMatchObject({
        name: 'create_ticket',
        requires_approval: false,
        reconcile_window_s: 120,
      });

      // Immutable: no route changes a revision, and the table refuses it even to the owner.
      expect((await api(h.app, 'PUT', at(`/apps/${agent.app_id}/revisions/1`), { ...as, body })).status).toBe(
        404,
      );
      await expect(
        h.sql`update agent_app_revision set system_prompt = 'x' where tenant_id = ${a.tenantId} and app_id = ${agent.app_id}`,
      ).rejects.toThrow('append-only');
      expect(await ok(api(h.app, 'GET', at(`/apps/${agent.app_id}/revisions/1`), as))).toEqual(r1);

      const badTool = await api(h.app, 'POST', at(`/apps/${agent.app_id}/revisions`), {
        ...as,
        body: { ...body, tools: [] },
      });
      expect(badTool.status).toBe(400);
      expect(badTool.body.error.details.fields[0].path).toBe('scripted.rules.0.tool_call.name');
      const badRegex = await api(h.app, 'POST', at(`/apps/${agent.app_id}/revisions`), {
        ...as,
        body: { ...body, scripted: { rules: [{ match: '(', reply: 'x' }] } },
      });
      expect(badRegex.status).toBe(400);
      const foreignProfile = await api(h.app, 'POST', at(`/apps/${agent.app_id}/revisions`), {
        ...as,
        body: { ...body, model_profile_id: b.modelProfileId },
      });
      expect(foreignProfile.status).toBe(400);
      expect(foreignProfile.body.error.details.fields[0].path).toBe('model_profile_id');

      const published = await ok(
        api(h.app, 'POST', at(`/apps/${agent.app_id}/publish`), {
          ...as,
          body: { revision: 2, expected_version: 1 },
        }),
      );
      expect(published).toMatchObject({ published_revision: 2, version: 2 });
      const stale = await api(h.app, 'POST', at(`/apps/${agent.app_id}/publish`), {
        ...as,
        body: { revision: 3, expected_version: 1 },
      });
      expect(stale.status).toBe(409);
      expect(stale.body.error.code).toBe('optimistic_conflict');
      const missing = await api(h.app, 'POST', at(`/apps/${agent.app_id}/publish`), {
        ...as,
        body: { revision: 99, expected_version: 2 },
      });
      expect(missing.status).toBe(400);
      expect((await ok(api(h.app, 'GET', at(`/apps/${agent.app_id}`), as))).published_revision).toBe(2);
      const list = await ok(api(h.app, 'GET', at(`/apps/${agent.app_id}/revisions?limit=2`), as));
      expect(list.items.map((r: { revision: number }) => r.revision)).toEqual([3, 2]);
      const rest = await ok(
        api(h.app, 'GET', at(`/apps/${agent.app_id}/revisions?limit=2&cursor=${list.next_cursor}`), as),
      );
      expect(rest.items.map((r: { revision: number }) => r.revision)).toEqual([1]);
      expect(rest.next_cursor).toBeNull();
    });
  });

  describe('secrets', () => {
    it('are write-only: versions rotate, values never come back', async () => {
      const plaintext = `p-${randomBytes(8).toString('hex')}`;
      const created = await ok(
        api(h.app, 'POST', at('/secrets'), {
          ...as,
          body: { name: 'api-key', purpose: 'model_api_key', value: plaintext },
        }),
        201,
      );
      expect(created).toMatchObject({
        name: 'api-key',
        purpose: 'model_api_key',
        version: 1,
        status: 'active',
      });
      expect(created.secret_ref).toMatch(/^sec_/);
      const rotated = await ok(
        api(h.app, 'PUT', at('/secrets/api-key'), { ...as, body: { value: `${plaintext}-2` } }),
      );
      expect(rotated).toMatchObject({ secret_ref: created.secret_ref, version: 2 });
      const list = await ok(api(h.app, 'GET', at('/secrets'), as));
      expect(list.items.find((s: { name: string }) => s.name === 'api-key')).toMatchObject({ version: 2 });
      expect(JSON.stringify([created, rotated, list])).not.toContain(plaintext);
      const versions = await h.sql`
        select version, ciphertext from secret_version where secret_ref = ${created.secret_ref} order by version`;
      expect(versions.map((v) => v.version)).toEqual([1, 2]);
      for (const v of versions) expect(Buffer.from(v.ciphertext).toString('latin1')).not.toContain(plaintext);

      expect(
        (
          await api(h.app, 'POST', at('/secrets'), {
            ...as,
            body: { name: 'api-key', purpose: 'model_api_key', value: 'x' },
          })
        ).status,
      ).toBe(409);
      expect((await api(h.app, 'PUT', at('/secrets/nope'), { ...as, body: { value: 'x' } })).status).toBe(
        404,
      );
      expect(
        (
          await api(h.app, 'POST', at('/secrets'), {
            ...as,
            body: { name: 'empty', purpose: 'model_api_key', value: '' },
          })
        ).status,
      ).toBe(400);
      expect(
        (
          await api(h.app, 'POST', at('/secrets'), {
            ...as,
            body: { name: 'num', purpose: 'tool_credential', value: 42 },
          })
        ).status,
      ).toBe(400);
    });
  });
});
