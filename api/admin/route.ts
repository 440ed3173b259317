import { createRoute, type RouteConfig } from '@hono/zod-openapi';
import { type ErrorResponses, type ErrorStatus, errorResponses } from './schemas';

// How an admin route is declared. Every /v1/admin route is behind adminAuth (api/admin/auth.ts),
// so each documents the bearer scheme and 401; the rest of its error statuses is the route's own.

const BEARER = [{ bearerAuth: [] }];

type AdminRouteConfig<P extends string> = Omit<RouteConfig, 'path' | 'security'> & {
  path: P;
  /** The route's error statuses besides 401 and those of every route (schemas.ts EVERY_ROUTE). */
  errors?: readonly ErrorStatus[];
};

type ErrorsOf<R> = R extends { errors: readonly (infer S extends ErrorStatus)[] } ? S : never;

/**
 * What adminRoute makes of a config: the config without `errors`, with the security and the error
 * responses filled in, typed like createRoute's result (less its getRoutingPath, which nothing here
 * uses), so that a handler's `c.json(…, status)` and `c.req.valid(…)` are checked as before.
 */
export type AdminRoute<R extends AdminRouteConfig<string>> = Omit<R, 'errors' | 'responses'> & {
  security: typeof BEARER;
  responses: ErrorResponses<401 | ErrorsOf<R>> & R['responses'];
};

/**
 * createRoute for the admin API: bearer security (adminAuth guards every route), and the error
 * responses of 401, of `errors` and of every route (schemas.ts EVERY_ROUTE), under the route's own
 * responses (a status the route describes itself keeps its description).
 */
export function adminRoute<P extends string, R extends AdminRouteConfig<P>>(config: R): AdminRoute<R>;
// Callers see the signature above; this body works on the widened config and returns `unknown`, so
// its result is not checked against AdminRoute<R>: the overload is a cast, which the OpenAPI
// document (unchanged by this builder) and the handlers' type checks stand behind.
export function adminRoute(config: AdminRouteConfig<string>): unknown {
  const { method, path, tags, errors = [], responses, ...rest } = config;
  // Security where the routes used to write it (after tags): the published document keeps its bytes.
  return createRoute({
    method,
    path,
    tags,
    security: BEARER,
    ...rest,
    responses: { ...errorResponses(401, ...errors), ...responses },
  });
}
