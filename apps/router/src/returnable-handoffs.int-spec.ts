import { randomBytes } from 'node:crypto';
import { createEventRegistry, Subjects, type AgentResult, type ProjectDefinition } from '@baton/contracts';
import { compileProject, LOAN_EXAMPLE_YAML } from '@baton/definitions';
import { connectNats, JetStreamEventStore, type NatsHandle, type StoredEvent } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
import type { Msg, Subscription } from 'nats';
import { startRouter } from './router.app';
import { claimHandoff, currentHandoff, deleteStreams, publishDefinition } from './int/support';

/*
 * Seed 001 through the running router over the real NATS: the loan example compiled from Baton's
 * YAML, published, and played as a conversation (run start with the first customer message,
 * agent results, customer messages on `<prefix>.in.<project>.message`). A tiny ledger responder
 * (a real NATS participant) records the handoffs the router asks for, and refuses creation for a
 * project whose handoffs must fail (ON_FAILURE).
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function loanDefinition(project: string, edit: (yaml: string) => string = (y) => y): ProjectDefinition {
  const compiled = compileProject([{ path: 'loans.yaml', text: edit(LOAN_EXAMPLE_YAML).replace('project: loans', `project: ${project}`) }]);
  if (compiled.project === null) throw new Error(JSON.stringify(compiled.diagnostics));
  return compiled.project;
}

const MEMORY_LINE = '      DESCRIPTION: "Annual income in whole currency units, collected by the income agent."\n';
const GATE_ON_RETURN = '      action: resume_intent\n      MAP:\n        annual_income: annual_income\n';
/** The example with more supervisor MEMORY: income_note (writable) and locked (READONLY). */
const withMemory = (y: string) => y.replace(MEMORY_LINE, `${MEMORY_LINE}    - income_note\n      TYPE: string\n    - locked\n      READONLY: true\n`);
/** ON_RETURN continue with a SET of `target`. */
const continueWithSet = (target: string) => (y: string) =>
  withMemory(y).replace(
    GATE_ON_RETURN,
    `      action: continue\n      MAP:\n        annual_income: annual_income\n      SET:\n        ${target}: "Income collected by the income agent."\n`,
  );
/** Offer_Agent gets a route to itself. */
const offerSelfRoute = (y: string) => `${y}\nHANDOFF:\n  - TO: Offer_Agent\n    WHEN: annual_income IS SET\n`;
/** Income_Capture_Agent is switched off unless income_capture_enabled = true. */
const incomeDisabled = (y: string) => y.replace('AGENT: Income_Capture_Agent\n', 'AGENT: Income_Capture_Agent\nENABLED_WHEN: income_capture_enabled = true\n');
/** Offer_Agent requires authentication: the supervisor's session variable customer_verified must be true. */
const offerNeedsAuth = (y: string) =>
  y
    .replace(MEMORY_LINE, `${MEMORY_LINE}    - customer_verified\n      TYPE: boolean\n`)
    .replace('AGENT: Offer_Agent\n', 'AGENT: Offer_Agent\nAUTH:\n  REQUIRED: true\n  VARIABLE: customer_verified\n');

interface Created {
  project: string;
  body: Record<string, unknown>;
}

