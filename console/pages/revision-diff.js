// Two revisions side by side: prompt, tools, scripted rules, limits and model profile, line by line.

import { sideBySide } from '../lib/diff.js';
import { html } from '../lib/html.js';

const FIELDS = [
  ['system_prompt', 'Prompt', (r) => r.system_prompt],
  ['tools', 'Tools', (r) => JSON.stringify(r.tools, null, 2)],
  ['scripted', 'Scripted rules', (r) => JSON.stringify(r.scripted, null, 2)],
  ['limits', 'Limits', (r) => JSON.stringify(r.limits, null, 2)],
  ['model_profile_id', 'Model profile', (r) => r.model_profile_id],
];

export function RevisionDiff({ left, right }) {
  return html`<div class="diff" data-testid="revision-diff">
    ${FIELDS.map(([key, label, text]) => {
      const rows = sideBySide(text(left) ?? '', text(right) ?? '');
      const changed = rows.some((r) => r.kind !== 'same');
      return html`<div class=${`diff-field${changed ? ' changed' : ''}`} data-field=${key}>
        <h3>${label} ${changed ? html`<span class="badge s-changed">changed</span>` : html`<span class="muted">same</span>`}</h3>
        <table class="diff-table">
          <thead><tr><th>revision ${left.revision}</th><th>revision ${right.revision}</th></tr></thead>
          <tbody>
            ${rows.map(
              (r) =>
                html`<tr class=${`d-${r.kind}`}><td><pre>${r.left}</pre></td><td><pre>${r.right}</pre></td></tr>`,
            )}
          </tbody>
        </table>
      </div>`;
    })}
  </div>`;
}
