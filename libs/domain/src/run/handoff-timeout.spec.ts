import { ProjectDefinitionSchema, type OnFailure, type ProjectDefinition } from '@baton/contracts';
import { given } from '../testing/given';
import type { HandoffFailedCommand, RunCommand } from './commands';
// Results are sent under the run's current claim unless a test says otherwise (withCurrentClaim).
import { claimedRunDecider as runDecider, decideClaimed as decideRun } from './test-helpers';
import { evolveRun, initialRunState, type RunEvent, type RunState } from './state';
import { expectValidEvents } from './test-helpers';

/*
 * Issue 5: "A returnable handoff has a deadline: past it, `handoff_completed` with outcome
 * `timeout`, and the parent resumes according to its `ON_FAILURE`. Delegation always comes back or
 * escalates; it is never silently lost." The router turns the ledger's `handoff.deadline_expired`
 * of a run's child handoff into `handoff_failed` with reason `timeout`; decided here, purely.
 */

const T0 = '2025-01-01T00:00:00.000Z';
const at = (s: number) => new Date(Date.parse(T0) + s * 1000).toISOString();
const SORRY = 'Our income specialist did not answer in time. Please try again later.';

function project(onFailure: OnFailure): ProjectDefinition {
  return ProjectDefinitionSchema.parse({
    project: 'loans',
    agents: [
      {
        name: 'Loan_Supervisor',
        supervisor: true,
        memory: [{ name: 'annual_income', type: 'number' }],
        handoffs: [
          {
            to: 'Income_Capture_Agent',
            when: { kind: 'expression', source: 'annual_income IS NOT SET' },
            return: true,
            deadline_ms: 30 * 60_000,
            on_return: { action: 'continue', map: { annual_income: 'annual_income' } },
            on_failure: onFailure,
          },
        ],
      },
      { name: 'Income_Capture_Agent', gather: [{ name: 'annual_income', type: 'number', required: true }] },
    ],
    workflows: [{ name: 'loan_session', version: 1, entry: 'converse', steps: [{ id: 'converse', agent: 'Loan_Supervisor', terminal: true }] }],
  });
}

/** The run's history up to the returnable handoff (the child never answers), and its handoff id. */
function delegated(defs: ProjectDefinition, childAnswers = false): { history: RunEvent[]; handoffId: string } {
  const history: RunEvent[] = [];
  let state: RunState = initialRunState();
  const apply = (command: RunCommand) => {
    const result = decideRun(command, state);
    if (!result.ok) throw new Error(`${result.error.code}: ${result.error.message}`);
    for (const event of result.events) state = evolveRun(state, event);
    history.push(...result.events);
  };
  const workflow = defs.workflows[0]!;
  apply({
    type: 'start_run',
    data: {
      workflow_run_id: 'wr-1',
      project: 'loans',
      workflow,
      agents: defs.agents,
      people: { started_by: 'sam', issue_author: null, trigger_author: null },
      input: 'I want a loan offer',
    },
    metadata: { now: at(0), actor: 'sam' },
  });
  if (childAnswers) {
    const result = {
      result_id: 'r1',
      run_id: 'ar-r1',
      project: 'loans',
      workflow_run_id: 'wr-1',
      agent: 'Income_Capture_Agent',
      produced_at: at(5),
      body: 'What is your annual income?',
    };
    apply({ type: 'record_result', data: { result, workflow, agents: defs.agents }, metadata: { now: at(5), actor: 'Income_Capture_Agent' } });
  }
  const handoff = history.find((e): e is Extract<RunEvent, { type: 'run.handoff' }> => e.type === 'run.handoff');
  return { history, handoffId: handoff!.data.handoffId };
}

