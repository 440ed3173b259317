import { OpenAPIHono } from '@hono/zod-openapi';
import type { AppDeps, AppEnv } from '../deps';
import { registerApiKeyRoutes } from './api-keys';
import { registerAppRevisionRoutes } from './app-revisions';
import { registerAppRoutes } from './apps';
import { registerAuditRoutes } from './audit';
import { adminAuth } from './auth';
import { registerBackendProfileRoutes } from './backend-profiles';
import { registerBindingRoutes } from './bindings';
import { registerConsoleRoutes } from './console';
import { registerDeadLetterRetryRoutes } from './dead-letter-retry';
import { registerDeadLetterRoutes } from './dead-letters';
import type { AdminEnv } from './env';
import { onAdminError } from './errors';
import { registerMessageActionRoutes } from './message-actions';
import { registerMessageTimelineRoutes } from './message-timeline';
import { registerMessageRoutes } from './messages';
import { registerModelProfileRoutes } from './model-profiles';
import { registerSecretRoutes } from './secrets';
import { registerTenantRoutes } from './tenants';
import { registerToolDecisionRoutes } from './tool-decisions';
import { registerToolInvocationRoutes } from './tool-invocations';
import { adminSpan } from './tracing';
import { registerUsageRoutes } from './usage';
import { registerWhoamiRoutes } from './whoami';

/**
 * The admin API (/v1/admin): one sub-app so that its principal is typed in the context and its
 * error handler also maps the framework's JSON/media-type exceptions. It has no defaultHook of
 * its own: validation failures use the app's one hook (resolved through the parent).
 */
export function registerAdminRoutes(app: OpenAPIHono<AppEnv>, deps: AppDeps): void {
  const admin = new OpenAPIHono<AdminEnv>();
  admin.onError(onAdminError(deps));
  admin.use('/v1/admin/*', adminSpan());
  admin.use('/v1/admin/*', adminAuth(deps));
  admin.openAPIRegistry.registerComponent('securitySchemes', 'bearerAuth', {
    type: 'http',
    scheme: 'bearer',
    description: 'The platform token (SWITCHYARD_ADMIN_TOKEN) or a tenant API key (sy_…).',
  });

  registerWhoamiRoutes(admin);
  registerTenantRoutes(admin, deps);
  registerApiKeyRoutes(admin, deps);
  registerSecretRoutes(admin, deps);
  registerModelProfileRoutes(admin, deps);
  registerBackendProfileRoutes(admin, deps);
  registerAppRoutes(admin, deps);
  registerAppRevisionRoutes(admin, deps);
  registerBindingRoutes(admin, deps);
  registerConsoleRoutes(admin, deps);
  registerMessageRoutes(admin, deps);
  registerMessageActionRoutes(admin, deps);
  registerMessageTimelineRoutes(admin, deps);
  registerToolInvocationRoutes(admin, deps);
  registerToolDecisionRoutes(admin, deps);
  registerDeadLetterRoutes(admin, deps);
  registerDeadLetterRetryRoutes(admin, deps);
  registerAuditRoutes(admin, deps);
  registerUsageRoutes(admin, deps);

  app.route('/', admin);
}
