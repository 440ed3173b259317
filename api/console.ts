import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join, relative, resolve, sep } from 'node:path';
import type { Hono } from 'hono';
import type { AppEnv } from './deps';

/**
 * The operator console (`/console`): static HTML, CSS and ES modules from `console/`, plus Preact,
 * its hooks and htm served from node_modules, so nothing is built and nothing comes from a CDN.
 * The page talks only to the admin API, with the signed-in token as the bearer, so roles and
 * tenancy are exactly the API's. Not in the OpenAPI document: it is a page, not an API.
 */

/**
 * No inline script or style, no other origin: the console's own modules and the admin API only.
 * `frame-ancestors 'none'` because a console inside someone else's frame could be clickjacked.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

interface Asset {
  type: string;
  body: string;
}

const require = createRequire(import.meta.url);

/**
 * The vendored modules under `/console/vendor/`. The hooks import the bare specifier "preact",
 * which a browser cannot resolve without an import map (that would be an inline script): it is
 * rewritten to the sibling file. A changed dist layout fails here, at startup, not in a browser.
 */
function vendorAssets(): Map<string, Asset> {
  // Entry points, not subpaths: both packages' `exports` hide their dist files.
  const preactDir = resolve(dirname(require.resolve('preact')), '..');
  const read = (p: string) => readFileSync(p, 'utf8').replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n');
  const hooks = read(join(preactDir, 'hooks/dist/hooks.mjs'));
  const rewritten = hooks.replaceAll('from"preact"', 'from"./preact.mjs"');
  if (rewritten === hooks || rewritten.includes('"preact"')) {
    throw new Error('console: preact/hooks no longer imports "preact" as expected');
  }
  const type = TYPES['.mjs']!;
  return new Map([
    ['vendor/preact.mjs', { type, body: read(join(preactDir, 'dist/preact.mjs')) }],
    ['vendor/hooks.mjs', { type, body: rewritten }],
    ['vendor/htm.mjs', { type, body: read(join(dirname(require.resolve('htm')), 'htm.mjs')) }],
  ]);
}

/** Every servable file of `dir`, by its path relative to it: a fixed set, so no path can escape. */
function ownAssets(dir: string): Map<string, Asset> {
  const out = new Map<string, Asset>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else {
        const type = TYPES[extname(name)];
        if (type) out.set(relative(dir, p).split(sep).join('/'), { type, body: readFileSync(p, 'utf8') });
      }
    }
  };
  walk(dir);
  return out;
}

export const CONSOLE_DIR = resolve(import.meta.dirname, '../console');

/** Registers `GET /console` and its assets (read once, here). Outside `/v1/admin`: no admin auth. */
export function registerConsole(app: Hono<AppEnv>, dir = CONSOLE_DIR): void {
  const assets = new Map([...ownAssets(dir), ...vendorAssets()]);
  const index = assets.get('index.html');
  if (!index) throw new Error(`console: no index.html in ${dir}`);
  const headers = (type: string) => ({
    'content-type': type,
    'content-security-policy': CONSOLE_CSP,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    // The token lives in sessionStorage; pages carry none, but nothing here should be cached
    // by a shared proxy across releases either.
    'cache-control': 'no-cache',
  });
  const serve = (a: Asset) => new Response(a.body, { status: 200, headers: headers(a.type) });
  app.get('/console', () => serve(index));
  app.get('/console/', () => serve(index));
  app.get('/console/*', (c, next) => {
    const a = assets.get(c.req.path.slice('/console/'.length));
    return a ? serve(a) : next();
  });
}
