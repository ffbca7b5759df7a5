import { ProjectDefinitionSchema, type WorkflowDefinition } from '@baton/contracts';
import { guardFactOf, OwnTurnRefusalCodes, type RunEvent, type RunState } from '@baton/domain';
import { routerRunDecider, type RouterRunCommand } from './router-run.decider';

/*
 * What the run's OWN agent can write onto its run: before, every refused result of the agent a run
 * waited for was recorded (`run.result_rejected`), on a run that had ended or stopped too — an agent
 * could append events to its own finished run for ever. Now, while the run waits for no agent
 * result (held, stopped, finished, waiting for the customer), the run records at most the cap
 * (ROUTER_FOREIGN_REFUSALS_PER_RUN) of them per agent, counted in its own events (`idleRefusals`);
 * past it `reject_result` is refused `idle_refusals_spent`. Its refusals on its own running turn
 * (the claim rule's, which the circuit reads) are still each recorded.
 */

const NOW = '2025-01-01T00:00:00.000Z';
const definition = ProjectDefinitionSchema.parse({
  project: 'demo',
  agents: [{ name: 'issue' }, { name: 'context' }],
  workflows: [
    {
      name: 'flow',
      version: 1,
      entry: 'triage',
      steps: [
        { id: 'triage', agent: 'issue', next: 'gather' },
        { id: 'gather', agent: 'context' },
      ],
    },
  ],
});
const workflow: WorkflowDefinition = definition.workflows[0]!;

const apply = (state: RunState, events: readonly RunEvent[]) => events.reduce((s: RunState, e: RunEvent) => routerRunDecider.evolve(s, e), state);

function started(): RunState {
  const decided = routerRunDecider.decide(
    {
      kind: 'start',
      command: {
        type: 'start_run',
        data: { workflow_run_id: 'wr-1', project: 'demo', workflow, people: { started_by: 'sam', issue_author: null, trigger_author: null } },
        metadata: { now: NOW, actor: 'sam' },
      },
    },
    routerRunDecider.initialState(),
  );
  if (!decided.ok) throw new Error(decided.error.message);
  return apply(routerRunDecider.initialState(), decided.events);
}

/** The run stopped from outside (the watchdog's request). */
function stopped(): RunState {
  const decided = routerRunDecider.decide(
    {
      kind: 'stop',
      command: { type: 'stop', data: { packet_id: 'wd-1', why: 'circuit_open', tried: [] }, metadata: { now: NOW, actor: 'baton-watchdog' } },
    } as RouterRunCommand,
    started(),
  );
  if (!decided.ok) throw new Error(decided.error.message);
  return apply(started(), decided.events);
}

const rejectCmd = (agent: string, id: string, cap: number, code: string): RouterRunCommand => ({
  kind: 'reject',
  command: {
    type: 'reject_result',
    data: { result_id: id, agent, code, message: `refused ${id}`, refused: 'result' },
    metadata: { now: NOW, actor: 'baton-router' },
  },
  foreignCap: cap,
});

const play = (state: RunState, commands: RouterRunCommand[]) => {
  const refused: string[] = [];
  const events: RunEvent[] = [];
  for (const command of commands) {
    const decided = routerRunDecider.decide(command, state);
    if (!decided.ok) refused.push(decided.error.code);
    else {
      events.push(...decided.events);
      state = apply(state, decided.events);
    }
  }
  return { state, refused, events };
};

