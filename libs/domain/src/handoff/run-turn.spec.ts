import fc from 'fast-check';
import type { HandoffEvent } from '@baton/contracts';
import { fold } from '../decider';
import type { RunCommand } from '../run/commands';
import { evolveRun, initialRunState, type RunEvent, type RunState } from '../run/state';
import { agents, claimedRunDecider, decided, holdAnswer, meta as runMeta, resultCmd, startCmd } from '../run/test-helpers';
import { given } from '../testing/given';
import type { CreateHandoff } from './commands';
import { handoffDecider } from './decider';
import { cmd, meta, PROJECT } from './handoff.fixtures';
import { evolveRunTurn, runTurnFold, type RunTurn } from './run-turn';

/*
 * An agent names a run in a create only while that run waits for it (docs/handoffs.md, create;
 * docs/governance.md, circuit per agent). A security audit's second form of the circuit attack: an
 * agent with no part in a run created a handoff to itself naming that run, claimed and failed it
 * three times, and its circuit's opening stopped the run; one give_up_offer at max_retries 0 stopped
 * it through the escalation. The ledger reads the run (`run_turn`); the decider refuses `not_in_run`.
 */

const RUN = 'wr-7';
const running = (agent: string): RunTurn => ({ status: 'running', agent });
/** mallory's create of a handoff to herself naming the run, as the ledger sends it with what it read of the run. */
const selfAddressed = (turn: RunTurn, overrides: Partial<CreateHandoff['data']> = {}): CreateHandoff =>
  cmd.create({ from_agent: 'mallory', to_agent: 'mallory', max_retries: 0, workflow_run_id: RUN, run_turn: turn, ...overrides }, meta('mallory'));

describe('handoff create: an agent names a run only while that run waits for it (not_in_run)', () => {
  it("the audit's second form: an agent creating a handoff to itself naming another agent's run is refused not_in_run, and nothing is stored", () => {
    const refused = given(handoffDecider).when(selfAddressed(running('coder')));
    const error = refused.thenFails('not_in_run');
    expect(error).toMatchObject({ kind: 'forbidden', details: { workflow_run_id: RUN, run_project: PROJECT } });
    expect(refused.result.ok).toBe(false);
  });

  it('the same answer whatever the run is: no run of that id, a run of its own that holds, stopped or ended — the refusal tells nothing of whose turn it is', () => {
    const turns: RunTurn[] = [
      { status: 'none', agent: null },
      running('coder'),
      { status: 'held', agent: 'mallory' },
      { status: 'stopped', agent: 'mallory' },
      { status: 'completed', agent: 'mallory' },
      { status: 'terminated', agent: 'mallory' },
    ];
    const errors = turns.map((turn) => given(handoffDecider).when(selfAddressed(turn)).thenFails('not_in_run'));
    for (const error of errors) expect(error).toEqual(errors[0]);
  });

  it('the run`s own agent delegates a piece of its work inside its run: accepted, the handoff names the run (as documented: its failures may stop that run)', () => {
    const create = cmd.create({ from_agent: 'coder', to_agent: 'helper', workflow_run_id: RUN, run_turn: running('coder') }, meta('coder'));
    const [created] = given(handoffDecider)
      .when(create)
      .thenMatch([{ type: 'handoff.created' }]);
    expect(created!.data).toMatchObject({ from_agent: 'coder', to_agent: 'helper', workflow_run_id: RUN });
    // What the ledger read is not recorded: the event is the same as before the rule.
    expect(created!.data).not.toHaveProperty('run_turn');
    // ... also to itself (its own run: it could fail its own step as well).
    given(handoffDecider)
      .when(cmd.create({ from_agent: 'coder', to_agent: 'coder', workflow_run_id: RUN, run_turn: running('coder') }, meta('coder')))
      .thenMatch([{ type: 'handoff.created' }]);
  });

  it('a conversation agent waiting for the customer is still the run`s agent', () => {
    const turn = evolveRunTurn(running('coder'), { type: 'run.awaiting_input', data: { agent: 'mallory', step: 's', reply: null } } as unknown as RunEvent);
    expect(turn).toEqual(running('mallory'));
    given(handoffDecider)
      .when(selfAddressed(turn))
      .thenMatch([{ type: 'handoff.created' }]);
  });

  it('a retry of a create stored while the run waited for its sender is answered as stored after the run moved on; a new key is refused', () => {
    const first = cmd.create({ from_agent: 'coder', to_agent: 'helper', workflow_run_id: RUN, run_turn: running('coder') }, meta('coder'));
    const stored = given(handoffDecider)
      .when(first)
      .thenMatch([{ type: 'handoff.created' }]);
    const moved: CreateHandoff = { ...first, data: { ...first.data, run_turn: running('reviewer') } };
    given(handoffDecider, stored).when(moved).then([]);
    given(handoffDecider, stored)
      .when({ ...moved, data: { ...moved.data, handoff_id: 'h-2', idempotency_key: 'create:h-2' } })
      .thenFails('not_in_run');
  });

  it('nothing is checked for a create naming no run, for the services (the router names the runs it routes), or without the ledger`s read (a command not sent through it)', () => {
    given(handoffDecider)
      .when(cmd.create({ from_agent: 'mallory', to_agent: 'mallory', run_turn: running('coder') }, meta('mallory')))
      .thenMatch([{ type: 'handoff.created' }]);
    given(handoffDecider)
      .when(
        cmd.create({ from_agent: 'coder', to_agent: 'coder', workflow_run_id: RUN, run_turn: { status: 'none', agent: null } }, meta('baton-router', 'system')),
      )
      .thenMatch([{ type: 'handoff.created' }]);
    given(handoffDecider)
      .when(cmd.create({ from_agent: 'mallory', to_agent: 'mallory', workflow_run_id: RUN }, meta('mallory')))
      .thenMatch([{ type: 'handoff.created' }]);
  });

  it('a cross-project create names a run of its source project: refused there unless that run waits for the delegator, the refusal naming the source project', () => {
    const cross = (turn: RunTurn): CreateHandoff =>
      cmd.create(
        {
          project: 'target',
          from_agent: 'mallory',
          to_agent: 'bob',
          workflow_run_id: RUN,
          target_project: 'target',
          cto_override: 'dec-1',
          cross_project: { source_project: PROJECT, source_visible: ['mallory', 'coder'], target_visible: ['bob'], target_accepts: true },
          run_turn: turn,
        },
        meta('mallory'),
      );
    const error = given(handoffDecider)
      .when(cross(running('coder')))
      .thenFails('not_in_run');
    expect(error.details).toEqual({ workflow_run_id: RUN, run_project: PROJECT });
    const [created] = given(handoffDecider)
      .when(cross(running('mallory')))
      .thenMatch([{ type: 'handoff.created' }]);
    expect(created!.data).toMatchObject({ project: 'target', source_project: PROJECT, workflow_run_id: RUN });
  });

  it('before the rule such a handoff was stored; one stored then folds as it did (the rule reads no event)', () => {
    // An event an earlier ledger stored for mallory's self-addressed create naming coder's run.
    const old = given(handoffDecider).when(cmd.create({ from_agent: 'mallory', to_agent: 'mallory', workflow_run_id: RUN }, meta('mallory'))).then;
    const events = old([expect.objectContaining({ type: 'handoff.created' }) as HandoffEvent]);
    expect(fold(handoffDecider, events)).toMatchObject({ status: 'pending', workflow_run_id: RUN, from_agent: 'mallory' });
  });
});

