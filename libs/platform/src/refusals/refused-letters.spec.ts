import { DeadLetterReason, type DeadLetterInput } from '@baton/eventstore';
import { inboxLetterGate, type RefusedLetters } from './refused-letters';

/** A recorder that notes whose refusals reach it (the gate's decision is what is under test, not the writing). */
function noting(): { letters: Pick<RefusedLetters, 'refuse'>; senders: string[] } {
  const senders: string[] = [];
  return {
    senders,
    letters: {
      refuse: (sender) => {
        senders.push(sender);
        return { outcome: 'refused', written: Promise.resolve() };
      },
    },
  };
}

const letter = (subject: string, reason: string): DeadLetterInput => ({
  prefix: 'baton',
  source: 'router-results',
  reason,
  subject,
  headers: {},
  data: new Uint8Array(),
  deliveries: 1,
  stream: 'BATON_INBOX',
  seq: 1,
  consumer: 'router_results',
});

describe('inboxLetterGate: which letters count against a sender`s budget', () => {
  it('an agent`s refused input does, under its sender; a max_deliveries letter never (it redrives acknowledged work), nor what agents do not publish', () => {
    const { letters, senders } = noting();
    const gate = inboxLetterGate('baton', letters);
    const at = (subject: string, reason: string) => gate({ subject }, letter(subject, reason));
    expect(at('baton.in.acme.result.bob', DeadLetterReason.schemaViolation)).not.toBeNull();
    expect(at('baton.in.acme.start', 'workflow_unknown')).not.toBeNull();
    expect(at('baton.in.acme.result.bob', DeadLetterReason.maxDeliveries)).toBeNull();
    expect(at('baton.in.acme.answer', DeadLetterReason.schemaViolation)).toBeNull();
    expect(at('baton.in.acme.stop', DeadLetterReason.schemaViolation)).toBeNull();
    expect(senders).toEqual(['acme/bob', 'acme']);
  });
});
