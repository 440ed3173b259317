// Applies every migration in db/migrations (Drizzle's journal) over one connection, as the migrating
// identity (MIGRATION_DATABASE_URL, else DATABASE_URL); with SWITCHYARD_API_DB_PASSWORD /
// SWITCHYARD_WORKER_DB_PASSWORD set it also turns on LOGIN for switchyard_api / switchyard_worker.
import { runMigrations } from '../db/migrate';
import { provisionLogins } from '../db/provision';
import { loadEnvOrExit } from '../runtime/entry';

const env = loadEnvOrExit();
const url = env.MIGRATION_DATABASE_URL ?? env.DATABASE_URL;
if (!url) {
  console.error(
    'Invalid configuration:\n  MIGRATION_DATABASE_URL: required for npm run migrate (or DATABASE_URL)',
  );
  process.exit(2);
}
await runMigrations(url);
await provisionLogins(url, {
  api: env.SWITCHYARD_API_DB_PASSWORD,
  worker: env.SWITCHYARD_WORKER_DB_PASSWORD,
});
console.log('migrations applied');
