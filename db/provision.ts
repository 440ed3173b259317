import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import postgres from 'postgres';

// The login roles of migration 0021 are created NOLOGIN without a password; provisioning turns on
// LOGIN with one. The embedded default does it on every start (passwords generated into the data
// dir); a deployment does it once as a superuser/CREATEROLE identity (npm run migrate with the
// password variables set), or its DBA does.

export const LOGIN_ROLES = { api: 'switchyard_api', worker: 'switchyard_worker' } as const;
export type LoginKind = keyof typeof LOGIN_ROLES;

/** Sets LOGIN and the password of each given login role, over its own connection. */
export async function provisionLogins(
  adminUrl: string,
  passwords: Partial<Record<LoginKind, string>>,
): Promise<void> {
  const sql = postgres(adminUrl, { max: 1, onnotice: () => undefined });
  try {
    for (const [kind, password] of Object.entries(passwords) as [LoginKind, string | undefined][]) {
      if (!password) continue;
      // ALTER ROLE takes no bound parameters: format() quotes the name and the literal. What is
      // sent is a SCRAM-SHA-256 verifier, never the password, so a statement log or
      // pg_stat_statements holds nothing a client could log in with.
      const [row] = await sql<{ stmt: string }[]>`
        select format('ALTER ROLE %I LOGIN PASSWORD %L', ${LOGIN_ROLES[kind]}::text,
                      ${scramVerifier(password)}::text) as stmt`;
      await sql.unsafe(row!.stmt);
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** `url` with its user and password replaced by a login role's. */
export function loginUrl(url: string, kind: LoginKind, password: string): string {
  const u = new URL(url);
  u.username = LOGIN_ROLES[kind];
  u.password = password;
  return u.toString();
}

/**
 * Refuses to run the API or the worker as a role that could step around the database's checks:
 * a superuser, a BYPASSRLS role, or a member of the schema owner.
 */
export async function assertRuntimeLogin(sql: postgres.Sql): Promise<void> {
  // MEMBER, not USAGE: a membership without INHERIT still lets the login SET ROLE to it.
  const [row] = await sql<
    { name: string; super: boolean; bypass: boolean; createrole: boolean; definer: string | null }[]
  >`
    select current_user as name, r.rolsuper as super, r.rolbypassrls as bypass,
           r.rolcreaterole as createrole,
           (select d.rolname from pg_roles d
            where d.rolname in ('switchyard_owner', 'switchyard_lookup', 'switchyard_janitor')
              and pg_has_role(current_user, d.oid, 'MEMBER') limit 1) as definer
    from pg_roles r where r.rolname = current_user`;
  if (row && (row.super || row.bypass || row.createrole || row.definer)) {
    const what = row.super
      ? 'a superuser'
      : row.bypass
        ? 'a BYPASSRLS role'
        : row.createrole
          ? 'a CREATEROLE role'
          : `a member of ${row.definer}`;
    throw new Error(
      `DATABASE_URL logs in as ${row.name}, ${what}: the API and the worker log in as switchyard_api / switchyard_worker (README, "Security model")`,
    );
  }
}

/** The SCRAM-SHA-256 verifier PostgreSQL stores for `password` (RFC 5802/7677, as libpq's PQencryptPasswordConn). */
export function scramVerifier(password: string, iterations = 4096): string {
  const salt = randomBytes(16);
  const salted = pbkdf2Sync(Buffer.from(password.normalize('NFKC'), 'utf8'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}
