import { messageTypeOf } from './metrics';

/**
 * The `type` label of consumed messages: the sender chooses a message's headers, so a header value
 * becomes a label only when the event catalogue names it — each label series lives as long as the
 * process, and an agent could otherwise mint one per message.
 */
describe('messageTypeOf: a bounded type label', () => {
  const at = (subject: string, type?: string) => messageTypeOf({ subject, headers: type === undefined ? {} : { 'Baton-Event-Type': [type] } }, 'baton');

  it('a stored event: its catalogue type', () => {
    expect(at('baton.ev.acme.run.wr-1', 'run.routed')).toBe('run.routed');
    expect(at('baton.ev.acme.handoff.h-1', 'handoff.claimed')).toBe('handoff.claimed');
  });

  it('a stored event with a type the catalogue does not name, or none: other', () => {
    expect(at('baton.ev.acme.run.wr-1', 'run.made_up')).toBe('other');
    expect(at('baton.ev.acme.run.wr-1')).toBe('other');
  });

  it("an inbox message is labelled by its subject's kind, whatever type header its sender set", () => {
    expect(at('baton.in.acme.result.support')).toBe('in.result');
    expect(at('baton.in.acme.result.support', 'run.routed')).toBe('in.result');
    expect(at('baton.in.acme.result.support', `x-${'a'.repeat(1000)}`)).toBe('in.result');
  });

  it('a subject the table does not know: other', () => {
    expect(at('elsewhere.topic', 'run.routed')).toBe('other');
  });
});
