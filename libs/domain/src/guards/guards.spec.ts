import type { StopWhy } from '@baton/contracts';
import type { GuardConfig, GuardFact, GuardStop } from './facts';
import { guardFactOf, HopCapName } from './facts';
import { stepRunGuard, type RunGuardFact, type RunGuardState } from './run-guard';
import { stepCircuit, type CircuitInput, type CircuitState } from './circuit';
import { fold } from '../decider';
import { OwnTurnRefusalCodes, runDecider } from '../run/decide';
import type { RunCommand } from '../run/commands';
import type { RunEvent } from '../run/state';
import { claimedRunDecider, decided, resultCmd, startCmd } from '../run/test-helpers';

const config: GuardConfig = { maxHops: 3, maxAlternations: 2, circuitFailures: 3, circuitCooldownMs: 60_000 };
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const at = (s: number) => new Date(T0 + s * 1000).toISOString();

let seq = 0;
const routed = (from: string | null, to: string, hop: number, extra: Partial<Extract<GuardFact, { kind: 'routed' }>> = {}): RunGuardFact => ({
  kind: 'routed',
  event_id: `ev-${++seq}`,
  project: 'p',
  run: 'r1',
  from,
  to,
  hop,
  at: at(hop),
  ...extra,
});

/** given(run facts).when(fact).then(stops) over the pure run guard. */
function givenRun(history: RunGuardFact[]) {
  let state: RunGuardState | undefined;
  for (const fact of history) state = stepRunGuard(state, fact, config).state;
  return { when: (fact: RunGuardFact) => stepRunGuard(state, fact, config) };
}

function givenCircuit(history: CircuitInput[]) {
  let state: CircuitState | undefined;
  for (const input of history) state = stepCircuit(state, input, config).state;
  return { when: (input: CircuitInput) => stepCircuit(state, input, config) };
}

const failure = (agent: string, s: number, run = 'r1'): CircuitInput => ({
  kind: 'failure',
  event_id: `f-${++seq}`,
  project: 'p',
  agent,
  run,
  cause: 'failed',
  at: at(s),
});
const dispatch = (agent: string, s: number, run: string): CircuitInput => ({ kind: 'dispatch', event_id: `d-${++seq}`, project: 'p', agent, run, at: at(s) });

