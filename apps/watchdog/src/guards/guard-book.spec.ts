import { DefaultGuardConfig, guardFactOf, type GuardStop } from '@baton/domain';
import { GuardBook } from './guard-book';

/**
 * The book remembers whose each handoff is only while the handoff can still fail: a watchdog that
 * runs for months folds every handoff ever made, and what it keeps of them must not grow with that.
 */
describe('GuardBook: which handoffs it remembers', () => {
  const at = '2026-12-01T10:00:00.000Z';
  const open = (book: GuardBook, handoff: string, project = 'acme') => {
    book.applyFact({ kind: 'handoff_created', project, handoff, to_agent: 'support', run: `wr-${handoff}` });
    book.applyFact({ kind: 'handoff_claimed', project, handoff, agent: 'support', claim_id: 'c-1' });
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

  it('forgets, from the stored events, a handoff its claimer released and a handback once its review is decided (a soak saw both kept for good)', () => {
    const book = new GuardBook(DefaultGuardConfig);
    const event = (id: string, type: string, aggregate: string, payload: Record<string, unknown>) =>
      guardFactOf({ id, type, project: 'acme', aggregate: { kind: 'handoff', id: aggregate }, occurredAt: at, payload });
    const apply = (id: string, type: string, aggregate: string, payload: Record<string, unknown>) => {
      const fact = event(id, type, aggregate, payload);
      if (fact !== null) book.applyFact(fact);
    };
    apply('e-1', 'handoff.created', 'h-rel', { handoff_id: 'h-rel', from_agent: 'lead', to_agent: 'support', summary: 's', at });
    apply('e-2', 'handoff.claimed', 'h-rel', { handoff_id: 'h-rel', claimed_by: 'support', claim_id: 'c-1', at });
    apply('e-3', 'handoff.created', 'hb-1', { handoff_id: 'hb-1', from_agent: 'support', to_agent: 'lead', summary: 's', kind: 'completion_handback', at });
    apply('e-4', 'handoff.claimed', 'hb-1', { handoff_id: 'hb-1', claimed_by: 'lead', claim_id: 'c-2', at });
    expect(book.status().handoffs).toBe(2);
    apply('e-5', 'handoff.released', 'h-rel', { handoff_id: 'h-rel', claim_id: 'c-1', released_by: 'support', reason: 'not mine', at });
    apply('e-6', 'handoff.handback_decided', 'hb-1', {
      handoff_id: 'hb-1',
      parent_handoff_id: 'h-0',
      decision: 'accept',
      decided_by: 'lead',
      decided_by_kind: 'agent',
      at,
    });
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
    book.applyFact({ kind: 'handoff_claimed', project: 'tgt', handoff, agent: 'flaky', claim_id: 'c-1' });
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

/**
 * A failure is charged to the agent that held the handoff's claim when it failed: the circuit
 * measures an agent failing work it took. Work nobody held failing — an operator failing a handoff
 * (or a review) nobody claimed, a deadline passing on a pending handoff, during a project pause say
 * — is no agent's failure.
 */
describe('GuardBook: a failure is the claimer`s, never the addressee`s', () => {
  const at = '2026-12-01T10:00:00.000Z';
  const config = { ...DefaultGuardConfig, circuitFailures: 2 };
  const created = (book: GuardBook, handoff: string) =>
    book.applyFact({ kind: 'handoff_created', project: 'acme', handoff, to_agent: 'rev', run: `wr-${handoff}` });

  it('failures and deadlines of handoffs nobody claimed open no circuit', () => {
    const book = new GuardBook(config);
    for (const [i, cause] of [
      [1, 'failed'],
      [2, 'deadline_expired'],
      [3, 'failed'],
    ] as const) {
      created(book, `h-${i}`);
      expect(book.applyFact({ kind: 'handoff_failed', event_id: `e-${i}`, project: 'acme', handoff: `h-${i}`, cause, at })).toEqual([]);
    }
    expect(book.circuitOf('acme', 'rev')).toBeUndefined();
  });

  it('a run`s step handoff that lapses again and again is one failure; its escalation at the cap adds none; failures of other handoffs add up', () => {
    const book = new GuardBook({ ...DefaultGuardConfig, circuitFailures: 3 });
    created(book, 'h-1');
    for (const n of [1, 2, 3, 4]) {
      book.applyFact({ kind: 'handoff_claimed', project: 'acme', handoff: 'h-1', agent: 'rev', claim_id: `c-${n}` });
      expect(book.applyFact({ kind: 'handoff_failed', event_id: `e-${n}`, project: 'acme', handoff: 'h-1', cause: 'lease_expired', at })).toEqual([]);
    }
    book.applyFact({ kind: 'handoff_claimed', project: 'acme', handoff: 'h-1', agent: 'rev', claim_id: 'c-5' });
    expect(book.applyFact({ kind: 'handoff_failed', event_id: 'e-5', project: 'acme', handoff: 'h-1', cause: 'escalated', at })).toEqual([]);
    expect(book.circuitOf('acme', 'rev')).toMatchObject({ status: 'closed', failures: 1 });
    for (const h of ['h-2', 'h-3']) {
      created(book, h);
      book.applyFact({ kind: 'handoff_claimed', project: 'acme', handoff: h, agent: 'rev', claim_id: 'c-1' });
      book.applyFact({ kind: 'handoff_failed', event_id: `e-${h}`, project: 'acme', handoff: h, cause: 'failed', at });
    }
    expect(book.circuitOf('acme', 'rev')).toMatchObject({ status: 'open', failures: 3 });
  });

  it('a lapse frees the claim: a later failure while the handoff waits pending is nobody`s; one while claimed again is the new claimer`s', () => {
    const book = new GuardBook(config);
    created(book, 'h-1');
    book.applyFact({ kind: 'handoff_claimed', project: 'acme', handoff: 'h-1', agent: 'rev', claim_id: 'c-1' });
    book.applyFact({ kind: 'handoff_failed', event_id: 'e-1', project: 'acme', handoff: 'h-1', agent: 'rev', cause: 'lease_expired', at });
    expect(book.circuitOf('acme', 'rev')).toMatchObject({ status: 'closed', failures: 1 });
    // Pending again: an operator fails it before anyone claims it. Not rev's.
    expect(book.applyFact({ kind: 'handoff_failed', event_id: 'e-2', project: 'acme', handoff: 'h-1', cause: 'failed', at })).toEqual([]);
    expect(book.circuitOf('acme', 'rev')).toMatchObject({ status: 'closed', failures: 1 });
    // Claimed and failed: rev's second failure opens its circuit.
    created(book, 'h-2');
    book.applyFact({ kind: 'handoff_claimed', project: 'acme', handoff: 'h-2', agent: 'rev', claim_id: 'c-1' });
    expect(book.applyFact({ kind: 'handoff_failed', event_id: 'e-3', project: 'acme', handoff: 'h-2', cause: 'failed', at })).toEqual([
      expect.objectContaining({ guard: 'circuit', agent: 'rev', workflow_run_id: 'wr-h-2' }),
    ]);
  });
});

/**
 * A review (completion handback) of a run's work carries that run's id, but its reviewer's lapses
 * only requeue it (docs/handoffs.md rule 5): they count against the reviewer's circuit, and stop no
 * run — the work under review is done, and stopping its run would abandon it and its review.
 */
describe('GuardBook: a review`s failures stop no run', () => {
  const at = '2026-12-01T10:00:00.000Z';
  const config = { ...DefaultGuardConfig, circuitFailures: 2 };

  it('lapses of a review open the reviewer`s circuit without a stop; the next dispatch to the reviewer is what the circuit holds', () => {
    const book = new GuardBook(config);
    const created = guardFactOf({
      id: 'e-c',
      type: 'handoff.created',
      project: 'acme',
      aggregate: { kind: 'handoff', id: 'hb-1' },
      occurredAt: at,
      payload: { handoff_id: 'hb-1', project: 'acme', kind: 'completion_handback', to_agent: 'lead', workflow_run_id: 'wr-1', reply_to_handoff_id: 'h-1' },
    });
    expect(created).toMatchObject({ kind: 'handoff_created', review: true });
    expect(created).not.toHaveProperty('run');
    book.applyFact(created!);
    for (const n of [1, 2]) {
      book.applyFact({ kind: 'handoff_claimed', project: 'acme', handoff: 'hb-1', agent: 'lead', claim_id: 'c-1' });
      expect(
        book.applyFact({ kind: 'handoff_failed', event_id: `e-${n}`, project: 'acme', handoff: 'hb-1', agent: 'lead', cause: 'lease_expired', at }),
      ).toEqual([]);
    }
    expect(book.circuitOf('acme', 'lead')).toMatchObject({ status: 'open' });
  });
});

/**
 * A claim that ended in a failure the circuit counted (a deadline, a lapse, a failure) is not
 * counted again when its agent's result arrives late under it and the router refuses it: one slow
 * piece of work is one failure. A refused result under any other claim is a failure of its own.
 */
const at = '2026-12-01T10:00:00.000Z';
/** The guard fact of an event of project `acme`. */
const event = (id: string, type: string, kind: 'run' | 'handoff', aggregate: string, payload: Record<string, unknown>) =>
  guardFactOf({ id, type, project: 'acme', aggregate: { kind, id: aggregate }, occurredAt: at, payload })!;

/** The guard fact of `slow`'s result `r-<n>` refused as late on run `run`, naming the claim it came under when given. */
const refused = (n: number, named?: { handoff: string; claim: string }, run = 'wr-1') =>
  event(`e-rj-${n}`, 'run.result_rejected', 'run', run, {
    result_id: `r-${n}`,
    agent: 'slow',
    code: 'stale_handoff',
    message: 'late',
    rejected_at: at,
    refused: 'result',
    ...(named ? { handoff_id: named.handoff, claim_id: named.claim } : {}),
  });

describe('GuardBook: a late result under a claim already counted is not a second failure', () => {
  const claimed = (handoff: string, claim: string) =>
    event(`e-cl-${handoff}-${claim}`, 'handoff.claimed', 'handoff', handoff, { claimed_by: 'slow', claim_id: claim, lease_expires_at: at, at });

  it('a deadline then the late result under that claim count once; the same after a lapse; a result under a claim never counted counts', () => {
    const book = new GuardBook({ ...DefaultGuardConfig, circuitFailures: 3 });
    book.applyFact(
      event('e-c1', 'handoff.created', 'handoff', 'h-1', { handoff_id: 'h-1', project: 'acme', kind: 'task', to_agent: 'slow', workflow_run_id: 'wr-1' }),
    );
    book.applyFact(claimed('h-1', 'c-1'));
    book.applyFact(event('e-d1', 'handoff.deadline_expired', 'handoff', 'h-1', { at }));
    expect(book.circuitOf('acme', 'slow')).toMatchObject({ failures: 1 });
    expect(refused(1, { handoff: 'h-1', claim: 'c-1' })).toMatchObject({ kind: 'result_rejected', named: { handoff: 'h-1', claim_id: 'c-1' } });
    expect(book.applyFact(refused(1, { handoff: 'h-1', claim: 'c-1' }))).toEqual([]);
    expect(book.circuitOf('acme', 'slow')).toMatchObject({ failures: 1 });

    // A lapse (its event names the claim), then the result of that claim: still one more, not two.
    book.applyFact(
      event('e-c2', 'handoff.created', 'handoff', 'h-2', { handoff_id: 'h-2', project: 'acme', kind: 'task', to_agent: 'slow', workflow_run_id: 'wr-1' }),
    );
    book.applyFact(claimed('h-2', 'c-2'));
    book.applyFact(
      event('e-l2', 'handoff.lease_expired', 'handoff', 'h-2', { claim_id: 'c-2', expired_claimer: 'slow', lease_expires_at: at, retry_count: 1, at }),
    );
    book.applyFact(refused(2, { handoff: 'h-2', claim: 'c-2' }));
    expect(book.circuitOf('acme', 'slow')).toMatchObject({ status: 'closed', failures: 2 });

    // A refused result under a claim never counted (a made-up one) is a failure — once per handoff
    // in a streak: on h-2, already counted, it adds nothing; on another handoff it is the third.
    expect(book.applyFact(refused(3, { handoff: 'h-2', claim: 'c-made-up' }))).toEqual([]);
    expect(book.circuitOf('acme', 'slow')).toMatchObject({ status: 'closed', failures: 2 });
    const stops = book.applyFact(refused(4, { handoff: 'h-3', claim: 'c-made-up' }));
    expect(book.circuitOf('acme', 'slow')).toMatchObject({ status: 'open', failures: 3 });
    expect(stops).toEqual([expect.objectContaining({ guard: 'circuit', agent: 'slow', workflow_run_id: 'wr-1' })]);
  });

  it('work withdrawn from its claimer (the handoff abandoned: a person, the delegator, the router stopping the run) makes its late results no failure; a result under a claim nobody withdrew still counts', () => {
    const book = new GuardBook({ ...DefaultGuardConfig, circuitFailures: 3 });
    for (const n of [1, 2, 3]) {
      const h = `ho-s-${n}`;
      book.applyFact(
        event(`e-c${n}`, 'handoff.created', 'handoff', h, { handoff_id: h, project: 'acme', kind: 'task', to_agent: 'slow', workflow_run_id: 'wr-1' }),
      );
      book.applyFact(claimed(h, `c-${n}`));
      book.applyFact(event(`e-a${n}`, 'handoff.abandoned', 'handoff', h, { abandoned_by: 'baton-router', reason: 'run stopped', at }));
      // The claimer finishes late: the router refuses the result on the handoff it no longer works on.
      expect(book.applyFact(refused(10 + n, { handoff: h, claim: `c-${n}` }))).toEqual([]);
    }
    expect(book.circuitOf('acme', 'slow')).toBeUndefined();
    // Another claim on the same handoff was never withdrawn: a failure as before.
    book.applyFact(refused(20, { handoff: 'ho-s-1', claim: 'c-other' }));
    expect(book.circuitOf('acme', 'slow')).toMatchObject({ failures: 1 });
    // Another agent naming the withdrawn claim is not its claimer: not excused.
    const other = event('e-rj-30', 'run.result_rejected', 'run', 'wr-1', {
      result_id: 'r-30',
      agent: 'stray',
      code: 'unexpected_agent',
      message: 'waits for slow',
      rejected_at: at,
      refused: 'result',
      handoff_id: 'ho-s-2',
      claim_id: 'c-2',
    });
    book.applyFact(other);
    expect(book.circuitOf('acme', 'stray')).toMatchObject({ failures: 1 });
  });

  it('a result refused with no handoff named is counted (claim_required: nothing to match)', () => {
    const book = new GuardBook({ ...DefaultGuardConfig, circuitFailures: 3 });
    book.applyFact(refused(9));
    expect(book.circuitOf('acme', 'slow')).toMatchObject({ failures: 1 });
  });
});

/**
 * The security audit's attack, in the book: an agent publishes results naming three runs of another
 * agent's work (their step handoffs `ho-s-<run>`, a made-up claim). Each refusal is a failure of the
 * sender's — its circuit opens —, but the sender is not the agent those runs wait for, so no stop is
 * asked for them; the open circuit holds the next dispatch TO the sender, and that stop names it.
 */
describe('GuardBook: results refused on runs their sender has no part in open its circuit and stop none of those runs', () => {
  it("three results of reviewer on three of coder's runs: reviewer's circuit opens, no stop; the next run routed to reviewer is held, naming reviewer", () => {
    const book = new GuardBook({ ...DefaultGuardConfig, circuitFailures: 3 });
    const stops: GuardStop[] = [];
    for (const n of [1, 2, 3]) {
      const run = `victim-${n}`;
      const h = `ho-s-${run}`;
      book.applyFact(
        event(`e-c${n}`, 'handoff.created', 'handoff', h, { handoff_id: h, project: 'acme', kind: 'task', to_agent: 'coder', workflow_run_id: run }),
      );
      book.applyFact(event(`e-cl${n}`, 'handoff.claimed', 'handoff', h, { claimed_by: 'coder', claim_id: `c-${n}`, lease_expires_at: at, at }));
      const bogus = event(`e-rj-${n}`, 'run.result_rejected', 'run', run, {
        result_id: `bogus-${n}`,
        agent: 'reviewer',
        code: 'unexpected_agent',
        message: `run ${run} waits for 'coder', not 'reviewer'`,
        rejected_at: at,
        refused: 'result',
        handoff_id: h,
        claim_id: 'claim-made-up',
      });
      stops.push(...book.applyFact(bogus));
    }
    expect(stops).toEqual([]);
    expect(book.circuitOf('acme', 'reviewer')).toMatchObject({ status: 'open', failures: 3 });
    expect(book.circuitOf('acme', 'coder')).toBeUndefined();
    const held = book.applyFact({ kind: 'routed', event_id: 'e-r9', project: 'acme', run: 'wr-9', from: 'coder', to: 'reviewer', hop: 2, at });
    expect(held).toEqual([expect.objectContaining({ guard: 'circuit', why: 'circuit_open', workflow_run_id: 'wr-9', agent: 'reviewer', tried: ['reviewer'] })]);
  });
});

/**
 * A returnable child's failure is its run's to handle (the route's ON_FAILURE: continue, RESPOND,
 * ESCALATE): the circuit that failure opens stops no run — it holds the agent's next dispatches.
 * A workflow step's failure leaves its run with nothing to go on: that run is stopped.
 */
describe('GuardBook: the failure of a returnable child opens the circuit without stopping its run', () => {
  const at = '2026-12-01T10:00:00.000Z';
  const config = { ...DefaultGuardConfig, circuitFailures: 2 };
  const child = (book: GuardBook, handoff: string, run: string, deadline: boolean) => {
    const created = guardFactOf({
      id: `e-c-${handoff}`,
      type: 'handoff.created',
      project: 'acme',
      aggregate: { kind: 'handoff', id: handoff },
      occurredAt: at,
      payload: { handoff_id: handoff, project: 'acme', kind: 'task', to_agent: 'kid', workflow_run_id: run, ...(deadline ? { deadline_at: at } : {}) },
    })!;
    expect(created).toMatchObject({ kind: 'handoff_created', run, ...(deadline ? { returnable: true } : {}) });
    book.applyFact(created);
    book.applyFact({ kind: 'handoff_claimed', project: 'acme', handoff, agent: 'kid', claim_id: `c-${handoff}` });
  };

  it('two children past their deadlines open the circuit and stop neither conversation; the next dispatch to the agent is held', () => {
    const book = new GuardBook(config);
    child(book, 'ho-1', 'conv-1', true);
    expect(book.applyFact({ kind: 'handoff_failed', event_id: 'e-d1', project: 'acme', handoff: 'ho-1', cause: 'deadline_expired', at })).toEqual([]);
    child(book, 'ho-2', 'conv-2', true);
    expect(book.applyFact({ kind: 'handoff_failed', event_id: 'e-d2', project: 'acme', handoff: 'ho-2', cause: 'deadline_expired', at })).toEqual([]);
    expect(book.circuitOf('acme', 'kid')).toMatchObject({ status: 'open', failures: 2 });
    const held = book.applyFact({ kind: 'routed', event_id: 'e-r3', project: 'acme', run: 'conv-3', from: 'sup', to: 'kid', hop: 2, at });
    expect(held).toEqual([expect.objectContaining({ guard: 'circuit', why: 'circuit_open', workflow_run_id: 'conv-3', agent: 'kid' })]);
  });

  it('a workflow step (no deadline) that fails twice stops the run of the failure that opened the circuit', () => {
    const book = new GuardBook(config);
    child(book, 'ho-1', 'wr-1', false);
    book.applyFact({ kind: 'handoff_failed', event_id: 'e-f1', project: 'acme', handoff: 'ho-1', cause: 'failed', at });
    child(book, 'ho-2', 'wr-2', false);
    expect(book.applyFact({ kind: 'handoff_failed', event_id: 'e-f2', project: 'acme', handoff: 'ho-2', cause: 'failed', at })).toEqual([
      expect.objectContaining({ guard: 'circuit', workflow_run_id: 'wr-2' }),
    ]);
  });
});

describe('GuardBook: saved and restored (the watchdog snapshot)', () => {
  const routed = (run: string, hop: number, from: string | null, to: string) =>
    event(`e-r-${run}-${hop}`, 'run.routed', 'run', run, {
      target: { agent: to, step: 's' },
      from: from === null ? null : { agent: from, step: 's' },
      handoff_id: `${run}-h${hop}`,
      hop,
      cause: { kind: 'result', id: `res-${run}-${hop}` },
      routed_at: at,
      decision: {
        rule: 'task',
        dispatch: { status: 'advance', reason: null, origin: 'agent' },
        callback_after: null,
        outcome: 'dispatch',
        target: { agent: to, step: 's' },
      },
    });
  /** Runs ping-ponging, handoffs claimed, lapsed, abandoned and answered late: every map and both LRU sets get entries. */
  const history = () => {
    const facts = [];
    for (const n of [1, 2, 3, 4]) {
      const h = `h-${n}`;
      facts.push(
        event(`e-c${n}`, 'handoff.created', 'handoff', h, { handoff_id: h, project: 'acme', kind: 'task', to_agent: 'slow', workflow_run_id: `wr-${n % 2}` }),
      );
      facts.push(event(`e-cl${n}`, 'handoff.claimed', 'handoff', h, { claimed_by: 'slow', claim_id: `c-${n}`, lease_expires_at: at, at }));
      facts.push(routed(`wr-${n % 2}`, n, n === 1 ? null : 'a', n % 2 === 0 ? 'a' : 'b'));
      if (n % 2 === 0) facts.push(event(`e-a${n}`, 'handoff.abandoned', 'handoff', h, { abandoned_by: 'olga', reason: 'withdrawn', at }));
      else
        facts.push(
          event(`e-l${n}`, 'handoff.lease_expired', 'handoff', h, { claim_id: `c-${n}`, expired_claimer: 'slow', lease_expires_at: at, retry_count: 1, at }),
        );
      facts.push(refused(n, { handoff: h, claim: `c-${n}` }, `wr-${n % 2}`));
    }
    for (let hop = 5; hop <= 9; hop++) facts.push(routed('wr-1', hop, hop % 2 === 0 ? 'a' : 'b', hop % 2 === 0 ? 'b' : 'a'));
    return facts;
  };

  it('a book restored from what another saved at any point decides the rest of the events as that one does, and ends the same', () => {
    const config = { ...DefaultGuardConfig, circuitFailures: 2, maxAlternations: 3 };
    const facts = history();
    const whole = new GuardBook(config);
    const wholeStops = facts.map((fact) => whole.applyFact(fact));
    expect(wholeStops.flat().length).toBeGreaterThan(0);
    for (let cut = 0; cut <= facts.length; cut++) {
      const before = new GuardBook(config);
      facts.slice(0, cut).forEach((fact) => before.applyFact(fact));
      const restored = new GuardBook(config);
      restored.restore(JSON.parse(JSON.stringify(before.save())));
      expect(facts.slice(cut).map((fact) => restored.applyFact(fact))).toEqual(wholeStops.slice(cut));
      expect(restored.save()).toEqual(whole.save());
      expect(restored.status()).toEqual(whole.status());
    }
  });

  it('restoring replaces what the book held; the LRU sets keep their order, so the same entries are evicted first', () => {
    const book = new GuardBook(DefaultGuardConfig);
    history().forEach((fact) => book.applyFact(fact));
    const saved = book.save();
    expect(saved.counted.length).toBeGreaterThan(1);
    expect(saved.withdrawn.length).toBeGreaterThan(1);
    const other = new GuardBook(DefaultGuardConfig);
    other.applyFact(event('e-x', 'handoff.created', 'handoff', 'h-x', { handoff_id: 'h-x', project: 'acme', kind: 'task', to_agent: 'x' }));
    other.restore(saved);
    expect(other.save()).toEqual(saved);
    expect(other.runOfHandoff('acme', 'h-x')).toBeUndefined();
  });
});
