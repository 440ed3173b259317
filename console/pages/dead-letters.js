// The operator's queue: dead letters (retry / discard with a reason) and tool invocations that
// wait for an operator (a manual outcome to resolve, an approval to give or deny).
import { Badge, Json, Section, when } from '../components/bits.js';
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, qs, tenantPath } from '../lib/api.js';
import { html, useState } from '../lib/html.js';
import { usePaged } from '../lib/load.js';
import { tenantHref } from '../lib/route.js';
import { canWrite } from '../lib/session.js';
import { DeadLetterActions } from './dead-letter-actions.js';
import { ToolDecision } from './tool-decision.js';

export function DeadLetterList({ tenantId, items, writable, onDone }) {
  return html`<div class="dead-letters" data-testid="dead-letters">
    ${items.map(
      (d) => html`<article class="dead-letter" data-dead-letter=${d.dead_letter_id}>
        <h3>${d.reason_class} <${Badge} status=${d.status} /> <small class="muted">${d.kind}</small></h3>
        <p class="muted">
          ${d.dead_letter_id} · message <a href=${tenantHref(tenantId, `/messages/${d.event_id}`)}>${d.event_id}</a>
          · ${when(d.created_at)}${d.resolved_at ? ` · resolved ${when(d.resolved_at)} by ${d.resolved_by}` : ''}
          ${d.resolution_reason ? ` (${d.resolution_reason})` : ''}
        </p>
        <details><summary>detail</summary><${Json} value=${d.detail} /></details>
        ${writable && html`<${DeadLetterActions} tenantId=${tenantId} deadLetter=${d} onDone=${onDone} />`}
      </article>`,
    )}
    ${items.length === 0 && html`<p class="muted">None.</p>`}
  </div>`;
}

export function DeadLetters({ session, tenantId }) {
  const form = useForm({ status: 'open', kind: '' });
  const [filter, setFilter] = useState(form.values);
  const writable = canWrite(session);
  const letters = usePaged(
    (cursor) => call('GET', `${tenantPath(tenantId, 'dead-letters')}${qs({ limit: 50, cursor, ...filter })}`),
    [tenantId, filter.status, filter.kind],
  );
  const waiting = usePaged(async () => {
    const get = (status) =>
      call('GET', `${tenantPath(tenantId, 'tool-invocations')}${qs({ status, limit: 200 })}`);
    const [manual, approval] = await Promise.all([get('manual'), get('awaiting_approval')]);
    return { items: [...manual.items, ...approval.items], next_cursor: null };
  }, [tenantId]);
  const apply = (e) => {
    e.preventDefault();
    setFilter({ ...form.values });
  };
  return html`<div class="grid">
    <${Section} title="Dead letters">
      <form class="inline filters" onSubmit=${apply}>
        <${Field} form=${form} name="status" label="Status" as="select" options=${[['', 'any'], 'open', 'retried', 'discarded']} />
        <${Field} form=${form} name="kind" label="Kind" as="select" options=${[['', 'any'], 'execution', 'segment', 'tool']} />
        <button type="submit">Apply filters</button>
        <button type="button" class="link" onClick=${letters.reload}>Refresh</button>
      </form>
      <${ErrorBox} error=${letters.error} />
      <${DeadLetterList} tenantId=${tenantId} items=${letters.items} writable=${writable} onDone=${letters.reload} />
      ${letters.more && html`<button type="button" class="link" onClick=${letters.loadMore}>Load more</button>`}
    </${Section}>
    <${Section} title="Tool invocations waiting for an operator">
      <${ErrorBox} error=${waiting.error} />
      ${waiting.items.map(
        (t) => html`<article class="tool" data-invocation=${t.invocation_id}>
          <h3>${t.tool_name} <${Badge} status=${t.status} /></h3>
          <p class="muted">${t.invocation_id} · message <a href=${tenantHref(tenantId, `/messages/${t.event_id}`)}>${t.event_id}</a>
            · key <code>${t.idempotency_key}</code>${t.approval_deadline ? ` · approve before ${when(t.approval_deadline)}` : ''}</p>
          ${t.last_error && html`<p class="warn">${t.last_error}</p>`}
          ${writable && html`<${ToolDecision} tenantId=${tenantId} invocation=${t} onDone=${waiting.reload} />`}
        </article>`,
      )}
      ${waiting.items.length === 0 && !waiting.loading && html`<p class="muted">Nothing is waiting.</p>`}
    </${Section}>
  </div>`;
}
