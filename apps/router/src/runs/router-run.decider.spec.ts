import { AgentResultSchema, ProjectDefinitionSchema, type AgentResult, type DefinitionEvent, type WorkflowDefinition } from '@baton/contracts';
import { fold, type HandoffClaimView, type RunEvent, type RunState } from '@baton/domain';
import { definitionDecider } from '../definitions/definition.decider';
import { routerRunDecider, type RouterRunCommand } from './router-run.decider';

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
const definitions = fold(definitionDecider, [
  { type: 'definition.published', data: { definition, digest: 'd1', published_by: 'olga', published_at: NOW } } satisfies DefinitionEvent,
]);
const none = fold(definitionDecider, []);

function started(): RunState {
  const start: RouterRunCommand = {
    kind: 'start',
    command: {
      type: 'start_run',
      data: { workflow_run_id: 'wr-1', project: 'demo', workflow, people: { started_by: 'sam', issue_author: null, trigger_author: null } },
      metadata: { now: NOW, actor: 'sam' },
    },
  };
  const decided = routerRunDecider.decide(start, routerRunDecider.initialState());
  if (!decided.ok) throw new Error(decided.error.message);
  return decided.events.reduce((s: RunState, e: RunEvent) => routerRunDecider.evolve(s, e), routerRunDecider.initialState());
}

/** The entry handoff of the started run, and the claim `agent` holds on it. */
const ENTRY = 'ho-s-wr-1';
const claimOf = (agent: string): HandoffClaimView => ({ handoff_id: ENTRY, status: 'claimed', claim: { claim_id: `claim-${agent}`, claimed_by: agent } });

const result = (agent: string, id = 'r1'): AgentResult => ({
  result_id: id,
  run_id: `ar-${id}`,
  project: 'demo',
  workflow_run_id: 'wr-1',
  agent,
  body: '<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "advance"}} -->',
  handoff_id: ENTRY,
  claim_id: `claim-${agent}`,
  produced_at: NOW,
});
const recordCmd = (agent: string, defs = definitions, id = 'r1', handoff: HandoffClaimView | null = claimOf(agent)): RouterRunCommand => ({
  kind: 'result',
  result: result(agent, id),
  definitions: defs,
  metadata: { now: NOW, actor: agent },
  handoff,
});

