// Small shared pieces: JSON blocks, timestamps, status badges, "load more" lists.
import { html } from '../lib/html.js';

export const Json = ({ value }) => html`<pre class="json">${JSON.stringify(value, null, 2)}</pre>`;

export const when = (iso) => (iso ? new Date(iso).toLocaleString() : '–');

/** Date and time to the millisecond: steps of one message are often milliseconds apart. */
export const precise = (iso) =>
  iso
    ? `${new Date(iso).toLocaleDateString()} ${new Date(iso).toLocaleTimeString([], { hour12: false, fractionalSecondDigits: 3 })}`
    : '–';

export const Badge = ({ status }) => html`<span class=${`badge s-${status}`}>${status}</span>`;

export const Loading = () => html`<p class="muted">Loading…</p>`;

export function Section({ title, children, actions }) {
  return html`<section class="card">
    <header><h2>${title}</h2>${actions}</header>
    ${children}
  </section>`;
}
