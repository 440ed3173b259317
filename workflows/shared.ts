// Names and types shared by the workflow sandbox and the processes that start or serve it
// (API, worker, tests). No I/O here: the workflow bundle imports this file.
import { defineSearchAttributeKey } from '@temporalio/common';

export const TASK_QUEUE_DEFAULT = 'switchyard';

/** Custom search attributes; temporal-dev.sh registers the same names (a test checks the two agree). */
export const SA_TENANT = defineSearchAttributeKey('SwitchyardTenantId', 'KEYWORD');
export const SA_CHANNEL = defineSearchAttributeKey('SwitchyardChannel', 'KEYWORD');
export const SA_STATUS = defineSearchAttributeKey('SwitchyardMessageStatus', 'KEYWORD');
export const SEARCH_ATTRIBUTE_KEYS = [SA_TENANT, SA_CHANNEL, SA_STATUS] as const;

export type Channel = 'telegram' | 'wecom';

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
}

export interface MessageWorkflowResult {
  status: MessageStatus;
  outcome: string | null;
  replyId: string | null;
  segmentsSent: number;
}

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