describe('the router run decider (record_result with the pinned workflow looked up on the folded run)', () => {
  it('routes a result over the workflow version the run started on', () => {
    const decided = routerRunDecider.decide(recordCmd('issue'), started());
    expect(decided.ok && decided.events.map((e) => e.type)).toEqual(['run.result_recorded', 'run.routed']);
  });

  it('the recorded result names the claim it was accepted under (the ledger voids a lapse of it that lands first)', () => {
    const decided = routerRunDecider.decide(recordCmd('issue'), started());
    if (!decided.ok) throw new Error(decided.error.message);
    expect(decided.events[0]).toMatchObject({ type: 'run.result_recorded', data: { result_id: 'r1', claim_id: 'claim-issue' } });
  });

  it('a message or an answer whose id is one of the run`s result ids is decided, not taken as already applied (ids of each kind are apart)', () => {
    const decided = routerRunDecider.decide(recordCmd('issue'), started());
    if (!decided.ok) throw new Error(decided.error.message);
    const after = decided.events.reduce((s: RunState, e: RunEvent) => routerRunDecider.evolve(s, e), started());
    // This run is no conversation: the message r1 is decided, and refused for that, not swallowed as the result r1.
    const message: RouterRunCommand = { kind: 'message', message: { message_id: 'r1', text: 'hello' }, definitions, metadata: { now: NOW, actor: 'sam' } };
    expect(routerRunDecider.decide(message, after)).toMatchObject({ ok: false });
    // The run is running: the answer r1 is decided, and refused for that (nothing is held or stopped).
    const answer: RouterRunCommand = {
      kind: 'answer',
      answer: { kind: 'hold_answer', answer: { answer_id: 'r1', action: 'continue', answered_by: 'olga', answered_at: NOW } },
      definitions,
      metadata: { now: NOW, actor: 'olga', actorRole: 'operator' },
    };
    expect(routerRunDecider.decide(answer, after)).toMatchObject({ ok: false });
  });

  it("the handoff the router read reaches the claim rule: unread, pending or another agent's claim is refused", () => {
    expect(routerRunDecider.decide(recordCmd('issue', definitions, 'r1', null), started())).toMatchObject({
      ok: false,
      error: { code: 'handoff_not_claimed' },
    });
    const pending: HandoffClaimView = { handoff_id: ENTRY, status: 'pending', claim: null };
    expect(routerRunDecider.decide(recordCmd('issue', definitions, 'r1', pending), started())).toMatchObject({
      ok: false,
      error: { code: 'handoff_not_claimed' },
    });
    expect(routerRunDecider.decide(recordCmd('issue', definitions, 'r1', claimOf('context')), started())).toMatchObject({
      ok: false,
      error: { code: 'claim_mismatch' },
    });
    const { handoff: _unread, ...noView } = recordCmd('issue') as Extract<RouterRunCommand, { kind: 'result' }>;
    expect(routerRunDecider.decide(noView, started())).toMatchObject({ ok: false, error: { code: 'handoff_not_claimed' } });
  });

  it.each([
    ['a typed decision', { decision: { dispatch: { status: 'advance', origin: 'engine_fallback' } } }],
    ['a body sentinel', { body: '<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"advance","origin":"engine_fallback"}} -->' }],
  ] as const)('seed 000 §5: %s may carry a dispatch origin, but a claimed engine_fallback is recorded as the agent`s own decision', (_name, part) => {
    const claimed: AgentResult = AgentResultSchema.parse({ ...result('issue'), ...part });
    const decided = routerRunDecider.decide({ ...(recordCmd('issue') as Extract<RouterRunCommand, { kind: 'result' }>), result: claimed }, started());
    if (!decided.ok) throw new Error(decided.error.message);
    const routed = decided.events.find((e) => e.type === 'run.routed');
    // Routed over the workflow edge as the agent asked, not held as an unparseable sentinel; provenance is Baton's.
    expect(routed).toMatchObject({ data: { decision: { rule: 'workflow_edge', dispatch: { status: 'advance', origin: 'agent' } } } });
  });

  it('a result from an agent the project does not list is refused with unknown_agent', () => {
    expect(routerRunDecider.decide(recordCmd('ghost'), started())).toMatchObject({ ok: false, error: { code: 'unknown_agent' } });
  });

  it('a pinned workflow missing from the definitions given is definition_missing (the caller re-reads them)', () => {
    expect(routerRunDecider.decide(recordCmd('issue', none), started())).toMatchObject({ ok: false, error: { code: 'definition_missing' } });
  });

  it('a result for a run that never started is run_not_found', () => {
    expect(routerRunDecider.decide(recordCmd('issue'), routerRunDecider.initialState())).toMatchObject({ ok: false, error: { code: 'run_not_found' } });
  });

  it('a result id already applied yields no events, even when it was refused the first time', () => {
    const state = started();
    const refused = routerRunDecider.decide(
      {
        kind: 'reject',
        command: {
          type: 'reject_result',
          data: { result_id: 'r9', agent: 'ghost', code: 'unknown_agent', message: 'no' },
          metadata: { now: NOW, actor: 'baton-router' },
        },
      },
      state,
    );
    if (!refused.ok) throw new Error(refused.error.message);
    const after = refused.events.reduce((s: RunState, e: RunEvent) => routerRunDecider.evolve(s, e), state);
    expect(routerRunDecider.decide(recordCmd('ghost', definitions, 'r9'), after)).toEqual({ ok: true, events: [] });
  });
});

describe('the run events a cut-short command may be completed behind (passive)', () => {
  it('are the records that decide nothing for later commands: a refused input and a notice; every event that moves the run is not', () => {
    expect(['run.result_rejected', 'run.notice_emitted'].every((type) => routerRunDecider.passive?.(type))).toBe(true);
    for (const type of [
      'run.started',
      'run.result_recorded',
      'run.routed',
      'run.held',
      'run.stopped',
      'run.resumed',
      'run.completed',
      'run.terminated',
      'run.message_received',
      'run.handoff',
    ]) {
      expect({ type, passive: routerRunDecider.passive?.(type) }).toEqual({ type, passive: false });
    }
  });
});

describe('a result completed after its append was cut short (resuming)', () => {
  it("is decided again under the claim its stored run.result_recorded names, whatever the handoff's claim is now; a record of another result or claim changes nothing", () => {
    const first = routerRunDecider.decide(recordCmd('issue'), started());
    if (!first.ok) throw new Error(first.error.message);
    const [recorded] = first.events as [Extract<RunEvent, { type: 'run.result_recorded' }>];
    // The ledger completed the handoff from that record: judged on that, the result is refused.
    const retry = recordCmd('issue', definitions, 'r1', { ...claimOf('issue'), status: 'completed' });
    expect(routerRunDecider.decide(retry, started())).toMatchObject({ ok: false, error: { code: 'handoff_not_claimed' } });
    const resumed = routerRunDecider.resuming?.(retry, [recorded]);
    expect(resumed).toEqual({ ...retry, claimRecorded: true });
    expect(routerRunDecider.decide(resumed!, started())).toEqual(first);
    for (const other of [
      { ...recorded, data: { ...recorded.data, result_id: 'r2' } },
      { ...recorded, data: { ...recorded.data, claim_id: 'claim-old' } },
    ]) {
      expect(routerRunDecider.resuming?.(retry, [other])).toBe(retry);
    }
    expect(routerRunDecider.resuming?.(recordCmd('issue'), [])).toEqual(recordCmd('issue'));
  });
});

