// The platform's two tenant mutations: the full configuration snapshot and a status transition,
// each sent with the version it was loaded at (a 409 optimistic_conflict offers a reload).
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, tenantPath } from '../lib/api.js';
import { html } from '../lib/html.js';
import { useAction } from '../lib/load.js';
import { intOrNull, REASON, TENANT_RULES } from '../lib/rules.js';

const str = (v) => (v === null || v === undefined ? '' : String(v));
const NULLABLE = [
  'rate_limit_rpm',
  'max_concurrent_executions',
  'monthly_token_budget',
  'monthly_spend_limit_minor',
];

export function TenantConfiguration({ tenant, onSaved }) {
  const form = useForm(
    {
      display_name: tenant.display_name,
      ...Object.fromEntries(NULLABLE.map((k) => [k, str(tenant[k])])),
      billing_currency: str(tenant.billing_currency),
      audit_retention_days: str(tenant.audit_retention_days),
      log_masking_level: tenant.log_masking_level,
      trace_sampling_rate: str(tenant.trace_sampling_rate),
      default_agent_app_id: str(tenant.default_agent_app_id),
      default_backend_profile_id: str(tenant.default_backend_profile_id),
    },
    TENANT_RULES,
  );
  const action = useAction();
  const v = form.values;
  const submit = async (e) => {
    e.preventDefault();
    const spend = v.monthly_spend_limit_minor.trim() !== '' && v.billing_currency.trim() === '';
    if (
      !form.validate(
        spend
          ? { billing_currency: 'billing_currency is required when monthly_spend_limit_minor is set' }
          : {},
      )
    )
      return;
    const saved = await action.run(() =>
      call('PUT', tenantPath(tenant.tenant_id, 'configuration'), {
        expected_version: tenant.version,
        display_name: v.display_name.trim(),
        ...Object.fromEntries(NULLABLE.map((k) => [k, intOrNull(v[k])])),
        billing_currency: v.billing_currency.trim() || null,
        audit_retention_days: Number(v.audit_retention_days),
        log_masking_level: v.log_masking_level,
        trace_sampling_rate: Number(v.trace_sampling_rate),
        default_agent_app_id: v.default_agent_app_id.trim() || null,
        default_backend_profile_id: v.default_backend_profile_id.trim() || null,
      }),
    );
    if (saved) onSaved();
  };
  return html`<form class="cols" onSubmit=${submit} data-testid="configuration">
    <${Field} form=${form} name="display_name" label="Display name" />
    ${NULLABLE.map((k) => html`<${Field} form=${form} name=${k} hint="empty: unlimited" />`)}
    <${Field} form=${form} name="billing_currency" hint="ISO 4217, e.g. EUR" />
    <${Field} form=${form} name="audit_retention_days" />
    <${Field} form=${form} name="log_masking_level" as="select" options=${['none', 'basic', 'strict']} />
    <${Field} form=${form} name="trace_sampling_rate" hint="0 to 1" />
    <${Field} form=${form} name="default_agent_app_id" />
    <${Field} form=${form} name="default_backend_profile_id" />
    <div class="actions">
      <button type="submit" data-mutation disabled=${action.busy}>Save configuration (v${tenant.version})</button>
    </div>
    <${ErrorBox} error=${action.error} onReload=${onSaved} />
  </form>`;
}

const NEXT = { active: ['suspended', 'disabled'], suspended: ['active', 'disabled'], disabled: [] };

export function TenantStatus({ tenant, onSaved }) {
  const options = NEXT[tenant.status] ?? [];
  const form = useForm({ next_status: options[0] ?? '', reason: '' }, { reason: REASON });
  const action = useAction();
  if (options.length === 0) return html`<p>The tenant is ${tenant.status}: that is final.</p>`;
  const submit = async (e) => {
    e.preventDefault();
    if (!form.validate()) return;
    const saved = await action.run(() =>
      call('POST', tenantPath(tenant.tenant_id, 'status-transitions'), {
        expected_version: tenant.version,
        next_status: form.values.next_status,
        reason: form.values.reason.trim(),
      }),
    );
    if (saved) onSaved();
  };
  return html`<form class="inline" onSubmit=${submit} data-testid="tenant-status">
    <${Field} form=${form} name="next_status" label="Next status" as="select" options=${options} />
    <${Field} form=${form} name="reason" label="Reason" />
    <button type="submit" data-mutation disabled=${action.busy}>Change status</button>
    ${form.values.next_status === 'disabled' && html`<p class="warn">Disabled is terminal.</p>`}
    <${ErrorBox} error=${action.error} onReload=${onSaved} />
  </form>`;
}
