import { z } from '@hono/zod-openapi';
import { getMessage, listMessages, type MessageRow, type SegmentRow } from '../../db/queries/admin/messages';
import { eventArtifacts } from '../../db/queries/artifacts';
import { CHANNELS } from '../../db/schema/channel-binding';
import { describeWorkflow } from '../../lib/workflow-start';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { scopedTenant } from './auth';
import { adminTx, requireTenant, tenantTx } from './context';
import type { AdminApp } from './env';
import { pageBody, pageParams } from './pagination';
import { adminRoute } from './route';
import {
  iso,
  isoNN,
  JsonObject,
  jsonResponse,
  ListQuery,
  pageOf,
  pathId,
  TenantParams,
  Timestamp,
} from './schemas';
import { temporalUiLink } from './temporal-link';
import { ToolInvocationSchema, toolInvocationJson } from './tool-invocations';

const MessageStatus = z.enum([
  'received',
  'running',
  'execution_reconciling',
  'completed',
  'reply_pending',
  'replied',
  'failed',
]);

const MessageSchema = z
  .object({
    event_id: z.string(),
    session_id: z.string(),
    binding_id: z.string(),
    event_seq: z.number(),
    kind: z.string(),
    status: z.string(),
    outcome: z.string().nullable(),
    failure_reason: z.string().nullable(),
    reply_id: z.string().nullable(),
    segment_count: z.number().nullable(),
    merged_into: z
      .string()
      .nullable()
      .openapi({
        description:
          'The event whose turn answered this message (revision conversation policy collect / interrupt); ' +
          'set on every message of a merged turn, the turn’s own event included',
      }),
    workflow_id: z.string().nullable(),
    temporal_ui_url: z.string().nullable().openapi({ description: 'This execution in the Temporal Web UI' }),
    request_id: z.string(),
    trace_id: z.string().nullable(),
    execution_attempts: z.number(),
    created_at: Timestamp,
    committed_at: Timestamp.nullable(),
    updated_at: Timestamp,
  })
  .openapi('Message');

const SegmentSchema = z
  .object({
    segment_id: z.string(),
    segment_index: z.number(),
    segment_count: z.number(),
    status: z.string(),
    attempts: z.number(),
    provider_message_id: z.string().nullable(),
    last_error: z.string().nullable(),
    content: z.string(),
    created_at: Timestamp,
    sent_at: Timestamp.nullable(),
  })
  .openapi('ReplySegment');

const ArtifactSchema = z
  .object({
    artifact_id: z.string(),
    direction: z.enum(['inbound', 'outbound']),
    kind: z.string().openapi({ description: 'image | audio | video | file' }),
    content_type: z.string(),
    size_bytes: z.number().int(),
    content_digest: z.string().openapi({ description: 'SHA-256 of the stored bytes (hex)' }),
    content_ref: z
      .string()
      .openapi({ description: "The object's key in the store: `<tenant_id>/<artifact_id>`" }),
    storage: z.string().openapi({ description: 'filesystem | s3' }),
    backend_profile_id: z.string(),
    file_name: z.string().nullable(),
    created_at: Timestamp,
    deleting: z.boolean().openapi({
      description:
        'Marked by retention (artifact_retention_days): its object is being deleted, may already be gone, ' +
        'and no execution reads it any more',
    }),
  })
  .openapi('Artifact');

const MessageDetailSchema = MessageSchema.extend({
  workflow_status: z
    .string()
    .nullable()
    .openapi({
      description:
        'The Temporal execution of workflow_id as Temporal reports it now (running, completed, failed, ' +
        'cancelled, terminated, timed_out, continued_as_new, not_found), next to the database status so ' +
        'a mismatch (e.g. terminated while the message is unfinished) is visible; null when Temporal did ' +
        'not answer in time',
    }),
  repair_count: z.number().int().openapi({ description: 'Repair runs started for this message' }),
  payload: JsonObject,
  plan: JsonObject.nullable().openapi({ description: 'The pinned ExecutionPlan: ids, versions, digests' }),
  tool_invocations: z.array(ToolInvocationSchema),
  reply_segments: z.array(SegmentSchema),
  artifacts: z.array(ArtifactSchema).openapi({
    description: "The message's stored media: what the user sent (inbound), what replies attach",
  }),
}).openapi('MessageDetail');

