// Applies every migration in db/migrations (Drizzle's journal) over one connection, as the migrating
// identity (MIGRATION_DATABASE_URL, else DATABASE_URL); with SWITCHYARD_API_DB_PASSWORD /
// SWITCHYARD_WORKER_DB_PASSWORD set it also turns on LOGIN for switchyard_api / switchyard_worker.
// With TEMPORAL_ADDRESS set it then registers Switchyard's custom search attributes in
// TEMPORAL_NAMESPACE. Exit 0: everything done (or the server would not say whether they exist: a
// warning); exit 1 after the database part when they are missing and the server refused to
// register them (Temporal Cloud's operator API does): the API and the worker would refuse to start,
// so a deployment pipeline must stop here; the message gives the commands to run.
import { runMigrations } from '../db/migrate';
import { provisionLogins } from '../db/provision';
import { loadEnvOrExit } from '../runtime/entry';
import { registerSearchAttributes, SearchAttributesMissing } from '../runtime/search-attributes';
import { connectClient } from '../runtime/temporal';

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

if (env.TEMPORAL_ADDRESS) {
  const client = await connectClient(env, env.TEMPORAL_ADDRESS);
  try {
    const result = await registerSearchAttributes(client.connection, env.TEMPORAL_NAMESPACE).catch(
      (err: unknown) => {
        if (!(err instanceof SearchAttributesMissing)) throw err;
        return { outcome: 'refused' as const, message: err.message };
      },
    );
    switch (result.outcome) {
      case 'present':
        console.log(`search attributes present in Temporal namespace ${env.TEMPORAL_NAMESPACE}`);
        break;
      case 'registered':
        console.log(`search attributes registered in ${env.TEMPORAL_NAMESPACE}: ${result.names.join(', ')}`);
        break;
      case 'unknown':
        console.warn(`warning: ${result.message}`);
        break;
      case 'refused':
        console.error(result.message);
        process.exitCode = 1;
        break;
      default: {
        const never: never = result;
        throw new Error(`unexpected outcome ${String(never)}`);
      }
    }
  } finally {
    await client.connection.close();
  }
}
