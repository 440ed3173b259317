// Messages, newest first, filtered by the API (status, channel, session, received from / before).
import { Badge, when } from '../components/bits.js';
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, qs, tenantPath } from '../lib/api.js';
import { html, useState } from '../lib/html.js';
import { useLoad, usePaged } from '../lib/load.js';
import { tenantHref } from '../lib/route.js';

const STATUSES = [
  '',
  'received',
  'running',
  'execution_reconciling',
  'completed',
  'reply_pending',
  'replied',
  'failed',
];

/** A local date-time field's value as the API's ISO 8601 instant ('' when empty or invalid). */
const isoOf = (value) => {
  const t = value ? new Date(value).getTime() : Number.NaN;
  return Number.isNaN(t) ? '' : new Date(t).toISOString();
};

export function Messages({ tenantId }) {
  const form = useForm({ status: '', session_id: '', channel: '', from: '', to: '' });
  const [applied, setApplied] = useState(form.values);
  const bindings = useLoad(
    () => call('GET', `${tenantPath(tenantId, 'bindings')}${qs({ limit: 200 })}`),
    [tenantId],
  );
  const list = usePaged(
    (cursor) =>
      call(
        'GET',
        `${tenantPath(tenantId, 'messages')}${qs({
          limit: 50,
          cursor,
          status: applied.status,
          session_id: applied.session_id.trim(),
          channel: applied.channel,
          received_from: isoOf(applied.from),
          received_before: isoOf(applied.to),
        })}`,
      ),
    [tenantId, applied.status, applied.session_id, applied.channel, applied.from, applied.to],
  );
  const channelOf = (bindingId) =>
    bindings.data?.items.find((b) => b.binding_id === bindingId)?.channel ?? '?';
  const items = list.items;
  const apply = (e) => {
    e.preventDefault();
    setApplied({ ...form.values });
  };
  return html`<div>
    <form class="inline filters" onSubmit=${apply} data-testid="message-filters">
      <${Field} form=${form} name="status" label="Status" as="select" options=${STATUSES.map((s) => [s, s || 'any'])} />
      <${Field} form=${form} name="channel" label="Channel" as="select" options=${[['', 'any'], 'telegram', 'wecom', 'console']} />
      <${Field} form=${form} name="session_id" label="Session id" />
      <${Field} form=${form} name="from" label="From" type="datetime-local" />
      <${Field} form=${form} name="to" label="To" type="datetime-local" />
      <button type="submit">Apply filters</button>
    </form>
    <${ErrorBox} error=${list.error} />
    <table class="list" data-testid="messages">
      <thead><tr><th>Received</th><th>Message</th><th>Channel</th><th>Session</th><th>Status</th><th>Outcome</th></tr></thead>
      <tbody>
        ${items.map(
          (m) => html`<tr>
            <td>${when(m.created_at)}</td>
            <td><a href=${tenantHref(tenantId, `/messages/${m.event_id}`)}>${m.event_id}</a></td>
            <td>${channelOf(m.binding_id)}</td>
            <td><small>${m.session_id}</small></td>
            <td><${Badge} status=${m.status} /></td>
            <td>${m.outcome ?? ''}${m.failure_reason ? ` (${m.failure_reason})` : ''}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    ${!list.loading && items.length === 0 && html`<p class="muted">No messages match.</p>`}
    ${list.more && html`<button type="button" class="link" onClick=${list.loadMore}>Load more</button>`}
  </div>`;
}
