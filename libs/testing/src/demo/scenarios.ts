import { randomUUID } from 'node:crypto';
import {
  Principals,
  createEventRegistry,
  inboxPrefixOf,
  type AgentRunConfig,
  type EventEnvelope,
  type HandoffRecord,
  type PublishDefinitionReply,
} from '@baton/contracts';
import { MsgIds } from '@baton/contracts';
import { connectNats, JetStreamEventStore, LedgerClient, type NatsHandle, type StoredEvent } from '@baton/eventstore';
import { AgentSubjects, createBatonClient, type BatonAgent, type FinishResult, type HandoffOffer, type OfferSubscription } from '@baton/sdk';
import { waitFor } from '@baton/wait';
import { demoDefinition } from './definition';
import { runMeshScenario } from './mesh-scenario';

/** Where the platform is. */
export interface DemoOptions {
  natsUrl: string;
  prefix: string;
  /** The notifier's operator API, e.g. http://127.0.0.1:7100. */
  apiUrl: string;
  /** An operator token for the API (`baton token create --role operator --project <project>`), sent as `Authorization: Bearer`. */
  apiToken?: string;
  /** Project key (default `demo`). */
  project?: string;
  /** How long to wait for each expected outcome, ms (default 20 s). */
  timeoutMs?: number;
  log?: (line: string) => void;
  /** The admin's NATS credentials file, for a server with authentication (`npm start` runs one). */
  natsCreds?: string;
  /**
   * Each demo agent's own credentials file (`baton creds agent`). When given, every agent connects
   * as itself, as an agent microservice would; otherwise the agents share the demo's connection.
   */
  agentCreds?: (agent: string) => string;
}

/** Open an SDK client for one demo agent: its own authenticated connection, or the shared one. */
export function demoAgentClient(
  options: Pick<DemoOptions, 'natsUrl' | 'prefix' | 'agentCreds'>,
  nats: NatsHandle,
  project: string,
  agent: string,
): Promise<BatonAgent> {
  return options.agentCreds
    ? createBatonClient({ natsUrl: options.natsUrl.split(','), natsCreds: options.agentCreds(agent), prefix: options.prefix, project, agent })
    : createBatonClient({ nats, prefix: options.prefix, project, agent });
}

/** One checked outcome: what the rules say must happen, and what the platform did. */
export interface Outcome {
  scenario: string;
  check: string;
  expected: unknown;
  actual: unknown;
  ok: boolean;
}

export interface DemoReport {
  outcomes: Outcome[];
  /** The operator inbox (open items of the demo project) after the scenarios ran. */
  inbox: Array<Record<string, unknown>>;
  ok: boolean;
}

type Script = Array<FinishResult | { kind: 'return'; summary: string }>;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const sentinel = (config: AgentRunConfig) => `<!-- AGENT_RUN_CONFIG ${JSON.stringify(config)} -->`;

/**
 * Drive Baton's seed scenarios against a running platform, through the same doors an agent
 * microservice and an operator use: the SDK (offers, claims, results), the ledger's request/reply
 * API, and the operator HTTP API. Every expected outcome is read back from the event streams (the
 * source of truth) or the API, and recorded with what actually happened.
 */
