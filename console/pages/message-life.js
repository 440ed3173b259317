// One message's life: its states in order with timestamps, the pinned ExecutionPlan, its dead
// letters (with the operator's actions), trace id and the workflow in the Temporal UI. Refreshes
// itself while the message is unfinished.
import { Badge, Json, Loading, precise, Section, when } from '../components/bits.js';
import { ErrorBox } from '../components/error-box.js';
import { call, tenantPath } from '../lib/api.js';
import { html, useEffect } from '../lib/html.js';
import { useLoad } from '../lib/load.js';
import { canWrite } from '../lib/session.js';
import { DeadLetterList } from './dead-letters.js';
import { MessageActions } from './message-actions.js';

const FINISHED = new Set(['replied', 'failed']);

async function loadLife(tenantId, eventId) {
  const at = (...more) => tenantPath(tenantId, 'messages', eventId, ...more);
  const [detail, timeline] = await Promise.all([
    call('GET', at()),
    call('GET', at('timeline')).catch((error) => ({ error })),
  ]);
  return { detail, timeline };
}

function Timeline({ entries }) {
  return html`<ol class="timeline" data-testid="timeline">
    ${entries.map(
      (e) => html`<li data-kind=${e.kind} data-state=${e.state}>
        <time datetime=${e.at}>${precise(e.at)}</time>
        <span class="kind">${e.kind}</span> <${Badge} status=${e.state} />
        ${e.detail && Object.keys(e.detail).length > 0 && html`<small class="muted">${JSON.stringify(e.detail)}</small>`}
      </li>`,
    )}
  </ol>`;
}

export function MessageLife({ session, tenantId, eventId }) {
  const life = useLoad(() => loadLife(tenantId, eventId), [tenantId, eventId]);
  const status = life.data?.detail.status;
  const { reload } = life;
  useEffect(() => {
    if (!status || FINISHED.has(status)) return undefined;
    const timer = setTimeout(reload, 1500);
    return () => clearTimeout(timer);
  }, [status, life.data, reload]);
  if (life.error) return html`<${ErrorBox} error=${life.error} />`;
  if (!life.data) return html`<${Loading} />`;
  const { detail, timeline } = life.data;
  const t = timeline.error ? null : timeline;
  const uiUrl = t?.temporal_ui_url ?? detail.temporal_ui_url;
  const writable = canWrite(session);
  return html`<div class="grid" data-testid="message-life">
    <${Section} title=${`Message ${detail.event_id}`}>
      <dl class="facts">
        <dt>Status</dt><dd><${Badge} status=${detail.status} /> ${detail.outcome ?? ''} ${detail.failure_reason ? `(${detail.failure_reason})` : ''}</dd>
        <dt>Workflow</dt><dd><code>${t?.workflow_id ?? detail.workflow_id ?? '–'}</code> ${detail.workflow_status ?? ''}
          ${uiUrl && html` · <a href=${uiUrl} target="_blank" rel="noopener noreferrer" data-testid="temporal-link">open in the Temporal UI</a>`}</dd>
        <dt>Trace id</dt><dd><code data-testid="trace-id">${t?.trace_id ?? detail.trace_id ?? '–'}</code></dd>
        <dt>Session</dt><dd><code>${detail.session_id}</code> · seq ${detail.event_seq}</dd>
        <dt>Received</dt><dd>${when(detail.created_at)}</dd>
      </dl>
      ${writable && html`<${MessageActions} tenantId=${tenantId} message=${detail} onDone=${reload} />`}
    </${Section}>
    <${Section} title="Timeline">
      ${timeline.error ? html`<${ErrorBox} error=${timeline.error} />` : html`<${Timeline} entries=${t.entries} />`}
    </${Section}>
    <${Section} title="ExecutionPlan">
      ${(t?.plan ?? detail.plan) ? html`<${Json} value=${t?.plan ?? detail.plan} />` : html`<p class="muted">Not pinned yet.</p>`}
    </${Section}>
    <${Section} title="Dead letters">
      <${DeadLetterList} tenantId=${tenantId} items=${t?.dead_letters ?? []} writable=${writable} onDone=${reload} />
    </${Section}>
    <${Section} title="Reply segments">
      <table class="list" data-testid="segments">
        <thead><tr><th>#</th><th>Status</th><th>Attempts</th><th>Sent</th><th>Content</th></tr></thead>
        <tbody>
          ${detail.reply_segments.map(
            (
              s,
            ) => html`<tr><td>${s.segment_index + 1}/${s.segment_count}</td><td><${Badge} status=${s.status} />${s.last_error ? ` ${s.last_error}` : ''}</td>
              <td>${s.attempts}</td><td>${when(s.sent_at)}</td><td class="content">${s.content}</td></tr>`,
          )}
        </tbody>
      </table>
    </${Section}>
    ${
      detail.tool_invocations.length > 0 &&
      html`<${Section} title="Tool invocations">
        <table class="list">
          <thead><tr><th>Tool</th><th>Status</th><th>Attempts</th><th>Created</th><th>Resolution</th></tr></thead>
          <tbody>
            ${detail.tool_invocations.map(
              (
                i,
              ) => html`<tr><td>${i.tool_name}</td><td><${Badge} status=${i.status} /></td><td>${i.attempts}</td>
                <td>${when(i.created_at)}</td><td>${i.resolution ? JSON.stringify(i.resolution) : ''}</td></tr>`,
            )}
          </tbody>
        </table>
      </${Section}>`
    }
  </div>`;
}
