import { z } from '@hono/zod-openapi';
import { sumUsage } from '../../db/queries/admin/usage';
import type { AppDeps } from '../deps';
import { requireTenant, tenantTx } from './context';
import type { AdminApp } from './env';
import { adminRoute } from './route';
import { jsonResponse, TenantParams } from './schemas';

const UsageSchema = z
  .object({
    month: z.string(),
    tokens_in: z.number(),
    tokens_out: z.number(),
    cost_minor: z.number(),
    currency: z.string().nullable(),
  })
  .openapi('Usage');

const route = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/usage',
  tags: ['usage'],
  summary: "A calendar month's (UTC) usage, summed from immutable usage events",
  request: {
    params: TenantParams,
    query: z.object({
      month: z
        .string()
        .regex(/^\d{4}-(0[1-9]|1[0-2])$/, 'month must be YYYY-MM')
        .optional()
        .openapi({
          param: { name: 'month', in: 'query' },
          example: '2025-01',
          description: 'Default: this month',
        }),
    }),
  },
  errors: [400, 404],
  responses: { 200: jsonResponse(UsageSchema, 'Totals (zeros when none)') },
});

/** [first instant of the month, first instant of the next), as UTC ISO strings. */
function monthRange(month: string): { from: string; to: string } {
  const [y, m] = month.split('-').map(Number) as [number, number];
  return {
    from: new Date(Date.UTC(y, m - 1, 1)).toISOString(),
    to: new Date(Date.UTC(y, m, 1)).toISOString(),
  };
}

export function registerUsageRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(route, async (c) => {
    const month = c.req.valid('query').month ?? new Date(deps.now()).toISOString().slice(0, 7);
    const { tenant, totals } = await tenantTx(c, deps, async (tx, tenantId) => ({
      tenant: await requireTenant(tx, tenantId),
      totals: await sumUsage(tx, { tenantId, ...monthRange(month) }),
    }));
    return c.json({ month, ...totals, currency: tenant.billing_currency }, 200);
  });
}
