// An operator's decision on a tool invocation: resolve a `manual` one (accepted with the provider's
// receipt, or rejected), or approve / deny one `awaiting_approval`. Both need a reason.
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, tenantPath } from '../lib/api.js';
import { html } from '../lib/html.js';
import { useAction } from '../lib/load.js';
import { json, REASON } from '../lib/rules.js';

export function ToolDecision({ tenantId, invocation, onDone }) {
  const approval = invocation.status === 'awaiting_approval';
  const form = useForm(
    { outcome: 'accepted', reason: '', provider_receipt: '' },
    { reason: REASON, provider_receipt: json('provider_receipt', 'object', { optional: true }) },
  );
  const action = useAction();
  const at = (verb) => tenantPath(tenantId, 'tool-invocations', invocation.invocation_id, verb);
  const send = async (path, body) => {
    if (!form.validate()) return;
    if (await action.run(() => call('POST', at(path), body))) onDone();
  };
  const reason = form.values.reason.trim();
  if (approval) {
    return html`<div class="inline">
      <${Field} form=${form} name="reason" label="Reason" />
      <button type="button" data-mutation onClick=${() => send('approval', { decision: 'approve', reason })}>Approve</button>
      <button type="button" data-mutation class="danger" onClick=${() => send('approval', { decision: 'deny', reason })}>Deny</button>
      <${ErrorBox} error=${action.error} onReload=${onDone} />
    </div>`;
  }
  const resolve = () => {
    const receipt = form.values.provider_receipt.trim();
    void send('resolution', {
      outcome: form.values.outcome,
      reason,
      ...(receipt && form.values.outcome === 'accepted' ? { provider_receipt: JSON.parse(receipt) } : {}),
    });
  };
  return html`<div class="inline">
    <${Field} form=${form} name="outcome" label="Outcome" as="select" options=${['accepted', 'rejected']} />
    <${Field} form=${form} name="reason" label="Reason" />
    <${Field} form=${form} name="provider_receipt" label="Provider receipt (JSON, if accepted)" />
    <button type="button" data-mutation disabled=${action.busy} onClick=${resolve}>Resolve</button>
    <${ErrorBox} error=${action.error} onReload=${onDone} />
  </div>`;
}