describe('the run turn the ledger reads (runTurnFold)', () => {
  const turnOf = (events: readonly RunEvent[]): RunTurn => events.reduce(evolveRunTurn, runTurnFold.initialState());
  const view = (state: RunState): RunTurn => (state.status === 'none' ? { status: 'none', agent: null } : { status: state.status, agent: state.agent });

  /** A few moves a run takes: results of its agent or of another, with decisions that route, hold, call or end it; a hold answered; a stop. */
  const moveArb = fc.record({ kind: fc.nat(9), pick: fc.nat(50) });
  function commandFor(state: RunState, move: { kind: number; pick: number }, i: number): RunCommand {
    if (state.status === 'none') return startCmd();
    const other = agents[move.pick % agents.length]!.name;
    if (state.status === 'held' && move.kind < 5) return holdAnswer(`a${i}`, move.kind < 2 ? 'continue' : move.kind < 4 ? 'reroute' : 'terminate', other);
    switch (move.kind) {
      case 0:
        return { type: 'stop', data: { packet_id: `wd${i}`, why: 'circuit_open', tried: ['x'] }, metadata: runMeta };
      case 1:
        return decided(`r${i}`, state.agent, { dispatch: { status: 'hold', reason: 'wait' } });
      case 2:
        return decided(`r${i}`, state.agent, { function_call: { function: 'call_agent', agent_name: other } });
      case 3:
        return decided(`r${i}`, state.agent, { dispatch: { status: 'terminate' } });
      case 4:
        return resultCmd(`r${i}`, other, { body: 'not my turn' });
      default:
        return decided(`r${i}`, state.agent, { dispatch: { status: 'advance' } });
    }
  }

  it('is the run fold`s status and agent (the agent whose result the run waits for), event for event', () => {
    const reached = new Set<string>();
    fc.assert(
      fc.property(fc.array(moveArb, { minLength: 1, maxLength: 30 }), (moves) => {
        let state: RunState = initialRunState();
        const events: RunEvent[] = [];
        moves.forEach((move, i) => {
          const outcome = claimedRunDecider.decide(commandFor(state, move, i), state);
          if (!outcome.ok) return;
          for (const event of outcome.events) {
            state = evolveRun(state, event);
            events.push(event);
            expect(turnOf(events)).toEqual(view(state));
            reached.add(state.status);
          }
        });
      }),
      {
        numRuns: 200,
        // Walks that reach each status the rule reads, so that reaching them never rests on chance
        // alone: stopped, terminated, held, and advanced through the human gate to its end (completed).
        examples: [[0], [3], [1], [9, 9, 9, 9, 9, 1, 9, 9, 9, 9]].map((kinds) => [[{ kind: 9, pick: 0 }, ...kinds.map((kind) => ({ kind, pick: 0 }))]]),
      },
    );
    // The walks reach every status the rule reads.
    expect([...reached].sort()).toEqual(['completed', 'held', 'running', 'stopped', 'terminated']);
  });

  it('reads a stream the run fold would refuse for its agent (routes with no start), and keeps nothing else', () => {
    const routed = { type: 'run.routed', data: { target: { agent: 'coder', step: 's' } } } as unknown as RunEvent;
    expect(turnOf([routed])).toEqual(running('coder'));
    expect(() => fold({ evolve: evolveRun, initialState: initialRunState }, [routed])).toThrow(/corrupt run stream/);
    expect(turnOf([{ type: 'run.stopped', data: {} } as unknown as RunEvent])).toEqual({ status: 'none', agent: null });
    expect(runTurnFold.cacheHistory).toBe(0);
  });
});
