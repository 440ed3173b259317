// Retry (reason optional) or discard (reason required) one open dead letter.
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, tenantPath } from '../lib/api.js';
import { html } from '../lib/html.js';
import { useAction } from '../lib/load.js';
import { optional, REASON } from '../lib/rules.js';

export function DeadLetterActions({ tenantId, deadLetter, onDone }) {
  const form = useForm({ reason: '' });
  const action = useAction();
  const at = (verb) => tenantPath(tenantId, 'dead-letters', deadLetter.dead_letter_id, verb);
  const act = async (kind) => {
    const rule = kind === 'discard' ? REASON : optional(REASON);
    const message = rule(form.values.reason);
    if (!form.validate({ reason: message })) return;
    const reason = form.values.reason.trim();
    const body = reason ? { reason } : {};
    if (await action.run(() => call('POST', at(kind), body))) onDone();
  };
  if (deadLetter.status !== 'open') return null;
  return html`<div class="inline" data-testid="dead-letter-actions">
    <${Field} form=${form} name="reason" label="Reason (required to discard)" />
    <button type="button" data-mutation disabled=${action.busy} onClick=${() => act('retry')}>Retry</button>
    <button type="button" data-mutation class="danger" disabled=${action.busy} onClick=${() => act('discard')}>Discard</button>
    <${ErrorBox} error=${action.error} onReload=${onDone} />
  </div>`;
}
