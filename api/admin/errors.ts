import type { ErrorHandler } from 'hono';
import postgres from 'postgres';
import type { AppDeps } from '../deps';
import { ApiError, errorResponse, frameworkErrorResponse } from '../errors';
import type { AdminEnv } from './env';

/** A 400 naming the failing fields; messages describe the rule, never the submitted value. */
export function fieldError(path: string, message: string): ApiError {
  return new ApiError('validation_failed', 'The request is invalid.', { fields: [{ path, message }] });
}

// Expected constraint violations, mapped deliberately. PostgreSQL's `detail` (which quotes the
// offending values) is never echoed; only the constraint name, which is part of the schema.
const UNIQUE_MESSAGES: Readonly<Record<string, string>> = {
  tenant_tenant_key_unique: 'A tenant with this tenant_key already exists.',
  secret_tenant_name_unique: 'A secret with this name already exists in the tenant.',
  model_profile_tenant_profile_key_unique: 'A model profile with this profile_key already exists.',
  backend_profile_tenant_profile_key_unique: 'A backend profile with this profile_key already exists.',
  agent_app_tenant_app_key_unique: 'An app with this app_key already exists.',
  channel_binding_active_account_unique:
    'Another active binding already serves this channel and provider account.',
};

/** Maps the PostgreSQL errors a well-formed request can still cause; anything else stays a 500. */
export function mapDbError(err: unknown): unknown {
  if (!(err instanceof postgres.PostgresError)) return err;
  const constraint = err.constraint_name || undefined;
  const details = constraint ? { constraint } : undefined;
  switch (err.code) {
    case '23505':
      return new ApiError(
        'conflict',
        (constraint && UNIQUE_MESSAGES[constraint]) ?? 'The object conflicts with an existing one.',
        details,
      );
    case '23503':
      return new ApiError('validation_failed', 'A referenced object does not exist in this tenant.', details);
    case '23514':
    case '23502':
      return new ApiError('validation_failed', 'A value violates a constraint of the data model.', details);
    case '22P02':
    case '22003':
    case '22007':
    case '22008':
      return new ApiError('validation_failed', 'A value is malformed or out of range.');
    case '40001':
    case '40P01':
      return new ApiError('conflict', 'A concurrent change interfered; retry the request.');
    default:
      return err;
  }
}

/**
 * The admin sub-app's error handler: the app-wide envelope, plus the framework's own HTTP
 * exceptions (malformed JSON, unsupported media type) mapped to their codes instead of 500.
 */
export function onAdminError(deps: AppDeps): ErrorHandler<AdminEnv> {
  return (raw, c) => {
    const err = mapDbError(raw);
    if (err instanceof ApiError) return errorResponse(c, err.code, err.message, err.details);
    const framework = frameworkErrorResponse(c, err);
    if (framework) return framework;
    const e = err as Error;
    // Name and message only: no request body, no PostgreSQL detail (which may quote values).
    deps.log.error(
      { err: { name: e.name, message: e.message }, requestId: c.get('requestId') },
      'admin error',
    );
    return errorResponse(c, 'internal', 'Internal error.');
  };
}
