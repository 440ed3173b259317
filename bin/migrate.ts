// Applies every migration in db/migrations (Drizzle's journal) to DATABASE_URL, over one connection.
import { runMigrations } from '../db/migrate';
import { loadEnvOrExit, requireSettings } from '../runtime/entry';

const env = requireSettings(loadEnvOrExit(), ['DATABASE_URL'], 'for npm run migrate');
await runMigrations(env.DATABASE_URL);
console.log('migrations applied');
