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

/**
 * A cross-project handoff lives in the target project but belongs to a run of the source project
 * (`source_project`): what the book does with its run must name that project, never the handoff's.
 */
describe("GuardBook: a cross-project handoff's run is the source project's", () => {
  const at = '2026-12-01T10:00:00.000Z';
  const config = { ...DefaultGuardConfig, circuitFailures: 2 };
  const crossHandoff = (book: GuardBook, handoff: string) => {
    book.applyFact({ kind: 'handoff_created', project: 'tgt', handoff, to_agent: 'flaky', run: 'wr-1', run_project: 'src' });
    book.applyFact({ kind: 'handoff_claimed', project: 'tgt', handoff, agent: 'flaky' });
  };

  it('remembers the run with its project (runOfHandoff)', () => {
    const book = new GuardBook(config);
    crossHandoff(book, 'h-1');
    expect(book.runOfHandoff('tgt', 'h-1')).toEqual({ project: 'src', workflow_run_id: 'wr-1' });
    expect(book.runOfHandoff('src', 'h-1')).toBeUndefined();
  });

  it("a circuit opened by the failures of the target's agent stops the run in the source project", () => {
    const book = new GuardBook(config);
    crossHandoff(book, 'h-1');
    crossHandoff(book, 'h-2');
    expect(book.applyFact({ kind: 'handoff_failed', event_id: 'e-1', project: 'tgt', handoff: 'h-1', cause: 'failed', at })).toEqual([]);
    const stops = book.applyFact({ kind: 'handoff_failed', event_id: 'e-2', project: 'tgt', handoff: 'h-2', cause: 'failed', at });
    expect(stops).toEqual([expect.objectContaining({ guard: 'circuit', project: 'src', workflow_run_id: 'wr-1', agent: 'flaky' })]);
    // The circuit is the agent's, in its own project.
    expect(book.circuitOf('tgt', 'flaky')).toMatchObject({ status: 'open' });
    expect(book.circuitOf('src', 'flaky')).toBeUndefined();
  });
});