describe('loop guard: hop budget per run', () => {
  it('a run.routed past the hop budget asks for one stop with why budget', () => {
    const step = givenRun([routed(null, 'a', 1), routed('a', 'b', 2), routed('b', 'c', 3)]).when(routed('c', 'd', 4));
    expect(step.stops).toHaveLength(1);
    expect(step.stops[0]).toMatchObject<Partial<GuardStop>>({ guard: 'hop_budget', why: 'budget', workflow_run_id: 'r1' });
    expect(step.stops[0]?.packet_seed).toBe(`hop_budget:${step.stops[0]?.trigger_event_id}`);
  });

  it('within the budget nothing is asked', () => {
    expect(givenRun([routed(null, 'a', 1), routed('a', 'b', 2)]).when(routed('b', 'c', 3)).stops).toEqual([]);
  });

  it('after a trip no second stop is asked until the run is resumed', () => {
    const history = [routed(null, 'a', 1), routed('a', 'b', 2), routed('b', 'c', 3), routed('c', 'd', 4)];
    expect(givenRun(history).when(routed('d', 'e', 5)).stops).toEqual([]);
  });

  /** Four hops past a budget of 3, stopped on a packet of `why` naming `cap`, resumed, and routed with a raised cap of `raised`. */
  const raisedAfter = (
    stoppedOn: { why: StopWhy; cap: string | null; source: 'agent' | 'router' | 'external' } | undefined,
    raised: number,
  ): RunGuardFact[] => [
    routed(null, 'a', 1),
    routed('a', 'b', 2),
    routed('b', 'c', 3),
    routed('c', 'd', 4),
    { kind: 'run_halted', project: 'p', run: 'r1', ...(stoppedOn !== undefined ? { stopped_on: stoppedOn } : {}) },
    { kind: 'run_resumed', project: 'p', run: 'r1' },
    routed('d', 'e', 5, { raised_cap: raised }),
  ];

  it('the hop-budget stop names its cap: hops, the limit in force and the hop reached', () => {
    const step = givenRun([routed(null, 'a', 1), routed('a', 'b', 2), routed('b', 'c', 3)]).when(routed('c', 'd', 4));
    expect(step.stops[0]?.cap).toEqual({ name: HopCapName, limit: 3, used: 4 });
    expect(HopCapName).toBe('hops');
  });

  it('only an operator raises the cap: a routed event carrying raised_cap, answering the hop-budget stop, lifts the budget', () => {
    expect(givenRun(raisedAfter({ why: 'budget', cap: 'hops', source: 'external' }, 10)).when(routed('e', 'f', 6)).stops).toEqual([]);
  });

  it("raising another cap is not the hop budget: an agent's tokens cap raised to 100000 leaves the hop limit where it was", () => {
    const history = raisedAfter({ why: 'budget', cap: 'tokens', source: 'agent' }, 100_000);
    const last = history.pop()!;
    expect(givenRun(history).when(last).stops).toEqual([expect.objectContaining({ guard: 'hop_budget', cap: { name: 'hops', limit: 3, used: 5 } })]);
  });

  it('a raise answering a budget packet that names no cap (stored before stops named their cap: the hop budget) still lifts it; a hold or an unseen stop does not', () => {
    expect(givenRun(raisedAfter({ why: 'budget', cap: null, source: 'external' }, 10)).when(routed('e', 'f', 6)).stops).toEqual([]);
    const held = raisedAfter(undefined, 10);
    const last = held.pop()!;
    expect(givenRun(held).when(last).stops).toHaveLength(1);
  });

  it("an agent's own budget stop is never the hop budget, whatever cap it names (hops, or none): raising it leaves the hop limit alone", () => {
    for (const cap of ['hops', null]) {
      const history = raisedAfter({ why: 'budget', cap, source: 'agent' }, 100_000);
      const last = history.pop()!;
      expect(givenRun(history).when(last).stops).toEqual([expect.objectContaining({ guard: 'hop_budget', cap: { name: 'hops', limit: 3, used: 5 } })]);
    }
  });

  it('the raise applies once: a later routed event does not carry the stop forward', () => {
    const lifted = stepRunGuard(
      undefined,
      { kind: 'run_halted', project: 'p', run: 'r1', stopped_on: { why: 'budget', cap: 'hops', source: 'external' } },
      config,
    ).state;
    expect(lifted.hop_stop).toBe(true);
    expect(stepRunGuard(lifted, routed('a', 'b', 1), config).state.hop_stop).toBe(false);
  });
});

describe('loop guard: ping-pong per edge (why thrash)', () => {
  const wide: GuardConfig = { ...config, maxHops: 100 };
  it('A→B→A→B… with more than N alternations on one edge asks for a thrash stop', () => {
    let state: RunGuardState | undefined;
    const hops = [routed(null, 'a', 1), routed('a', 'b', 2), routed('b', 'a', 3), routed('a', 'b', 4)];
    for (const fact of hops) {
      const step = stepRunGuard(state, fact, wide);
      expect(step.stops).toEqual([]);
      state = step.state;
    }
    const step = stepRunGuard(state, routed('b', 'a', 5), wide);
    expect(step.stops).toHaveLength(1);
    expect(step.stops[0]).toMatchObject({ guard: 'ping_pong', why: 'thrash' });
  });

  it('the same edge taken in the same direction again is not an alternation', () => {
    let state: RunGuardState | undefined;
    for (const fact of [routed(null, 'a', 1), routed('a', 'b', 2), routed('b', 'c', 3), routed('c', 'a', 4), routed('a', 'b', 5), routed('b', 'c', 6)]) {
      const step = stepRunGuard(state, fact, wide);
      expect(step.stops).toEqual([]);
      state = step.state;
    }
  });

  it('a resume resets the edge counts', () => {
    let state: RunGuardState | undefined;
    for (const fact of [routed('a', 'b', 1), routed('b', 'a', 2), routed('a', 'b', 3), { kind: 'run_resumed', project: 'p', run: 'r1' } as RunGuardFact]) {
      state = stepRunGuard(state, fact, wide).state;
    }
    expect(stepRunGuard(state, routed('b', 'a', 4), wide).stops).toEqual([]);
  });
});

