import { Subjects, type ProjectDefinition } from '@baton/contracts';
import { compileProject, LOAN_EXAMPLE_YAML } from '@baton/definitions';
import { waitFor } from '@baton/wait';
import { createBatonClient, decisions, type BatonAgent, type HandoffOffer, type OfferSubscription, type ReturnedAnswer } from '@baton/sdk';
import { publishDefinition, startInProcess, type InProcessDeployment } from './int/support';

/*
 * A returnable call carries the callee's answer back to the caller (seed 000 §4–§5: "the caller
 * re-enters with the report and decides"; §7: "your answer is returned to them by the engine's
 * callback"), through the real router and ledger over the real NATS, with the SDK's agents: the
 * handoff the router creates for the caller holds the callee's result (`context.returned`), and
 * the SDK's offer reads it (`offer.returned`). Before, the caller's offer held only the routing
 * decision, the cause id and the run's variables (SDK audit MED-2).
 */

const PROJECT = 'retans';
const CONVERSATION = 'retconv';
/** The loan gate whose ON_RETURN continues the parent (no replay). */
const CONTINUED = 'retcont';
/** The same with a SET the parent may not write: every return is a memory_error and applies no effects. */
const UNWRITABLE = 'retro';
const encoder = new TextEncoder();

const definition = {
  project: PROJECT,
  agents: [
    { name: 'planner', role: 'Planner' },
    { name: 'reviewer', role: 'Reviewer' },
    { name: 'coder', role: 'Coder' },
  ],
  workflows: [
    {
      name: 'plan',
      version: 1,
      entry: 'plan',
      steps: [
        { id: 'plan', agent: 'planner', next: 'code' },
        { id: 'code', agent: 'coder', terminal: true },
      ],
    },
  ],
};

/** Text of the loan example this spec edits: it must still be there. */
function replaced(yaml: string, from: string, to: string): string {
  if (!yaml.includes(from)) throw new Error('the loan example changed: update this spec');
  return yaml.replace(from, to);
}

/**
 * Seed 001's loan gate without the Offer_Agent route: the replayed request after the child's return
 * (or, with ON_RETURN `onReturn`, the customer's next message) reaches the supervisor itself.
 */
function conversationDefinition(project = CONVERSATION, onReturn?: string, edit: (yaml: string) => string = (y) => y): ProjectDefinition {
  const offerRoute =
    '  - TO: Offer_Agent\n    WHEN: annual_income IS SET\n    PASS: [annual_income]\n    SUMMARY: "The offer agent now owns the conversation."\n    RETURN: false\n';
  let yaml = replaced(LOAN_EXAMPLE_YAML, offerRoute, '').replace('project: loans', `project: ${project}`);
  if (onReturn !== undefined) yaml = replaced(yaml, '      action: resume_intent\n      MAP:\n        annual_income: annual_income\n', onReturn);
  yaml = edit(yaml);
  const compiled = compileProject([{ path: 'loans.yaml', text: yaml }]);
  if (compiled.project === null) throw new Error(JSON.stringify(compiled.diagnostics));
  return compiled.project;
}

/** ON_RETURN continue: the parent waits for the customer after the return (its COMPLETE RESPOND said as the parent's). */
const CONTINUE = '      action: continue\n      MAP:\n        annual_income: annual_income\n';
/** ON_RETURN continue with a SET of a variable the supervisor does not declare writable: memory_error, no effects. */
const CONTINUE_UNWRITABLE = `${CONTINUE}      SET:\n        locked: "x"\n`;
/** The gate as an intent: skipped at message time, so the supervisor gets every message and hands off by its own choice. */
const gateByChoice = (yaml: string) => replaced(yaml, '    WHEN: annual_income IS NOT SET\n', '    WHEN: "the applicant has not told us their income"\n');

/** What one agent did with one offer it claimed. */
interface Seen {
  agent: string;
  run: string;
  offer: HandoffOffer;
  claimId: string;
  returned: ReturnedAnswer | null;
  context: Record<string, unknown>;
}

