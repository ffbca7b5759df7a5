import { ProjectDefinitionSchema, type ProjectDefinition } from '@baton/contracts';
import { decideRun, evolveRun, initialRunState, v8Shapes, type RunCommand, type RunState } from '@baton/domain';
import type { JsonValue } from '../canonical-json';
import type { SequencedEvent } from '../store';
import { lastSeqOfState, runsProjection, runViewOf, runViewOfState, MAX_VIEW_ROUTES, appendRoute, RunKeys, type RunRoute, type RunView } from './runs';

/*
 * The run view (issue 14): the waiting parent of a returnable handoff, each route's rule and
 * reason, and the run's variables with the declared ones apart from the implicit ones — the same
 * from the `runs` projection (folded event by event, its state kept between events) and from a
 * fold of the events (`runViewOf`: `baton run --at`, the notifier's answer outcomes).
 */

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const at = (s: number) => new Date(T0 + s * 1000).toISOString();

function loanProject(): ProjectDefinition {
  return ProjectDefinitionSchema.parse({
    project: 'loans',
    agents: [
      {
        name: 'Loan_Supervisor',
        supervisor: true,
        memory: [
          { name: 'annual_income', type: 'number' },
          { name: 'income_note', type: 'string' },
        ],
        handoffs: [
          {
            to: 'Income_Capture_Agent',
            when: { kind: 'expression', source: 'annual_income IS NOT SET' },
            summary: "Collect the applicant's annual income, then return.",
            return: true,
            on_return: { action: 'continue', map: { annual_income: 'annual_income' } },
          },
        ],
      },
      { name: 'Income_Capture_Agent', gather: [{ name: 'annual_income', type: 'number', required: true }] },
    ],
    workflows: [{ name: 'loan_session', version: 1, entry: 'converse', steps: [{ id: 'converse', agent: 'Loan_Supervisor', terminal: true }] }],
  });
}

/** Decide `commands` in turn on one run and give its events as the stream would hold them. */
function play(commands: RunCommand[]): SequencedEvent[] {
  let state: RunState = initialRunState();
  const out: SequencedEvent[] = [];
  for (const command of commands) {
    const decided = decideRun(command, state);
    if (!decided.ok) throw new Error(`${decided.error.code}: ${decided.error.message}`);
    for (const event of decided.events) {
      state = evolveRun(state, event);
      const seq = out.length + 1;
      out.push({
        id: `e${seq}`,
        type: event.type,
        version: 1,
        aggregate: { kind: 'run', id: 'wr-1' },
        project: 'loans',
        occurredAt: command.metadata.now,
        actor: 'router',
        origin: 'engine_fallback',
        causationId: null,
        correlationId: 'wr-1',
        payload: event.data,
        seq,
      });
    }
  }
  return out;
}

/**
 * Fold `events` through the `runs` projection as the engine does (the folded state handed from one
 * event to the next, as stored; the routes' sorted set gathered from the ops) and return the view a
 * reader renders from them.
 */
function projected(events: readonly SequencedEvent[]): RunView {
  const projection = runsProjection();
  let state: JsonValue | null = null;
  const routes = new Map<number, string>();
  for (const event of events) {
    const step = projection.step(state, event);
    if (step.state !== undefined) state = JSON.parse(JSON.stringify(step.state)) as JsonValue;
    // The view is not stored beside the state: no op writes it.
    expect(step.ops.filter((op) => op.op === 'json.set')).toEqual([]);
    for (const op of step.ops) if (op.op === 'zadd' && op.key === RunKeys.routes(event.project, event.aggregate.id)) routes.set(op.score, op.member);
  }
  const lastSeq = lastSeqOfState(state);
  if (lastSeq === null) throw new Error('no run');
  const upToState = [...routes].filter(([seq]) => seq <= lastSeq).sort(([a], [b]) => a - b);
  const view = runViewOfState(
    state,
    upToState.map(([, member]) => member),
  );
  if (view === null) throw new Error('no view');
  return view;
}

const project = loanProject();
const start: RunCommand = {
  type: 'start_run',
  data: {
    workflow_run_id: 'wr-1',
    project: 'loans',
    workflow: project.workflows[0]!,
    agents: project.agents,
    people: { started_by: 'sam', issue_author: null, trigger_author: null },
    // As the router starts it: the start's input is also the variable `input`.
    variables: { channel: 'web', input: 'I want a loan offer' },
    input: 'I want a loan offer',
  },
  metadata: { now: at(0), actor: 'sam' },
};

