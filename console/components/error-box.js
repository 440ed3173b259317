// The API's error envelope, readable: code and status, message, failing fields, other details,
// the request id to quote. An optimistic-lock conflict offers a reload of what the form edits.
import { html } from '../lib/html.js';

export function ErrorBox({ error, onReload }) {
  if (!error) return null;
  const details = error.details;
  const fields = Array.isArray(details?.fields) ? details.fields : null;
  const rest = details && !fields ? details : null;
  return html`<div class="error" role="alert" data-code=${error.code}>
    <p><strong>${error.code}</strong>${error.status ? ` (HTTP ${error.status})` : ''}: ${error.message}</p>
    ${
      error.code === 'optimistic_conflict' &&
      html`<p>
        Someone changed this since it was loaded (version mismatch).
        ${onReload && html` <button type="button" class="reload" onClick=${onReload}>Reload</button>`}
      </p>`
    }
    ${fields && html`<ul>${fields.map((f) => html`<li><code>${f.path || '(body)'}</code>: ${f.message}</li>`)}</ul>`}
    ${rest && html`<pre>${JSON.stringify(rest, null, 2)}</pre>`}
    ${error.requestId && html`<p class="muted">request ${error.requestId}</p>`}
  </div>`;
}
