import { AgentRunConfig, DecisionSignal, parseSentinel, RouteDecision } from '@baton/contracts';
import { NoActionReasons } from './reasons';
import { resolveRoute, RouteInput } from './route';
import { agents, workflow } from './test-fixtures';
import { readTypedDecision } from '../run/decide';

/** Read a posted body the way the router does: its AGENT_RUN_CONFIG sentinel, or none. */
function fromBody(body: string): DecisionSignal {
  const parsed = parseSentinel(body);
  if (parsed.kind === 'config') return { kind: 'config', source: 'sentinel', config: parsed.config };
  if (parsed.kind === 'invalid') return { kind: 'invalid', diagnostic: parsed.diagnostic, code: parsed.code };
  return { kind: 'absent' };
}

const cfg = (config: AgentRunConfig): DecisionSignal => ({ kind: 'config', source: 'typed', config });
const advance = cfg({ dispatch: { status: 'advance' } });
const absent: DecisionSignal = { kind: 'absent' };

function route(at: { agent: string; step: string; callback?: string | null }, signal: DecisionSignal): RouteDecision {
  const input: RouteInput = { workflow, agents, step: at.step, agent: at.agent, callback: at.callback ?? null, signal };
  return resolveRoute(input);
}

describe('seed 000 §6 worked examples', () => {
  it('architect → context → architect (workflow edge): a dispatch-only advance with no callback follows the forward edge context → plan, which is architect', () => {
    const first = route({ agent: 'architect', step: 'analyze' }, fromBody('Analysis done.\n<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "advance"}} -->'));
    expect(first).toMatchObject({ rule: 'workflow_edge', outcome: 'dispatch', target: { agent: 'context', step: 'context' }, callback_after: null });

    const second = route(
      { agent: 'context', step: 'context', callback: null },
      fromBody('Context.\n<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "advance"}} -->'),
    );
    expect(second).toEqual({
      rule: 'workflow_edge',
      outcome: 'dispatch',
      target: { agent: 'architect', step: 'plan' },
      dispatch: { status: 'advance', reason: null, origin: 'agent' },
      callback_after: null,
    });
  });

  it('issue → context → issue (imperative call): the callback defaults to issue, and on a dispatch-only advance it wins over the workflow edge', () => {
    const call = route(
      { agent: 'issue', step: 'triage' },
      fromBody('<!-- AGENT_RUN_CONFIG {"function_call": {"function": "call_agent", "agent_name": "context"}} -->'),
    );
    expect(call).toMatchObject({ rule: 'function_call', outcome: 'dispatch', target: { agent: 'context' }, callback_after: 'issue' });

    const back = route(
      { agent: 'context', step: 'triage', callback: call.callback_after },
      fromBody('<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "advance"}} -->'),
    );
    expect(back).toMatchObject({ rule: 'callback', outcome: 'dispatch', target: { agent: 'issue', step: 'triage' }, callback_after: null });
    // Without the callback the same advance would have followed the edge triage → analyze.
    expect(route({ agent: 'context', step: 'triage' }, advance)).toMatchObject({ rule: 'workflow_edge', target: { agent: 'architect', step: 'analyze' } });
  });

  it('a decision-less agent with no return address resolves dispatch = hold (origin engine_fallback) with an observable reason, rather than continuing the workflow', () => {
    const decision = route({ agent: 'context', step: 'context' }, fromBody('Here is my answer, and no sentinel at all.'));
    expect(decision).toMatchObject({
      rule: 'no_action_default',
      outcome: 'hold',
      dispatch: { status: 'hold', reason: 'no-action default: agent emitted no decision', origin: 'engine_fallback' },
    });
  });

  it("a decision-less callee reached through a caller's function_call resolves advance and returns to the caller", () => {
    const decision = route({ agent: 'context', step: 'triage', callback: 'issue' }, fromBody('Here is my answer, and no sentinel at all.'));
    expect(decision).toEqual({
      rule: 'no_action_default',
      outcome: 'dispatch',
      target: { agent: 'issue', step: 'triage' },
      dispatch: { status: 'advance', reason: "no-action default: agent emitted no decision; returning to caller 'issue'", origin: 'engine_fallback' },
      callback_after: null,
    });
  });
});