describe('loop guard: circuit per agent (why circuit_open)', () => {
  it('opens after K consecutive failures of the agent and stops the run of the K-th failure', () => {
    const step = givenCircuit([failure('x', 1), failure('x', 2)]).when(failure('x', 3, 'r9'));
    expect(step.state.status).toBe('open');
    expect(step.stops).toEqual([expect.objectContaining({ guard: 'circuit', why: 'circuit_open', workflow_run_id: 'r9', agent: 'x' })]);
  });

  it('a handoff with a retry cap that fails again counts once in a streak: its cap escalates it, the circuit opens on failures of as many handoffs', () => {
    const of = (handoff: string, s: number): CircuitInput => ({ ...failure('x', s), capped_handoff: `p/${handoff}` }) as CircuitInput;
    // Four lapses of one step handoff (its cap, 3, escalates at the fourth): one failure.
    const again = givenCircuit([of('h1', 1), of('h1', 2), of('h1', 3)]).when(of('h1', 4));
    expect(again.state).toEqual({ status: 'closed', failures: 1, handoffs: ['p/h1'] });
    expect(again.stops).toEqual([]);
    // Failures of three handoffs in a row open it; one without a handoff counts too.
    expect(givenCircuit([of('h1', 1), of('h1', 2), of('h2', 3)]).when(of('h3', 4)).state.status).toBe('open');
    expect(givenCircuit([of('h1', 1), failure('x', 2)]).when(of('h1', 3)).state).toEqual({ status: 'closed', failures: 2, handoffs: ['p/h1'] });
    // A success ends the streak: the same handoff failing after it counts again.
    const after = givenCircuit([of('h1', 1), { kind: 'success', project: 'p', agent: 'x' }]).when(of('h1', 2));
    expect(after.state).toEqual({ status: 'closed', failures: 1, handoffs: ['p/h1'] });
  });

  it('a circuit a lease lapse opened marks its stops settle (rule 4b may still void the lapse), the opening one and a dispatch held while open; other causes do not', () => {
    const lapse = (s: number, run = 'r1'): CircuitInput => ({ ...failure('x', s, run), cause: 'lease_expired' }) as CircuitInput;
    const opened = givenCircuit([failure('x', 1), failure('x', 2)]).when(lapse(3, 'r9'));
    expect(opened.stops).toEqual([expect.objectContaining({ workflow_run_id: 'r9', settle: { agent_project: 'p', lapse_at: at(3) } })]);
    const held = givenCircuit([failure('x', 1), failure('x', 2), lapse(3, 'r9')]).when(dispatch('x', 4, 'r10'));
    expect(held.stops).toEqual([expect.objectContaining({ workflow_run_id: 'r10', settle: { agent_project: 'p', lapse_at: at(3) } })]);
    expect(givenCircuit([lapse(1), lapse(2)]).when(failure('x', 3, 'r9')).stops).toEqual([expect.not.objectContaining({ settle: expect.anything() })]);
    // The void's completion is the agent's success: the circuit closes, and the settled stop finds it closed.
    expect(givenCircuit([lapse(1), lapse(2), lapse(3)]).when({ kind: 'success', project: 'p', agent: 'x' }).state).toEqual({ status: 'closed', failures: 0 });
  });

  it('a success in between resets the count: failures must be consecutive', () => {
    const step = givenCircuit([failure('x', 1), failure('x', 2), { kind: 'success', project: 'p', agent: 'x' }]).when(failure('x', 3));
    expect(step.state).toEqual({ status: 'closed', failures: 1 });
    expect(step.stops).toEqual([]);
  });

  it('while open, a dispatch to the agent stops that run', () => {
    const step = givenCircuit([failure('x', 1), failure('x', 2), failure('x', 3)]).when(dispatch('x', 10, 'r2'));
    expect(step.stops).toEqual([expect.objectContaining({ why: 'circuit_open', workflow_run_id: 'r2' })]);
  });

  it('after the cool-down one dispatch goes through as a half-open probe; others are still held', () => {
    const probe = givenCircuit([failure('x', 1), failure('x', 2), failure('x', 3)]).when(dispatch('x', 70, 'r2'));
    expect(probe.stops).toEqual([]);
    expect(probe.state).toMatchObject({ status: 'half_open', probe_run: 'r2' });
    const other = givenCircuit([failure('x', 1), failure('x', 2), failure('x', 3), dispatch('x', 70, 'r2')]).when(dispatch('x', 71, 'r3'));
    expect(other.stops).toEqual([expect.objectContaining({ workflow_run_id: 'r3' })]);
  });

  it('a probe that neither succeeds nor fails (its handoff released or abandoned) is replaced by the next dispatch after another cool-down, not waited on for good', () => {
    const history = [failure('x', 1), failure('x', 2), failure('x', 3), dispatch('x', 70, 'r2')];
    expect(givenCircuit(history).when(dispatch('x', 100, 'r3')).stops).toEqual([expect.objectContaining({ workflow_run_id: 'r3' })]);
    const next = givenCircuit(history).when(dispatch('x', 131, 'r4'));
    expect(next.stops).toEqual([]);
    expect(next.state).toMatchObject({ status: 'half_open', probe_run: 'r4', probe_since: at(131) });
  });

  it('the probe succeeding closes the circuit; the probe failing opens it again', () => {
    const history = [failure('x', 1), failure('x', 2), failure('x', 3), dispatch('x', 70, 'r2')];
    expect(givenCircuit(history).when({ kind: 'success', project: 'p', agent: 'x' }).state).toEqual({ status: 'closed', failures: 0 });
    const failed = givenCircuit(history).when(failure('x', 75, 'r2'));
    expect(failed.state.status).toBe('open');
    expect(failed.stops).toEqual([expect.objectContaining({ workflow_run_id: 'r2' })]);
  });

  it("a cross-project handoff's failure that opens the circuit stops its run in the run's project, not the agent's", () => {
    // The agent works in project p (the target); the handoff's run r9 is project src's (source_project).
    const crossFailure: CircuitInput = {
      kind: 'failure',
      event_id: 'f-cross',
      project: 'p',
      agent: 'x',
      run: 'r9',
      run_project: 'src',
      cause: 'failed',
      at: at(3),
    };
    const step = givenCircuit([failure('x', 1), failure('x', 2)]).when(crossFailure);
    expect(step.state.status).toBe('open');
    expect(step.stops).toEqual([expect.objectContaining({ guard: 'circuit', project: 'src', workflow_run_id: 'r9', agent: 'x' })]);
    expect(step.stops[0]?.detail).toContain('project p');
    // The circuit itself stays the agent's, in its own project: a local failure keeps its project.
    expect(givenCircuit([failure('x', 1), failure('x', 2)]).when(failure('x', 3, 'r9')).stops).toEqual([
      expect.objectContaining({ project: 'p', workflow_run_id: 'r9' }),
    ]);
  });
});

