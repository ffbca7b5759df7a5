import type { ConsumedMessage } from '@baton/eventstore';
import { orderingKeyOf } from './jetstream.server';

const message = (subject: string, body: unknown) =>
  ({ subject, data: new TextEncoder().encode(JSON.stringify(body)), headers: {} }) as unknown as ConsumedMessage;

describe('ordering keys', () => {
  it("{ bodyField } keys by the body's field within the subject's project: equal run ids of two projects never wait for each other", () => {
    const key = orderingKeyOf({ bodyField: 'workflow_run_id' }, 'baton')!;
    const alpha = key(message('baton.in.alpha.result.support', { workflow_run_id: 'ticket-42' }));
    const beta = key(message('baton.in.beta.result.support', { workflow_run_id: 'ticket-42' }));
    expect(alpha).toBe('alpha/ticket-42');
    expect(beta).toBe('beta/ticket-42');
    expect(key(message('baton.in.alpha.start', { workflow_run_id: 'ticket-42' }))).toBe(alpha);
    expect(key(message('baton.in.alpha.result.support', { workflow_run_id: 42 }))).toBeUndefined();
  });

  it("'subject' keys by the subject", () => {
    expect(orderingKeyOf('subject', 'baton')!(message('baton.ev.alpha.run.r-1', {}))).toBe('baton.ev.alpha.run.r-1');
  });
});