describe('seed 000 §3 routing precedence', () => {
  it("rule 1: the callee's explicit function_call routes to agent_name, over the workflow edge", () => {
    const decision = route({ agent: 'architect', step: 'analyze' }, cfg({ function_call: { function: 'call_agent', agent_name: 'security' } }));
    expect(decision).toMatchObject({ rule: 'function_call', outcome: 'dispatch', target: { agent: 'security', step: 'analyze' } });
    expect(decision.dispatch).toEqual({ status: 'advance', reason: null, origin: 'agent' });
  });

  it('rule 1 outranks rule 2: a function_call wins over a dispatch hold in the same payload', () => {
    const decision = route(
      { agent: 'architect', step: 'analyze' },
      cfg({ function_call: { function: 'call_agent', agent_name: 'context' }, dispatch: { status: 'hold', reason: 'wait' } }),
    );
    expect(decision).toMatchObject({ rule: 'function_call', outcome: 'dispatch', target: { agent: 'context' } });
  });

  it("rule 1 outranks rule 3: the callee's own function_call wins over its registered callback", () => {
    const decision = route({ agent: 'context', step: 'triage', callback: 'issue' }, cfg({ function_call: { function: 'call_agent', agent_name: 'security' } }));
    expect(decision).toMatchObject({ rule: 'function_call', target: { agent: 'security' }, callback_after: 'context' });
  });

  it('rule 1: a function_call naming an agent the project does not have is unresolved, never guessed', () => {
    const decision = route({ agent: 'architect', step: 'analyze' }, cfg({ function_call: { function: 'call_agent', agent_name: 'ghost' } }));
    expect(decision).toMatchObject({ rule: 'function_call', outcome: 'unresolved', requested: 'ghost', dispatch: { origin: 'engine_fallback' } });
  });

  it('task (legacy, workflow-relative) decides the next agent at rule-1 level: it names the target role and wins over the callback and the edge', () => {
    const byAgent = route({ agent: 'context', step: 'triage', callback: 'issue' }, cfg({ task: 'reviewer' }));
    expect(byAgent).toMatchObject({ rule: 'task', outcome: 'dispatch', target: { agent: 'reviewer', step: 'review' }, callback_after: null });
    const byRole = route({ agent: 'context', step: 'context' }, cfg({ task: 'security reviewer' }));
    expect(byRole).toMatchObject({ rule: 'task', target: { agent: 'security', step: 'context' } });
    const byStep = route({ agent: 'context', step: 'context' }, cfg({ task: 'ship' }));
    expect(byStep).toMatchObject({ rule: 'task', target: { agent: 'shipper', step: 'ship' } });
  });

  it('task naming an agent that runs several steps picks the next of its steps along the workflow (context → architect means plan, not analyze)', () => {
    expect(route({ agent: 'context', step: 'context' }, cfg({ task: 'architect' }))).toMatchObject({ target: { agent: 'architect', step: 'plan' } });
  });

  it("task is an explicit target of the callee's own: it outranks a dispatch hold in the same payload (Baton's documented choice)", () => {
    expect(route({ agent: 'context', step: 'context' }, cfg({ task: 'reviewer', dispatch: { status: 'hold' } }))).toMatchObject({
      rule: 'task',
      outcome: 'dispatch',
    });
  });

  it('task naming no step, agent or role is unresolved', () => {
    expect(route({ agent: 'context', step: 'context' }, cfg({ task: 'poem' }))).toMatchObject({ rule: 'task', outcome: 'unresolved', requested: 'poem' });
  });

  it("rule 2: an explicit dispatch hold is honoured (a deliberate human gate), with origin agent and the agent's reason", () => {
    const decision = route({ agent: 'architect', step: 'analyze' }, cfg({ dispatch: { status: 'hold', reason: 'need a product decision' } }));
    expect(decision).toEqual({
      rule: 'explicit_dispatch',
      outcome: 'hold',
      hold_kind: 'hold',
      pending_target: { agent: 'context', step: 'context' },
      dispatch: { status: 'hold', reason: 'need a product decision', origin: 'agent' },
      callback_after: null,
    });
  });

  it('rule 2: an explicit dispatch loop retries the same agent at the same step', () => {
    expect(route({ agent: 'architect', step: 'analyze' }, cfg({ dispatch: { status: 'loop' } }))).toMatchObject({
      rule: 'explicit_dispatch',
      outcome: 'dispatch',
      target: { agent: 'architect', step: 'analyze' },
      dispatch: { status: 'loop', origin: 'agent' },
    });
  });

  it('rule 2: an explicit dispatch terminate is honoured', () => {
    expect(route({ agent: 'architect', step: 'analyze' }, cfg({ dispatch: { status: 'terminate', reason: 'duplicate issue' } }))).toMatchObject({
      rule: 'explicit_dispatch',
      outcome: 'terminate',
      dispatch: { status: 'terminate', reason: 'duplicate issue', origin: 'agent' },
    });
  });

  it('rule 2: a dispatch advance that names an explicit step decides the next agent, over the callback', () => {
    expect(route({ agent: 'context', step: 'triage', callback: 'issue' }, cfg({ dispatch: { status: 'advance', step: 'plan' } }))).toMatchObject({
      rule: 'explicit_dispatch',
      outcome: 'dispatch',
      target: { agent: 'architect', step: 'plan' },
      callback_after: null,
    });
  });

  it('rule 2: a dispatch advance that names a task_hint decides the next agent', () => {
    expect(route({ agent: 'context', step: 'context' }, cfg({ dispatch: { status: 'advance', task_hint: 'writer' } }))).toMatchObject({
      rule: 'explicit_dispatch',
      target: { agent: 'writer', step: 'draft' },
    });
  });

  it('rule 2: a dispatch advance naming this workflow restarts it at its entry; naming another workflow is unresolved (a run never switches workflows)', () => {
    expect(route({ agent: 'context', step: 'context' }, cfg({ dispatch: { status: 'advance', workflow: 'feature' } }))).toMatchObject({
      rule: 'explicit_dispatch',
      target: { agent: 'issue', step: 'triage' },
    });
    expect(route({ agent: 'context', step: 'context' }, cfg({ dispatch: { status: 'advance', workflow: 'other' } }))).toMatchObject({
      rule: 'explicit_dispatch',
      outcome: 'unresolved',
      requested: 'other',
    });
  });

  it('rule 2 only fires for the non-advance statuses: an advance with no destination falls through to the callback (3), then the workflow edge (4)', () => {
    expect(route({ agent: 'context', step: 'context', callback: 'architect' }, advance)).toMatchObject({ rule: 'callback' });
    expect(route({ agent: 'context', step: 'context', callback: null }, advance)).toMatchObject({ rule: 'workflow_edge' });
  });

  it("rule 3: the registered callback returns to the caller, over the workflow edge, keeping the agent's provenance", () => {
    expect(route({ agent: 'context', step: 'context', callback: 'issue' }, cfg({ dispatch: { status: 'advance', reason: 'done' } }))).toEqual({
      rule: 'callback',
      outcome: 'dispatch',
      target: { agent: 'issue', step: 'context' },
      dispatch: { status: 'advance', reason: 'done', origin: 'agent' },
      callback_after: null,
    });
  });

  it('rule 4: the workflow forward edge (steps[].next) continues the workflow', () => {
    expect(route({ agent: 'issue', step: 'triage' }, advance)).toMatchObject({ rule: 'workflow_edge', target: { agent: 'architect', step: 'analyze' } });
  });

  it('rule 4, terminal step: an advance at a terminal step completes the workflow (a stop-for-a-human outcome)', () => {
    expect(route({ agent: 'shipper', step: 'ship' }, advance)).toMatchObject({
      rule: 'terminal',
      outcome: 'complete',
      dispatch: { status: 'advance', origin: 'agent', reason: "workflow 'feature' completed at terminal step 'ship'" },
    });
  });

  it('rule 4, human gate: an advance out of a human_gate step holds for a person, remembering the gated edge', () => {
    expect(route({ agent: 'reviewer', step: 'review' }, advance)).toMatchObject({
      rule: 'workflow_edge',
      outcome: 'hold',
      hold_kind: 'human_gate',
      pending_target: { agent: 'shipper', step: 'ship' },
      dispatch: { status: 'hold', origin: 'engine_fallback' },
    });
  });

  it('rule 5: no target at all — an advance at a step with no edge that is not terminal — is the no-action hold, not a silent completion', () => {
    expect(route({ agent: 'writer', step: 'draft' }, advance)).toEqual({
      rule: 'no_action_default',
      outcome: 'hold',
      hold_kind: 'hold',
      pending_target: null,
      dispatch: { status: 'hold', reason: NoActionReasons.noRoute('draft'), origin: 'engine_fallback' },
      callback_after: null,
    });
  });

  it('rule 5: no decision at a terminal step still holds (it does not auto-complete on an unknown state)', () => {
    expect(route({ agent: 'shipper', step: 'ship' }, absent)).toMatchObject({ rule: 'no_action_default', outcome: 'hold' });
  });
});

