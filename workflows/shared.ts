// Names and types shared by the workflow sandbox and the processes that start or serve it
// (API, worker, tests). No I/O here: the workflow bundle imports this file.
import { defineSearchAttributeKey } from '@temporalio/common';
import { defineSignal } from '@temporalio/workflow';

/** Custom search attributes; temporal-dev.sh registers the same names (a test checks the two agree). */
export const SA_TENANT = defineSearchAttributeKey('SwitchyardTenantId', 'KEYWORD');
export const SA_CHANNEL = defineSearchAttributeKey('SwitchyardChannel', 'KEYWORD');
export const SA_STATUS = defineSearchAttributeKey('SwitchyardMessageStatus', 'KEYWORD');
export const SEARCH_ATTRIBUTE_KEYS = [SA_TENANT, SA_CHANNEL, SA_STATUS] as const;

/** `console`: the operator console's chat preview (no provider: its sends are recorded, never made). */
export type Channel = 'telegram' | 'wecom' | 'console';

export type MessageStatus =
  | 'received'
  | 'running'
  | 'execution_reconciling'
  | 'completed'
  | 'reply_pending'
  | 'replied'
  | 'failed';

export interface MessageWorkflowInput {
  tenantId: string;
  eventId: string;
  channel: Channel;
  /** A repair run (started by the sweeper or an operator after the message's workflow ended abnormally). */
  repair?: { attempt: number; reasonClass: string };
  /**
   * Tuning of the long waits (defaults: continue as new past 800 history events, re-check a
   * manual tool resolution every 10 minutes); carried across continue-as-new.
   */
  waits?: { historyBudget?: number; manualRecheckMs?: number; lostWakeMs?: number };
}

export interface MessageWorkflowResult {
  status: MessageStatus;
  outcome: string | null;
  replyId: string | null;
  segmentsSent: number;
}

/** Fixed replies for executions that cannot produce one (the message still ends `failed`). */
export const BUDGET_EXHAUSTED_REPLY = 'This assistant has reached its usage limit for this month.';
export const MODEL_FAILED_REPLY = 'Sorry, I could not prepare a reply. Please try again later.';
/** Policy reject: the reply to a message that arrives while its chat's turn runs (revision `busy_reply`). */
export const BUSY_REPLY = 'I am still working on your previous message. Please wait for my answer.';

/** A revision's double-texting policy: what a message does while its session's turn runs. */
export type ConversationPolicy = 'enqueue' | 'collect' | 'interrupt' | 'reject';

/** Workflow ID for one inbound message: a business key, so a duplicate start is rejected by Temporal. */
export function messageWorkflowId(idempotencyKey: string): string {
  return `msg-${idempotencyKey}`;
}

/**
 * What an execution runs with, fixed when it starts and carried by the workflow: ids, versions
 * and content digests only, never a secret (seeds: ExecutionPlan).
 */
export interface ExecutionPlan {
  tenant: { id: string; version: number };
  app: { id: string; revision: number; digest: string };
  modelProfile: { id: string; version: number; digest: string; provider: 'scripted' | 'openai_compatible' };
  backendProfile: { id: string; version: number; digest: string };
}

/** Sent by a finishing message (or a freed tenant permit) to messages waiting for their turn. */
export const wakeSignal = defineSignal('wake');

/**
 * Policy interrupt: sent by a newer message of the session to the running turn's workflow, which
 * cancels its model call and takes the message in (the database decides: conversation_absorb).
 */
export const interruptSignal = defineSignal('interrupt');

/** Sent by the admin API when an operator resolves a `manual` tool invocation or decides an approval. */
export const toolDecisionSignal = defineSignal<[{ invocationId: string }]>('toolDecision');

/** Result of a delivery run: how many segments went out and whether all of them did. */
export interface DeliveryResult {
  sent: number;
  /** The message's terminal transition, made with the last segment's receipt (null: not made). */
  finished: { status: MessageStatus; wake: string[] } | null;
  /** First segment that did not go out, and why; null when every segment is sent. */
  failure: { segmentId: string; reasonClass: string; deadLettered: boolean } | null;
}

export interface DeliveryWorkflowInput {
  tenantId: string;
  eventId: string;
  segmentIds: string[];
  deadLetterId: string;
}

/** Workflow ID of the n-th repair run of a message (the database derives the same in message_repair_begin). */
export function repairWorkflowId(attempt: number, idempotencyKey: string): string {
  return `repair-${attempt}-${idempotencyKey}`;
}

/** Workflow ID of an operator-requested delivery retry of a dead letter. */
export function deliveryRetryWorkflowId(tenantId: string, deadLetterId: string): string {
  return `dlq-retry-${tenantId}-${deadLetterId}`;
}

/** What the repair sweeper did in a pass (or a run of passes). */
export interface SweepReport {
  checked: number;
  started: number;
  alive: number;
  /** alive session heads still waiting for their turn, woken in case their wake was lost */
  woken: number;
  repaired: number;
  deadLettered: number;
  failed: number;
  /** repairs by reason class */
  reasons: Record<string, number>;
}

export function emptySweepReport(): SweepReport {
  return { checked: 0, started: 0, alive: 0, woken: 0, repaired: 0, deadLettered: 0, failed: 0, reasons: {} };
}
