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

  it('tells the runner what became of the letter: written, or counted in its sender`s summary (baton_events_handled_total outcome suppressed)', async () => {
    let outcome: 'refused' | 'suppressed' = 'refused';
    const gate = inboxLetterGate('baton', { refuse: () => ({ outcome, written: Promise.resolve() }) });
    const subject = 'baton.in.acme.result.bob';
    await expect(gate({ subject }, letter(subject, DeadLetterReason.schemaViolation))).resolves.toBe('written');
    outcome = 'suppressed';
    await expect(gate({ subject }, letter(subject, DeadLetterReason.schemaViolation))).resolves.toBe('suppressed');
  });
});