describe('returnable and permanent handoffs through the router (seed 001, real NATS)', () => {
  const prefix = `rh${randomBytes(5).toString('hex')}`;
  let router: RunningService;
  let nats: NatsHandle;
  let store: JetStreamEventStore;
  const subs: Subscription[] = [];
  const created: Created[] = [];
  let counter = 0;

  /**
   * Answer ledger commands like the ledger; `refuseCreate` makes every create of the project to
   * Income_Capture_Agent fail, also as the second part of a `complete_then_create`.
   */
  const serveLedger = (project: string, refuseCreate = false) => {
    const answer = (command: string, body: Record<string, unknown>): unknown => {
      if (command === 'create' && refuseCreate && body['to_agent'] === 'Income_Capture_Agent') {
        return { ok: false, error: { code: 'agent_unavailable', kind: 'invalid', message: 'Income_Capture_Agent is not deployed' } };
      }
      if (command === 'create' || command === 'complete_from_result') {
        if (command === 'create') created.push({ project, body });
        return { ok: true, handoff: record(project, body), events: 1 };
      }
      if (command === 'complete_then_create') {
        return {
          ok: true,
          complete: answer('complete_from_result', body['complete'] as Record<string, unknown>),
          create: answer('create', body['create'] as Record<string, unknown>),
        };
      }
      return { ok: false, error: { code: 'unknown_command', kind: 'rejected', message: command } };
    };
    subs.push(
      nats.connection.subscribe(`${prefix}.cmd.ledger.${project}.>`, {
        callback: (_err, msg: Msg) => {
          const command = msg.subject.split('.').pop()!;
          const body = JSON.parse(decoder.decode(msg.data)) as Record<string, unknown>;
          msg.respond(encoder.encode(JSON.stringify(answer(command, body))));
        },
      }),
    );
  };

  const record = (project: string, body: Record<string, unknown>) => ({
    id: String(body['handoff_id']),
    project,
    kind: 'task',
    priority: 'medium',
    status: 'pending',
    from_agent: typeof body['from_agent'] === 'string' ? body['from_agent'] : 'baton-router',
    ...(typeof body['to_agent'] === 'string' ? { to_agent: body['to_agent'] } : {}),
    summary: 'test',
    context: {},
    acceptance: {},
    retry: { max_retries: 3, retry_count: 0 },
    escalation: {},
    created_at: '2025-01-01T00:00:00.000Z',
    updated_at: '2025-01-01T00:00:00.000Z',
    version: 1,
  });

  const publish = (project: string, definition: ProjectDefinition) => publishDefinition(nats, prefix, project, definition);

  const events = async (project: string, runId: string): Promise<StoredEvent[]> => (await store.read({ project, kind: 'run', id: runId })).events;
  const payloads = async <T = Record<string, unknown>>(project: string, runId: string, type: string) =>
    (await events(project, runId)).filter((e) => e.type === type).map((e) => e.payload as T);
  const waitEvents = <T = Record<string, unknown>>(project: string, runId: string, type: string, count = 1) =>
    waitFor(async () => {
      const found = await payloads<T>(project, runId, type);
      return found.length >= count ? found : undefined;
    }, `${count} × ${type} on ${runId}`);

  const start = async (project: string, input: string, variables: Record<string, unknown> = {}) => {
    const id = `wr-${++counter}`;
    await nats.js.publish(
      Subjects.runStart(prefix, project),
      encoder.encode(JSON.stringify({ workflow_run_id: id, project, workflow: 'loan_session', started_by: 'sam', input, variables })),
    );
    return id;
  };
  /** A customer's message on the project's shared subject, or relayed by `via` on `…message.<via>`. */
  const say = (project: string, runId: string, text: string, via?: string) =>
    nats.js.publish(
      via === undefined ? Subjects.sessionMessage(prefix, project) : Subjects.agentSessionMessage(prefix, project, via),
      encoder.encode(JSON.stringify({ workflow_run_id: runId, project, message_id: `msg-${++counter}`, text })),
    );
  /** An agent's result as its SDK sends it: the run's current handoff claimed first (claim rule, docs/runs.md). */
  const reply = async (project: string, runId: string, agent: string, extra: Partial<AgentResult> = {}) => {
    const id = `res-${++counter}`;
    const current = await currentHandoff(store, project, runId);
    const claim =
      current === null
        ? {}
        : {
            handoff_id: current.handoffId,
            claim_id: (await claimHandoff(store, project, current.handoffId, agent, { addressee: current.agent })) ?? 'claim-not-held',
          };
    const result: AgentResult = {
      result_id: id,
      run_id: `ar-${id}`,
      project,
      workflow_run_id: runId,
      agent,
      produced_at: new Date().toISOString(),
      ...claim,
      ...extra,
    };
    return nats.js.publish(Subjects.agentResult(prefix, project, agent), encoder.encode(JSON.stringify(result)));
  };
  const createdFor = (project: string, runId: string, to: string) =>
    waitFor(
      () => created.find((c) => c.project === project && c.body['workflow_run_id'] === runId && c.body['to_agent'] === to),
      `a ledger create to ${to} on ${runId}`,
    );

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    router = await startRouter({ ...process.env, NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' });
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    serveLedger('loans');
    serveLedger('loansv');
    serveLedger('loansfail', true);
    for (const p of ['loanscont', 'loansro', 'loansoff', 'loansauth']) serveLedger(p);
    await nats.connection.flush();
    expect(
      await publish(
        'loanscont',
        loanDefinition('loanscont', (y) => offerSelfRoute(continueWithSet('income_note')(y))),
      ),
    ).toMatchObject({ ok: true });
    expect(await publish('loansro', loanDefinition('loansro', continueWithSet('locked')))).toMatchObject({ ok: true });
    expect(await publish('loansoff', loanDefinition('loansoff', incomeDisabled))).toMatchObject({ ok: true });
    expect(await publish('loansauth', loanDefinition('loansauth', offerNeedsAuth))).toMatchObject({ ok: true });
    expect(await publish('loans', loanDefinition('loans'))).toMatchObject({ ok: true });
    expect(await publish('loansv', loanDefinition('loansv'))).toMatchObject({ ok: true });
    expect(await publish('loansfail', loanDefinition('loansfail'))).toMatchObject({ ok: true });
  }, 20_000);

  afterAll(async () => {
    for (const sub of subs) sub.unsubscribe();
    await router?.stop();
    await deleteStreams(nats, prefix);
    await nats.close();
  }, 20_000);

  it('verification 2–5: a new session is gated to Income_Capture_Agent, the income returns by MAP, resume_intent replays the request and Offer_Agent takes over for good', async () => {
    const run = await start('loans', 'I want a loan offer');
    // 2. The WHEN is checked before any model runs: the supervisor never gets a handoff.
    const [handoff] = await waitEvents('loans', run, 'run.handoff');
    expect(handoff).toMatchObject({ from: 'Loan_Supervisor', to: 'Income_Capture_Agent', returnExpected: true, reasonCode: 'handoff_return_expected' });
    const gate = await createdFor('loans', run, 'Income_Capture_Agent');
    // HISTORY summary_only, no PASS: the child receives the SUMMARY and nothing else.
    expect(gate.body['context']).toMatchObject({
      message: 'I want a loan offer',
      variables: {},
      handoff: { summary: "Collect the applicant's annual income, then return.", history_mode: 'summary_only', history: [], passed: [] },
    });
    expect(created.some((c) => c.body['workflow_run_id'] === run && c.body['to_agent'] === 'Loan_Supervisor')).toBe(false);

    await reply('loans', run, 'Income_Capture_Agent', { body: 'What is your annual income?' });
    await waitEvents('loans', run, 'run.awaiting_input');
    await say('loans', run, 'About 52000 a year');
    await waitEvents('loans', run, 'run.routed', 2);
    // 3. The child completes: handoff_return_handler with mappedFields, then resume_intent.
    await reply('loans', run, 'Income_Capture_Agent', { variables: { annual_income: 52000 } });
    const [handler] = await waitEvents('loans', run, 'run.handoff_return_handler');
    expect(handler).toMatchObject({ mappedFields: ['annual_income'], path: 'complete' });
    const [resume] = await waitEvents('loans', run, 'run.resume_intent');
    expect(resume).toMatchObject({ reasonCode: 'resume_intent', message: 'I want a loan offer' });
    // 4. The second handoff is permanent, to Offer_Agent, with PASS [annual_income].
    const handoffs = await waitEvents('loans', run, 'run.handoff', 2);
    expect(handoffs[1]).toMatchObject({ to: 'Offer_Agent', returnExpected: false, reasonCode: 'handoff_permanent' });
    const offer = await createdFor('loans', run, 'Offer_Agent');
    expect(offer.body['context']).toMatchObject({
      message: 'I want a loan offer',
      variables: { annual_income: 52000 },
      handoff: { passed: ['annual_income'] },
    });
    // The replay fired a route: its target is no caller of the child, and gets no child's answer (only what PASS gives it).
    expect(offer.body['context']).not.toHaveProperty('returned');
    // 5. handoff_completed: outcome and durationMs.
    const completed = await payloads('loans', run, 'run.handoff_completed');
    expect(completed).toContainEqual(expect.objectContaining({ to: 'Income_Capture_Agent', outcome: 'success', durationMs: expect.any(Number) }));
    expect(completed).toContainEqual(expect.objectContaining({ to: 'Income_Capture_Agent', outcome: 'blocked', code: 'handoff_condition_check' }));
    // The order of the trace is the seed's.
    const order = (await events('loans', run)).map((e) => e.type).filter((t) => ['run.handoff', 'run.handoff_return_handler', 'run.resume_intent'].includes(t));
    expect(order).toEqual(['run.handoff', 'run.handoff_return_handler', 'run.resume_intent', 'run.handoff']);
  }, 30_000);

  it('a returning customer with the value set goes straight to Offer_Agent; messages while the agent works are queued and delivered in order each time it waits', async () => {
    const run = await start('loans', 'Show me offers', { annual_income: 80000 });
    const [handoff] = await waitEvents('loans', run, 'run.handoff');
    expect(handoff).toMatchObject({ to: 'Offer_Agent', returnExpected: false, reasonCode: 'handoff_permanent' });
    await say('loans', run, 'hello?', 'chat-front');
    await waitEvents('loans', run, 'run.message_queued');
    await say('loans', run, 'are you there?');
    const queued = await waitEvents('loans', run, 'run.message_queued', 2);
    // The agent that relayed a message is known from its subject only (`…message.<agent>`); the actor stays the customer.
    expect(queued.map((q) => ({ text: q['text'], agent: q['agent'], position: q['position'], relayed_by: q['relayed_by'] }))).toEqual([
      { text: 'hello?', agent: 'Offer_Agent', position: 1, relayed_by: 'chat-front' },
      { text: 'are you there?', agent: 'Offer_Agent', position: 2, relayed_by: undefined },
    ]);
    expect((await events('loans', run)).filter((e) => e.type === 'run.message_queued').map((e) => [e.actor, e.origin])).toEqual([
      ['customer', 'human'],
      ['customer', 'human'],
    ]);
    expect(await payloads('loans', run, 'run.result_rejected')).toEqual([]);
    expect(await payloads('loans', run, 'run.message_received')).toHaveLength(1); // only the start's input so far
    // Offer_Agent answers: the run waits, and the oldest queued message is delivered in the same decision.
    await reply('loans', run, 'Offer_Agent', { body: 'Here are your offers.' });
    const received = await waitEvents('loans', run, 'run.message_received', 2);
    expect(received[1]).toMatchObject({
      message_id: queued[0]!['message_id'],
      text: 'hello?',
      agent: 'Offer_Agent',
      queued_at: queued[0]!['queued_at'],
      relayed_by: 'chat-front',
    });
    const completed = (await payloads('loans', run, 'run.handoff_completed')).find((c) => c['outcome'] === 'success');
    expect(completed).toMatchObject({ to: 'Offer_Agent', outcome: 'success', durationMs: expect.any(Number), siblingIntentMs: expect.any(Number) });
    // The delivered message goes to Offer_Agent as a new turn (a ledger create), before any other input.
    await waitFor(
      () => created.filter((c) => c.body['workflow_run_id'] === run && c.body['to_agent'] === 'Offer_Agent').length >= 2 || undefined,
      'the turn for the delivered message',
    );
    const types = (await events('loans', run)).map((e) => e.type);
    expect(types.slice(types.lastIndexOf('run.awaiting_input'))).toEqual(['run.awaiting_input', 'run.message_received', 'run.routed']);
    // The next time it waits, the second one follows.
    await reply('loans', run, 'Offer_Agent', { body: 'Yes, I am here.' });
    const all = await waitEvents('loans', run, 'run.message_received', 3);
    expect(all[2]).toMatchObject({ text: 'are you there?' });
    expect(all[2]).not.toHaveProperty('relayed_by');
    expect((await events('loans', run)).filter((e) => e.type === 'run.routed')).toHaveLength(3);
    // The words are the customer's whichever command recorded them (the start's input, an agent's
    // reply delivering a queued message); the reply's own events keep the agent that sent it.
    const stored = await events('loans', run);
    expect(stored.filter((e) => e.type === 'run.message_received').map((e) => [e.actor, e.origin])).toEqual([
      ['customer', 'human'],
      ['customer', 'human'],
      ['customer', 'human'],
    ]);
    expect(stored.filter((e) => e.type === 'run.result_recorded').map((e) => e.actor)).toEqual(['Offer_Agent', 'Offer_Agent']);
  }, 20_000);

  it("a message read before its run's start (separate consumers) waits for the start instead of being dead-lettered not_found", async () => {
    const run = `wr-${++counter}`;
    await say('loans', run, 'hello before the start');
    await sleep(300);
    await nats.js.publish(
      Subjects.runStart(prefix, 'loans'),
      encoder.encode(
        JSON.stringify({
          workflow_run_id: run,
          project: 'loans',
          workflow: 'loan_session',
          started_by: 'sam',
          input: 'Show me offers',
          variables: { annual_income: 80000 },
        }),
      ),
    );
    const [queued] = await waitEvents('loans', run, 'run.message_queued');
    expect(queued).toMatchObject({ text: 'hello before the start' });
    expect(await payloads('loans', run, 'run.result_rejected')).toEqual([]);
  }, 20_000);

  it('a message to a finished run is still refused and recorded (run_not_awaiting_input)', async () => {
    const run = await start('loans', 'Show me offers', { annual_income: 80000 });
    await waitEvents('loans', run, 'run.handoff');
    await reply('loans', run, 'Offer_Agent', { decision: { dispatch: { status: 'terminate', reason: 'done' } } });
    await waitEvents('loans', run, 'run.terminated');
    await say('loans', run, 'hello?');
    const [rejected] = await waitEvents('loans', run, 'run.result_rejected');
    expect(rejected).toMatchObject({ agent: 'customer', code: 'run_not_awaiting_input' });
  }, 20_000);

  it('the child hands off to the waiting parent: the parent resumes (hand_back, the forwarded message recorded) and its ON_RETURN runs', async () => {
    const run = await start('loans', 'I want a loan offer');
    await waitEvents('loans', run, 'run.handoff');
    await reply('loans', run, 'Income_Capture_Agent', { body: 'What is your annual income?' });
    await waitEvents('loans', run, 'run.awaiting_input');
    await say('loans', run, 'What are your opening hours?');
    await waitEvents('loans', run, 'run.routed', 2);
    await reply('loans', run, 'Income_Capture_Agent', { handoff: { to: 'Loan_Supervisor' } });
    const [handler] = await waitEvents('loans', run, 'run.handoff_return_handler');
    expect(handler).toMatchObject({ path: 'hand_back', parent: 'Loan_Supervisor', forwardedMessage: 'What are your opening hours?', mappedFields: [] });
    const [resume] = await waitEvents('loans', run, 'run.resume_intent');
    expect(resume).toMatchObject({ resumeWith: 'original_handoff_utterance' });
  }, 20_000);

  it('a refused route: the child routing to itself (already active) is rejected with recursion', async () => {
    const run = await start('loans', 'I want a loan offer');
    await waitEvents('loans', run, 'run.handoff');
    await reply('loans', run, 'Income_Capture_Agent', { handoff: { to: 'Income_Capture_Agent' } });
    const completed = await waitEvents('loans', run, 'run.handoff_completed', 2);
    expect(completed).toContainEqual(expect.objectContaining({ outcome: 'rejected', code: 'recursion' }));
    // The child keeps the conversation and waits for the customer.
    await waitEvents('loans', run, 'run.awaiting_input');
  }, 20_000);

  it('ON_FAILURE RESPOND runs when the ledger refuses to create the child handoff (handoff_completed error with cause and code)', async () => {
    const run = await start('loansfail', 'I want a loan offer');
    const [failed] = await waitEvents('loansfail', run, 'run.handoff_completed');
    expect(failed).toMatchObject({ outcome: 'error', code: 'agent_unavailable', onFailure: 'respond', cause: expect.stringMatching(/^create_refused/) });
    const [waiting] = await waitEvents('loansfail', run, 'run.awaiting_input');
    expect(waiting).toMatchObject({ agent: 'Loan_Supervisor', reply: 'I cannot collect your income details right now. Please try again later.' });
  }, 20_000);

  it('publishing makes a new version; a run keeps the routes of the definition it started with', async () => {
    const run = await start('loansv', 'I want a loan offer');
    await waitEvents('loansv', run, 'run.handoff');
    // v2 drops the MAP: a run started now would get no income back.
    const v2 = loanDefinition('loansv', (y) => y.replace('      MAP:\n        annual_income: annual_income\n', ''));
    expect(await publish('loansv', v2)).toMatchObject({ ok: true, changed: true });
    await reply('loansv', run, 'Income_Capture_Agent', { variables: { annual_income: 41000 } });
    const [handler] = await waitEvents('loansv', run, 'run.handoff_return_handler');
    expect(handler).toMatchObject({ mappedFields: ['annual_income'] });

    const later = await start('loansv', 'I want a loan offer');
    await waitEvents('loansv', later, 'run.handoff');
    await reply('loansv', later, 'Income_Capture_Agent', { variables: { annual_income: 41000 } });
    const [v2handler] = await waitEvents('loansv', later, 'run.handoff_return_handler');
    expect(v2handler).toMatchObject({ mappedFields: [] });
  }, 30_000);

  it('action: continue with SET: the parent does not route after the return; a later message routes; a route to the agent waiting for input is refused (target_waiting_for_input)', async () => {
    const run = await start('loanscont', 'I want a loan offer');
    await waitEvents('loanscont', run, 'run.handoff');
    await reply('loanscont', run, 'Income_Capture_Agent', { variables: { annual_income: 60000 } });
    const [handler] = await waitEvents('loanscont', run, 'run.handoff_return_handler');
    expect(handler).toMatchObject({ action: 'continue', mappedFields: ['annual_income'], setFields: ['income_note'], applied: true });
    const [waiting] = await waitEvents('loanscont', run, 'run.awaiting_input');
    expect(waiting).toMatchObject({ agent: 'Loan_Supervisor', reply: 'Thanks. I have your income.' });
    expect(await payloads('loanscont', run, 'run.resume_intent')).toEqual([]);

    await say('loanscont', run, 'So what can I get?');
    const handoffs = await waitEvents('loanscont', run, 'run.handoff', 2);
    expect(handoffs[1]).toMatchObject({ to: 'Offer_Agent', reasonCode: 'handoff_permanent', passedVariables: { annual_income: 60000 } });
    await reply('loanscont', run, 'Offer_Agent', { body: 'Here are your offers.' });
    await waitEvents('loanscont', run, 'run.awaiting_input', 2);
    await say('loanscont', run, 'Thanks');
    const completed = await waitFor(async () => {
      const all = await payloads('loanscont', run, 'run.handoff_completed');
      return all.find((c) => c['code'] === 'target_waiting_for_input');
    }, 'a target_waiting_for_input refusal');
    expect(completed).toMatchObject({ outcome: 'rejected', from: 'Offer_Agent', to: 'Offer_Agent' });
  }, 30_000);

  it('the return applies no effects when a SET target is not writable by the parent: memory_error', async () => {
    const run = await start('loansro', 'I want a loan offer');
    await waitEvents('loansro', run, 'run.handoff');
    await reply('loansro', run, 'Income_Capture_Agent', { variables: { annual_income: 60000 } });
    const [error] = await waitEvents('loansro', run, 'run.memory_error');
    expect(error).toMatchObject({ parent: 'Loan_Supervisor', targets: ['locked'] });
    const [handler] = await waitEvents('loansro', run, 'run.handoff_return_handler');
    expect(handler).toMatchObject({ applied: false, mappedFields: [] });
    // annual_income was not copied: the gate still holds on the next message.
    await waitEvents('loansro', run, 'run.awaiting_input');
    await say('loansro', run, 'Offers please');
    const handoffs = await waitEvents('loansro', run, 'run.handoff', 2);
    expect(handoffs[1]).toMatchObject({ to: 'Income_Capture_Agent' });
  }, 30_000);

  it('ENABLED_WHEN switches the target off: handoff_completed blocked, the supervisor gets the message', async () => {
    const run = await start('loansoff', 'I want a loan offer');
    const [blocked] = await waitEvents('loansoff', run, 'run.handoff_completed');
    expect(blocked).toMatchObject({ outcome: 'blocked', to: 'Income_Capture_Agent', cause: 'target_disabled' });
    const [routed] = await waitEvents<{ target: { agent: string }; decision: { rule: string } }>('loansoff', run, 'run.routed');
    expect(routed).toMatchObject({ target: { agent: 'Loan_Supervisor' }, decision: { rule: 'message' } });
  }, 20_000);

  it('AUTH requires authentication: handoff_completed blocked (authentication_required) while customer_verified is not true, the supervisor gets the message; once it is true the same route goes through', async () => {
    const run = await start('loansauth', 'Show me offers', { annual_income: 80000 });
    const completed = await waitEvents('loansauth', run, 'run.handoff_completed', 2);
    expect(completed).toEqual([
      expect.objectContaining({ outcome: 'blocked', to: 'Income_Capture_Agent', cause: 'when_false' }),
      expect.objectContaining({
        outcome: 'blocked',
        from: 'Loan_Supervisor',
        to: 'Offer_Agent',
        cause: 'authentication_required',
        code: 'auth_profile',
        handoffId: null,
      }),
    ]);
    const [routed] = await waitEvents<{ target: { agent: string }; decision: { rule: string } }>('loansauth', run, 'run.routed');
    expect(routed).toMatchObject({ target: { agent: 'Loan_Supervisor' }, decision: { rule: 'message' } });
    expect(await payloads('loansauth', run, 'run.handoff')).toEqual([]);

    // The supervisor verifies the customer: its result sets the session variable.
    await reply('loansauth', run, 'Loan_Supervisor', { body: 'Thanks, you are verified.', variables: { customer_verified: true } });
    await waitEvents('loansauth', run, 'run.awaiting_input');
    await say('loansauth', run, 'Show me offers');
    const [handoff] = await waitEvents('loansauth', run, 'run.handoff');
    expect(handoff).toMatchObject({ from: 'Loan_Supervisor', to: 'Offer_Agent', returnExpected: false, reasonCode: 'handoff_permanent' });
    const offer = await createdFor('loansauth', run, 'Offer_Agent');
    expect(offer.body['context']).toMatchObject({ message: 'Show me offers', variables: { annual_income: 80000 } });
    expect((await payloads('loansauth', run, 'run.handoff_completed')).filter((c) => c['cause'] === 'authentication_required')).toHaveLength(1);
  }, 20_000);

  it('expecting a replay to chain: a replay runs one level only (resume_intent_depth_limit)', async () => {
    const run = await start('loans', 'I want a loan offer');
    await waitEvents('loans', run, 'run.handoff');
    // The child hands back with a message; the replay re-fires the gate (a replay, depth 1).
    await reply('loans', run, 'Income_Capture_Agent', { handoff: { to: 'Loan_Supervisor', message: 'What rates do you have?' } });
    const handoffs = await waitEvents('loans', run, 'run.handoff', 2);
    expect(handoffs[1]).toMatchObject({ to: 'Income_Capture_Agent', replayDepth: 1 });
    await reply('loans', run, 'Income_Capture_Agent', { variables: { annual_income: 45000 } });
    const resumes = await waitEvents('loans', run, 'run.resume_intent', 2);
    expect(resumes[1]).toMatchObject({ reasonCode: 'resume_intent_depth_limit' });
    const waiting = await waitEvents('loans', run, 'run.awaiting_input');
    expect(waiting[waiting.length - 1]).toMatchObject({ agent: 'Loan_Supervisor' });
  }, 20_000);
});
