import { defineConfig } from 'drizzle-kit';

// drizzle-kit loads this file itself, outside the app's config module, so it is the one place
// besides config/ that reads process.env. `generate` needs no database; `migrate` does.
export default defineConfig({
  dialect: 'postgresql',
  schema: './db/schema/index.ts',
  out: './db/migrations',
  dbCredentials: { url: process.env.DATABASE_URL ?? '' },
  strict: true,
  verbose: true,
});
