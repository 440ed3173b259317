import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';

const migrationsFolder = fileURLToPath(new URL('./migrations', import.meta.url));

/**
 * Applies every pending migration in db/migrations (generated and hand-written alike, all in
 * Drizzle's journal) over its own single connection, which is closed afterwards. Drizzle runs the
 * pending migrations in one transaction, so a failure leaves the schema unchanged.
 * The connecting user becomes the owner of the schema objects and of the SECURITY DEFINER functions.
 */
export async function runMigrations(databaseUrl: string): Promise<void> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await migrate(drizzle({ client: sql }), { migrationsFolder });
  } finally {
    await sql.end({ timeout: 5 });
  }
}
