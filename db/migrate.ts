import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';

const migrationsFolder = fileURLToPath(new URL('./migrations', import.meta.url));

/**
 * Applies every pending migration in db/migrations (generated and hand-written alike, all in
 * Drizzle's journal) over its own single connection, which is closed afterwards. Drizzle runs the
 * pending migrations in one transaction, so a failure leaves the schema unchanged.
 * The connecting identity is the migrator (a superuser, or a member of switchyard_owner); every
 * object is then handed to switchyard_owner (migration 0021's switchyard_claim_ownership), so
 * nothing the application logs in as owns anything.
 */
export async function runMigrations(databaseUrl: string): Promise<void> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await migrate(drizzle({ client: sql }), { migrationsFolder });
    await sql`select public.switchyard_claim_ownership()`;
  } finally {
    await sql.end({ timeout: 5 });
  }
}
