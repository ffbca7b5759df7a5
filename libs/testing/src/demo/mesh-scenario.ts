import type { StopPacket } from '@baton/contracts';
import type { JetStreamEventStore, NatsHandle, StoredEvent } from '@baton/eventstore';
import {
  createBatonClient,
  handoffCallsFromOpenAi,
  publishMeshResult,
  startMesh,
  type BatonAgent,
  type HandoffOffer,
  type OfferSubscription,
} from '@baton/sdk';
import { waitFor } from '@baton/wait';
import { DEMO_MESH } from './definition';

/** What the mesh scenario needs from the demo run (the same doors the other scenarios use). */
export interface MeshScenarioContext {
  nats: NatsHandle;
  store: JetStreamEventStore;
  prefix: string;
  project: string;
  /** Unique per demo session; every id of the scenario contains it. */
  tag: string;
  timeoutMs: number;
  /** The notifier's operator API and an operator token. */
  api: { base: string; token: string | undefined };
  log: (line: string) => void;
  /** Record one checked outcome (expected vs actual), like the other scenarios. */
  check: (scenario: string, what: string, expected: unknown, actual: unknown) => void;
  /** An SDK client for one mesh agent (its own credentials on a server with authentication); default: one on `nats`. */
  agentClient?: (agent: string) => Promise<BatonAgent>;
}

/** One scripted turn of a simulated mesh agent: what it says and whom it hands off to (none = end). */
interface MeshTurnScript {
  text: string;
  handoffTo?: string;
}

/**
 * Seed 004 against the running platform: a triage/billing handoff mesh driven through the SDK
 * (`startMesh`, offers taken by each agent's SDK client, turns with `publishMeshResult` and the
 * tool calls an OpenAI-style model would make).
 *
 * 1. triage → billing → triage → end: the mesh completes with triage's final turn as its output.
 * 2. A ping-pong that reaches the mesh's cap (4): the mesh stops (why `thrash`), exactly one human
 *    action notice is emitted, and the stop is an open item in the operator inbox. The operator
 *    answers it through the HTTP API with `raise_cap`; the mesh continues with triage (the agent
 *    the refused handoff named), which ends it, and the inbox item closes.
 *
 * Every outcome is read back from the mesh's event stream or the operator API. Idempotent per
 * `tag`; it stops its own subscriptions and clients before returning.
 */
