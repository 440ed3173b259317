import { z } from '@hono/zod-openapi';
import {
  permitAcquiredAt,
  previousInLane,
  type TimelineAuditRow,
  type TimelineEventRow,
  type TimelineSegmentRow,
  type TimelineToolRow,
  timelineAudit,
  timelineDeadLetters,
  timelineEvent,
  timelineSegments,
  timelineTools,
} from '../../db/queries/admin/timeline';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { requireTenant, tenantTx } from './context';
import { DeadLetterSchema, deadLetterJson } from './dead-letters';
import type { AdminApp } from './env';
import { adminRoute } from './route';
import { JsonObject, jsonResponse, pathId, TenantParams, Timestamp } from './schemas';
import { temporalUiLink } from './temporal-link';

// The life of one message as the database recorded it (issue #16): every entry is a stored
// timestamp (README "Message timeline" lists which column each kind comes from); nothing is
// inferred. Read in one snapshot, as any role of the tenant may read messages.

const EntrySchema = z
  .object({
    at: Timestamp.openapi({ description: 'The stored timestamp, with microseconds' }),
    kind: z.string().openapi({
      description:
        'received | workflow_started | session_lane | permit | model_turn | tool_invocation | execution | ' +
        'commit | segment | dead_letter | finished | audit',
    }),
    state: z.string(),
    detail: JsonObject,
  })
  .openapi('TimelineEntry');

const TimelineSchema = z
  .object({
    event_id: z.string(),
    status: z.string(),
    trace_id: z.string().nullable(),
    workflow_id: z.string().nullable(),
    temporal_ui_url: z.string().nullable().openapi({ description: 'null when no Temporal UI is configured' }),
    plan: JsonObject.nullable().openapi({ description: 'The pinned ExecutionPlan: ids, versions, digests' }),
    entries: z.array(EntrySchema),
    dead_letters: z.array(DeadLetterSchema),
  })
  .openapi('MessageTimeline');

type Entry = z.infer<typeof EntrySchema>;

const timelineRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/messages/{event_id}/timeline',
  tags: ['messages'],
  summary: "A message's life in time order: received, waits, model turns, tools, commit, segments, end",
  request: { params: TenantParams.extend({ event_id: pathId('event_id') }) },
  errors: [404],
  responses: { 200: jsonResponse(TimelineSchema, 'The timeline') },
});

/** Ties (one statement stamping two facts) keep the order in which a message lives them. */
const RANK: Readonly<Record<string, number>> = {
  received: 0,
  workflow_started: 1,
  session_lane: 2,
  permit: 3,
  model_turn: 4,
  tool_invocation: 4,
  audit: 4,
  execution: 5,
  commit: 6,
  segment: 7,
  dead_letter: 8,
  finished: 9,
};
const TERMINAL = new Set(['replied', 'failed']);

export function registerMessageTimelineRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(timelineRoute, async (c) => {
    const { event_id } = c.req.valid('param');
    const body = await tenantTx(
      c,
      deps,
      async (tx, tenantId) => {
        await requireTenant(tx, tenantId);
        const e = await timelineEvent(tx, tenantId, event_id);
        if (!e) throw new ApiError('not_found', 'No such message.');
        const at = { tenantId, ...e };
        const [previous, permit, audits, tools, segments, deadLetters] = [
          await previousInLane(tx, at),
          await permitAcquiredAt(tx, tenantId, event_id),
          await timelineAudit(tx, at),
          await timelineTools(tx, tenantId, event_id),
          await timelineSegments(tx, tenantId, event_id),
          await timelineDeadLetters(tx, tenantId, event_id),
        ];
        const entries: Entry[] = [
          ...eventEntries(e, previous, permit),
          ...audits.map(auditEntry),
          ...tools.flatMap(toolEntries),
          ...segments.map(segmentEntry),
          ...deadLetters.map((d) => ({
            at: d.created_us,
            kind: 'dead_letter',
            state: d.reason_class,
            detail: { dead_letter_id: d.dead_letter_id, kind: d.kind, status: d.status },
          })),
        ];
        if (TERMINAL.has(e.status) && !audits.some((a) => a.action === 'message.finished')) {
          // Finished without its audit entry (retention pruned it): the last change is the end.
          entries.push({
            at: e.updated_at,
            kind: 'finished',
            state: e.status,
            detail: { outcome: e.outcome, failure_reason: e.failure_reason, source: 'updated_at' },
          });
        }
        entries.sort((x, y) =>
          x.at < y.at ? -1 : x.at > y.at ? 1 : (RANK[x.kind] ?? 4) - (RANK[y.kind] ?? 4),
        );
        return {
          event_id: e.event_id,
          status: e.status,
          trace_id: e.trace_id,
          workflow_id: e.workflow_id,
          temporal_ui_url: temporalUiLink(deps, e.workflow_id),
          plan: e.execution_plan,
          entries,
          dead_letters: deadLetters.map(deadLetterJson),
        };
      },
      { isolation: 'repeatable read' },
    );
    return c.json(body, 200);
  });
}

