// Usage by month: the last six months' tokens as an inline SVG bar chart, and cost per month.
import { Loading, Section } from '../components/bits.js';
import { ErrorBox } from '../components/error-box.js';
import { call, qs, tenantPath } from '../lib/api.js';
import { html } from '../lib/html.js';
import { useLoad } from '../lib/load.js';

const MONTHS = 6;

function lastMonths(n) {
  const now = new Date();
  return Array.from({ length: n }, (_, i) => {
    const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - (n - 1 - i), 1));
    return `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
  });
}

const money = (minor, currency) =>
  currency ? `${(minor / 100).toFixed(2)} ${currency}` : `${minor} (minor units)`;

function Chart({ rows }) {
  const w = 560;
  const h = 200;
  const pad = 28;
  const max = Math.max(1, ...rows.map((r) => r.tokens_in + r.tokens_out));
  const slot = (w - pad) / rows.length;
  const bar = slot * 0.6;
  const y = (v) => h - pad - (v / max) * (h - 2 * pad);
  return html`<svg class="chart" viewBox=${`0 0 ${w} ${h}`} role="img" aria-label="Tokens by month" data-testid="usage-chart">
    <line x1=${pad} y1=${h - pad} x2=${w} y2=${h - pad} class="axis" />
    ${rows.map((r, i) => {
      const x = pad + i * slot + (slot - bar) / 2;
      const total = r.tokens_in + r.tokens_out;
      return html`<g>
        <rect class="in" x=${x} y=${y(r.tokens_in)} width=${bar} height=${h - pad - y(r.tokens_in)}><title>${r.tokens_in} in</title></rect>
        <rect class="out" x=${x} y=${y(total)} width=${bar} height=${y(r.tokens_in) - y(total)}><title>${r.tokens_out} out</title></rect>
        <text x=${x + bar / 2} y=${h - pad + 16} text-anchor="middle">${r.month}</text>
        <text x=${x + bar / 2} y=${y(total) - 4} text-anchor="middle" class="value">${total}</text>
      </g>`;
    })}
  </svg>`;
}

export function Usage({ tenantId }) {
  const data = useLoad(
    () =>
      Promise.all(
        lastMonths(MONTHS).map((month) => call('GET', `${tenantPath(tenantId, 'usage')}${qs({ month })}`)),
      ),
    [tenantId],
  );
  if (data.error) return html`<${ErrorBox} error=${data.error} />`;
  if (!data.data) return html`<${Loading} />`;
  return html`<${Section} title="Usage by month">
    <${Chart} rows=${data.data} />
    <p class="legend"><span class="key in"></span> tokens in <span class="key out"></span> tokens out</p>
    <table class="list" data-testid="usage">
      <thead><tr><th>Month</th><th>Tokens in</th><th>Tokens out</th><th>Cost</th></tr></thead>
      <tbody>
        ${data.data.map((r) => html`<tr><td>${r.month}</td><td>${r.tokens_in}</td><td>${r.tokens_out}</td><td>${money(r.cost_minor, r.currency)}</td></tr>`)}
      </tbody>
    </table>
  </${Section}>`;
}
