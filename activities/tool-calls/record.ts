import { ApplicationFailure } from '@temporalio/activity';
import {
  findTool,
  type ToolDefinition,
  toolCapabilityDigest,
  validateToolArguments,
} from '../../agents/tools';
import { newId } from '../../db/ids';
import { insertInvocation, invocationByKey, type ToolInvocationRow } from '../../db/queries/tools';
import { contentDigest, sha256Hex } from '../../lib/digest';
import { appendRuntimeAudit, type RuntimeAuditContext } from '../audit-runtime';
import { FENCED_OUT } from '../failures';
import type { InvokeToolInput } from './outcome';
import type { ToolRun, ToolSteps } from './steps';

// A tool call recorded under its stable key before anything is sent: refused (never sent) or
// prepared / awaiting approval (tool_invocation's first states in the seeds).

/**
 * The Idempotency-Key of one tool call of one execution, the same on every attempt and in every
 * run of the message (a restart, a Temporal reset, a repair): derived from where the call stands in
 * the execution and what it asks — never from the model's call id, which a model re-run after a
 * reset changes, so the same call would be dispatched and applied a second time.
 */
export function toolIdempotencyKey(
  eventId: string,
  step: number,
  ordinal: number,
  toolName: string,
  argumentsDigest: string,
): string {
  return sha256Hex(`${eventId}/${step}/${ordinal}/${toolName}/${argumentsDigest}`);
}

/** The key of a call prepared before 0019 (from the model's call id): such a row is reused, never re-dispatched. */
function legacyIdempotencyKey(eventId: string, step: number, callId: string): string {
  return sha256Hex(`${eventId}/${step}/${callId}`);
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Records one tool call under its stable key, before anything is sent: refused (never sent) when
 * the revision does not allow the tool or the arguments fail its schema, else prepared (or
 * awaiting approval). Idempotent: a call recorded earlier (by a retried attempt, an earlier run or
 * the step's first call) is returned as it stands.
 */
export async function recordCall(
  s: ToolSteps,
  input: InvokeToolInput,
  tools: ToolDefinition[],
  audit: RuntimeAuditContext,
  owner: string,
): Promise<{ run: ToolRun; row: ToolInvocationRow }> {
  const { tenantId, eventId, call } = input;
  const key = toolIdempotencyKey(
    eventId,
    input.step,
    input.ordinal ?? 0,
    TOOL_NAME.test(call.name) ? call.name : sanitizeName(call.name),
    contentDigest(call.arguments ?? null),
  );
  const tool = findTool(tools, call.name);
  const run: ToolRun = { tenantId, owner, tool, audit };
  if (!tool)
    return {
      run,
      row: await refuse(s, input, run, key, 'tool_not_allowed', `tool_not_allowed: ${call.name}`),
    };
  const check = validateToolArguments(tool, call.arguments);
  if (!check.ok) {
    const why = `invalid_arguments: ${check.errors.join('; ')}`;
    return { run, row: await refuse(s, input, run, key, 'invalid_arguments', why) };
  }
  const args = call.arguments as Record<string, unknown>;
  const requestDigest = contentDigest(args);
  const stored = await s.tx(tenantId, async (t) => {
    // A call prepared before 0019 under its model-call-id key continues under that key.
    const legacy = await invocationByKey(
      t,
      tenantId,
      eventId,
      legacyIdempotencyKey(eventId, input.step, call.id),
    );
    if (legacy) return { row: legacy, created: false };
    const res = await insertInvocation(t, {
      tenantId,
      invocationId: newId('inv'),
      eventId,
      ...positionOf(input),
      toolName: tool.name,
      capabilityDigest: toolCapabilityDigest(tool),
      idempotencyKey: key,
      requestDigest,
      arguments: args,
      status: tool.requires_approval ? 'awaiting_approval' : 'prepared',
      requiresApproval: tool.requires_approval,
      approvalTimeoutS: tool.approval_timeout_s,
      lastError: null,
      providerReceipt: undefined,
    });
    if (res?.created && res.row.status === 'awaiting_approval') {
      await appendRuntimeAudit(t, audit, {
        action: 'tool.invocation',
        decision: 'awaiting_approval',
        toolName: tool.name,
        details: { invocation_id: res.row.invocation_id },
      });
    }
    return res;
  });
  if (!stored) throw notRunning(eventId);
  if (stored.row.request_digest !== requestDigest || stored.row.tool_name !== tool.name) {
    throw ApplicationFailure.nonRetryable(
      `tool call ${call.id} was prepared with different arguments`,
      'RequestDigestMismatch',
    );
  }
  return { run, row: stored.row };
}

async function refuse(
  s: ToolSteps,
  input: InvokeToolInput,
  run: ToolRun,
  idempotencyKey: string,
  errorType: 'tool_not_allowed' | 'invalid_arguments',
  message: string,
): Promise<ToolInvocationRow> {
  const { call } = input;
  const args = isPlainObject(call.arguments) ? call.arguments : { _non_object_arguments: call.arguments };
  const stored = await s.tx(input.tenantId, async (t) => {
    const res = await insertInvocation(t, {
      tenantId: input.tenantId,
      invocationId: newId('inv'),
      eventId: input.eventId,
      ...positionOf(input),
      toolName: TOOL_NAME.test(call.name) ? call.name : sanitizeName(call.name),
      capabilityDigest: run.tool ? toolCapabilityDigest(run.tool) : contentDigest({ not_allowed: call.name }),
      idempotencyKey,
      requestDigest: contentDigest(call.arguments ?? null),
      arguments: args,
      status: 'refused',
      requiresApproval: false,
      approvalTimeoutS: null,
      lastError: message.slice(0, 2000),
      providerReceipt: undefined,
    });
    if (res?.created) {
      await appendRuntimeAudit(t, run.audit, {
        action: 'tool.invocation',
        decision: 'refused',
        toolName: res.row.tool_name,
        errorType,
        details: { invocation_id: res.row.invocation_id },
      });
    }
    return res;
  });
  if (!stored) throw notRunning(input.eventId);
  if (stored.created) s.countOutcome('refused');
  return stored.row;
}

/** Where a call stands in its execution, stored with it (the rebuilt transcript of a resumed run). */
function positionOf(input: InvokeToolInput) {
  return {
    step: input.step,
    callOrdinal: input.ordinal ?? 0,
    modelCallId: input.call.id ? input.call.id.slice(0, 200) : null,
  };
}

function notRunning(eventId: string) {
  return ApplicationFailure.nonRetryable(`message ${eventId} is no longer running`, FENCED_OUT);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function sanitizeName(name: string): string {
  return name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64) || 'unnamed';
}