function eventEntries(
  e: TimelineEventRow,
  previous: { event_id: string; status: string; finished_at: string | null } | null,
  permitAcquired: string | null,
): Entry[] {
  const out: Entry[] = [
    {
      at: e.created_at,
      kind: 'received',
      state: 'received',
      detail: {
        event_seq: e.event_seq,
        session_id: e.session_id,
        binding_id: e.binding_id,
        kind: e.kind,
        request_id: e.request_id,
      },
    },
  ];
  if (e.workflow_started_at) {
    out.push({
      at: e.workflow_started_at,
      kind: 'workflow_started',
      state: 'started',
      detail: { workflow_id: e.workflow_id, repair_count: e.repair_count },
    });
  }
  // The lane: execution_start runs a message only once every earlier one of its session finished.
  if (previous) {
    if (previous.finished_at && previous.finished_at > e.created_at) {
      out.push({
        at: previous.finished_at,
        kind: 'session_lane',
        state: 'released',
        detail: { after_event_id: previous.event_id },
      });
    } else if (!TERMINAL.has(previous.status)) {
      out.push({
        at: e.created_at,
        kind: 'session_lane',
        state: 'waiting',
        detail: { behind_event_id: previous.event_id },
      });
    }
  }
  if (e.permit_requested_at) {
    out.push({ at: e.permit_requested_at, kind: 'permit', state: 'waiting', detail: {} });
  }
  if (permitAcquired) out.push({ at: permitAcquired, kind: 'permit', state: 'acquired', detail: {} });
  if (e.execution_heartbeat_at) {
    out.push({
      at: e.execution_heartbeat_at,
      kind: 'execution',
      state: 'last_heartbeat',
      detail: { execution_attempts: e.execution_attempts },
    });
  }
  if (e.committed_at) {
    out.push({
      at: e.committed_at,
      kind: 'commit',
      state: 'committed',
      detail: { reply_id: e.reply_id, segment_count: e.segment_count, outcome: e.outcome },
    });
  }
  return out;
}

function auditEntry(a: TimelineAuditRow): Entry {
  switch (a.action) {
    case 'model.turn':
      return {
        at: a.occurred_at,
        kind: 'model_turn',
        state: a.decision ?? 'unknown',
        detail: {
          ...pick(a.details, ['usage_id', 'tool_calls']),
          tokens_in: a.tokens_in,
          tokens_out: a.tokens_out,
          cost_minor: a.cost_minor,
          latency_ms: a.latency_ms,
          error_type: a.error_type,
        },
      };
    case 'tool.invocation':
      return {
        at: a.occurred_at,
        kind: 'tool_invocation',
        state: a.decision ?? 'unknown',
        detail: {
          ...pick(a.details, ['invocation_id', 'attempts']),
          tool_name: a.tool_name,
          latency_ms: a.latency_ms,
          error_type: a.error_type,
        },
      };
    case 'message.finished':
      return {
        at: a.occurred_at,
        kind: 'finished',
        state: a.decision ?? 'unknown',
        detail: { outcome: a.reason, error_type: a.error_type, actor_id: a.actor_id },
      };
    default:
      // Operators' and the sweeper's actions on the message (repair, fail, tool decisions, DLQ).
      return {
        at: a.occurred_at,
        kind: 'audit',
        state: a.action,
        detail: {
          actor_type: a.actor_type,
          actor_id: a.actor_id,
          decision: a.decision,
          reason: a.reason,
        },
      };
  }
}

function toolEntries(t: TimelineToolRow): Entry[] {
  const detail = { invocation_id: t.invocation_id, tool_name: t.tool_name };
  const out: Entry[] = [
    {
      at: t.created_at,
      kind: 'tool_invocation',
      state: 'prepared',
      detail: { ...detail, step: t.step, call_ordinal: t.call_ordinal },
    },
  ];
  const stamps: [string | null, string][] = [
    [t.dispatched_at, 'dispatched'],
    [t.reconciled_at, 'reconciled'],
    [t.resolved_at, 'resolved'],
  ];
  for (const [at, state] of stamps) if (at) out.push({ at, kind: 'tool_invocation', state, detail });
  return out;
}

function segmentEntry(s: TimelineSegmentRow): Entry {
  const detail = {
    segment_id: s.segment_id,
    segment_index: s.segment_index,
    segment_count: s.segment_count,
    attempts: s.attempts,
  };
  if (s.status === 'sent' && s.sent_at) {
    const receipt =
      s.channel === 'console' ? { console: true } : { provider_message_id: s.provider_message_id };
    return { at: s.sent_at, kind: 'segment', state: 'sent', detail: { ...detail, receipt } };
  }
  // Not sent (yet): where it stands since its last change.
  return {
    at: s.updated_at,
    kind: 'segment',
    state: s.status,
    detail: { ...detail, last_error: s.last_error },
  };
}

function pick(o: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]]));
}