describe('seed 000 §4 the callback return address', () => {
  it('callback defaults to the emitting caller: architect calling context does not have to write the field', () => {
    expect(route({ agent: 'architect', step: 'analyze' }, cfg({ function_call: { function: 'call_agent', agent_name: 'context' } })).callback_after).toBe(
      'architect',
    );
  });

  it('an explicit callback on the function_call is registered as written', () => {
    const decision = route(
      { agent: 'architect', step: 'analyze' },
      cfg({ function_call: { function: 'call_agent', agent_name: 'context', callback: 'reviewer' } }),
    );
    expect(decision.callback_after).toBe('reviewer');
  });

  it('a callback naming no project agent is unresolved (the return address would dangle)', () => {
    const decision = route(
      { agent: 'architect', step: 'analyze' },
      cfg({ function_call: { function: 'call_agent', agent_name: 'context', callback: 'ghost' } }),
    );
    expect(decision).toMatchObject({ outcome: 'unresolved', requested: 'ghost' });
  });

  it("a callback equal to the callee's own agent_name is a no-op (no self re-entry)", () => {
    const decision = route(
      { agent: 'architect', step: 'analyze' },
      cfg({ function_call: { function: 'call_agent', agent_name: 'context', callback: 'context' } }),
    );
    expect(decision).toMatchObject({ rule: 'function_call', target: { agent: 'context' }, callback_after: null });
    // The caller is not the fallback of an ignored callback.
    // And a registered callback equal to the finishing agent never re-enters it.
    expect(route({ agent: 'context', step: 'context', callback: 'context' }, advance)).toMatchObject({ rule: 'workflow_edge', target: { agent: 'architect' } });
    expect(route({ agent: 'context', step: 'context', callback: 'context' }, absent)).toMatchObject({ rule: 'no_action_default', outcome: 'hold' });
  });

  it("an agent's function_call to itself is a no-op (no self re-entry): the no-action default — back to its caller, else hold — naming the ignored call, never the agent again", () => {
    const self = (callback?: string) =>
      cfg({ function_call: { function: 'call_agent', agent_name: 'context', ...(callback !== undefined ? { callback } : {}) } });
    const diagnostic = "a function_call to itself ('context'), which was ignored (no self re-entry)";
    // The audit's loop: issue called context; context answers by calling context (its callback itself, or none).
    for (const signal of [self('context'), self()]) {
      expect(route({ agent: 'context', step: 'triage', callback: 'issue' }, signal)).toEqual({
        rule: 'no_action_default',
        outcome: 'dispatch',
        target: { agent: 'issue', step: 'triage' },
        dispatch: { status: 'advance', reason: NoActionReasons.selfCallReturnToCaller(diagnostic, 'issue'), origin: 'engine_fallback' },
        callback_after: null,
      });
    }
    expect(NoActionReasons.selfCallReturnToCaller(diagnostic, 'issue')).toBe(
      "no-action default: agent emitted no decision but a function_call to itself ('context'), which was ignored (no self re-entry); returning to caller 'issue'",
    );
    // No return address: held for a person, whose continue may take the edge.
    expect(route({ agent: 'architect', step: 'analyze' }, cfg({ function_call: { function: 'call_agent', agent_name: 'architect' } }))).toMatchObject({
      rule: 'no_action_default',
      outcome: 'hold',
      pending_target: { agent: 'context', step: 'context' },
      dispatch: {
        status: 'hold',
        reason: NoActionReasons.selfCall("a function_call to itself ('architect'), which was ignored (no self re-entry)"),
        origin: 'engine_fallback',
      },
    });
    // The rest of its decision stands: an explicit hold or terminate beside the ignored call is honoured.
    expect(
      route(
        { agent: 'context', step: 'triage', callback: 'issue' },
        cfg({ function_call: { function: 'call_agent', agent_name: 'context' }, dispatch: { status: 'hold', reason: 'wait' } }),
      ),
    ).toMatchObject({ rule: 'explicit_dispatch', outcome: 'hold', dispatch: { reason: 'wait', origin: 'agent' } });
    // Calling another agent is still a call.
    expect(
      route({ agent: 'context', step: 'triage', callback: 'issue' }, cfg({ function_call: { function: 'call_agent', agent_name: 'reviewer' } })),
    ).toMatchObject({
      rule: 'function_call',
      target: { agent: 'reviewer' },
      callback_after: 'context',
    });
  });

  it("it is a fallback, not an override: the callee's own action (rules 1–2) always wins", () => {
    expect(route({ agent: 'context', step: 'triage', callback: 'issue' }, cfg({ task: 'reviewer' }))).toMatchObject({ target: { agent: 'reviewer' } });
    expect(route({ agent: 'context', step: 'triage', callback: 'issue' }, cfg({ dispatch: { status: 'terminate' } }))).toMatchObject({ outcome: 'terminate' });
  });

  it('callback is advance-only: a callee that explicitly holds or loops is never redirected to the callback', () => {
    const held = route({ agent: 'context', step: 'triage', callback: 'issue' }, cfg({ dispatch: { status: 'hold' } }));
    expect(held).toMatchObject({ rule: 'explicit_dispatch', outcome: 'hold' });
    const looped = route({ agent: 'context', step: 'triage', callback: 'issue' }, cfg({ dispatch: { status: 'loop' } }));
    expect(looped).toMatchObject({ rule: 'explicit_dispatch', outcome: 'dispatch', target: { agent: 'context' } });
  });

  it.each<[string, { agent: string; step: string }, DecisionSignal]>([
    ['callback return', { agent: 'context', step: 'triage' }, advance],
    ['explicit dispatch step', { agent: 'context', step: 'context' }, cfg({ dispatch: { status: 'advance', step: 'plan' } })],
    ['task', { agent: 'context', step: 'triage' }, cfg({ task: 'reviewer' })],
    ['hold', { agent: 'context', step: 'triage' }, cfg({ dispatch: { status: 'hold' } })],
    ['loop', { agent: 'context', step: 'triage' }, cfg({ dispatch: { status: 'loop' } })],
    ['terminate', { agent: 'context', step: 'triage' }, cfg({ dispatch: { status: 'terminate' } })],
    ['no-action default', { agent: 'context', step: 'triage' }, absent],
    ['unresolved task (an unknown_intent stop)', { agent: 'context', step: 'triage' }, cfg({ task: 'poem' })],
    ['unresolved call', { agent: 'context', step: 'triage' }, cfg({ function_call: { function: 'call_agent', agent_name: 'ghost' } })],
    ['dispatch naming another workflow', { agent: 'context', step: 'triage' }, cfg({ dispatch: { status: 'advance', workflow: 'other' } })],
  ])('it is cleared on every non-function-call transition (%s), so a stale callback cannot re-fire on a later step', (_name, at, signal) => {
    expect(route({ ...at, callback: 'issue' }, signal).callback_after).toBeNull();
  });
});