export async function runDemo(options: DemoOptions): Promise<DemoReport> {
  const project = options.project ?? 'demo';
  const timeoutMs = options.timeoutMs ?? 20_000;
  const log = options.log ?? (() => undefined);
  const tag = `${Date.now().toString(36)}${randomUUID().slice(0, 4)}`;
  const outcomes: Outcome[] = [];
  const nats = await connectNats({
    servers: options.natsUrl.split(','),
    name: 'baton-demo',
    reconnect: false,
    ...(options.natsCreds !== undefined ? { credsFile: options.natsCreds, inboxPrefix: inboxPrefixOf(options.prefix, { kind: 'op', relay: 'admin' }) } : {}),
  });
  const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix: options.prefix, registry: createEventRegistry() });
  const scripts = new Map<string, Script>();
  const agents: BatonAgent[] = [];
  const subscriptions: OfferSubscription[] = [];

  const check = (scenario: string, what: string, expected: unknown, actual: unknown) => {
    const ok = JSON.stringify(expected) === JSON.stringify(actual);
    outcomes.push({ scenario, check: what, expected, actual, ok });
    log(`  ${ok ? 'ok  ' : 'FAIL'} ${what}${ok ? '' : `\n         expected ${JSON.stringify(expected)}\n         actual   ${JSON.stringify(actual)}`}`);
  };

  const runEvents = async (runId: string): Promise<StoredEvent[]> => (await store.read({ project, kind: 'run', id: runId })).events;
  /** Poll `probe` (@baton/wait); on a timeout log it and give undefined: the checks that follow record the failure. */
  const waitOrLog = <T>(what: string, probe: () => Promise<T | undefined>): Promise<T | undefined> =>
    waitFor(probe, what, { timeoutMs, everyMs: 150 }).catch((error: Error) => {
      log(`  (${error.message})`);
      return undefined;
    });
  const waitForRun = (runId: string, done: (events: StoredEvent[]) => boolean) =>
    waitOrLog(`run ${runId}`, async () => {
      const events = await runEvents(runId);
      return done(events) ? events : undefined;
    });
  const routes = (events: StoredEvent[]) =>
    events
      .filter((e) => e.type === 'run.routed')
      .map((e) => {
        const p = e.payload as { decision: { rule: string }; target: { agent: string; step: string } };
        return `${p.decision.rule}→${p.target.agent}`;
      });
  const has = (type: string) => (events: StoredEvent[]) => events.some((e) => e.type === type);
  const payloadOf = <T>(events: StoredEvent[] | undefined, type: string): T | undefined => events?.find((e) => e.type === type)?.payload as T | undefined;

  try {
    // --- set-up: the project definition and one SDK client per agent ---------------------------
    log(`publishing the demo project definition (project ${project})`);
    const definitionReply = await request<PublishDefinitionReply>(
      nats,
      AgentSubjects.router(options.prefix, project, 'publish_definition'),
      demoDefinition(project),
    );
    if (!definitionReply.ok) throw new Error(`the router refused the demo definition: ${definitionReply.error.code}: ${definitionReply.error.message}`);

    const workflowAgent = (name: string) => async (offer: HandoffOffer) => {
      const runId = String(offer.offered['workflow_run_id'] ?? '');
      const script = scripts.get(`${runId}/${name}`);
      const step = script?.shift();
      if (!step) return; // not a demo run of this session: leave the offer alone
      await offer.claim();
      if ('kind' in step) {
        await offer.return({ summary: step.summary, outcome: 'completed', evidence: { tests_run: [{ name: 'unit', passed: 12 }] } });
      } else {
        await offer.finish(step);
      }
    };
    for (const name of ['architect', 'context', 'issue', 'support', 'builder', 'Loan_Supervisor', 'Income_Capture_Agent', 'Offer_Agent']) {
      const agent = await demoAgentClient(options, nats, project, name);
      agents.push(agent);
      subscriptions.push(await agent.handoffs({ onOffer: workflowAgent(name), ackWaitMs: 10_000 }));
    }
    const lead = await demoAgentClient(options, nats, project, 'lead-agent');
    agents.push(lead);
    const start = (workflow: string, runId: string) =>
      agents[0]!.startRun({ workflow_run_id: runId, project, workflow, started_by: 'dana', issue_author: 'issue-bot' });

    // --- seed 000 §6: architect → context → architect (workflow edge) ---------------------------
    {
      const scenario = 'architect → context → architect (workflow edge)';
      log(`\n${scenario}`);
      const runId = `feature-${tag}`;
      scripts.set(`${runId}/architect`, [
        { body: `Analysis done.\n${sentinel({ dispatch: { status: 'advance' } })}` },
        { body: `Plan written.\n${sentinel({ dispatch: { status: 'advance' } })}` },
      ]);
      scripts.set(`${runId}/context`, [{ body: `Here is the context.\n${sentinel({ dispatch: { status: 'advance' } })}` }]);
      await start('feature', runId);
      // The completion and its notice are appended one after the other: wait for both.
      const events = await waitForRun(runId, (e) => has('run.completed')(e) && has('run.notice_emitted')(e));
      check(
        scenario,
        'routes follow the workflow edges: analyze → context → plan',
        ['entry→architect', 'workflow_edge→context', 'workflow_edge→architect'],
        routes(events ?? []),
      );
      check(
        scenario,
        'the terminal step completes the workflow with one human action notice',
        [true, 1],
        [has('run.completed')(events ?? []), (events ?? []).filter((e) => e.type === 'run.notice_emitted').length],
      );
    }

    // --- seed 000 §6: issue → context → issue (imperative call, callback) ------------------------
    {
      const scenario = 'issue → context → issue (imperative call)';
      log(`\n${scenario}`);
      const runId = `triage-${tag}`;
      scripts.set(`${runId}/issue`, [
        { decision: { function_call: { function: 'call_agent', agent_name: 'context' } } },
        { decision: { dispatch: { status: 'terminate', reason: 'triaged' } } },
      ]);
      scripts.set(`${runId}/context`, [{ body: `Context for the issue.\n${sentinel({ dispatch: { status: 'advance' } })}` }]);
      await start('triage', runId);
      const events = await waitForRun(runId, has('run.terminated'));
      check(
        scenario,
        'the callback defaults to issue and wins over the workflow edge',
        ['entry→issue', 'function_call→context', 'callback→issue'],
        routes(events ?? []),
      );
    }

    // --- seed 000 §6: a decision-less agent, with and without a return address -------------------
    {
      const scenario = 'a decision-less agent';
      log(`\n${scenario}`);
      const heldRun = `support-${tag}-held`;
      scripts.set(`${heldRun}/support`, [{ body: 'I answered the customer but made no routing decision.' }]);
      await start('support', heldRun);
      const held = await waitForRun(heldRun, (e) => has('run.held')(e) && has('run.notice_emitted')(e));
      const hold = payloadOf<{ reason: string; decision: { dispatch: { origin: string; status: string } } }>(held, 'run.held');
      check(
        scenario,
        'no return address: hold for a human with the seed reason, origin engine_fallback',
        {
          status: 'hold',
          reason: 'no-action default: agent emitted no decision',
          origin: 'engine_fallback',
        },
        { status: hold?.decision.dispatch.status, reason: hold?.reason, origin: hold?.decision.dispatch.origin },
      );
      check(
        scenario,
        'exactly one human action notice, to the workflow starter',
        [1, 'dana'],
        [
          (held ?? []).filter((e) => e.type === 'run.notice_emitted').length,
          payloadOf<{ notice: { recipient: { handle: string } } }>(held, 'run.notice_emitted')?.notice.recipient.handle,
        ],
      );

      const calleeRun = `triage-${tag}-callee`;
      scripts.set(`${calleeRun}/issue`, [
        { decision: { function_call: { function: 'call_agent', agent_name: 'context' } } },
        { decision: { dispatch: { status: 'terminate', reason: 'done' } } },
      ]);
      scripts.set(`${calleeRun}/context`, [{ body: 'Context, but no decision.' }]);
      await start('triage', calleeRun);
      const returned = await waitForRun(calleeRun, has('run.terminated'));
      const back = (returned ?? [])
        .filter((e) => e.type === 'run.routed')
        .map((e) => e.payload as { decision: { rule: string; dispatch: { reason?: string; origin: string } }; target: { agent: string } })[2];
      check(
        scenario,
        'with a return address: advance back to the caller (engine_fallback)',
        {
          rule: 'no_action_default',
          to: 'issue',
          reason: "no-action default: agent emitted no decision; returning to caller 'issue'",
          origin: 'engine_fallback',
        },
        { rule: back?.decision.rule, to: back?.target.agent, reason: back?.decision.dispatch.reason, origin: back?.decision.dispatch.origin },
      );
    }

    // --- seed 003: a policy stop with a frozen tool call, approved by an operator ----------------
    {
      const scenario = 'a policy stop (seed 003)';
      log(`\n${scenario}`);
      const runId = `support-${tag}-refund`;
      const refund = { name: 'refund', args: { amount: 40, order: 99 }, call_id: 'call-1' };
      scripts.set(`${runId}/support`, [
        {
          body: 'Refund needs approval.',
          stop: { why: 'policy', detail: 'refund over the cap' },
          pending_tool_call: refund,
          tried: [{ name: 'router' }, { name: 'lookup_order', trace_id: 'tr-1' }],
        },
        { decision: { dispatch: { status: 'advance' } }, body: 'Refund issued.' },
      ]);
      await start('support', runId);
      const stopped = await waitForRun(runId, has('run.stopped'));
      const packet = payloadOf<{
        packet: { packet_id: string; why: string; pending: unknown; user_msg: string; next_form: { kind: string; actions: Array<{ id: string }> } | null };
      }>(stopped, 'run.stopped')?.packet;
      check(
        scenario,
        'the packet keeps the frozen refund args and offers approve / deny',
        {
          why: 'policy',
          pending: refund,
          form: 'approve_deny',
          buttons: ['approve', 'deny'],
        },
        { why: packet?.why, pending: packet?.pending, form: packet?.next_form?.kind, buttons: packet?.next_form?.actions.map((a) => a.id) },
      );
      check(scenario, 'the user message does not say crash', false, /crash/i.test(packet?.user_msg ?? 'crash'));
      const item = await waitOrLog('the stop in the inbox', async () => {
        const inbox = await http<{ items: Array<{ id: string }> }>(
          { base: options.apiUrl, token: options.apiToken },
          'GET',
          `/v1/inbox?project=${project}&kind=stop`,
        );
        return inbox.body.items.find((i) => i.id === `stop:${project}:${packet?.packet_id}`);
      });
      check(scenario, 'the stop is in the operator inbox', true, item !== undefined);
      if (packet) {
        const stop = await http<{ stop: { pending_digest: string } }>(
          { base: options.apiUrl, token: options.apiToken },
          'GET',
          `/v1/projects/${project}/stops/${packet.packet_id}`,
        );
        const answer = await http<{ accepted?: boolean; outcome?: string }>(
          { base: options.apiUrl, token: options.apiToken },
          'POST',
          `/v1/projects/${project}/stops/${packet.packet_id}/answer`,
          {
            action: 'approve',
            pending_digest: stop.body.stop.pending_digest,
            // No `answered_by`: who answered is the token's name (a body naming anyone else is refused, identity_mismatch).
          },
        );
        // The API waits for the router's decision: 200 `applied` (or 202 `pending` on a slow machine).
        check(
          scenario,
          'the operator approves through the API and the router applies it',
          true,
          (answer.status === 200 && answer.body.outcome === 'applied') || answer.status === 202,
        );
      }
      const resumed = await waitForRun(runId, has('run.completed'));
      const approved = (resumed ?? [])
        .filter((e) => e.type === 'run.routed')
        .map((e) => (e.payload as { approved_call?: unknown }).approved_call)
        .filter(Boolean);
      check(scenario, 'approve runs exactly the frozen call, once, and the run completes', [[refund], true], [approved, has('run.completed')(resumed ?? [])]);

      // A budget stop left open, so the inbox has something for a person.
      const budgetRun = `support-${tag}-budget`;
      scripts.set(`${budgetRun}/support`, [
        { body: 'Out of budget.', stop: { why: 'budget' }, budget_used: { steps: 40 }, tried: [{ name: 'search' }, { name: 'search' }] },
      ]);
      await start('support', budgetRun);
      const budget = await waitForRun(budgetRun, has('run.stopped'));
      check(
        scenario,
        'a budget stop offers raise_cap (only an operator lifts it)',
        'raise_cap',
        payloadOf<{ packet: { next_form: { kind: string } } }>(budget, 'run.stopped')?.packet.next_form.kind,
      );
    }

    // --- seed 002: create → claim → return → handback → accept ----------------------------------
    {
      const scenario = 'claim / return / accept (seed 002)';
      log(`\n${scenario}`);
      const ledger = new LedgerClient(nats, options.prefix, { as: Principals.agent(project, 'lead-agent') });
      const handoffId = `ho-demo-${tag}`;
      scripts.set(`/builder`, [{ kind: 'return', summary: 'Built the feature; 12 tests pass.' }]);
      const created = await ledger.create(project, {
        handoff_id: handoffId,
        project,
        from_agent: 'lead-agent',
        to_agent: 'builder',
        summary: 'Build the export button',
        idempotency_key: `create-${handoffId}`,
      });
      check(scenario, 'the ledger creates the handoff as pending', 'pending', created.ok ? created.handoff.status : created.error.code);
      const returned = await waitOrLog('the parent to be returned', async () => {
        const h = await ledger.get(project, handoffId);
        return h && h.status === 'returned' ? h : undefined;
      });
      check(scenario, 'the builder claims and returns: the parent is returned', 'returned', returned?.status);
      const handback = await waitOrLog('the completion handback', async () => {
        const events = (await store.read({ project, kind: 'handoff', id: handoffId })).events as Array<EventEnvelope<{ handback_id?: string }>>;
        const id = events.find((e) => e.type === 'handoff.returned')?.payload.handback_id;
        if (!id) return undefined;
        const record = await ledger.get(project, id);
        return record ?? undefined;
      });
      check(
        scenario,
        'the completion handback is addressed to the delegator',
        { kind: 'completion_handback', to: 'lead-agent' },
        { kind: handback?.kind, to: handback?.to_agent },
      );
      if (handback) {
        const decided = await ledger.decideHandback(project, { handoff_id: handback.id, decision: 'accept', idempotency_key: `accept-${handback.id}` });
        check(scenario, 'the delegator accepts the handback', true, decided.ok);
      }
      const completed = await waitOrLog('the parent to complete', async () => {
        const h: HandoffRecord | null = await ledger.get(project, handoffId);
        return h && h.status === 'completed' ? h : undefined;
      });
      check(scenario, 'accept → the parent is completed', 'completed', completed?.status);
    }

    // --- seed 001: a returnable handoff (the loan gate) and a permanent one ------------------------
    {
      const scenario = 'returnable and permanent handoffs (seed 001 loan example)';
      log(`\n${scenario}`);
      const runId = `loan-${tag}`;
      const payloads = (events: StoredEvent[] | undefined, type: string) =>
        (events ?? []).filter((e) => e.type === type).map((e) => e.payload as Record<string, unknown>);
      scripts.set(`${runId}/Income_Capture_Agent`, [{ body: 'What is your annual income?' }, { body: 'Noted.', variables: { annual_income: 52000 } }]);
      scripts.set(`${runId}/Offer_Agent`, [{ body: 'With an annual income of 52000 you qualify for our standard loan.' }]);
      // The customer's first message is the run's input: the supervisor's WHEN runs before any model.
      await agents[0]!.startRun({ workflow_run_id: runId, project, workflow: 'loan_session', started_by: 'dana', input: 'I want a loan offer' });
      const asked = await waitForRun(runId, has('run.awaiting_input'));
      const first = payloads(asked, 'run.handoff')[0];
      check(
        scenario,
        'step 2: "I want a loan offer" hands off to Income_Capture_Agent (returnExpected: true, reasonCode: handoff_return_expected)',
        {
          to: 'Income_Capture_Agent',
          returnExpected: true,
          reasonCode: 'handoff_return_expected',
        },
        { to: first?.['to'], returnExpected: first?.['returnExpected'], reasonCode: first?.['reasonCode'] },
      );
      check(scenario, 'the child asks for the income', 'What is your annual income?', payloads(asked, 'run.awaiting_input')[0]?.['reply']);
      await nats.js.publish(
        `${options.prefix}.in.${project}.message`,
        new TextEncoder().encode(JSON.stringify({ workflow_run_id: runId, project, message_id: `${runId}-m1`, text: 'About 52000 a year' })),
        { msgID: MsgIds.message(project, runId, `${runId}-m1`) },
      );
      const done = await waitForRun(runId, (events) => payloads(events, 'run.awaiting_input').some((p) => p['agent'] === 'Offer_Agent'));
      check(
        scenario,
        'step 3: handoff_return_handler with mappedFields ["annual_income"], then resume_intent',
        [['annual_income'], 'resume_intent'],
        [payloads(done, 'run.handoff_return_handler')[0]?.['mappedFields'], payloads(done, 'run.resume_intent')[0]?.['reasonCode']],
      );
      const second = payloads(done, 'run.handoff')[1];
      check(
        scenario,
        'step 4: a second handoff to Offer_Agent with returnExpected: false and reasonCode: handoff_permanent',
        {
          to: 'Offer_Agent',
          returnExpected: false,
          reasonCode: 'handoff_permanent',
        },
        { to: second?.['to'], returnExpected: second?.['returnExpected'], reasonCode: second?.['reasonCode'] },
      );
      const outcomes = payloads(done, 'run.handoff_completed').map((p) => `${String(p['to'])}:${String(p['outcome'])}:${typeof p['durationMs']}`);
      check(
        scenario,
        'step 5: handoff_completed events carry outcome and durationMs',
        true,
        outcomes.includes('Income_Capture_Agent:success:number') && outcomes.includes('Offer_Agent:success:number'),
      );
    }

    // --- seed 004: handoff meshes (libs/testing/src/demo/mesh-scenario.ts) ---------------------------------
    await runMeshScenario({
      nats,
      store,
      prefix: options.prefix,
      project,
      tag,
      timeoutMs,
      api: { base: options.apiUrl, token: options.apiToken },
      log,
      check,
      agentClient: (agent) => demoAgentClient(options, nats, project, agent),
    });

    // --- what the operator inbox holds -------------------------------------------------------------
    await sleep(500);
    const inbox = await http<{ items: Array<Record<string, unknown>> }>(
      { base: options.apiUrl, token: options.apiToken },
      'GET',
      `/v1/inbox?project=${project}&order=urgent&limit=100`,
    );
    const mine = inbox.body.items.filter((item) => JSON.stringify(item).includes(tag));
    return { outcomes, inbox: mine, ok: outcomes.every((o) => o.ok) };
  } finally {
    for (const subscription of subscriptions) await subscription.stop().catch(() => undefined);
    for (const agent of agents) await agent.close().catch(() => undefined);
    await nats.close();
  }
}

async function request<T>(nats: NatsHandle, subject: string, body: unknown): Promise<T> {
  const reply = await nats.connection.request(subject, new TextEncoder().encode(JSON.stringify(body)), { timeout: 10_000 });
  return JSON.parse(new TextDecoder().decode(reply.data)) as T;
}

async function http<T>(api: { base: string; token: string | undefined }, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const response = await fetch(`${api.base}${path}`, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(api.token ? { authorization: `Bearer ${api.token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : {}) as T };
}
