import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { serve } from '@hono/node-server';
import { type Browser, chromium, type Page } from 'playwright-core';
import { describe } from 'vitest';

// Real-browser tests: Playwright (playwright-core, which downloads nothing) drives the system's
// Chromium (Debian's `chromium`, installed by .ci/run). Without one they are skipped loudly; in CI
// (CI set) a missing Chromium is a failure, never a silent skip.

/** The Chromium on PATH (or CHROMIUM_PATH), or null. */
export function findChromium(): string | null {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH;
  for (const name of ['chromium', 'chromium-browser']) {
    try {
      const path = execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();
      if (path) return path;
    } catch {
      // not this name
    }
  }
  return null;
}

/** `describe` when a Chromium exists; else `describe.skip` with a warning (or an error in CI). */
export function describeBrowser(name: string, fn: () => void): void {
  const path = findChromium();
  if (path) {
    describe(name, fn);
    return;
  }
  if (process.env.CI) {
    throw new Error(
      `${name}: no Chromium on PATH. CI must install it (.ci/run: apt-get install chromium); refusing to skip.`,
    );
  }
  console.warn(
    `\n!!! SKIPPED ${name}: no 'chromium' on PATH. Install it (apt-get install chromium) to run the browser tests.\n`,
  );
  describe.skip(name, fn);
}

export async function launchBrowser(): Promise<Browser> {
  const executablePath = findChromium();
  if (!executablePath) throw new Error('no Chromium');
  // --no-sandbox: tests and CI run as root, where Chromium's sandbox refuses to start.
  return chromium.launch({ executablePath, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
}

/** Serves `app` (newApp's fetch) on a real 127.0.0.1 port, so the browser reaches it over HTTP. */
export async function serveApp(app: {
  fetch: (req: Request) => Response | Promise<Response>;
}): Promise<{ url: string; close(): Promise<void> }> {
  const server = await new Promise<ReturnType<typeof serve>>((ok) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => ok(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((ok) => {
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => ok());
      }),
  };
}

export const BROWSER_OUTPUT = resolve(import.meta.dirname, '../browser/.output');

/** A full-page screenshot at `tests/browser/.output/<name>.png` (gitignored). */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(BROWSER_OUTPUT, { recursive: true });
  const path = join(BROWSER_OUTPUT, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/**
 * Collects what would make a page silently broken: uncaught errors, console errors (a CSP
 * violation is one) and failed requests. Tests assert it stays empty.
 */
export function watchPage(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const text = msg.text();
    const url = msg.location().url;
    // The admin API's own 4xx answers (a 404 the page shows, a refused key) are expected; a 4xx
    // for anything else (a missing module or stylesheet of the console) is a broken page.
    if (
      /Failed to load resource: the server responded with a status of 4\d\d/.test(text) &&
      new URL(url || '/', 'http://x').pathname.startsWith('/v1/admin/')
    )
      return;
    problems.push(`console: ${text}${url ? ` (${url})` : ''}`);
  });
  page.on('requestfailed', (req) => {
    // A poll aborted by navigating away is not a failure of the page.
    if (req.failure()?.errorText === 'net::ERR_ABORTED') return;
    problems.push(`requestfailed: ${req.url()} ${req.failure()?.errorText}`);
  });
  return problems;
}