describe("a returnable call carries the callee's answer back to the caller (context.returned, offer.returned; real router and ledger)", () => {
  let deployment: InProcessDeployment | undefined;
  const clients: BatonAgent[] = [];
  const subscriptions: OfferSubscription[] = [];
  const seen: Seen[] = [];
  /** What each agent does next on each run, in order: `<run>/<agent>` → steps. */
  const plans = new Map<string, ((offer: HandoffOffer) => Promise<unknown>)[]>();
  let counter = 0;

  const plan = (run: string, agent: string, ...steps: ((offer: HandoffOffer) => Promise<unknown>)[]) => plans.set(`${run}/${agent}`, steps);
  const seenBy = (run: string, agent: string, count: number) =>
    waitFor(() => {
      const found = seen.filter((s) => s.run === run && s.agent === agent);
      return found.length >= count ? found : undefined;
    }, `${count} offer(s) of ${run} claimed by ${agent}`);

  const agentOn = async (project: string, agent: string) => {
    const nats = deployment!.nats;
    const client = await createBatonClient({ nats, prefix: deployment!.prefix, project, agent });
    clients.push(client);
    subscriptions.push(
      await client.handoffs({
        onOffer: async (offer) => {
          const claimed = await offer.tryClaim();
          if (claimed === null) return;
          const run = claimed.workflow_run_id ?? '';
          seen.push({ agent, run, offer, claimId: claimed.claim_id!, returned: offer.returned, context: claimed.context });
          const step = plans.get(`${run}/${agent}`)?.shift();
          await (step ?? ((o: HandoffOffer) => o.release('no plan for this offer')))(offer);
        },
      }),
    );
  };
  /** A customer's message to a conversation run (the project's shared message subject). */
  const say = (project: string, run: string, text: string) =>
    deployment!.nats.js.publish(
      Subjects.sessionMessage(deployment!.prefix, project),
      encoder.encode(JSON.stringify({ workflow_run_id: run, project, message_id: `msg-${++counter}`, text })),
    );
  /** The run's events of `type`, once there are `count` of them. */
  const eventsOf = (project: string, run: string, type: string, count = 1) =>
    waitFor(async () => {
      const found = (await deployment!.store.read({ project, kind: 'run', id: run })).events.filter((e) => e.type === type);
      return found.length >= count ? found.map((e) => e.payload as Record<string, unknown>) : undefined;
    }, `${count} × ${type} on ${run}`);
  const startRun = async (project: string, workflow: string, input: string) => {
    const run = `wr-${++counter}`;
    await deployment!.nats.js.publish(
      Subjects.runStart(deployment!.prefix, project),
      encoder.encode(JSON.stringify({ workflow_run_id: run, project, workflow, started_by: 'sam', input })),
    );
    return run;
  };

  beforeAll(async () => {
    deployment = await startInProcess({ tag: 'ra', services: ['ledger', 'router'] });
    expect(await publishDefinition(deployment.nats, deployment.prefix, PROJECT, definition)).toMatchObject({ ok: true });
    expect(await publishDefinition(deployment.nats, deployment.prefix, CONVERSATION, conversationDefinition())).toMatchObject({ ok: true });
    expect(await publishDefinition(deployment.nats, deployment.prefix, CONTINUED, conversationDefinition(CONTINUED, CONTINUE))).toMatchObject({ ok: true });
    expect(
      await publishDefinition(deployment.nats, deployment.prefix, UNWRITABLE, conversationDefinition(UNWRITABLE, CONTINUE_UNWRITABLE, gateByChoice)),
    ).toMatchObject({ ok: true });
    for (const agent of ['planner', 'reviewer']) await agentOn(PROJECT, agent);
    for (const project of [CONVERSATION, CONTINUED, UNWRITABLE]) for (const agent of ['Loan_Supervisor', 'Income_Capture_Agent']) await agentOn(project, agent);
  }, 40_000);

  afterAll(async () => {
    for (const subscription of subscriptions) await subscription.stop({ timeoutMs: 2_000 });
    for (const client of clients) await client.close({ timeoutMs: 2_000 });
    await deployment?.close();
  }, 30_000);

  it("callAgent('reviewer') → the reviewer answers with a body and evidence → the planner's next offer carries that answer (rule callback)", async () => {
    const run = await startRun(PROJECT, 'plan', 'plan the cart');
    const answer = 'ANSWER: the plan is wrong in step 3';
    plan(
      run,
      'planner',
      (o) => o.finish({ body: 'asking reviewer', decision: decisions.callAgent('reviewer') }),
      (o) => o.finish({ decision: decisions.terminate('done') }),
    );
    plan(run, 'reviewer', (o) =>
      o.finish({
        body: answer,
        evidence: { tests_run: ['plan-check: 1 failed'] },
        variables: { review_verdict: 'wrong step 3' },
        decision: decisions.advance('answered'),
      }),
    );
    const [first, back] = await seenBy(run, 'planner', 2);
    const [review] = await seenBy(run, 'reviewer', 1);
    // The first step and the call itself carry no answer: nobody returned to them.
    expect(first!.returned).toBeNull();
    expect(review!.returned).toBeNull();
    expect(review!.context).toMatchObject({ rule: 'function_call', called_by: 'planner' });
    // Control came back by the return address, with the reviewer's words.
    expect(back!.context).toMatchObject({ rule: 'callback', from: { agent: 'reviewer', step: 'plan' }, variables: { review_verdict: 'wrong step 3' } });
    const expected = {
      from_agent: 'reviewer',
      step: 'plan',
      result_id: `res-${review!.claimId}`,
      body: answer,
      body_truncated: false,
      evidence: { tests_run: ['plan-check: 1 failed'] },
    };
    expect(back!.context['returned']).toEqual(expected);
    expect(back!.returned).toEqual(expected);
    expect(back!.offer.returned).toEqual(expected);
  }, 30_000);

  it("a callee that decides nothing returns to its caller (no-action default) with its words; a long answer is cut at the run's cap and says so", async () => {
    const run = await startRun(PROJECT, 'plan', 'plan the checkout');
    const long = `${'The plan needs a rollback step. '.repeat(600)}END`;
    plan(
      run,
      'planner',
      (o) => o.finish({ body: 'asking reviewer', decision: decisions.callAgent('reviewer') }),
      (o) => o.finish({ decision: decisions.terminate('done') }),
    );
    plan(run, 'reviewer', (o) => o.finish({ body: long }));
    const [, back] = await seenBy(run, 'planner', 2);
    expect(back!.context).toMatchObject({ rule: 'no_action_default', dispatch: { origin: 'engine_fallback' } });
    const returned = back!.returned!;
    expect(returned).toMatchObject({ from_agent: 'reviewer', step: 'plan', body_truncated: true });
    expect(returned.body!.startsWith('The plan needs a rollback step. ')).toBe(true);
    expect(returned.body!.endsWith('… (cut at 16384 characters)')).toBe(true);
    expect(returned.body).not.toContain('END');
    expect(returned).not.toHaveProperty('evidence');
  }, 30_000);

  it("a returnable child's return replayed to its waiting parent: the parent's handoff carries the child's answer beside the replayed message", async () => {
    const run = await startRun(CONVERSATION, 'loan_session', 'I want a loan offer');
    plan(
      run,
      'Income_Capture_Agent',
      (o) => o.finish({ body: 'What is your annual income?' }),
      (o) => o.finish({ body: 'Income noted: 52000 a year.', variables: { annual_income: 52000 } }),
    );
    plan(run, 'Loan_Supervisor', (o) => o.finish({ body: 'Thank you.', decision: decisions.terminate('done') }));
    await seenBy(run, 'Income_Capture_Agent', 1);
    await waitFor(
      async () => (await deployment!.store.read({ project: CONVERSATION, kind: 'run', id: run })).events.some((e) => e.type === 'run.awaiting_input'),
      'the child waits for the customer',
    );
    await deployment!.nats.js.publish(
      Subjects.sessionMessage(deployment!.prefix, CONVERSATION),
      encoder.encode(JSON.stringify({ workflow_run_id: run, project: CONVERSATION, message_id: `income-${run}`, text: 'About 52000 a year' })),
    );
    const [, completing] = await seenBy(run, 'Income_Capture_Agent', 2);
    const [parent] = await seenBy(run, 'Loan_Supervisor', 1);
    expect(parent!.context).toMatchObject({ rule: 'message', message: 'I want a loan offer', variables: { annual_income: 52000 } });
    const expected = {
      from_agent: 'Income_Capture_Agent',
      step: 'converse',
      result_id: `res-${completing!.claimId}`,
      body: 'Income noted: 52000 a year.',
      body_truncated: false,
    };
    expect(parent!.context['returned']).toEqual(expected);
    expect(parent!.returned).toEqual(expected);
  }, 40_000);

  /** The child asks for the income, then (after the customer's answer) completes with `body`; `during` runs while it works on that turn. */
  const incomeChild = (run: string, body: string, during?: () => Promise<unknown>) =>
    plan(
      run,
      'Income_Capture_Agent',
      (o) => o.finish({ body: 'What is your annual income?' }),
      async (o) => {
        await during?.();
        return o.finish({ body, evidence: { artifacts: ['income-form-1'] }, variables: { annual_income: 52000 } });
      },
    );
  /** Start a run of `project` and play the child's first turn and the customer's answer to it. */
  const throughTheGate = async (project: string, run: string) => {
    await seenBy(run, 'Income_Capture_Agent', 1);
    await eventsOf(project, run, 'run.awaiting_input');
    await say(project, run, 'About 52000 a year');
  };
  const answerOf = (completing: Seen, body: string) => ({
    from_agent: 'Income_Capture_Agent',
    step: 'converse',
    result_id: `res-${completing.claimId}`,
    body,
    body_truncated: false,
    evidence: { artifacts: ['income-form-1'] },
  });

  it("ON_RETURN continue: the parent waits for the customer; its next turn carries the child's answer beside the customer's message, its turn after that does not", async () => {
    const run = await startRun(CONTINUED, 'loan_session', 'I want a loan offer');
    incomeChild(run, 'Income noted: 52000 a year.');
    plan(
      run,
      'Loan_Supervisor',
      (o) => o.finish({ body: 'You qualify for two offers.' }),
      (o) => o.finish({ body: 'Goodbye.', decision: decisions.terminate('done') }),
    );
    await throughTheGate(CONTINUED, run);
    const [, completing] = await seenBy(run, 'Income_Capture_Agent', 2);
    const [handler] = await eventsOf(CONTINUED, run, 'run.handoff_return_handler');
    expect(handler).toMatchObject({ action: 'continue', path: 'complete', mappedFields: ['annual_income'], applied: true });
    const waits = await eventsOf(CONTINUED, run, 'run.awaiting_input', 2);
    expect(waits[1]).toMatchObject({ agent: 'Loan_Supervisor', reply: 'Thanks. I have your income.' });

    await say(CONTINUED, run, 'What can I get?');
    const [next] = await seenBy(run, 'Loan_Supervisor', 1);
    expect(next!.context).toMatchObject({ rule: 'message', cause: { kind: 'message' }, message: 'What can I get?', variables: { annual_income: 52000 } });
    const expected = answerOf(completing!, 'Income noted: 52000 a year.');
    expect(next!.context['returned']).toEqual(expected);
    expect(next!.returned).toEqual(expected);

    // Read once: the parent's own reply ended that turn, and its next one has nothing returned to it.
    await eventsOf(CONTINUED, run, 'run.awaiting_input', 3);
    await say(CONTINUED, run, 'Thanks');
    const [, after] = await seenBy(run, 'Loan_Supervisor', 2);
    expect(after!.context).toMatchObject({ rule: 'message', message: 'Thanks' });
    expect(after!.returned).toBeNull();
    expect(after!.context).not.toHaveProperty('returned');
  }, 40_000);

  it("ON_RETURN continue with a message queued while the child worked: delivered at once to the parent, whose handoff carries the child's answer", async () => {
    const run = await startRun(CONTINUED, 'loan_session', 'I want a loan offer');
    incomeChild(run, 'Income noted: 52000 a year.', async () => {
      await say(CONTINUED, run, 'And what rates do you have?');
      await eventsOf(CONTINUED, run, 'run.message_queued');
    });
    plan(run, 'Loan_Supervisor', (o) => o.finish({ decision: decisions.terminate('done') }));
    await throughTheGate(CONTINUED, run);
    const [, completing] = await seenBy(run, 'Income_Capture_Agent', 2);
    const [next] = await seenBy(run, 'Loan_Supervisor', 1);
    expect(next!.context).toMatchObject({ rule: 'message', cause: { kind: 'message' }, message: 'And what rates do you have?' });
    expect(next!.returned).toEqual(answerOf(completing!, 'Income noted: 52000 a year.'));
  }, 40_000);

  it("a return that applies no effects (memory_error) still gives control back to the parent: its next turn carries the child's answer (return_to_parent)", async () => {
    const run = await startRun(UNWRITABLE, 'loan_session', 'I want a loan offer');
    plan(run, 'Income_Capture_Agent', (o) => o.finish({ body: 'Your income is noted as 52000 a year.', return_to_parent: { message: 'income noted' } }));
    plan(
      run,
      'Loan_Supervisor',
      (o) => o.finish({ body: 'Let me ask for your income first.', handoff: { to: 'Income_Capture_Agent' } }),
      (o) => o.finish({ decision: decisions.terminate('done') }),
    );
    const [first] = await seenBy(run, 'Loan_Supervisor', 1);
    expect(first!.returned).toBeNull();
    const [child] = await seenBy(run, 'Income_Capture_Agent', 1);
    const [error] = await eventsOf(UNWRITABLE, run, 'run.memory_error');
    expect(error).toMatchObject({ parent: 'Loan_Supervisor', targets: ['locked'] });
    const [handler] = await eventsOf(UNWRITABLE, run, 'run.handoff_return_handler');
    expect(handler).toMatchObject({ path: 'return_action', action: 'continue', applied: false });
    await eventsOf(UNWRITABLE, run, 'run.awaiting_input');
    await say(UNWRITABLE, run, 'What can I get?');
    const [, next] = await seenBy(run, 'Loan_Supervisor', 2);
    expect(next!.context).toMatchObject({ rule: 'message', message: 'What can I get?' });
    expect(next!.returned).toEqual({
      from_agent: 'Income_Capture_Agent',
      step: 'converse',
      result_id: `res-${child!.claimId}`,
      body: 'Your income is noted as 52000 a year.',
      body_truncated: false,
    });
  }, 40_000);
});