function timeout(defs: ProjectDefinition, handoffId: string, seconds = 1800): HandoffFailedCommand {
  return {
    type: 'handoff_failed',
    data: {
      handoff_id: handoffId,
      code: 'deadline',
      message: 'no result from Income_Capture_Agent by the deadline',
      reason: 'timeout',
      workflow: defs.workflows[0]!,
      agents: defs.agents,
    },
    metadata: { now: at(seconds), actor: 'baton-router' },
  };
}

describe('a returnable handoff has a deadline: past it, handoff_completed with outcome timeout, and the parent resumes per ON_FAILURE', () => {
  it('ON_FAILURE RESPOND: handoff_completed (timeout, durationMs, cause, code) and the parent answers the customer with the message', () => {
    const defs = project({ action: 'respond', message: SORRY });
    const { history, handoffId } = delegated(defs);
    const when = given(runDecider, history).when(timeout(defs, handoffId));
    const events = when.thenMatch([
      {
        type: 'run.handoff_completed',
        data: expect.objectContaining({
          handoffId,
          from: 'Loan_Supervisor',
          to: 'Income_Capture_Agent',
          outcome: 'timeout',
          durationMs: 1_800_000,
          cause: expect.stringMatching(/^deadline_expired: no result from Income_Capture_Agent/),
          code: 'deadline',
          onFailure: 'respond',
        }),
      },
      { type: 'run.awaiting_input', data: expect.objectContaining({ agent: 'Loan_Supervisor', reply: SORRY, note: expect.stringContaining('timed out') }) },
    ]);
    expectValidEvents(events);
    const after = when.stateAfter();
    expect(
      after.status !== 'none' && { agent: after.agent, awaiting: after.awaitingInput, parents: after.waitingParents, pending: after.pendingHandoff },
    ).toEqual({
      agent: 'Loan_Supervisor',
      awaiting: true,
      parents: [],
      pending: null,
    });
  });

  it('ON_FAILURE continue (the default): the parent gets control back and waits for the customer, with no reply', () => {
    const defs = project({ action: 'continue' });
    const { history, handoffId } = delegated(defs);
    const when = given(runDecider, history).when(timeout(defs, handoffId));
    when.thenMatch([
      { type: 'run.handoff_completed', data: expect.objectContaining({ outcome: 'timeout', onFailure: 'continue' }) },
      { type: 'run.awaiting_input', data: expect.objectContaining({ agent: 'Loan_Supervisor', reply: null }) },
    ]);
    const after = when.stateAfter();
    expect(after.status !== 'none' && after.waitingParents).toEqual([]);
  });

  it('ON_FAILURE ESCALATE: the run is held for a person (one notice), continuing to the parent; delegation escalates, never silently lost', () => {
    const defs = project({ action: 'escalate' });
    const { history, handoffId } = delegated(defs);
    const when = given(runDecider, history).when(timeout(defs, handoffId));
    const events = when.thenMatch([
      { type: 'run.handoff_completed', data: expect.objectContaining({ outcome: 'timeout', code: 'deadline', onFailure: 'escalate' }) },
      { type: 'run.held' },
      { type: 'run.notice_emitted' },
    ]);
    const held = events[1] as Extract<RunEvent, { type: 'run.held' }>;
    expect(held.data).toMatchObject({ pending_target: { agent: 'Loan_Supervisor', step: 'converse' }, reason: expect.stringContaining('timed out') });
    expect(when.stateAfter().status).toBe('held');
  });

  it("ON_FAILURE ESCALATE: the hold names the caller a continue runs — the held event, the run's agent and the notice — not the failed child", () => {
    const defs = project({ action: 'escalate' });
    const { history, handoffId } = delegated(defs);
    const when = given(runDecider, history).when(timeout(defs, handoffId));
    const events = when.thenMatch([{ type: 'run.handoff_completed' }, { type: 'run.held' }, { type: 'run.notice_emitted' }]);
    const caller = { agent: 'Loan_Supervisor', step: 'converse' };
    expect(events[1]!.data).toMatchObject({ ...caller, pending_target: caller });
    expect((events[2] as Extract<RunEvent, { type: 'run.notice_emitted' }>).data.notice).toMatchObject(caller);
    const after = when.stateAfter();
    expect(after.status !== 'none' && { agent: after.agent, step: after.step }).toEqual(caller);
  });

  it('a run stopped from outside while its child works stays stopped when the child then fails: the end is recorded, ON_FAILURE is not applied over the stop', () => {
    const defs = project({ action: 'continue' });
    const { history, handoffId } = delegated(defs);
    const stopped = given(runDecider, history).when({
      type: 'stop',
      data: { packet_id: 'wd-guard:c1', why: 'circuit_open', tried: [] },
      metadata: { now: at(10), actor: 'baton-watchdog' },
    } as RunCommand);
    const stopEvents = stopped.thenMatch([
      { type: 'run.stopped', data: expect.anything() },
      { type: 'run.notice_emitted', data: expect.anything() },
    ]);
    const ended: HandoffFailedCommand = {
      ...timeout(defs, handoffId, 20),
      data: { ...timeout(defs, handoffId, 20).data, code: 'handoff_failed', reason: 'ended' },
    };
    const when = given(runDecider, [...history, ...stopEvents]).when(ended);
    when.thenMatch([{ type: 'run.handoff_completed', data: expect.objectContaining({ handoffId, outcome: 'error', onFailure: 'continue' }) }]);
    const after = when.stateAfter();
    expect(after.status !== 'none' && { status: after.status, pending: after.pendingHandoff, awaiting: after.awaitingInput }).toEqual({
      status: 'stopped',
      pending: null,
      awaiting: false,
    });
  });

  it('a deadline for a handoff whose child already produced its result is a no-op', () => {
    const defs = project({ action: 'respond', message: SORRY });
    const { history, handoffId } = delegated(defs, true);
    given(runDecider, history).when(timeout(defs, handoffId)).then([]);
  });

  it('the timeout is applied once: a second deadline for the same handoff is a no-op', () => {
    const defs = project({ action: 'respond', message: SORRY });
    const { history, handoffId } = delegated(defs);
    const first = given(runDecider, history)
      .when(timeout(defs, handoffId))
      .thenMatch([{ type: 'run.handoff_completed' }, { type: 'run.awaiting_input' }]);
    given(runDecider, [...history, ...first])
      .when(timeout(defs, handoffId, 1900))
      .then([]);
  });

  it('a late result from the timed-out child is refused: the parent has control again', () => {
    const defs = project({ action: 'continue' });
    const { history, handoffId } = delegated(defs);
    const timedOut = given(runDecider, history)
      .when(timeout(defs, handoffId))
      .thenMatch([{ type: 'run.handoff_completed' }, { type: 'run.awaiting_input' }]);
    const late = {
      result_id: 'r-late',
      run_id: 'ar-late',
      project: 'loans',
      workflow_run_id: 'wr-1',
      agent: 'Income_Capture_Agent',
      produced_at: at(1900),
      body: 'Your income?',
    };
    const refused = given(runDecider, [...history, ...timedOut]).when({
      type: 'record_result',
      data: { result: late, workflow: defs.workflows[0]!, agents: defs.agents },
      metadata: { now: at(1900), actor: 'Income_Capture_Agent' },
    }).result;
    expect(refused.ok).toBe(false);
  });

  it('a refused create (no reason) still records outcome error, not timeout', () => {
    const defs = project({ action: 'continue' });
    const { history, handoffId } = delegated(defs);
    const command = timeout(defs, handoffId);
    const { reason: _reason, ...data } = command.data;
    given(runDecider, history)
      .when({ ...command, data: { ...data, code: 'agent_unavailable' } })
      .thenMatch([
        { type: 'run.handoff_completed', data: expect.objectContaining({ outcome: 'error', cause: expect.stringMatching(/^create_refused/) }) },
        { type: 'run.awaiting_input' },
      ]);
  });
});
