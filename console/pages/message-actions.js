// A stuck message's operator actions: run its repair now, or end it with a reason.
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, tenantPath } from '../lib/api.js';
import { html } from '../lib/html.js';
import { useAction } from '../lib/load.js';
import { REASON } from '../lib/rules.js';

export function MessageActions({ tenantId, message, onDone }) {
  const form = useForm({ reason: '' });
  const action = useAction();
  if (message.status === 'replied' || message.status === 'failed') return null;
  const at = (verb) => tenantPath(tenantId, 'messages', message.event_id, verb);
  const repair = async () => {
    if (await action.run(() => call('POST', at('repair'), {}))) onDone();
  };
  const fail = async () => {
    if (!form.validate({ reason: REASON(form.values.reason) })) return;
    if (await action.run(() => call('POST', at('fail'), { reason: form.values.reason.trim() }))) onDone();
  };
  return html`<details class="stuck">
    <summary>Stuck? Repair or fail this message</summary>
    <div class="inline">
      <button type="button" data-mutation disabled=${action.busy} onClick=${repair}>Repair now</button>
      <${Field} form=${form} name="reason" label="Reason to fail it" />
      <button type="button" data-mutation class="danger" disabled=${action.busy} onClick=${fail}>Fail message</button>
    </div>
    <${ErrorBox} error=${action.error} />
  </details>`;
}