describe('refused results of the run`s own agent while the run waits for no result are recorded up to the cap (idle_refusals_spent)', () => {
  it('a stopped run records the cap of its own agent`s refused results, then refuses the rest idle_refusals_spent, naming the refusal and the cap', () => {
    const run = stopped();
    expect(run).toMatchObject({ status: 'stopped', agent: 'issue' });
    const { state, refused } = play(
      run,
      Array.from({ length: 10 }, (_, i) => rejectCmd('issue', `late-${i}`, 3, 'run_not_running')),
    );
    expect(refused).toEqual(Array(7).fill('idle_refusals_spent'));
    expect(state.status !== 'none' && state.idleRefusals).toEqual({ issue: 3 });
    expect(state.status !== 'none' && state.foreignRefusals).toBeNull();
    const past = routerRunDecider.decide(rejectCmd('issue', 'late-9', 3, 'run_not_running'), state);
    expect(past).toMatchObject({
      ok: false,
      error: { code: 'idle_refusals_spent', kind: 'forbidden', details: { agent: 'issue', refused_code: 'run_not_running', recorded: 3, cap: 3 } },
    });
    expect(!past.ok && past.error.message).toContain(
      "result late-9 of 'issue' refused (run_not_running: refused late-9); not recorded on run wr-1, which is stopped",
    );
    // A redelivery of one recorded before the cap: accepted, nothing new.
    expect(routerRunDecider.decide(rejectCmd('issue', 'late-1', 3, 'run_not_running'), state)).toEqual({ ok: true, events: [] });
    // Another agent's are held to the foreign cap, counted apart.
    expect(play(state, [rejectCmd('context', 'c-0', 3, 'run_not_running'), rejectCmd('context', 'c-1', 3, 'run_not_running')]).refused).toEqual([]);
  });

  it('a finished run too: its last agent cannot append refusals to it for ever', () => {
    const run = stopped();
    if (run.status !== 'stopped') throw new Error('not stopped');
    const terminated = routerRunDecider.evolve(run, { type: 'run.terminated', data: { reason: 'denied', terminated_at: NOW } } as unknown as RunEvent);
    expect(terminated.status).toBe('terminated');
    expect(
      play(
        terminated,
        Array.from({ length: 5 }, (_, i) => rejectCmd('issue', `x-${i}`, 2, 'run_not_running')),
      ).refused,
    ).toEqual(['idle_refusals_spent', 'idle_refusals_spent', 'idle_refusals_spent']);
  });

  it('a run waiting for the customer`s message waits for no result either: its agent`s awaiting_input refusals are capped alike', () => {
    const waiting = routerRunDecider.evolve(started(), {
      type: 'run.awaiting_input',
      data: { agent: 'issue', step: 'triage', reply: null, at: NOW },
    } as RunEvent);
    expect(waiting).toMatchObject({ status: 'running', awaitingInput: true });
    const { state, refused } = play(
      waiting,
      Array.from({ length: 4 }, (_, i) => rejectCmd('issue', `w-${i}`, 1, 'awaiting_input')),
    );
    expect(refused).toEqual(Array(3).fill('idle_refusals_spent'));
    expect(state.status !== 'none' && state.idleRefusals).toEqual({ issue: 1 });
  });

  it('its refusals on its own running turn are each recorded (the circuit reads them), and count nothing against the cap; 0 is no cap', () => {
    const own = play(
      started(),
      Array.from({ length: 10 }, (_, i) => rejectCmd('issue', `own-${i}`, 1, 'claim_mismatch')),
    );
    expect(own.refused).toEqual([]);
    expect(own.state.status !== 'none' && own.state.idleRefusals).toBeNull();
    // Each of those is a failure on the run, as the guards read it.
    const refusals = own.events.filter((e) => e.type === 'run.result_rejected');
    expect(refusals).toHaveLength(10);
    expect([...OwnTurnRefusalCodes]).toContain('claim_mismatch');
    expect(
      play(
        stopped(),
        Array.from({ length: 10 }, (_, i) => rejectCmd('issue', `n-${i}`, 0, 'run_not_running')),
      ).refused,
    ).toEqual([]);
  });

  it('the refusals it caps are none a guard reads as a failure on the run', () => {
    for (const code of ['run_not_running', 'awaiting_input']) expect(OwnTurnRefusalCodes.has(code)).toBe(false);
    const fact = guardFactOf({
      id: 'e-1',
      type: 'run.result_rejected',
      version: 1,
      project: 'demo',
      aggregate: { kind: 'run', id: 'wr-1' },
      payload: { result_id: 'x', agent: 'issue', code: 'run_not_running', message: 'm', rejected_at: NOW, refused: 'result' },
    } as unknown as Parameters<typeof guardFactOf>[0]);
    expect(fact).toBeNull();
  });
});