describe('the run view: waiting parents, routes with rule and reason, declared and implicit variables', () => {
  it('a returnable handoff shows its waiting parent (the return address), and the route that made it with its rule and reason', () => {
    const events = play([start]);
    const view = runViewOf(events)!;
    expect(view.waiting_parents).toEqual([
      {
        agent: 'Loan_Supervisor',
        step: 'converse',
        handoff_id: expect.any(String),
        child: 'Income_Capture_Agent',
        since: at(0),
        on_return: expect.objectContaining({ action: 'continue', map: { annual_income: 'annual_income' } }),
        child_variables: {},
        original_utterance: 'I want a loan offer',
        replay_depth: 0,
      },
    ]);
    expect(view.agent).toBe('Income_Capture_Agent');
    expect(view.pending_handoff).toMatchObject({ from: 'Loan_Supervisor', to: 'Income_Capture_Agent', return_expected: true, route: 0 });
    expect(view.routes).toEqual([
      {
        seq: expect.any(Number),
        at: at(0),
        event: 'run.routed',
        outcome: 'dispatch',
        rule: 'handoff',
        reason: "returnable handoff Loan_Supervisor → Income_Capture_Agent: Collect the applicant's annual income, then return.",
        origin: 'engine_fallback',
        status: 'advance',
        from: { agent: 'Loan_Supervisor', step: 'converse' },
        to: { agent: 'Income_Capture_Agent', step: 'converse' },
        hop: 1,
        handoff_id: view.waiting_parents[0]!.handoff_id,
        cause: { kind: 'start', id: 'wr-1' },
        handoff: { return_expected: true, route: 0 },
      },
    ]);
  });

  it('a result naming nothing shows as a route: the router`s unresolved decision, its engine_fallback hold and reason, recorded with the unknown_intent stop', () => {
    const flow = ProjectDefinitionSchema.parse({
      project: 'loans',
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
    const shared = { workflow: flow.workflows[0]!, agents: flow.agents };
    const begin: RunCommand = {
      type: 'start_run',
      data: { workflow_run_id: 'wr-1', project: 'loans', ...shared, people: { started_by: 'sam', issue_author: null, trigger_author: null } },
      metadata: { now: at(0), actor: 'sam' },
    };
    const handoff = 'ho-s-wr-1';
    const unknown: RunCommand = {
      type: 'record_result',
      data: {
        result: {
          result_id: 'r1',
          run_id: 'ar-r1',
          project: 'loans',
          workflow_run_id: 'wr-1',
          agent: 'issue',
          produced_at: at(1),
          decision: { task: 'poem' },
          handoff_id: handoff,
          claim_id: 'c1',
        },
        ...shared,
        handoff: { handoff_id: handoff, status: 'claimed', claim: { claim_id: 'c1', claimed_by: 'issue' } },
      },
      metadata: { now: at(1), actor: 'issue' },
    };
    const events = play([begin, unknown]);
    for (const view of [runViewOf(events)!, projected(events)]) {
      expect(view.status).toBe('stopped');
      expect(view.routes.at(-1)).toMatchObject({
        event: 'run.stopped',
        outcome: 'unresolved',
        origin: 'engine_fallback',
        status: 'hold',
        reason: expect.stringMatching(/^unresolved target: /),
        from: { agent: 'issue', step: 'triage' },
        to: null,
        cause: { kind: 'result', id: 'r1' },
      });
    }
  });

  it('variables: the declared ones (MEMORY, GATHER) apart from the implicit ones (the input, start variables no agent declares); declared but unset are named', () => {
    const view = runViewOf(play([start]))!;
    expect(view.variables).toEqual({ channel: 'web', input: 'I want a loan offer' });
    expect(view.declared_variables).toEqual({});
    expect(view.implicit_variables).toEqual({ channel: 'web', input: 'I want a loan offer' });
    expect(view.unset_declared_variables).toEqual(['annual_income', 'income_note']);

    const withIncome = runViewOf(play([{ ...start, data: { ...start.data, variables: { ...start.data.variables, annual_income: 52000 } } } as RunCommand]))!;
    expect(withIncome.declared_variables).toEqual({ annual_income: 52000 });
    expect(withIncome.implicit_variables).toEqual({ channel: 'web', input: 'I want a loan offer' });
    expect(withIncome.unset_declared_variables).toEqual(['income_note']);
    // With its income known the gate's WHEN is false: no handoff, nobody waits, the supervisor has the message.
    expect(withIncome.waiting_parents).toEqual([]);
    expect(withIncome.routes.map((r) => [r.rule, r.to?.agent, r.reason])).toEqual([
      ['message', 'Loan_Supervisor', 'Loan_Supervisor handles the first message'],
    ]);
  });

  it('a run whose start recorded no declarations (older runs) shows its variables together: declared and implicit are null', () => {
    const events = play([start]).map((e) => (e.type === 'run.started' ? { ...e, payload: { ...(e.payload as object), declared_variables: undefined } } : e));
    const view = runViewOf(JSON.parse(JSON.stringify(events)) as SequencedEvent[])!;
    expect(view.variables).toEqual({ channel: 'web', input: 'I want a loan offer' });
    expect([view.declared_variables, view.implicit_variables, view.unset_declared_variables]).toEqual([null, null, null]);
  });

  it('the runs projection writes the same view as a fold of the events, its routes in a sorted set of their own (not in the folded state)', () => {
    const events = play([start]);
    expect(projected(events)).toEqual(runViewOf(events));
    const projection = runsProjection();
    let state: JsonValue | null = null;
    const added: Array<[string, number]> = [];
    for (const event of events) {
      const step = projection.step(state, event);
      if (step.state !== undefined) state = step.state;
      expect(Object.keys(step.state ?? {})).not.toContain('view_routes');
      for (const op of step.ops) if (op.op === 'zadd' && op.key.startsWith('rr:')) added.push([event.type, op.score]);
    }
    // One member per route, scored by the sequence of the event that recorded it.
    const routed = events.filter((e) => e.type === 'run.routed');
    expect(routed.length).toBeGreaterThan(0);
    expect(added).toEqual(routed.map((e) => ['run.routed', e.seq]));
  });

  it('the view shows the latest hundred of the routes it is given, oldest first', () => {
    const events = play([start]);
    const projection = runsProjection();
    let state: JsonValue | null = null;
    for (const event of events) state = projection.step(state, event).state ?? state;
    const route = runViewOf(events)!.routes[0]!;
    const members = Array.from({ length: MAX_VIEW_ROUTES + 3 }, (_, i) => JSON.stringify({ ...route, seq: i + 1 }));
    expect(runViewOfState(state, members)!.routes.map((r) => r.seq)).toEqual(Array.from({ length: MAX_VIEW_ROUTES }, (_, i) => i + 4));
    expect(runViewOfState(state, [])!.routes).toEqual([]);
    expect(lastSeqOfState(state)).toBe(events[events.length - 1]!.seq);
    expect(lastSeqOfState(null)).toBeNull();
  });

  it('a seed 000 workflow run lists its entry route; the view keeps the latest routes only', () => {
    const plain = ProjectDefinitionSchema.parse({
      project: 'loans',
      agents: [{ name: 'builder' }],
      workflows: [{ name: 'build', version: 1, entry: 'make', steps: [{ id: 'make', agent: 'builder', terminal: true }] }],
    });
    const view = runViewOf(play([{ ...start, data: { ...start.data, workflow: plain.workflows[0]!, agents: plain.agents, input: undefined } } as RunCommand]))!;
    expect(view.routes.map((r: RunRoute) => [r.event, r.outcome, r.rule, r.status, r.from, r.to])).toEqual([
      ['run.routed', 'dispatch', 'entry', 'advance', null, { agent: 'builder', step: 'make' }],
    ]);
    expect(view.declared_variables).toEqual({});
    expect(view.implicit_variables).toEqual({ channel: 'web', input: 'I want a loan offer' });
    const many = Array.from({ length: MAX_VIEW_ROUTES + 5 }, (_, i) => ({ ...view.routes[0]!, seq: i + 1 }));
    const kept = many.reduce<RunRoute[]>((routes, route) => appendRoute(routes, route), []);
    expect(kept).toHaveLength(MAX_VIEW_ROUTES);
    expect(kept[0]!.seq).toBe(6);
  });
});

describe("the runs projection's state: one hidden class per shape, not one per run", () => {
  it('the states a rebuild keeps, stepped from the same events, share a hidden class and stay fast objects', () => {
    const { haveSameMap, hasFastProperties } = v8Shapes();
    const events = play([start]);
    expect(events.map((e) => e.type)).toContain('run.routed');
    // As a rebuild keeps them: each step's state object handed to the next step. (What `step` builds
    // before its canonical copy is not kept, so putting the route list before the spread in runs.ts
    // saves time, measured apart, not classes kept: this guards the kept states.)
    const statesOf = () => {
      const projection = runsProjection();
      let state: JsonValue | null = null;
      return events.map((event) => {
        const step = projection.step(state, event);
        if (step.state !== undefined) state = step.state;
        return state as object;
      });
    };
    const runs = Array.from({ length: 60 }, statesOf);
    const [a, b] = runs.slice(-2) as [object[], object[]];
    a.forEach((state, i) => expect([events[i]!.type, haveSameMap(state, b[i]!), hasFastProperties(state)]).toEqual([events[i]!.type, true, true]));
  });
});
