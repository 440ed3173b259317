import { copyFileSync, mkdirSync, mkdtempSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newApp } from '../../api/app';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import {
  type AdminTenant,
  api,
  configurationOf,
  type Json,
  ok,
  setupTenant,
  tenantPath,
} from '../helpers/admin';
import { describeBrowser, launchBrowser, screenshot, serveApp, watchPage } from '../helpers/browser';
import { deadLettersOf, messagesOf, waitForFinished } from '../helpers/delivery';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';
import { telegramTextUpdate } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

// The operator console in a real Chromium against the real stack (PostgreSQL, Temporal, a
// worker; the fake Telegram for a channel that refuses): every page is what an operator sees,
// every action goes through the admin API with the signed-in token.

const DOCS = resolve(import.meta.dirname, '../../docs');

/** A GET with the path sent exactly as given (node:http does not normalise it). */
function rawGet(base: string, path: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((ok, fail) => {
    const req = httpRequest({ host: hostname, port, path, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
      });
      res.on('end', () => ok({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', fail);
    req.end();
  });
}
const UI = 10_000;

describeBrowser('operator console (real browser)', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let server: { url: string; close(): Promise<void> };
  let browser: Browser;
  let a: AdminTenant;
  let b: AdminTenant;
  const contexts: BrowserContext[] = [];
  const problems: string[] = [];

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    // Console uploads are stored by the API and read by the worker: one data dir of the test's own.
    const artifacts = { dataDir: mkdtempSync(join(tmpdir(), 'switchyard-data-')), trustedEndpoints: [] };
    await h.startWorker({ artifacts });
    server = await serveApp(newApp({ ...h.appDeps, artifacts }));
    browser = await launchBrowser();
    [a, b] = await Promise.all([setupTenant(h.app, { telegram }), setupTenant(h.app, { telegram })]);
  });
  afterAll(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await server?.close();
    await h?.close();
    await telegram?.close();
  });

  /** A fresh tab (its own sessionStorage) on /console. */
  async function openConsole(): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(context);
    const page = await context.newPage();
    page.setDefaultTimeout(UI);
    const seen = watchPage(page);
    page.on('close', () => problems.push(...seen));
    await page.goto(`${server.url}/console`);
    return page;
  }

  /** A tenant key signs in alone: the API says whose it is (GET /v1/admin/whoami). */
  async function signIn(page: Page, token: string) {
    await page.getByLabel('Platform token or tenant API key').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByTestId('principal').waitFor();
  }

  const visit = (page: Page, hash: string) => page.goto(`${server.url}/console#${hash}`);

  it('serves the console with a strict CSP, outside the admin API and the OpenAPI document', async () => {
    const res = await fetch(`${server.url}/console`);
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    const html = await res.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/); // no inline script
    expect(html).not.toMatch(/https?:\/\//); // no external asset
    expect((await fetch(`${server.url}/console/vendor/preact.mjs`)).status).toBe(200);
    // Raw paths, as a client that does not normalise `..` sends them (fetch and URL would).
    for (const path of [
      '/console/../package.json',
      '/console/%2e%2e/package.json',
      '/console/..%2fpackage.json',
      '/console/%2e%2e%2f%2e%2e%2fpackage.json',
      '/console/vendor/..%2f..%2fpackage.json',
    ]) {
      const raw = await rawGet(server.url, path);
      expect(raw.status, path).toBe(404);
      expect(raw.body, path).not.toContain('"name": "switchyard"');
    }
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: object };
    expect(Object.keys(doc.paths).some((p) => p.startsWith('/console'))).toBe(false);
  });

  it('platform: tenants, client-side validation, a configuration conflict offers a reload, status with a reason', async () => {
    const page = await openConsole();
    await signIn(page, TEST_ADMIN_TOKEN);
    await page.getByRole('heading', { name: 'Tenants' }).waitFor();
    await page.getByTestId('tenants').waitFor();
    await screenshot(page, '01-tenants');

    // The API's rules, before anything is sent.
    await page.getByLabel('Tenant key').fill('Not a slug!');
    await page.getByLabel('Display name').fill('Console test');
    await page.getByRole('button', { name: 'Create tenant' }).click();
    await page
      .getByText("tenant_key must be 2-64 characters of a-z, 0-9 and '-', starting with a letter")
      .waitFor();
    const key = `console-${Date.now().toString(36)}`;
    await page.getByLabel('Tenant key').fill(key);
    await page.getByRole('button', { name: 'Create tenant' }).click();
    await page.getByText(`· ${key} · version 1`).waitFor();
    const tenantId = page.url().split('#/tenants/')[1]!;

    // Someone else changes the tenant while the form shows version 1.
    const current = await ok(api(h.app, 'GET', tenantPath(tenantId)));
    await ok(api(h.app, 'PUT', tenantPath(tenantId, '/configuration'), { body: configurationOf(current) }));
    const config = page.getByTestId('configuration');
    await config.getByLabel('rate_limit_rpm').fill('-1');
    await config.getByRole('button', { name: /Save configuration/ }).click();
    await config.getByText('rate_limit_rpm must be at least 0').waitFor();
    await config.getByLabel('rate_limit_rpm').fill('120');
    await config.getByRole('button', { name: /Save configuration/ }).click();
    await page.locator('.error[data-code="optimistic_conflict"]').waitFor();
    await screenshot(page, '02-conflict');
    await page.getByRole('button', { name: 'Reload' }).click();
    await page.getByText(`· ${key} · version 2`).waitFor();
    await config.getByLabel('rate_limit_rpm').fill('120');
    await config.getByRole('button', { name: 'Save configuration (v2)' }).click();
    await page.getByText(`· ${key} · version 3`).waitFor();
    expect((await ok(api(h.app, 'GET', tenantPath(tenantId)))).rate_limit_rpm).toBe(120);

    const status = page.getByTestId('tenant-status');
    await status.getByRole('button', { name: 'Change status' }).click();
    await status.getByText('reason must not be blank').waitFor();
    await status.getByLabel('Reason').fill('console test');
    await status.getByRole('button', { name: 'Change status' }).click();
    await page.locator('.tenant-head .badge', { hasText: 'suspended' }).waitFor();
  }, 60_000);

  it('apps: two revisions side by side, publish and roll back', async () => {
    const page = await openConsole();
    await signIn(page, TEST_ADMIN_TOKEN);
    await visit(page, `/tenants/${a.tenantId}/apps/${a.appId}`);
    await page.getByTestId('revisions').waitFor();
    await page.getByRole('button', { name: 'New revision' }).click();
    const form = page.getByTestId('new-revision');
    await form.getByLabel('System prompt').fill('You are brief.');
    await form.getByLabel('max_steps').fill('500');
    await form.getByRole('button', { name: 'Create revision' }).click();
    await form.getByText('max_steps must be at most 100').waitFor();
    await form.getByLabel('max_steps').fill('8');
    await form.getByRole('button', { name: 'Create revision' }).click();
    await page.getByRole('button', { name: 'Publish 2' }).waitFor();
    const diff = page.getByTestId('revision-diff');
    await diff.locator('[data-field="system_prompt"] .badge', { hasText: 'changed' }).waitFor();
    await diff.locator('[data-field="limits"] .badge', { hasText: 'changed' }).waitFor();
    expect(await diff.locator('[data-field="tools"] .badge').count()).toBe(0);
    await screenshot(page, '03-revisions');

    await page.getByRole('button', { name: 'Publish 2' }).click();
    await page.getByTestId('published-revision').getByText('2').waitFor();
    await page.getByRole('button', { name: 'Roll back to 1' }).click();
    await page.getByTestId('published-revision').getByText('1').waitFor();
    const app = await ok(api(h.app, 'GET', tenantPath(a.tenantId, `/apps/${a.appId}`)));
    expect(app.published_revision).toBe(1);
  }, 60_000);

  it('dead letters: a refused Telegram send is parked; retried from the page, it is delivered', async () => {
    const chatId = 74_001;
    telegram.blockChat(chatId);
    const update = telegramTextUpdate({ chatId, text: 'hello' });
    const res = await fetch(`${server.url}${a.webhookPath}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': a.bot.webhookSecret },
      body: JSON.stringify(update),
    });
    expect(res.status).toBe(200);
    const [msg] = await waitForFinished(h, a.tenantId, 1, 30_000);
    expect(msg).toMatchObject({ status: 'failed', failure_reason: 'bot_blocked' });
    telegram.unblockChat(chatId);

    const page = await openConsole();
    await signIn(page, TEST_ADMIN_TOKEN);
    await visit(page, `/tenants/${a.tenantId}/dead-letters`);
    const letter = page.locator(`[data-testid="dead-letters"] article`, { hasText: 'bot_blocked' });
    await letter.waitFor();
    await screenshot(page, '04-dead-letters');
    // Discard needs a reason (checked here, as the API would).
    await letter.getByRole('button', { name: 'Discard' }).click();
    await letter.getByText('reason must not be blank').waitFor();
    await letter.getByLabel(/Reason/).fill('user unblocked the bot');
    await letter.getByRole('button', { name: 'Retry' }).click();
    await page.getByLabel('Status').first().selectOption('');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.locator('[data-testid="dead-letters"] article .badge', { hasText: 'retried' }).waitFor();

    await waitFor(async () => (await messagesOf(h, a.tenantId))[0]?.status === 'replied', {
      timeoutMs: 30_000,
      label: 'the retried message replied',
    });
    expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual(['You said: hello']);
    expect((await deadLettersOf(h, a.tenantId))[0]).toMatchObject({ status: 'retried' });

    await visit(page, `/tenants/${a.tenantId}/messages/${msg!.event_id}`);
    await page.getByTestId('message-life').locator('.badge', { hasText: 'replied' }).first().waitFor();
    await page.getByTestId('segments').getByText('You said: hello').waitFor();
  }, 90_000);

  it('a tenant_viewer key sees no mutating control and no other tenant; a revoked key returns to sign-in', async () => {
    const page = await openConsole();
    await signIn(page, a.viewerKey);
    expect(await page.getByTestId('principal').textContent()).toContain('tenant_viewer');
    const [message] = await messagesOf(h, a.tenantId);
    const pages = [
      ['', 'API keys'],
      ['/apps', 'Model profiles'],
      [`/apps/${a.appId}`, 'Compare revisions'],
      ['/bindings', 'Bindings'],
      ['/messages', 'Received'],
      [`/messages/${message!.event_id}`, 'ExecutionPlan'],
      ['/dead-letters', 'Tool invocations waiting for an operator'],
      ['/audit', 'Audit log'],
      ['/usage', 'Usage by month'],
    ] as const;
    for (const [hash, marker] of pages) {
      await visit(page, `/tenants/${a.tenantId}${hash}`);
      await page.getByText(marker, { exact: true }).first().waitFor();
      await page.waitForLoadState('networkidle');
      expect(
        await page.locator('[data-mutation]').count(),
        `mutating controls on ${hash || 'overview'}`,
      ).toBe(0);
      for (const label of [
        'Retry',
        'Discard',
        'Mint key',
        'Revoke',
        'Create app',
        'New revision',
        'Create binding',
      ]) {
        expect(await page.getByRole('button', { name: label }).count(), `${label} on ${hash}`).toBe(0);
      }
    }
    await page.getByTestId('usage-chart').waitFor();
    await screenshot(page, '05-viewer-usage');

    // Another tenant's page: the API's 404 and nothing of it.
    await visit(page, `/tenants/${b.tenantId}`);
    await page.locator('.error[data-code="not_found"]').waitFor();
    expect(await page.locator('.tabs').count()).toBe(0);
    expect(await page.content()).not.toContain(b.tenantKey);

    // The key is revoked: the next call is a 401 and the console is back at sign-in.
    await ok(api(h.app, 'POST', tenantPath(a.tenantId, `/api-keys/${a.viewerKeyId}/revoke`), { body: {} }));
    await visit(page, `/tenants/${a.tenantId}/audit`);
    await page.getByText('The API refused your key (expired or revoked). Sign in again.').waitFor();
    expect(await page.evaluate("sessionStorage.getItem('switchyard.console.session')")).toBeNull();
  }, 90_000);

  it('first run: "Create a demo agent", chat with it, and the message life in order', async () => {
    const page = await openConsole();
    await signIn(page, TEST_ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Create a demo agent' }).click();
    await page.getByTestId('chat').waitFor({ timeout: 30_000 });
    await page.getByLabel('Message').fill('hello console');
    await page.getByRole('button', { name: 'Send' }).click();
    const reply = page.locator('.bubble.reply', { hasText: 'Hello! Switchyard received: "hello console"' });
    await reply.waitFor({ timeout: 30_000 });
    await screenshot(page, '06-chat');

    await page.locator('.bubble.user').getByRole('link', { name: 'message life' }).click();
    const timeline = page.getByTestId('timeline');
    await page
      .getByTestId('message-life')
      .locator('dd .badge', { hasText: 'replied' })
      .waitFor({ timeout: 30_000 });
    await timeline.locator('li').first().waitFor();
    // The message's life in the order it lived it (api/admin/message-timeline.ts kinds).
    const kinds = await timeline
      .locator('li')
      .evaluateAll((lis) => lis.map((li) => li.getAttribute('data-kind') ?? ''));
    const order = ['received', 'workflow_started', 'commit', 'segment', 'finished'];
    const firsts = kinds.filter((k, i) => order.includes(k) && kinds.indexOf(k) === i);
    expect(firsts).toEqual(order);
    await timeline.locator('li[data-kind="finished"][data-state="replied"]').waitFor();
    // Shown where the API put each entry: received first, finished after the last segment.
    expect(kinds[0]).toBe('received');
    expect(kinds.lastIndexOf('segment')).toBeLessThan(kinds.lastIndexOf('finished'));
    const [first] = await h.sql<{ at: Date }[]>`
      select e.created_at as at from message_event e
      where e.event_id = ${page.url().split('/messages/')[1]!}`;
    const shown = await timeline.locator('li').first().locator('time').getAttribute('datetime');
    expect(Date.parse(shown ?? '')).toBe(first!.at.getTime());
    expect(await page.getByTestId('temporal-link').getAttribute('href')).toContain('http://127.0.0.1:8233');
    await screenshot(page, '07-message-life');

    // The rest of the demo tenant's pages: a second console binding from the form, the message
    // list, the audit chain, usage.
    const tenantId = page.url().split('#/tenants/')[1]!.split('/')[0]!;
    await visit(page, `/tenants/${tenantId}/bindings`);
    const create = page.getByTestId('create-binding');
    await create.getByRole('button', { name: 'Create binding' }).click();
    await page.getByTestId('new-binding').getByRole('link', { name: 'Open its chat preview' }).waitFor();
    await page.locator('[data-testid="bindings"] article').nth(1).waitFor();
    await screenshot(page, '08-bindings');
    await visit(page, `/tenants/${tenantId}/messages`);
    await page.getByTestId('messages').getByText('replied').waitFor();
    await page.getByLabel('Channel').selectOption('telegram');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('No messages match.').waitFor();
    await page.getByLabel('Channel').selectOption('console');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByTestId('messages').getByText('replied').waitFor();
    await screenshot(page, '09-messages');
    await visit(page, `/tenants/${tenantId}/audit`);
    await page.getByRole('button', { name: 'Verify chain' }).click();
    await page.locator('[data-valid="true"]').waitFor();
    await page.getByTestId('audit').getByText('console.message').waitFor();
    await screenshot(page, '10-audit');
    await visit(page, `/tenants/${tenantId}/usage`);
    await page.getByTestId('usage-chart').waitFor();
    await screenshot(page, '11-usage');
  }, 120_000);

  it('a crafted link names nothing outside its tenant; a malformed one does not blank the console', async () => {
    const page = await openConsole();
    await signIn(page, TEST_ADMIN_TOKEN);
    await page.getByTestId('tenants').waitFor();
    await page.waitForLoadState('networkidle');
    const requested: string[] = [];
    page.on('request', (r) => requested.push(new URL(r.url()).pathname));
    const own = `/v1/admin/tenants/${a.tenantId}`;
    for (const hash of [
      `/tenants/${a.tenantId}/chat/..%2F..%2F${b.tenantId}%2Fbindings%2F${b.bindingId}`,
      `/tenants/${a.tenantId}/apps/..%2F..%2F${b.tenantId}`,
      `/tenants/${a.tenantId}/messages/%2e%2e`,
      `/tenants/${a.tenantId}/apps/..`,
      `/tenants/..%2F${b.tenantId}`,
      `/tenants/${a.tenantId}/chat/%E0%A4%A`,
    ]) {
      await visit(page, hash);
      await page.getByText('Not a console address.').waitFor();
      await page.waitForLoadState('networkidle');
      // Still the console: signed in, its header and a way home.
      await page.getByTestId('principal').waitFor();
    }
    const outside = requested.filter((p) => p.startsWith('/v1/') && p !== own && !p.startsWith(`${own}/`));
    expect(outside).toEqual([]);
    expect(await page.content()).not.toContain(b.tenantKey);
  }, 60_000);

  it('chat: a send whose answer was lost is retried as the same message; Enter twice or while composing sends once', async () => {
    const binding = await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, '/bindings'), {
        body: { channel: 'console', app_id: a.appId, activate: true },
      }),
      201,
    );
    const page = await openConsole();
    await signIn(page, TEST_ADMIN_TOKEN);
    const posts: Json[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().includes('/console/messages')) posts.push(r.postDataJSON());
    });
    await visit(page, `/tenants/${a.tenantId}/chat/${binding.binding_id}`);
    await page.getByTestId('chat').waitFor();
    const box = page.getByLabel('Message');
    const recorded = async (text: string) =>
      (
        await h.sql<{ n: number }[]>`
          select count(*)::int as n from message_event
          where tenant_id = ${a.tenantId} and binding_id = ${binding.binding_id} and payload ->> 'text' = ${text}`
      )[0]!.n;

    // Only whitespace: refused here, by the API's rule, and nothing is sent.
    await box.fill('   ');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByText('text must not be blank').waitFor();
    expect(posts).toEqual([]);

    // The first POST reaches the API (recorded), but its 202 never reaches the page.
    let lose = true;
    await page.route('**/console/messages', async (route) => {
      if (route.request().method() !== 'POST' || !lose) return route.fallback();
      lose = false;
      await route.fetch();
      await route.abort('aborted');
    });
    await box.fill('lost answer');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('.error').first().waitFor();
    expect(await recorded('lost answer')).toBe(1);
    expect(await box.inputValue()).toBe('lost answer');
    await page.getByRole('button', { name: 'Send' }).click();
    const lost = page.locator('.bubble.user', { hasText: 'lost answer' });
    await lost.waitFor();
    expect(posts.map((p) => p.client_message_id)).toEqual([
      posts[0]!.client_message_id,
      posts[0]!.client_message_id,
    ]);
    await page.locator('.bubble.reply', { hasText: 'You said: lost answer' }).waitFor({ timeout: 30_000 });
    expect(await recorded('lost answer')).toBe(1);
    // The user's bubble follows its message's status on later polls.
    await lost.and(page.locator('[data-status="replied"]')).waitFor({ timeout: 30_000 });

    // Enter while an IME composes (a candidate being confirmed) sends nothing.
    await box.fill('半');
    // Dispatched in the page (its own KeyboardEvent): `isComposing` cannot be set through a real key.
    const keydowns = (n: number, isComposing: boolean) =>
      page.evaluate(`{
        const el = document.querySelector('textarea[name="text"]');
        for (let i = 0; i < ${n}; i++)
          el.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true, cancelable: true, isComposing: ${isComposing} }));
      }`);
    await keydowns(1, true);
    await page.waitForTimeout(300);
    expect(posts).toHaveLength(2);
    expect(await box.inputValue()).toBe('半');

    // Two Enters in one task (before any re-render): one request, one message.
    await box.fill('twice');
    await keydowns(2, false);
    await page.locator('.bubble.user', { hasText: 'twice' }).waitFor();
    await page.locator('.bubble.reply', { hasText: 'You said: twice' }).waitFor({ timeout: 30_000 });
    expect(posts.filter((p) => p.text === 'twice')).toHaveLength(1);
    expect(await recorded('twice')).toBe(1);
    expect(await page.locator('.bubble.user', { hasText: 'twice' }).count()).toBe(1);
    await screenshot(page, '12-chat-retry');
  }, 90_000);

  it('chat: attach a photo → stored as an artifact, shown in the bubble, and the agent is told about it', async () => {
    const binding = await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, '/bindings'), {
        body: { channel: 'console', app_id: a.appId, activate: true },
      }),
      201,
    );
    const page = await openConsole();
    await signIn(page, TEST_ADMIN_TOKEN);
    await visit(page, `/tenants/${a.tenantId}/chat/${binding.binding_id}`);
    await page.getByTestId('chat').waitFor();
    // A 1×1 PNG.
    const png = Buffer.from(
      '89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
        '1f15c4890000000d49444154789c6300010000050001' +
        '0d0a2db40000000049454e44ae426082',
      'hex',
    );
    await page
      .getByLabel('Attach a photo')
      .setInputFiles({ name: 'dot.png', mimeType: 'image/png', buffer: png });
    await page.getByLabel('Message').fill('my photo');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('.bubble.user').getByTestId('attachment').filter({ hasText: 'dot.png' }).waitFor();
    await page
      .locator('.bubble.reply', {
        hasText: 'You said: my photo [image attached: dot.png, image/png, 0.1 KB]',
      })
      .waitFor({ timeout: 30_000 });
    const rows = await h.sql<{ content_ref: string; size_bytes: number }[]>`
      select a.content_ref, a.size_bytes from artifact a
      join message_event e on e.tenant_id = a.tenant_id and e.event_id = a.event_id
      where a.tenant_id = ${a.tenantId} and e.binding_id = ${binding.binding_id}`;
    expect(rows.map((r) => [r.content_ref.startsWith(`${a.tenantId}/`), Number(r.size_bytes)])).toEqual([
      [true, png.length],
    ]);
    expect(await page.getByLabel('Attach a photo').inputValue()).toBe('');
  }, 60_000);

  it('no page logged an error, violated the CSP or failed a request', async () => {
    for (const c of contexts) for (const p of c.pages()) await p.close();
    expect(problems).toEqual([]);
    // The README's two screenshots, refreshed only when asked (a test run never edits docs/).
    if (!process.env.UPDATE_DOCS_SCREENSHOTS) return;
    mkdirSync(DOCS, { recursive: true });
    for (const [from, to] of [
      ['06-chat', 'console-chat'],
      ['07-message-life', 'console-message-life'],
    ]) {
      copyFileSync(resolve(import.meta.dirname, `.output/${from}.png`), resolve(DOCS, `${to}.png`));
    }
  });
});
