import type { SessionKind } from '../channels/inbound';
import type { MessageWorkflowInput } from '../workflows/shared';

// What the Temporal Web UI shows for a message workflow (its static summary and details, set at
// start). Ids and classes only: never user text, never external user, chat or thread ids, so it is
// the same at every log masking level. Start options are not workflow code: no replay concern.

/** What a starter knows about the message besides the workflow input; unknown fields are left out. */
export interface MessageWorkflowFacts {
  tenantKey?: string | null;
  sessionKind?: SessionKind | null;
  appId?: string | null;
  /** the pinned revision once the plan is pinned, before that the published one */
  revision?: number | null;
  /**
   * The tenant's trace_sampling_rate: a start outside the message's own webhook request decides
   * its tracing by it (telemetry/sampling.ts). Not shown in the Web UI. Absent: the caller decided.
   */
  traceSamplingRate?: number | null;
}

export function messageWorkflowSummary(input: MessageWorkflowInput, facts: MessageWorkflowFacts): string {
  return [
    input.channel,
    facts.tenantKey ?? input.tenantId,
    ...(facts.sessionKind ? [facts.sessionKind] : []),
    ...(input.repair ? [`repair ${input.repair.attempt}`] : []),
  ].join(' · ');
}

export function messageWorkflowDetails(input: MessageWorkflowInput, facts: MessageWorkflowFacts): string {
  const line = (label: string, value: string | number | null | undefined) =>
    value === null || value === undefined ? [] : [`- ${label}: ${value}`];
  return [
    `**Message ${input.eventId}**`,
    '',
    ...line('Channel', input.channel),
    ...line('Tenant key', facts.tenantKey),
    ...line('Tenant id', input.tenantId),
    ...line('Session kind', facts.sessionKind),
    ...line('Event id', input.eventId),
    ...line('Agent app', facts.appId),
    ...line('App revision', facts.revision),
    ...line('Repair', input.repair && `attempt ${input.repair.attempt} (${input.repair.reasonClass})`),
  ].join('\n');
}
