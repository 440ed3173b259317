import { describe, expect, it } from 'vitest';
import { messageWorkflowDetails, messageWorkflowSummary } from '../../lib/workflow-summary';

// What the Temporal Web UI shows for a message workflow: only what is known, never a blank field.
describe('message workflow summary and details', () => {
  const input = { tenantId: 't_01', eventId: 'evt_01', channel: 'wecom' as const };

  it('names channel, tenant key and session kind, and a repair run as such', () => {
    const facts = { tenantKey: 'acme', sessionKind: 'thread' as const, appId: 'app_01', revision: 4 };
    expect(messageWorkflowSummary(input, facts)).toBe('wecom · acme · thread');
    expect(
      messageWorkflowSummary({ ...input, repair: { attempt: 2, reasonClass: 'lease_expired' } }, facts),
    ).toBe('wecom · acme · thread · repair 2');
    expect(messageWorkflowDetails(input, facts).split('\n')).toEqual([
      '**Message evt_01**',
      '',
      '- Channel: wecom',
      '- Tenant key: acme',
      '- Tenant id: t_01',
      '- Session kind: thread',
      '- Event id: evt_01',
      '- Agent app: app_01',
      '- App revision: 4',
    ]);
  });

  it('falls back to the tenant id and leaves unknown facts out', () => {
    expect(messageWorkflowSummary(input, {})).toBe('wecom · t_01');
    const details = messageWorkflowDetails(input, { tenantKey: null, revision: null });
    expect(details).not.toContain('Tenant key');
    expect(details).not.toContain('revision');
    expect(details).not.toContain('null');
  });
});