export async function runMeshScenario(ctx: MeshScenarioContext): Promise<void> {
  const scripts = new Map<string, MeshTurnScript[]>();
  const clients: BatonAgent[] = [];
  const byName = new Map<string, BatonAgent>();
  const subscriptions: OfferSubscription[] = [];
  let turnCounter = 0;

  const meshEvents = async (meshRunId: string): Promise<StoredEvent[]> => (await ctx.store.read({ project: ctx.project, kind: 'mesh', id: meshRunId })).events;
  /** Poll `probe` (@baton/wait); on a timeout log it and give undefined: the checks that follow record the failure. */
  const waitOrLog = <T>(what: string, probe: () => Promise<T | undefined>): Promise<T | undefined> =>
    waitFor(probe, what, { timeoutMs: ctx.timeoutMs, everyMs: 150 }).catch((error: Error) => {
      ctx.log(`  (${error.message})`);
      return undefined;
    });
  const waitForMesh = (meshRunId: string, type: string) =>
    waitOrLog(`${type} on mesh ${meshRunId}`, async () => {
      const events = await meshEvents(meshRunId);
      return events.some((e) => e.type === type) ? events : undefined;
    });
  const payloadOf = (events: StoredEvent[] | undefined, type: string) => events?.find((e) => e.type === type)?.payload as Record<string, unknown> | undefined;

  /** A simulated mesh agent: on each offer of a scripted mesh run, say the next scripted line. */
  const meshAgent = (name: string) => async (offer: HandoffOffer) => {
    const context = offer.offered['context'] as { mesh?: { mesh_run_id?: string } } | undefined;
    const meshRunId = context?.mesh?.mesh_run_id;
    const script = meshRunId !== undefined ? scripts.get(`${meshRunId}/${name}`) : undefined;
    const step = script?.shift();
    if (meshRunId === undefined || !step) return; // not a mesh turn of this session
    // A turn is accepted only under the speaker's current claim on the turn's handoff (docs/runs.md).
    await offer.claim();
    // What an OpenAI-style model's tool calls look like, converted by the SDK.
    const toolCalls = step.handoffTo
      ? [{ id: `call-${++turnCounter}`, type: 'function', function: { name: `handoff_to_${step.handoffTo}`, arguments: '{}' } }]
      : [];
    // Each agent speaks through its own client (with its own credentials: through its edge).
    const speaker = byName.get(name);
    await publishMeshResult(speaker ? speaker.meshPublisher() : { js: ctx.nats.js, prefix: ctx.prefix }, {
      project: ctx.project,
      mesh_run_id: meshRunId,
      agent: name,
      result_id: `${meshRunId}-t${++turnCounter}`,
      text: step.text,
      handoff_tool_calls: handoffCallsFromOpenAi(toolCalls),
      handoff_id: offer.handoffId,
      claim_id: offer.claimId ?? undefined,
    });
  };

  try {
    for (const name of DEMO_MESH.agents) {
      const client = ctx.agentClient
        ? await ctx.agentClient(name)
        : await createBatonClient({ nats: ctx.nats, prefix: ctx.prefix, project: ctx.project, agent: name });
      clients.push(client);
      byName.set(name, client);
      subscriptions.push(await client.handoffs({ onOffer: meshAgent(name), ackWaitMs: 10_000 }));
    }
    const publisher = { js: ctx.nats.js, prefix: ctx.prefix };

    // --- seed 004: triage → billing → triage → end ------------------------------------------------
    {
      const scenario = 'handoff mesh: triage → billing → triage → end';
      ctx.log(`\n${scenario}`);
      const meshRunId = `mesh-${ctx.tag}`;
      scripts.set(`${meshRunId}/triage`, [
        { text: 'This is about an invoice; over to billing.', handoffTo: 'billing' },
        { text: 'Billing refunded the duplicate charge. Anything else?' },
      ]);
      scripts.set(`${meshRunId}/billing`, [{ text: 'Refunded the duplicate charge.', handoffTo: 'triage' }]);
      await startMesh(publisher, { mesh_run_id: meshRunId, project: ctx.project, mesh: DEMO_MESH.name, input: 'I was charged twice', started_by: 'dana' });
      const events = await waitForMesh(meshRunId, 'mesh.completed');
      const path = (events ?? [])
        .filter((e) => e.type === 'mesh.handed_off')
        .map((e) => e.payload as { from: string; to: string })
        .map((p) => `${p.from}→${p.to}`);
      ctx.check(scenario, 'the agents hand off triage → billing → triage', ['triage→billing', 'billing→triage'], path);
      const completed = payloadOf(events, 'mesh.completed');
      const output = completed?.['output'] as { agent?: string; text?: string } | null | undefined;
      ctx.check(
        scenario,
        "a turn with no handoff call ends the mesh with triage's output",
        { turns: 3, agent: 'triage', text: 'Billing refunded the duplicate charge. Anything else?' },
        {
          turns: completed?.['turns'],
          agent: output?.agent,
          text: output?.text,
        },
      );
      ctx.check(scenario, 'a completed mesh notifies nobody', 0, (events ?? []).filter((e) => e.type === 'mesh.notice_emitted').length);
    }

    // --- seed 004: a ping-pong hits the cap → a thrash stop in the inbox → raise_cap continues -----
    {
      const scenario = 'handoff mesh: a ping-pong hits the iteration cap';
      ctx.log(`\n${scenario}`);
      const meshRunId = `mesh-pp-${ctx.tag}`;
      scripts.set(`${meshRunId}/triage`, [
        { text: 'Billing, please.', handoffTo: 'billing' },
        { text: 'Billing again, please.', handoffTo: 'billing' },
        { text: 'Resolved after all: the refund is on its way.' },
      ]);
      scripts.set(`${meshRunId}/billing`, [
        { text: 'Not mine; back to triage.', handoffTo: 'triage' },
        { text: 'Still not mine; back to triage.', handoffTo: 'triage' },
      ]);
      await startMesh(publisher, {
        mesh_run_id: meshRunId,
        project: ctx.project,
        mesh: DEMO_MESH.name,
        input: 'My card is declined and my invoice is wrong',
        started_by: 'dana',
      });
      const stoppedEvents = await waitForMesh(meshRunId, 'mesh.notice_emitted');
      const stopped = payloadOf(stoppedEvents, 'mesh.stopped') as { packet?: StopPacket; turns?: number } | undefined;
      const packet = stopped?.packet;
      ctx.check(
        scenario,
        'the turn that reaches the cap (4) stops the mesh with why thrash, a stop and not an error',
        { why: 'thrash', turns: 4, form: 'raise_cap' },
        {
          why: packet?.why,
          turns: stopped?.turns,
          form: packet?.next_form?.kind,
        },
      );
      const notices = (stoppedEvents ?? [])
        .filter((e) => e.type === 'mesh.notice_emitted')
        .map((e) => (e.payload as { notice: { recipient: { handle: string }; reason: string } }).notice);
      ctx.check(
        scenario,
        'exactly one human action notice, to the person who started the mesh',
        [{ to: 'dana', reason: 'stop' }],
        notices.map((n) => ({ to: n.recipient.handle, reason: n.reason })),
      );

      const itemId = `stop:${ctx.project}:${packet?.packet_id ?? '?'}`;
      const inboxItem = await waitOrLog('the mesh stop in the inbox', async () => {
        const page = await http<{ items: Array<Record<string, unknown>> }>(ctx.api, 'GET', `/v1/inbox?project=${ctx.project}&kind=stop&limit=100`);
        return page.body.items?.find((item) => item['id'] === itemId);
      });
      ctx.check(
        scenario,
        'the thrash stop is an open stop item in the operator inbox',
        { kind: 'stop', why: 'thrash', status: 'open', mesh_run_id: meshRunId },
        {
          kind: inboxItem?.['kind'],
          why: inboxItem?.['why'],
          status: inboxItem?.['status'],
          mesh_run_id: inboxItem?.['mesh_run_id'],
        },
      );

      const answered = await http<Record<string, unknown>>(ctx.api, 'POST', `/v1/projects/${ctx.project}/stops/${packet?.packet_id ?? '?'}/answer`, {
        answer_id: `ans-${meshRunId}`,
        action: 'raise_cap',
        cap: 6,
      });
      // The API waits for the router's decision: 200 `applied` (or 202 `pending` on a slow machine).
      ctx.check(
        scenario,
        'the operator raises the cap through the API (a mesh answer the router applies)',
        { answered: true, mesh_run_id: meshRunId },
        { answered: (answered.status === 200 && answered.body['outcome'] === 'applied') || answered.status === 202, mesh_run_id: answered.body['mesh_run_id'] },
      );
      const resumed = await waitForMesh(meshRunId, 'mesh.completed');
      const completed = payloadOf(resumed, 'mesh.completed');
      ctx.check(
        scenario,
        'raise_cap continues the mesh with triage (the agent the refused handoff named), which ends it',
        { max_iterations: 6, agent: 'triage', turns: 5 },
        {
          max_iterations: payloadOf(resumed, 'mesh.stop_answered')?.['max_iterations'],
          agent: completed?.['agent'],
          turns: completed?.['turns'],
        },
      );
      const closed = await waitOrLog('the mesh stop item to close', async () => {
        const item = await http<Record<string, unknown>>(ctx.api, 'GET', `/v1/projects/${ctx.project}/stops/${packet?.packet_id ?? '?'}`);
        return item.body['answered_at'] ? item.body : undefined;
      });
      ctx.check(scenario, 'the answered stop leaves the open inbox', 'answered', (closed?.['stop'] as { status?: string } | undefined)?.status);
    }
  } finally {
    for (const subscription of subscriptions) await subscription.stop().catch(() => undefined);
    for (const client of clients) await client.close().catch(() => undefined);
  }
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