/**
 * An agent may publish a result naming any run of its project (and the run's step handoff, whose id
 * is predictable). The router refuses it, and the refusal counts toward the SENDER's circuit; but
 * a sender the run does not wait for has no part in that run: the circuit its refusals open stops
 * none of them (a security audit saw three such results stop the third run they named, its packet
 * blaming the run's own agent).
 */
describe("loop guard: a circuit opened by results refused on runs the sender has no part in stops no one else's run", () => {
  /** `run.result_rejected` of `agent`'s result on run `run`, with the router's code. */
  const refusal = (n: number, agent: string, run: string, code: string) =>
    guardFactOf({
      id: `e-rj-${n}`,
      type: 'run.result_rejected',
      project: 'p',
      aggregate: { kind: 'run', id: run },
      occurredAt: at(n),
      payload: {
        result_id: `bogus-${n}`,
        agent,
        code,
        message: 'refused',
        rejected_at: at(n),
        refused: 'result',
        handoff_id: `ho-s-${run}`,
        claim_id: 'claim-made-up',
      },
    });
  /** The failure a refusal fact is for the sender's circuit (as the watchdog's guard book builds it). */
  const failureOf = (fact: GuardFact | null): CircuitInput => {
    if (fact?.kind !== 'result_rejected') throw new Error(`not a refused result: ${JSON.stringify(fact)}`);
    return {
      kind: 'failure',
      event_id: fact.event_id,
      project: fact.project,
      agent: fact.agent,
      ...(fact.run !== undefined ? { run: fact.run } : {}),
      cause: 'result_rejected',
      at: fact.at,
    };
  };

  it("the audit's attack: three results of a non-participant on three victims' runs open ITS circuit and stop none of those runs", () => {
    const facts = [1, 2, 3].map((n) => refusal(n, 'reviewer', `victim-${n}`, 'unexpected_agent'));
    for (const fact of facts) {
      expect(fact).toMatchObject({ kind: 'result_rejected', agent: 'reviewer' });
      expect(fact).not.toHaveProperty('run');
    }
    const step = givenCircuit(facts.slice(0, 2).map(failureOf)).when(failureOf(facts[2]!));
    expect(step.state.status).toBe('open');
    expect(step.stops).toEqual([]);
    // The open circuit does what it does for any agent: the next dispatch TO the sender is held.
    const held = givenCircuit(facts.map(failureOf)).when(dispatch('reviewer', 10, 'r-review'));
    expect(held.stops).toEqual([expect.objectContaining({ why: 'circuit_open', workflow_run_id: 'r-review', agent: 'reviewer' })]);
  });

  it("a result refused on the sender's own turn (claim rule, workflow) is a failure on that run: the circuit it opens stops that run, naming the sender", () => {
    for (const code of ['claim_required', 'stale_handoff', 'handoff_not_claimed', 'claim_mismatch', 'workflow_mismatch']) {
      expect(refusal(1, 'coder', 'r7', code)).toMatchObject({ kind: 'result_rejected', agent: 'coder', run: 'r7' });
    }
    const step = givenCircuit([failure('coder', 1), failure('coder', 2)]).when(failureOf(refusal(3, 'coder', 'r7', 'claim_mismatch')));
    expect(step.stops).toEqual([expect.objectContaining({ guard: 'circuit', workflow_run_id: 'r7', agent: 'coder', tried: ['coder'] })]);
    // Refusals that come before the router compares the sender with the run's agent name no run.
    for (const code of ['unexpected_agent', 'awaiting_input', 'wrong_run', 'unknown_agent']) {
      expect(refusal(1, 'coder', 'r7', code)).not.toHaveProperty('run');
    }
  });

  it('the run decider gives a refusal of the own-turn set only to the agent the run waits for: never to another agent, whatever state the run is in', () => {
    /** The run's history after `commands`, its agents' results sent under their current claims. */
    const play = (commands: RunCommand[]): RunEvent[] => {
      const events: RunEvent[] = [];
      for (const command of commands) {
        const decision = claimedRunDecider.decide(command, fold(claimedRunDecider, events));
        if (!decision.ok) throw new Error(`${command.type} refused: ${decision.error.code}`);
        events.push(...decision.events);
      }
      return events;
    };
    /** The code the router's run decider refuses a result with (no claim filled in). */
    const codeOf = (events: RunEvent[], command: RunCommand): string => {
      const decision = runDecider.decide(command, fold(runDecider, events));
      if (decision.ok) throw new Error(`accepted: ${JSON.stringify(decision.events)}`);
      return decision.error.code;
    };
    const started = play([startCmd()]);
    const entry = fold(runDecider, started);
    if (entry.status !== 'running' || entry.handoffId === null) throw new Error('the run should be on its entry handoff');
    const named = { handoff_id: entry.handoffId, claim_id: 'claim-made-up' };
    const runs: Record<string, RunEvent[]> = {
      running: started,
      held: play([startCmd(), decided('r1', 'issue', { dispatch: { status: 'hold' } })]),
      terminated: play([startCmd(), decided('r1', 'issue', { dispatch: { status: 'terminate' } })]),
      other_run: started,
    };
    for (const [name, events] of Object.entries(runs)) {
      for (const extra of [{}, named]) {
        const command = resultCmd(`bogus-${name}`, 'architect', { ...extra, ...(name === 'other_run' ? { workflow_run_id: 'wr-other' } : {}) });
        const code = codeOf(events, command);
        expect({ name, code, own: OwnTurnRefusalCodes.has(code) }).toEqual({ name, code, own: false });
      }
    }
    // The run's own agent, while the run waits for it, with no claim or a made-up one: refused on its turn.
    expect(OwnTurnRefusalCodes.has(codeOf(started, resultCmd('own-1', 'issue')))).toBe(true);
    expect(OwnTurnRefusalCodes.has(codeOf(started, resultCmd('own-2', 'issue', named)))).toBe(true);
  });

  it("a circuit's stop names the agent whose circuit opened on the packet and the notice, not the agent the run waits for; other stops name the run's agent", () => {
    const history: RunEvent[] = [];
    const begun = runDecider.decide(startCmd(), fold(runDecider, history));
    if (!begun.ok) throw new Error(begun.error.code);
    history.push(...begun.events);
    const stop = (agent?: string): RunCommand => ({
      type: 'stop',
      data: { packet_id: 'wd-guard:1', why: 'circuit_open', tried: ['helper'], ...(agent !== undefined ? { agent } : {}) },
      metadata: { now: at(5), actor: 'baton-watchdog' },
    });
    const stopped = (agent?: string) => {
      const decision = runDecider.decide(stop(agent), fold(runDecider, history));
      if (!decision.ok) throw new Error(decision.error.code);
      const packet = decision.events.find((e) => e.type === 'run.stopped');
      const notice = decision.events.find((e) => e.type === 'run.notice_emitted');
      return {
        packet: packet?.type === 'run.stopped' ? packet.data.packet.agent : null,
        notice: notice?.type === 'run.notice_emitted' ? notice.data.notice.agent : null,
      };
    };
    expect(stopped('helper')).toEqual({ packet: 'helper', notice: 'helper' });
    expect(stopped()).toEqual({ packet: 'issue', notice: 'issue' });
  });
});

