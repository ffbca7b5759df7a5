import { DefaultGuardConfig } from '@baton/domain';
import { GuardBook } from './guard-book';

/**
 * The book remembers whose each handoff is only while the handoff can still fail: a watchdog that
 * runs for months folds every handoff ever made, and what it keeps of them must not grow with that.
 */
describe('GuardBook: which handoffs it remembers', () => {
  const at = '2026-12-01T10:00:00.000Z';
  const open = (book: GuardBook, handoff: string, project = 'acme') => {
    book.applyFact({ kind: 'handoff_created', project, handoff, to_agent: 'support', run: `wr-${handoff}` });
    book.applyFact({ kind: 'handoff_claimed', project, handoff, agent: 'support' });
  };

  it('forgets a handoff once it is over: completed by its result, completed after its handback, abandoned, archived, failed', () => {
    const book = new GuardBook(DefaultGuardConfig);
    for (const h of ['h-1', 'h-2', 'h-3', 'h-4', 'h-5']) open(book, h);
    expect(book.status().handoffs).toBe(5);
    book.applyFact({ kind: 'handoff_succeeded', event_id: 'e-1', project: 'acme', handoff: 'h-1', agent: 'support', at, ends: true });
    book.applyFact({ kind: 'handoff_succeeded', event_id: 'e-2', project: 'acme', handoff: 'h-2', agent: 'support', at });
    book.applyFact({ kind: 'handoff_closed', project: 'acme', handoff: 'h-2' });
    book.applyFact({ kind: 'handoff_closed', project: 'acme', handoff: 'h-3' });
    book.applyFact({ kind: 'handoff_closed', project: 'acme', handoff: 'h-4' });
    book.applyFact({ kind: 'handoff_failed', event_id: 'e-5', project: 'acme', handoff: 'h-5', cause: 'failed', at });
    expect(book.status().handoffs).toBe(0);
  });

  it('keeps a handoff that may still fail: returned (its handback may be reworked), requeued after its lease expired', () => {
    const book = new GuardBook(DefaultGuardConfig);
    open(book, 'h-1');
    open(book, 'h-2');
    book.applyFact({ kind: 'handoff_succeeded', event_id: 'e-1', project: 'acme', handoff: 'h-1', agent: 'support', at });
    book.applyFact({ kind: 'handoff_failed', event_id: 'e-2', project: 'acme', handoff: 'h-2', agent: 'support', cause: 'lease_expired', at });
    expect(book.status().handoffs).toBe(2);
  });
});
