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
      // ALTER ROLE takes no bound parameters: format() quotes the name and the literal, and the
      // password travels as a bound parameter of the SELECT, never spliced in by us.
      const [row] = await sql<{ stmt: string }[]>`
        select format('ALTER ROLE %I LOGIN PASSWORD %L', ${LOGIN_ROLES[kind]}::text, ${password}::text) as stmt`;
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
  const [row] = await sql<{ name: string; super: boolean; bypass: boolean; owner: boolean }[]>`
    select current_user as name, r.rolsuper as super, r.rolbypassrls as bypass,
           coalesce(pg_has_role(current_user, 'switchyard_owner', 'USAGE'), false) as owner
    from pg_roles r where r.rolname = current_user`;
  if (row && (row.super || row.bypass || row.owner)) {
    const what = row.super ? 'a superuser' : row.bypass ? 'a BYPASSRLS role' : 'a member of switchyard_owner';
    throw new Error(
      `DATABASE_URL logs in as ${row.name}, ${what}: the API and the worker log in as switchyard_api / switchyard_worker (README, "Security model")`,
    );
  }
}