describe('refused results of an agent the run does not wait for are recorded up to a cap (ROUTER_FOREIGN_REFUSALS_PER_RUN)', () => {
  /** The router's `reject` of `agent`'s result `id` (refused `code`), with the cap. */
  const rejectCmd = (agent: string, id: string, cap: number, code = 'unexpected_agent'): RouterRunCommand => ({
    kind: 'reject',
    command: {
      type: 'reject_result',
      data: { result_id: id, agent, code, message: `refused ${id}`, refused: 'result', handoff_id: ENTRY, claim_id: 'claim-made-up' },
      metadata: { now: NOW, actor: 'baton-router' },
    },
    foreignCap: cap,
  });
  /** Decide each command on the state the ones before left, as the store does; the codes of the refusals. */
  const play = (state: RunState, commands: RouterRunCommand[]) => {
    const refused: string[] = [];
    for (const command of commands) {
      const decided = routerRunDecider.decide(command, state);
      if (!decided.ok) refused.push(decided.error.code);
      else state = decided.events.reduce((s: RunState, e: RunEvent) => routerRunDecider.evolve(s, e), state);
    }
    return { state, refused };
  };
  const rejectedOn = (state: RunState) => (state.status === 'none' ? [] : [...state.processedIds]);

  it('another agent`s refused results: the first `cap` are recorded, the rest refused foreign_refusals_spent with the refusal it stands for', () => {
    const { state, refused } = play(
      started(),
      Array.from({ length: 10 }, (_, i) => rejectCmd('context', `spam-${i}`, 3)),
    );
    expect(refused).toEqual(Array(7).fill('foreign_refusals_spent'));
    expect(rejectedOn(state)).toEqual(['wr-1', 'spam-0', 'spam-1', 'spam-2']);
    expect(state.status !== 'none' && state.foreignRefusals).toEqual({ context: 3 });
    const past = routerRunDecider.decide(rejectCmd('context', 'spam-9', 3), state);
    expect(past).toMatchObject({
      ok: false,
      error: { code: 'foreign_refusals_spent', kind: 'forbidden', details: { agent: 'context', refused_code: 'unexpected_agent', recorded: 3, cap: 3 } },
    });
    expect(!past.ok && past.error.message).toContain('unexpected_agent: refused spam-9');
    // A refusal recorded before the cap was reached is a redelivery: accepted, nothing new.
    expect(routerRunDecider.decide(rejectCmd('context', 'spam-1', 3), state)).toEqual({ ok: true, events: [] });
  });

  it('the run`s own agent`s refused results are always recorded, and count nothing against another agent`s cap; 0 is no cap', () => {
    const own = play(
      started(),
      Array.from({ length: 10 }, (_, i) => rejectCmd('issue', `own-${i}`, 1, 'claim_mismatch')),
    );
    expect(own.refused).toEqual([]);
    expect(own.state.status !== 'none' && own.state.foreignRefusals).toBeNull();
    expect(play(own.state, [rejectCmd('context', 'c-0', 1), rejectCmd('context', 'c-1', 1)]).refused).toEqual(['foreign_refusals_spent']);
    expect(
      play(
        started(),
        Array.from({ length: 10 }, (_, i) => rejectCmd('context', `c-${i}`, 0)),
      ).refused,
    ).toEqual([]);
  });

  it('each agent has its own count on each run, and answers and messages are not counted', () => {
    const answer: RouterRunCommand = {
      kind: 'reject',
      command: {
        type: 'reject_result',
        data: { result_id: 'a-1', agent: 'operator', code: 'run_not_stopped', message: 'no', refused: 'answer' },
        metadata: { now: NOW, actor: 'baton-router' },
      },
      foreignCap: 1,
    };
    const { state, refused } = play(started(), [
      rejectCmd('context', 'c-0', 1),
      rejectCmd('ghost', 'g-0', 1),
      answer,
      { ...answer, command: { ...answer.command, data: { ...answer.command.data, result_id: 'a-2' } } },
    ]);
    expect(refused).toEqual([]);
    expect(state.status !== 'none' && state.foreignRefusals).toEqual({ context: 1, ghost: 1 });
  });
});
