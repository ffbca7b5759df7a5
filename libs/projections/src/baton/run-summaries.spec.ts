import type { RunEvent } from '@baton/domain';
import { runsProjection, summarizeRunEvent } from './runs';
import { scenarioSequenced } from './scenario';
import { storedTimelineEntry } from './stored-timeline';

/** `baton run <id>` prints these summaries: seed 001's trace must read like the seed. */
describe('run timeline summaries of returnable handoffs (seed 001)', () => {
  const at = '2025-01-01T00:00:00.000Z';
  it('handoff, handoff_return_handler, resume_intent and handoff_completed show the seed fields', () => {
    const context = { summary: 's', history_mode: 'summary_only' as const, history: [], passed: [] };
    const events: RunEvent[] = [
      {
        type: 'run.handoff',
        data: {
          handoffId: 'ho-1',
          from: 'Loan_Supervisor',
          to: 'Income_Capture_Agent',
          step: 'converse',
          returnExpected: true,
          reasonCode: 'handoff_return_expected',
          route: 0,
          trigger: 'when',
          message: 'I want a loan offer',
          replayDepth: 0,
          context,
          passedVariables: {},
          onReturn: null,
          onFailure: { action: 'continue' },
          at,
        },
      },
      {
        type: 'run.handoff_return_handler',
        data: {
          handoffId: 'ho-1',
          parent: 'Loan_Supervisor',
          child: 'Income_Capture_Agent',
          path: 'complete',
          action: 'resume_intent',
          handler: null,
          mappedFields: ['annual_income'],
          skippedFields: [],
          setFields: [],
          writes: { annual_income: 1 },
          applied: true,
          respond: null,
          forwardedMessage: null,
          at,
        },
      },
      {
        type: 'run.resume_intent',
        data: {
          parent: 'Loan_Supervisor',
          resumeWith: 'original_handoff_utterance',
          message: 'I want a loan offer',
          reasonCode: 'resume_intent',
          depth: 1,
          at,
        },
      },
      {
        type: 'run.handoff_completed',
        data: { handoffId: null, from: 'A', to: 'B', route: 0, outcome: 'rejected', durationMs: 0, cause: 'recursion', code: 'recursion', at },
      },
      { type: 'run.memory_error', data: { handoffId: 'ho-1', parent: 'A', child: 'B', targets: ['x'], message: 'm', at } },
    ];
    const lines = events.map((event) => summarizeRunEvent(event));
    expect(lines[0]).toContain('returnExpected: true reasonCode: handoff_return_expected');
    expect(lines[1]).toContain('mappedFields: [annual_income]');
    expect(lines[2]).toContain('resume_intent Loan_Supervisor reasonCode: resume_intent');
    expect(lines[3]).toContain('outcome: rejected durationMs: 0 cause: recursion code: recursion');
    expect(lines[4]).toContain('memory_error: A may not write [x]');
  });

  it('a queued customer message shows in the timeline when it is queued and when it is delivered, and siblingIntentMs on the attempt', () => {
    const lines = (
      [
        { type: 'run.message_queued', data: { message_id: 'm1', text: 'hello?', sent_by: 'sam', agent: 'Offer_Agent', position: 1, queued_at: at } },
        {
          type: 'run.handoff_completed',
          data: { handoffId: 'ho-1', from: 'A', to: 'Offer_Agent', route: 0, outcome: 'success', durationMs: 900, siblingIntentMs: 400, at },
        },
        { type: 'run.message_received', data: { message_id: 'm1', text: 'hello?', agent: 'Offer_Agent', queued_at: at, received_at: at } },
      ] satisfies RunEvent[]
    ).map((event) => summarizeRunEvent(event));
    expect(lines[0]).toBe('customer message m1 queued while Offer_Agent works (1 waiting) from @sam: "hello?"');
    expect(lines[1]).toContain('outcome: success durationMs: 900 siblingIntentMs: 400');
    expect(lines[2]).toBe(`customer message m1 to Offer_Agent (queued at ${at}): "hello?"`);
  });

  it('a quoted text is one line of at most 80 characters, clipped between characters, never inside a surrogate pair', () => {
    const text = `${'a'.repeat(78)}😀😀 and\nmore`;
    const line = summarizeRunEvent({ type: 'run.message_received', data: { message_id: 'm2', text, agent: 'Offer_Agent', received_at: at } });
    const quoted = /: "(.*)"$/u.exec(line)![1]!;
    expect(quoted).toBe(`${'a'.repeat(78)}😀…`);
    expect(quoted).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/u);
    const short = summarizeRunEvent({
      type: 'run.message_received',
      data: { message_id: 'm3', text: '  two\n  lines ', agent: 'Offer_Agent', received_at: at },
    });
    expect(short).toBe('customer message m3 to Offer_Agent: "two lines"');
  });

  it('a recorded result names the tool call it reported pending, so a decision that went on does not hide it', () => {
    const recorded = (extra: object): RunEvent => ({
      type: 'run.result_recorded',
      data: { result_id: 'r1', run_id: 'r1', agent: 'issue', step: 'triage', signal: { kind: 'absent' }, recorded_at: at, ...extra },
    });
    expect(summarizeRunEvent(recorded({ pending_tool_call: { name: 'refund', args: { amount: 40 } } }))).toBe(
      'result r1 from issue at triage (absent); pending call refund',
    );
    expect(summarizeRunEvent(recorded({}))).toBe('result r1 from issue at triage (absent)');
  });

  it('a refusal says what was refused: a result, an operator answer or a customer message', () => {
    const rejected = (refused?: 'result' | 'answer' | 'message', agent = 'issue'): RunEvent => ({
      type: 'run.result_rejected',
      data: { result_id: 'x1', agent, code: 'run_not_running', message: 'run r is stopped', rejected_at: at, ...(refused ? { refused } : {}) },
    });
    expect(summarizeRunEvent(rejected())).toBe('result x1 from issue rejected (run_not_running): run r is stopped');
    expect(summarizeRunEvent(rejected('result'))).toBe('result x1 from issue rejected (run_not_running): run r is stopped');
    expect(summarizeRunEvent(rejected('message', 'customer'))).toBe('customer message x1 rejected (run_not_running): run r is stopped');
  });

  it('a refused operator answer names who answered (the event\'s actor), as an applied one says "resumed by"; the role word only when no actor is known', () => {
    const refusal = (refused?: 'answer'): RunEvent => ({
      type: 'run.result_rejected',
      data: {
        result_id: 'race-alice',
        agent: 'operator',
        code: 'run_not_stopped',
        message: 'answer race-alice by alice: run wr-1 is running',
        rejected_at: at,
        ...(refused ? { refused } : {}),
      },
    });
    // The router's message opens with the same words: said once.
    expect(summarizeRunEvent(refusal('answer'), 'alice')).toBe('answer race-alice by alice rejected (run_not_stopped): run wr-1 is running');
    // Recorded before refusals named their kind (agent operator): an answer all the same.
    expect(summarizeRunEvent(refusal(), 'alice')).toBe('answer race-alice by alice rejected (run_not_stopped): run wr-1 is running');
    expect(summarizeRunEvent(refusal('answer'))).toBe(
      'answer race-alice by operator rejected (run_not_stopped): answer race-alice by alice: run wr-1 is running',
    );
    // An agent's refused result still names the agent, whoever the actor.
    const result: RunEvent = {
      type: 'run.result_rejected',
      data: { result_id: 'x1', agent: 'issue', code: 'run_not_running', message: 'run r is stopped', rejected_at: at, refused: 'result' },
    };
    expect(summarizeRunEvent(result, 'baton-router')).toBe('result x1 from issue rejected (run_not_running): run r is stopped');
  });

  it("the runs projection's timeline and the timeline read from the stream both name the person a refused answer's event records", () => {
    const event = scenarioSequenced(
      {
        aggregate: 'run',
        id: 'wr-1',
        actor: 'alice',
        origin: 'operator',
        occurredAt: at,
        event: {
          type: 'run.result_rejected',
          data: { result_id: 'race-alice', agent: 'operator', code: 'run_not_stopped', message: 'run wr-1 is running', rejected_at: at, refused: 'answer' },
        },
      },
      7,
    );
    const line = 'answer race-alice by alice rejected (run_not_stopped): run wr-1 is running';
    expect(storedTimelineEntry('run', event)).toMatchObject({ actor: 'alice', summary: line });
    const ops = runsProjection().step(null, event).ops;
    const projected = ops.map((op) => JSON.stringify(op)).find((op) => op.includes('rt:'));
    expect(projected).toContain(line);
  });
});