function messageJson(deps: AppDeps, r: MessageRow): z.infer<typeof MessageSchema> {
  return {
    event_id: r.event_id,
    session_id: r.session_id,
    binding_id: r.binding_id,
    event_seq: r.event_seq,
    kind: r.kind,
    status: r.status,
    outcome: r.outcome,
    failure_reason: r.failure_reason,
    reply_id: r.reply_id,
    segment_count: r.segment_count,
    merged_into: r.merged_into,
    workflow_id: r.workflow_id,
    temporal_ui_url: temporalUiLink(deps, r.workflow_id),
    request_id: r.request_id,
    trace_id: r.trace_id,
    execution_attempts: r.execution_attempts,
    created_at: isoNN(r.created_at),
    committed_at: iso(r.committed_at),
    updated_at: isoNN(r.updated_at),
  };
}

const segmentJson = (s: SegmentRow): z.infer<typeof SegmentSchema> => ({
  ...s,
  created_at: isoNN(s.created_at),
  sent_at: iso(s.sent_at),
});

const tags = ['messages'];
/** The detail waits this long for Temporal's answer, then shows workflow_status null. */
const WORKFLOW_STATUS_DEADLINE_MS = 1_500;

const listRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/messages',
  tags,
  summary: 'Message events, newest first',
  request: {
    params: TenantParams,
    query: ListQuery.extend({
      status: MessageStatus.optional().openapi({ param: { name: 'status', in: 'query' } }),
      session_id: z
        .string()
        .max(200)
        .optional()
        .openapi({ param: { name: 'session_id', in: 'query' } }),
      channel: z
        .enum(CHANNELS)
        .optional()
        .openapi({ param: { name: 'channel', in: 'query' }, description: "The binding's channel" }),
      received_from: z.iso
        .datetime({ offset: true })
        .optional()
        .openapi({ param: { name: 'received_from', in: 'query' }, description: 'Received at or after' }),
      received_before: z.iso
        .datetime({ offset: true })
        .optional()
        .openapi({ param: { name: 'received_before', in: 'query' }, description: 'Received before' }),
    }),
  },
  errors: [400, 404],
  responses: { 200: jsonResponse(pageOf(MessageSchema), 'A page') },
});

const getRoute = adminRoute({
  method: 'get',
  path: '/v1/admin/tenants/{tenant_id}/messages/{event_id}',
  tags,
  summary: 'One message with its tool invocations, reply segments and plan',
  request: { params: TenantParams.extend({ event_id: pathId('event_id') }) },
  errors: [404],
  responses: { 200: jsonResponse(MessageDetailSchema, 'The message') },
});

export function registerMessageRoutes(admin: AdminApp, deps: AppDeps): void {
  admin.openapi(listRoute, async (c) => {
    const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
    const q = c.req.valid('query');
    const params = pageParams(q);
    const page = await adminTx(deps, tenantId, async (tx) => {
      await requireTenant(tx, tenantId);
      return listMessages(tx, {
        tenantId,
        status: q.status,
        sessionId: q.session_id,
        channel: q.channel,
        receivedFrom: q.received_from,
        receivedBefore: q.received_before,
        ...params,
      });
    });
    return c.json(
      pageBody(page, (r) => messageJson(deps, r)),
      200,
    );
  });

  admin.openapi(getRoute, async (c) => {
    const { event_id } = c.req.valid('param');
    const found = await tenantTx(c, deps, async (tx, tenantId) => {
      const m = await getMessage(tx, tenantId, event_id);
      return m && { ...m, artifacts: await eventArtifacts(tx, tenantId, event_id) };
    });
    if (!found) throw new ApiError('not_found', 'No such message.');
    const { event, invocations, segments, artifacts } = found;
    const workflow = event.workflow_id
      ? await describeWorkflow(deps.temporal, event.workflow_id, WORKFLOW_STATUS_DEADLINE_MS).catch(
          () => null,
        )
      : null;
    return c.json(
      {
        ...messageJson(deps, event),
        workflow_status: workflow?.state ?? null,
        repair_count: event.repair_count,
        payload: event.payload,
        plan: event.execution_plan,
        tool_invocations: invocations.map(toolInvocationJson),
        reply_segments: segments.map(segmentJson),
        artifacts: artifacts.map((a) => ({
          artifact_id: a.artifact_id,
          direction: a.direction,
          kind: a.kind,
          content_type: a.content_type,
          size_bytes: Number(a.size_bytes),
          content_digest: a.content_digest,
          content_ref: a.content_ref,
          storage: a.storage,
          backend_profile_id: a.backend_profile_id,
          file_name: a.file_name,
          created_at: isoNN(a.created_at),
          deleting: a.deleting,
        })),
      },
      200,
    );
  });
}