describe('guard facts', () => {
  it('a run.routed becomes a routed fact with its hop and edge', () => {
    const fact = guardFactOf({
      id: 'e1',
      type: 'run.routed',
      project: 'p',
      aggregate: { kind: 'run', id: 'r1' },
      occurredAt: at(0),
      payload: { target: { agent: 'b', step: 's' }, from: { agent: 'a', step: 's0' }, hop: 7, routed_at: at(0) },
    });
    expect(fact).toEqual({ kind: 'routed', event_id: 'e1', project: 'p', run: 'r1', from: 'a', to: 'b', hop: 7, at: at(0) });
  });

  it("a handoff.created names its run with the run's project: the source project on a cross-project handoff, else its own", () => {
    const created = (payload: Record<string, unknown>) =>
      guardFactOf({
        id: 'e2',
        type: 'handoff.created',
        project: 'tgt',
        aggregate: { kind: 'handoff', id: 'h1' },
        occurredAt: at(0),
        payload: { handoff_id: 'h1', project: 'tgt', to_agent: 'bob', workflow_run_id: 'r1', ...payload },
      });
    expect(created({ source_project: 'src', cto_override: 'dec-1' })).toEqual({
      kind: 'handoff_created',
      project: 'tgt',
      handoff: 'h1',
      to_agent: 'bob',
      run: 'r1',
      run_project: 'src',
    });
    expect(created({})).toEqual({ kind: 'handoff_created', project: 'tgt', handoff: 'h1', to_agent: 'bob', run: 'r1', run_project: 'tgt' });
  });

  const envelope = (type: string, payload: unknown) => ({
    id: `e-${++seq}`,
    type,
    project: 'p',
    aggregate: { kind: 'run', id: 'r1' },
    occurredAt: at(1),
    payload,
  });

  it('a recorded result or mesh turn names the claim it answered (the watchdog holds that lease back), when it was on a handoff', () => {
    const recorded = (payload: Record<string, unknown>) => guardFactOf(envelope('run.result_recorded', { agent: 'bob', recorded_at: at(1), ...payload }));
    expect(recorded({ handoff_id: 'h1', claim_id: 'c1' })).toMatchObject({
      kind: 'result_recorded',
      agent: 'bob',
      answered: { handoff: 'h1', claim_id: 'c1' },
    });
    expect(recorded({})).not.toHaveProperty('answered');
    const turn = (payload: Record<string, unknown>) =>
      guardFactOf({ id: 'e-t', type: 'mesh.turn_recorded', project: 'p', aggregate: { kind: 'mesh', id: 'm1' }, occurredAt: at(1), payload });
    expect(turn({ handoff_id: 'mh-1', claim_id: 'c7' })).toEqual({ kind: 'turn_recorded', project: 'p', answered: { handoff: 'mh-1', claim_id: 'c7' } });
    expect(turn({ handoff_id: null })).toBeNull();
    expect(turn({ handoff_id: 'mh-1' })).toBeNull();
  });

  it('run.stopped carries the packet why and the name of the cap it names (null: none); run.held carries neither', () => {
    expect(guardFactOf(envelope('run.stopped', { packet: { why: 'budget', cap: { name: 'tokens', limit: 10 } } }))).toEqual({
      kind: 'run_halted',
      project: 'p',
      run: 'r1',
      stopped_on: { why: 'budget', cap: 'tokens' },
    });
    expect(guardFactOf(envelope('run.stopped', { packet: { why: 'budget' } }))).toMatchObject({ stopped_on: { why: 'budget', cap: null } });
    expect(guardFactOf(envelope('run.held', { hold_kind: 'no_action' }))).toEqual({ kind: 'run_halted', project: 'p', run: 'r1' });
  });

  it("only an agent's refused result is a failure fact: an operator's refused answer, a customer's refused message or a result its stopped run refused (run_not_running) opens no circuit", () => {
    const rejected = (payload: Record<string, unknown>) =>
      guardFactOf(envelope('run.result_rejected', { result_id: 'x', code: 'c', message: 'm', rejected_at: at(1), ...payload }));
    expect(rejected({ agent: 'coder', refused: 'result' })).toMatchObject({ kind: 'result_rejected', agent: 'coder' });
    expect(rejected({ agent: 'operator', refused: 'answer' })).toBeNull();
    expect(rejected({ agent: 'customer', refused: 'message' })).toBeNull();
    // Events stored before `refused` existed: named by who sent them.
    expect(rejected({ agent: 'coder' })).toMatchObject({ kind: 'result_rejected', agent: 'coder' });
    expect(rejected({ agent: 'operator' })).toBeNull();
    expect(rejected({ agent: 'customer' })).toBeNull();
    // A result refused because its run stopped or ended under the work is the run's state, not the agent's failure.
    expect(rejected({ agent: 'coder', refused: 'result', code: 'run_not_running' })).toBeNull();
    expect(rejected({ agent: 'coder', refused: 'result', code: 'claim_mismatch' })).toMatchObject({ kind: 'result_rejected' });
  });

  it('events no guard reads map to null', () => {
    expect(
      guardFactOf({ id: 'e', type: 'definition.published', project: 'p', aggregate: { kind: 'definition', id: 'current' }, occurredAt: at(0), payload: {} }),
    ).toBeNull();
  });
});