describe('seed 000 §5 the no-action default → callback, else hold', () => {
  it.each(['advance', 'hold', 'loop', 'terminate'] as const)(
    'provenance is Baton`s: an agent-emitted %s is recorded origin agent, whatever origin the dispatch claims',
    (status) => {
      for (const origin of ['agent', 'engine_fallback'] as const) {
        const body = `<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"${status}","reason":"mine","origin":"${origin}"}} -->`;
        const decision = route({ agent: 'context', step: 'context' }, fromBody(body));
        expect(decision.rule).not.toBe('no_action_default');
        expect(decision.dispatch).toMatchObject({ status, origin: 'agent' });
        expect(route({ agent: 'context', step: 'context' }, cfg({ dispatch: { status, reason: 'mine', origin } })).dispatch).toMatchObject({
          status,
          origin: 'agent',
        });
      }
    },
  );

  it('no return address: hold with reason "no-action default: agent emitted no decision"', () => {
    expect(route({ agent: 'architect', step: 'analyze' }, absent).dispatch).toEqual({
      status: 'hold',
      reason: 'no-action default: agent emitted no decision',
      origin: 'engine_fallback',
    });
  });

  it('no-action hold does not auto-advance, but remembers the edge an operator may choose to continue on', () => {
    expect(route({ agent: 'architect', step: 'analyze' }, absent)).toMatchObject({ outcome: 'hold', pending_target: { agent: 'context', step: 'context' } });
  });

  it('with a return address: advance with reason "no-action default: agent emitted no decision; returning to caller \'<callback>\'"', () => {
    expect(route({ agent: 'context', step: 'analyze', callback: 'architect' }, absent).dispatch).toEqual({
      status: 'advance',
      reason: "no-action default: agent emitted no decision; returning to caller 'architect'",
      origin: 'engine_fallback',
    });
  });

  it('a sentinel marker that was present but could not be parsed carries its parse diagnostic into the reason instead of swallowing it', () => {
    const signal = fromBody('answer\n<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "advanse"}} -->');
    expect(signal.kind).toBe('invalid');
    const diagnostic = signal.kind === 'invalid' ? signal.diagnostic : '';
    const decision = route({ agent: 'architect', step: 'analyze' }, signal);
    expect(decision).toMatchObject({ outcome: 'hold', dispatch: { status: 'hold', origin: 'engine_fallback' } });
    expect(decision.dispatch.reason).toBe(`no-action default: agent emitted no decision and the AGENT_RUN_CONFIG sentinel could not be parsed (${diagnostic})`);
  });

  it('a typed decision that breaks the contract is the no-action default too: readTypedDecision leaves it off the result and its diagnostic goes into the reason', () => {
    const base = { result_id: 'r1', run_id: 'run-1', project: 'demo', workflow_run_id: 'wr-1', agent: 'architect', produced_at: '2026-12-04T00:00:00.000Z' };
    const empty = readTypedDecision({ ...base, decision: {} });
    expect(empty.result).not.toHaveProperty('decision');
    expect(empty.signal).toMatchObject({ kind: 'invalid', source: 'typed', code: 'invariant' });
    const both = readTypedDecision({ ...base, decision: { task: 'plan', function_call: { function: 'call_agent', agent_name: 'context' } } });
    expect(both.signal).toMatchObject({ kind: 'invalid', source: 'typed', code: 'invariant', diagnostic: expect.stringContaining('mutually exclusive') });
    expect(readTypedDecision({ ...base, decision: null }).signal).toMatchObject({
      code: 'not_object',
      diagnostic: 'the typed decision must be a JSON object, got null',
    });
    // A valid decision stays on the result, and no signal overrides it.
    expect(readTypedDecision({ ...base, decision: { dispatch: { status: 'advance' } } })).toEqual({
      result: { ...base, decision: { dispatch: { status: 'advance' } } },
    });

    const held = route({ agent: 'architect', step: 'analyze' }, empty.signal!);
    expect(held).toMatchObject({ outcome: 'hold', dispatch: { status: 'hold', origin: 'engine_fallback' } });
    expect(held.dispatch.reason).toBe(
      `no-action default: agent emitted no decision and its typed decision was invalid (${(empty.signal as { diagnostic: string }).diagnostic})`,
    );
    const back = route({ agent: 'context', step: 'analyze', callback: 'architect' }, { kind: 'invalid', source: 'typed', diagnostic: 'x' });
    expect(back.dispatch).toEqual({
      status: 'advance',
      reason: "no-action default: agent emitted no decision and its typed decision was invalid (x); returning to caller 'architect'",
      origin: 'engine_fallback',
    });
  });

  it('an unparseable sentinel with a return address returns to the caller and the reason carries both facts (diagnostic and caller)', () => {
    const decision = route({ agent: 'context', step: 'analyze', callback: 'architect' }, { kind: 'invalid', diagnostic: 'bad JSON at 12' });
    expect(decision).toMatchObject({ outcome: 'dispatch', target: { agent: 'architect' } });
    expect(decision.dispatch).toEqual({
      status: 'advance',
      reason:
        "no-action default: agent emitted no decision and the AGENT_RUN_CONFIG sentinel could not be parsed (bad JSON at 12); returning to caller 'architect'",
      origin: 'engine_fallback',
    });
  });

  it('provenance: every synthesized fallback is tagged origin "engine_fallback"; an agent-emitted decision defaults to origin "agent"', () => {
    const synthesized = [
      route({ agent: 'architect', step: 'analyze' }, absent),
      route({ agent: 'context', step: 'analyze', callback: 'architect' }, absent),
      route({ agent: 'architect', step: 'analyze' }, { kind: 'invalid', diagnostic: 'x' }),
    ];
    synthesized.forEach((d) => expect(d.dispatch.origin).toBe('engine_fallback'));
    const emitted = [
      route({ agent: 'architect', step: 'analyze' }, advance),
      route({ agent: 'architect', step: 'analyze' }, cfg({ dispatch: { status: 'hold' } })),
      route({ agent: 'context', step: 'analyze', callback: 'architect' }, advance),
      route({ agent: 'architect', step: 'analyze' }, cfg({ function_call: { function: 'call_agent', agent_name: 'context' } })),
    ];
    emitted.forEach((d) => expect(d.dispatch.origin).toBe('agent'));
  });

  it('the explicit agent hold outranks the callback: only the synthesized fallback returns home', () => {
    expect(route({ agent: 'context', step: 'analyze', callback: 'architect' }, cfg({ dispatch: { status: 'hold' } }))).toMatchObject({
      outcome: 'hold',
      dispatch: { origin: 'agent' },
    });
    expect(route({ agent: 'context', step: 'analyze', callback: 'architect' }, absent)).toMatchObject({
      outcome: 'dispatch',
      target: { agent: 'architect' },
      dispatch: { origin: 'engine_fallback' },
    });
  });
});
