import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateMasterKey } from '../lib/secret-box';

/**
 * The embedded default generates its master key, platform admin token and the passwords of its
 * database logins once, under the data dir
 * with 0600 permissions, and reuses them on later starts. Environment values always win.
 */
export function localSecret(
  dataDir: string,
  name: 'master.key' | 'admin-token' | 'db-api-password' | 'db-worker-password',
  fromEnv: string | undefined,
): { value: string; path: string | null } {
  if (fromEnv) return { value: fromEnv, path: null };
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, name);
  if (!existsSync(path)) {
    const value =
      name === 'master.key'
        ? generateMasterKey()
        : name === 'admin-token'
          ? `sy_admin_${randomBytes(24).toString('base64url')}`
          : randomBytes(24).toString('base64url');
    writeFileSync(path, `${value}\n`, { mode: 0o600 });
  }
  return { value: readFileSync(path, 'utf8').trim(), path };
}
