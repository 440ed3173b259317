import { type LoginKind, loginUrl } from '../../db/provision';
import { auditKeyFrom } from '../../lib/audit-key';

// The suite's login passwords for switchyard_api / switchyard_worker (set by tests/setup/global.ts
// on the suite's cluster, and by tests that start a private one). Test-only values.
export const TEST_LOGIN_PASSWORDS: Record<LoginKind, string> = {
  api: 'test-login-api-0123456789',
  worker: 'test-login-worker-0123456789',
};

/** The suite's master key (the same one tests/helpers/harness.ts uses). */
export const SUITE_MASTER_KEY = Buffer.alloc(32, 7).toString('base64');
export const SUITE_AUDIT_KEY = auditKeyFrom(SUITE_MASTER_KEY);

/** `superUrl` (the suite's superuser URL) as the API's or the worker's own login. */
export function testLoginUrl(superUrl: string, kind: LoginKind): string {
  return loginUrl(superUrl, kind, TEST_LOGIN_PASSWORDS[kind]);
}
