import { randomBytes } from 'node:crypto';
import { createEventRegistry, Subjects, type AgentResult, type HumanActionNotice } from '@baton/contracts';
import {
  batonStreamNames,
  connectNats,
  DlqHeader,
  hopTrace,
  JetStreamEventStore,
  REFUSED_LETTER_BYTES,
  type NatsHandle,
  type StoredEvent,
} from '@baton/eventstore';
import { pendingDigest } from '@baton/domain';
import { durableNameFor, type RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
import { headers as natsHeaders, type Msg, type Subscription } from 'nats';
import { startRouter } from './router.app';
import { definitionDecider } from './definitions/definition.decider';
import { definitionRef } from './definitions/definition-catalog';
import { routerRunDecider } from './runs/router-run.decider';
import { eventIdsFor } from './shared/ids';
import { RouterPatterns, RouterSubjects } from './shared/subjects';
import { abandonHandoff, claimHandoff, currentHandoff, deleteStreams, lapseClaim, publishDefinition as publishDefinitionTo, sleep } from './int/support';

/*
 * The router end to end over the real NATS: definitions by request/reply, run starts, agent
 * results and operator answers through the inbox stream, and the dispatch reactor's ledger
 * requests, seen by a tiny ledger responder (a real NATS participant on
 * `<prefix>.cmd.ledger.<project>.>` that records every request and answers like the ledger).
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const NOW = '2025-01-01T00:00:00.000Z';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

const sentinel = (payload: object) => `Done.\n<!-- AGENT_RUN_CONFIG ${JSON.stringify(payload)} -->`;
const ADVANCE = sentinel({ dispatch: { status: 'advance' } });

const definition = (project: string) => ({
  project,
  agents: [
    { name: 'issue', role: 'Triage' },
    { name: 'architect', role: 'Architect' },
    { name: 'context', role: 'Context gatherer' },
    { name: 'reviewer', role: 'Reviewer' },
  ],
  workflows: [
    {
      // seed 000 §6: architect runs both analyze and plan.
      name: 'design',
      version: 1,
      entry: 'analyze',
      steps: [
        { id: 'analyze', agent: 'architect', next: 'context' },
        { id: 'context', agent: 'context', next: 'plan' },
        { id: 'plan', agent: 'architect', next: 'review' },
        { id: 'review', agent: 'reviewer', terminal: true },
      ],
    },
    {
      name: 'feature',
      version: 1,
      entry: 'triage',
      steps: [
        { id: 'triage', agent: 'issue', next: 'analyze' },
        { id: 'analyze', agent: 'architect', next: 'review' },
        { id: 'review', agent: 'reviewer', terminal: true },
      ],
    },
    {
      name: 'gated',
      version: 1,
      entry: 'triage',
      steps: [
        { id: 'triage', agent: 'issue', next: 'analyze', human_gate: true },
        { id: 'analyze', agent: 'architect', terminal: true },
      ],
    },
  ],
});

interface LedgerRequest {
  project: string;
  command: string;
  body: Record<string, unknown>;
  /** Set when the command came as a part of this one (`complete_then_create`). */
  via?: string;
  /** The request's `traceparent` header: the span of the router's hop that sent it. */
  traceparent?: string;
}

/** A valid HandoffRecord for the responder's replies (the client validates them). */
function handoffRecord(project: string, body: Record<string, unknown>, status: 'pending' | 'completed' | 'abandoned') {
  return {
    id: String(body['handoff_id']),
    project,
    kind: 'task',
    priority: 'medium',
    status,
    from_agent: typeof body['from_agent'] === 'string' ? body['from_agent'] : 'baton-router',
    ...(typeof body['to_agent'] === 'string' ? { to_agent: body['to_agent'] } : {}),
    summary: 'test',
    context: {},
    acceptance: {},
    retry: { max_retries: 3, retry_count: 0 },
    escalation: {},
    ...(status === 'completed' ? { completed_at: NOW } : {}),
    created_at: NOW,
    updated_at: NOW,
    version: 1,
  };
}

describe('router service (real NATS)', () => {
  const prefix = `rt${randomBytes(5).toString('hex')}`;
  let router: RunningService;
  let nats: NatsHandle;
  let store: JetStreamEventStore;
  const ledgerRequests: LedgerRequest[] = [];
  const ledgerSubs: Subscription[] = [];
  const notices: HumanActionNotice[] = [];
  let runCounter = 0;

  /**
   * Answer ledger commands of one project like the ledger does (idempotent create). A
   * `complete_then_create` is recorded as its two parts (`via` names it) and answered part by part,
   * the creation only after a completion that was applied or done before; `combined: false` plays a
   * ledger that does not know it (`unknown_command`).
   */
  const serveLedger = (project: string, { combined = true }: { combined?: boolean } = {}) => {
    const created = new Map<string, string>();
    const answer = (
      command: string,
      body: Record<string, unknown>,
      via?: string,
      traceparent?: string,
    ): { ok: boolean; handoff?: unknown; events?: number; error?: { code: string; kind: string; message: string } } => {
      ledgerRequests.push({ project, command, body, ...(via !== undefined ? { via } : {}), ...(traceparent !== undefined ? { traceparent } : {}) });
      const id = String(body['handoff_id']);
      if (command === 'create') {
        const key = created.get(id);
        const reply =
          key === undefined || key === body['idempotency_key']
            ? { ok: true, handoff: handoffRecord(project, body, 'pending'), events: key === undefined ? 1 : 0 }
            : { ok: false, error: { code: 'already_exists', kind: 'wrong_state', message: `handoff ${id} already exists` } };
        created.set(id, String(body['idempotency_key']));
        return reply;
      }
      if (command === 'complete_from_result' || command === 'abandon') {
        return created.has(id)
          ? { ok: true, handoff: handoffRecord(project, body, command === 'abandon' ? 'abandoned' : 'completed'), events: 1 }
          : { ok: false, error: { code: 'not_found', kind: 'not_found', message: `no handoff ${id}` } };
      }
      return { ok: false, error: { code: 'unknown_command', kind: 'rejected', message: command } };
    };
    ledgerSubs.push(
      nats.connection.subscribe(`${prefix}.cmd.ledger.${project}.>`, {
        callback: (_err, msg: Msg) => {
          const command = msg.subject.split('.').pop()!;
          const body = JSON.parse(decoder.decode(msg.data)) as Record<string, unknown>;
          const traceparent = msg.headers?.get('traceparent') || undefined;
          let reply: unknown;
          if (command === 'complete_then_create' && combined) {
            const complete = answer('complete_from_result', body['complete'] as Record<string, unknown>, command, traceparent);
            const done = complete.ok || complete.error?.code === 'handoff_not_open';
            reply = { ok: true, complete, create: done ? answer('create', body['create'] as Record<string, unknown>, command, traceparent) : null };
          } else {
            reply = answer(command, body, undefined, traceparent);
          }
          msg.respond(encoder.encode(JSON.stringify(reply)));
        },
      }),
    );
  };

  const requestsFor = (command: string, handoffId: string) => ledgerRequests.filter((r) => r.command === command && r.body['handoff_id'] === handoffId);

  const publishDefinition = (body: unknown, project = 'demo', headers?: Record<string, string>) => publishDefinitionTo(nats, prefix, project, body, headers);

  const publishRaw = (subject: string, data: string | Uint8Array, traceparent?: string) => {
    const hdrs = traceparent !== undefined ? natsHeaders() : undefined;
    hdrs?.set('traceparent', traceparent!);
    return nats.js.publish(subject, typeof data === 'string' ? encoder.encode(data) : data, hdrs !== undefined ? { headers: hdrs } : {});
  };
  /** The watchdog's request to stop `run` of project demo, on its subject (in the trace `traceparent` names, when given). */
  const publishStopRequest = (run: string, request: { packet_id: string; why: string } & Record<string, unknown>, traceparent?: string) =>
    publishRaw(
      Subjects.stopRequest(prefix, 'demo'),
      JSON.stringify({ workflow_run_id: run, project: 'demo', tried: [], requested_by: 'baton-watchdog', ...request }),
      traceparent,
    );

  const startRun = async (workflow: string, project = 'demo', extra: Record<string, unknown> = {}) => {
    const id = `wr-${++runCounter}`;
    await publishRaw(
      RouterSubjects.runStart(prefix, project),
      JSON.stringify({ workflow_run_id: id, project, workflow, started_by: 'sam', issue_author: 'ivy', input: 'build the thing', ...extra }),
    );
    return id;
  };

  const result = (runId: string, agent: string, id: string, extra: Partial<AgentResult> = {}, project = 'demo'): AgentResult => ({
    result_id: id,
    run_id: `ar-${id}`,
    project,
    workflow_run_id: runId,
    agent,
    produced_at: NOW,
    ...extra,
  });

  /**
   * The result as an agent's SDK sends it (claim rule, docs/runs.md): the handoff it names (else
   * the run's current one) claimed by its agent first, with `handoff_id` and `claim_id` filled in.
   * A handoff the agent cannot claim (it is another agent's turn) gets a claim id nobody holds.
   */
  const claimed = async (r: AgentResult): Promise<AgentResult> => {
    if (r.claim_id !== undefined) return r;
    const current = await currentHandoff(store, r.project, r.workflow_run_id);
    const handoffId = r.handoff_id ?? current?.handoffId;
    if (handoffId === undefined) return r;
    const claimId = await claimHandoff(store, r.project, handoffId, r.agent, { addressee: current?.agent ?? r.agent });
    return { ...r, handoff_id: handoffId, claim_id: claimId ?? 'claim-not-held' };
  };

  const publishResult = async (r: AgentResult, subjectAgent = r.agent) =>
    publishRaw(`${prefix}.in.${r.project}.result.${subjectAgent}`, JSON.stringify(await claimed(r)));

  /** Publish a result exactly as given: no claim is taken, nothing is filled in. */
  const publishUnclaimed = (r: AgentResult, subjectAgent = r.agent) => publishRaw(`${prefix}.in.${r.project}.result.${subjectAgent}`, JSON.stringify(r));

  const events = async (runId: string, project = 'demo'): Promise<StoredEvent[]> => (await store.read({ project, kind: 'run', id: runId })).events;

  const payloads = async <T>(runId: string, type: string, project = 'demo'): Promise<T[]> =>
    (await events(runId, project)).filter((e) => e.type === type).map((e) => e.payload as T);

  /** Wait until the run has `count` events of `type`; returns their payloads. */
  const waitEvents = <T = Record<string, unknown>>(runId: string, type: string, count = 1, project = 'demo') =>
    waitFor(async () => {
      const found = await payloads<T>(runId, type, project);
      return found.length >= count ? found : undefined;
    }, `${count} × ${type} on ${runId}`);

  /** Wait until a durable consumer of the router has nothing pending or unacknowledged. */
  /**
   * Wait until the router's consumer for `pattern` has nothing pending nor unacknowledged. The
   * file shares one prefix, so what an earlier test left backing off (a completion retried 1, 5,
   * 15 s while its handoff "does not exist yet") is waited out too: a test that drains after many
   * others gives a longer `timeoutMs`. On a timeout the error names the consumer's position.
   */
  const drained = (stream: string, pattern: string, timeoutMs?: number) =>
    waitFor(
      async () => {
        const info = await nats.jsm.consumers.info(stream, durableNameFor('router', pattern));
        if (info.num_pending === 0 && info.num_ack_pending === 0) return true;
        throw new Error(
          `pending ${info.num_pending}, unacknowledged ${info.num_ack_pending}, redelivered ${info.num_redelivered}, ` +
            `delivered through ${info.delivered.stream_seq}, acknowledged through ${info.ack_floor.stream_seq}`,
        );
      },
      `consumer for ${pattern} to drain`,
      timeoutMs === undefined ? {} : { timeoutMs },
    );

  const deadLetters = async () => {
    const stream = batonStreamNames(prefix).dlq;
    const info = await nats.jsm.streams.info(stream);
    const letters: Array<{ subject: string; reason: string; detail: string; original: string; data: string }> = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      const msg = await nats.jsm.streams.getMessage(stream, { seq });
      letters.push({
        subject: msg.subject,
        reason: msg.header.get(DlqHeader.reason),
        detail: msg.header.get(DlqHeader.detail),
        original: msg.header.get(DlqHeader.subject),
        data: decoder.decode(msg.data),
      });
    }
    return letters;
  };

  const waitDeadLetter = (match: (letter: Awaited<ReturnType<typeof deadLetters>>[number]) => boolean, what: string) =>
    waitFor(async () => (await deadLetters()).find(match), `a dead letter: ${what}`);

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    router = await startRouter({ ...process.env, NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' });
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    serveLedger('demo');
    ledgerSubs.push(
      nats.connection.subscribe(`${prefix}.notice.>`, {
        callback: (_err, msg) => notices.push(JSON.parse(decoder.decode(msg.data)) as HumanActionNotice),
      }),
    );
    await nats.connection.flush();
    const published = await publishDefinition(definition('demo'));
    expect(published).toMatchObject({ ok: true, changed: true });
  }, 20_000);

  afterAll(async () => {
    for (const sub of ledgerSubs) sub.unsubscribe();
    await router?.stop();
    await deleteStreams(nats, prefix);
    await nats.close();
  }, 20_000);

  describe('definitions', () => {
    it('publishing the same definition again appends nothing and answers the same version', async () => {
      const first = await publishDefinition(definition('demo'));
      const again = await publishDefinition({ ...definition('demo') });
      expect(first).toMatchObject({ ok: true, changed: false });
      expect(again).toMatchObject({ ok: true, version: first.ok ? first.version : -1 });
      const stored = await store.read({ project: 'demo', kind: 'definition', id: 'current' });
      expect(stored.events.filter((e) => e.type === 'definition.published')).toHaveLength(1);
    });

    it('a definition that breaks the schema gets a typed rejection reply and is dead-lettered with its bytes', async () => {
      const bad = { ...definition('demo'), agents: [{ name: 'issue' }] }; // steps name agents that are not listed
      const reply = await publishDefinition(bad);
      expect(reply).toMatchObject({ ok: false, error: { code: 'schema_violation' } });
      const letter = await waitDeadLetter((l) => l.subject === `${prefix}.dlq.router-definitions` && l.reason === 'schema_violation', 'bad definition');
      expect(JSON.parse(letter.data)).toEqual(bad);
    });

    it("a mesh that does not build is refused with the check's own code in the error (MESH_SELF_HANDOFF, MESH_TOOL_NAME_COLLISION), not only in its message", async () => {
      const base = definition('demo');
      const agents = [...base.agents, { name: 'triage' }, { name: 'Billing' }, { name: 'billing' }];
      const self = await publishDefinition({ ...base, agents, meshes: [{ name: 'm', entry: 'triage', handoffs: { triage: ['triage'] } }] });
      expect(self).toMatchObject({
        ok: false,
        error: { code: 'MESH_SELF_HANDOFF', kind: 'rejection', issues: [expect.objectContaining({ code: 'MESH_SELF_HANDOFF' })] },
      });
      const collision = await publishDefinition({ ...base, agents, meshes: [{ name: 'm', entry: 'triage', handoffs: { triage: ['Billing', 'billing'] } }] });
      expect(collision).toMatchObject({ ok: false, error: { code: 'MESH_TOOL_NAME_COLLISION' } });
    });

    it('a definition whose project differs from the subject is refused', async () => {
      const reply = await publishDefinition(definition('other'), 'demo');
      expect(reply).toMatchObject({ ok: false, error: { code: 'project_mismatch', kind: 'rejection' } });
    });

    it('a published workflow version is immutable: changing its steps without a new version is refused', async () => {
      const changed = definition('demo');
      changed.workflows[0]!.steps[0]!.next = 'plan';
      const reply = await publishDefinition(changed);
      expect(reply).toMatchObject({
        ok: false,
        error: { code: 'workflow_version_changed', details: { workflow: changed.workflows[0]!.name, version: changed.workflows[0]!.version } },
      });
    });

    it("the publisher recorded is the admin connection's, never the router nor the person it names (Baton-Actor: on_behalf_of, a claim); a header that names nobody is refused", async () => {
      const published = async (reply: Awaited<ReturnType<typeof publishDefinition>>) => {
        if (!reply.ok) throw new Error(`refused: ${reply.error.code}`);
        const events = (await store.read({ project: 'pubby', kind: 'definition', id: 'current' })).events;
        const event = events.find((e) => e.seq === reply.version)!;
        const payload = event.payload as { published_by: string; on_behalf_of?: string };
        return { actor: event.actor, published_by: payload.published_by, on_behalf_of: payload.on_behalf_of };
      };
      const v1 = definition('pubby');
      expect(await published(await publishDefinition(v1, 'pubby'))).toEqual({ actor: 'admin', published_by: 'admin', on_behalf_of: undefined });
      const v2 = { ...v1, lead: v1.agents[1]!.name };
      expect(await published(await publishDefinition(v2, 'pubby', { 'Baton-Actor': 'olga@acme' }))).toEqual({
        actor: 'admin',
        published_by: 'admin',
        on_behalf_of: 'olga@acme',
      });
      const bad = await publishDefinition({ ...v1, lead: v1.agents[0]!.name }, 'pubby', { 'Baton-Actor': 'olga <script>' });
      expect(bad).toMatchObject({ ok: false, error: { code: 'schema_violation', issues: [{ path: 'Baton-Actor' }] } });
    });
  });

  describe('seed 000 §6 worked examples', () => {
    it('architect → context → architect (workflow edge): a dispatch-only advance with no callback follows the forward edge', async () => {
      const run = await startRun('design');
      const [started] = await waitEvents<{ entry: { agent: string } }>(run, 'run.started');
      expect(started!.entry).toEqual({ agent: 'architect', step: 'analyze' });
      const [entry] = await waitEvents<{ handoff_id: string }>(run, 'run.routed');
      await waitFor(() => requestsFor('create', entry!.handoff_id)[0], 'the entry handoff');
      expect(requestsFor('create', entry!.handoff_id)[0]!.body).toMatchObject({ from_agent: 'baton-router', to_agent: 'architect', kind: 'task' });

      await publishResult(result(run, 'architect', `${run}-a1`, { body: ADVANCE, handoff_id: entry!.handoff_id }));
      const toContext = (await waitEvents<RoutedPayload>(run, 'run.routed', 2))[1]!;
      expect(toContext.target).toEqual({ agent: 'context', step: 'context' });

      await publishResult(result(run, 'context', `${run}-c1`, { body: ADVANCE }));
      const back = (await waitEvents<RoutedPayload>(run, 'run.routed', 3))[2]!;
      expect(back.decision).toMatchObject({ rule: 'workflow_edge', outcome: 'dispatch', callback_after: null });
      expect(back.target).toEqual({ agent: 'architect', step: 'plan' });

      const create = await waitFor(() => requestsFor('create', back.handoff_id)[0], 'the create for plan');
      expect(create.body).toMatchObject({ handoff_id: back.handoff_id, to_agent: 'architect', from_agent: 'context', workflow_run_id: run });
      const context = create.body['context'] as Record<string, unknown>;
      expect(context['called_by']).toBeNull();
      expect(String(context['team_context'])).not.toContain('You were called by');
      expect(context['variables']).toEqual({ input: 'build the thing' });

      // The results closed the handoffs the agents were dispatched with, keyed by result id.
      const closed = await waitFor(() => requestsFor('complete_from_result', entry!.handoff_id)[0], 'completion of the entry handoff');
      expect(closed.body).toMatchObject({ result_id: `${run}-a1`, agent: 'architect', idempotency_key: `${run}-a1` });
      // The router speaks on its own subject (`…svc.router.complete_from_result`); the body names nobody.
      expect(closed.body).not.toHaveProperty('actor');
      expect(closed.body).not.toHaveProperty('actor_kind');
      await waitFor(() => requestsFor('complete_from_result', toContext.handoff_id)[0], 'completion of the context handoff');

      // Each result's completion and the next step's creation went to the ledger as one request
      // (`complete_then_create`, in that order); the routed events' own deliveries asked nothing more.
      for (const [finished, next] of [
        [entry!.handoff_id, toContext.handoff_id],
        [toContext.handoff_id, back.handoff_id],
      ] as const) {
        expect(requestsFor('complete_from_result', finished).map((r) => r.via)).toEqual(['complete_then_create']);
        expect(requestsFor('create', next).map((r) => r.via)).toEqual(['complete_then_create']);
        const parts = ledgerRequests.filter(
          (r) => (r.command === 'complete_from_result' && r.body['handoff_id'] === finished) || (r.command === 'create' && r.body['handoff_id'] === next),
        );
        expect(parts.map((r) => r.command)).toEqual(['complete_from_result', 'create']);
      }
      // The first step's create (no result before it) is a request of its own.
      expect(requestsFor('create', entry!.handoff_id).map((r) => r.via)).toEqual([undefined]);
    });

    it('issue → context → issue (imperative call): the callback defaults to the caller and wins over the workflow edge', async () => {
      const run = await startRun('feature');
      await waitEvents(run, 'run.routed');
      await publishResult(result(run, 'issue', `${run}-i1`, { body: sentinel({ function_call: { function: 'call_agent', agent_name: 'context' } }) }));
      const call = (await waitEvents<RoutedPayload>(run, 'run.routed', 2))[1]!;
      expect(call.decision).toMatchObject({ rule: 'function_call', callback_after: 'issue' });
      expect(call.target).toEqual({ agent: 'context', step: 'triage' });

      const create = await waitFor(() => requestsFor('create', call.handoff_id)[0], 'the create for context');
      const context = create.body['context'] as Record<string, unknown>;
      expect(context['called_by']).toBe('issue');
      expect(String(context['team_context'])).toContain('You were called by issue — your result returns to issue.');
      expect(String(context['team_context'])).toContain('You are **context**. Your role: Context gatherer');

      await publishResult(result(run, 'context', `${run}-c1`, { body: ADVANCE }));
      const back = (await waitEvents<RoutedPayload>(run, 'run.routed', 3))[2]!;
      expect(back.decision).toMatchObject({ rule: 'callback', outcome: 'dispatch', callback_after: null });
      expect(back.target).toEqual({ agent: 'issue', step: 'triage' });
      const returnCreate = await waitFor(() => requestsFor('create', back.handoff_id)[0], 'the create back to issue');
      expect(returnCreate.body).toMatchObject({ to_agent: 'issue', from_agent: 'context' });
    });

    it('a decision-less agent with no return address holds with the exact no-action reason and one notice', async () => {
      const run = await startRun('feature');
      await waitEvents(run, 'run.routed');
      await publishResult(result(run, 'issue', `${run}-i1`, { body: 'Here is my answer, with no sentinel at all.' }));
      const [held] = await waitEvents<{ reason: string; decision: { dispatch: { status: string; origin: string; reason: string } } }>(run, 'run.held');
      expect(held!.reason).toBe('no-action default: agent emitted no decision');
      expect(held!.decision.dispatch).toEqual({ status: 'hold', reason: 'no-action default: agent emitted no decision', origin: 'engine_fallback' });
      await drained(batonStreamNames(prefix).events, RouterPatterns.runEvents);
      const [emitted] = await payloads<{ notice: HumanActionNotice }>(run, 'run.notice_emitted');
      expect(emitted!.notice).toMatchObject({ reason: 'hold', recipient: { handle: 'sam', source: 'started_by' } });
      // The notifier publishes it (its only publisher: test/e2e/notices.e2e-spec.ts); the router does not.
      await sleep(300);
      expect(notices.filter((n) => n.workflow_run_id === run)).toEqual([]);
      expect(await payloads(run, 'run.routed')).toHaveLength(1); // the workflow did not advance
    });

    it('a typed decision that breaks the contract ({}, task with function_call) is the no-action default with its diagnostic, not a dead letter', async () => {
      const run = await startRun('feature');
      await waitEvents(run, 'run.routed');
      // AgentResult typing refuses such a decision; a raw client can still send it.
      await publishResult({ ...result(run, 'issue', `${run}-empty`), decision: {} } as unknown as AgentResult);
      const [held] = await waitEvents<{ reason: string; decision: { dispatch: { status: string; origin: string } } }>(run, 'run.held');
      expect(held!.reason).toBe(
        'no-action default: agent emitted no decision and its typed decision was invalid (at least one action is required: a sentinel must carry one of task, dispatch or function_call)',
      );
      expect(held!.decision.dispatch).toMatchObject({ status: 'hold', origin: 'engine_fallback' });
      const [recorded] = await payloads<{ signal: unknown }>(run, 'run.result_recorded');
      expect(recorded!.signal).toMatchObject({ kind: 'invalid', source: 'typed', code: 'invariant' });
      expect((await deadLetters()).filter((l) => l.data.includes(`${run}-empty`))).toEqual([]);
    });

    it('a decision-less callee with a return address advances back to its caller', async () => {
      const run = await startRun('feature');
      await waitEvents(run, 'run.routed');
      await publishResult(result(run, 'issue', `${run}-i1`, { decision: { function_call: { function: 'call_agent', agent_name: 'context' } } }));
      await waitEvents(run, 'run.routed', 2);
      await publishResult(result(run, 'context', `${run}-c1`, { body: 'context found, no decision' }));
      const back = (await waitEvents<RoutedPayload>(run, 'run.routed', 3))[2]!;
      expect(back.target).toEqual({ agent: 'issue', step: 'triage' });
      expect(back.decision).toMatchObject({
        rule: 'no_action_default',
        dispatch: { status: 'advance', origin: 'engine_fallback', reason: "no-action default: agent emitted no decision; returning to caller 'issue'" },
      });
      expect(await payloads(run, 'run.held')).toHaveLength(0);
    });
  });

  describe('idempotency', () => {
    it('a result published twice with the same result_id yields one set of events and one ledger create', async () => {
      const run = await startRun('feature');
      await waitEvents(run, 'run.routed');
      const twice = await claimed(result(run, 'issue', `${run}-i1`, { body: ADVANCE }));
      await publishUnclaimed(twice);
      await publishUnclaimed(twice); // no Nats-Msg-Id: the inbox stores it twice, the run must not
      const routed = (await waitEvents<RoutedPayload>(run, 'run.routed', 2))[1]!;
      await drained(batonStreamNames(prefix).inbox, RouterPatterns.agentResult);
      await drained(batonStreamNames(prefix).events, RouterPatterns.runEvents);
      const all = await events(run);
      expect(all.filter((e) => e.type === 'run.result_recorded')).toHaveLength(1);
      expect(all.filter((e) => e.type === 'run.routed')).toHaveLength(2);
      expect(all.filter((e) => e.type === 'run.result_rejected')).toHaveLength(0);
      expect(requestsFor('create', routed.handoff_id)).toHaveLength(1);
    });

    it('a run start delivered twice starts one run', async () => {
      const id = `wr-dup-${randomBytes(3).toString('hex')}`;
      const body = JSON.stringify({ workflow_run_id: id, project: 'demo', workflow: 'feature', trigger_author: 'tom' });
      await publishRaw(RouterSubjects.runStart(prefix, 'demo'), body);
      await publishRaw(RouterSubjects.runStart(prefix, 'demo'), body);
      await drained(batonStreamNames(prefix).inbox, RouterPatterns.runStart);
      const all = await events(id);
      expect(all.map((e) => e.type)).toEqual(['run.started', 'run.routed']);
    });
  });

  describe('bad input: typed rejections are recorded and the router keeps serving', () => {
    it('malformed JSON, schema violations, oversized payloads, mismatched subjects and unknown runs are dead-lettered with their reason', async () => {
      const run = await startRun('feature');
      await waitEvents(run, 'run.routed');
      const subject = `${prefix}.in.demo.result.issue`;

      await publishRaw(subject, '{"result_id": "x", oops');
      await waitDeadLetter((l) => l.original === subject && l.reason === 'malformed_json', 'malformed JSON');

      await publishRaw(subject, JSON.stringify({ result_id: `${run}-schema`, agent: 'issue' }));
      const schema = await waitDeadLetter(
        (l) => l.original === subject && l.reason === 'schema_violation' && l.data.includes(`${run}-schema`),
        'schema violation',
      );
      expect(schema.detail).toContain('schema_violation');

      const oversized = JSON.stringify({ ...result(run, 'issue', `${run}-big`), body: 'x'.repeat(300_000) });
      await publishRaw(subject, oversized);
      const big = await waitDeadLetter((l) => l.reason === 'payload_too_large', 'oversized payload');
      // A message refused for itself is never redriven: its letter keeps the first 4 KiB (the router's letters as the ledger's).
      expect(big.data.length).toBe(REFUSED_LETTER_BYTES);
      expect(big.detail).toContain(`(first ${REFUSED_LETTER_BYTES} of ${oversized.length} bytes kept)`);

      await publishResult(result(run, 'issue', `${run}-spoof`, { body: ADVANCE }), 'architect');
      await waitDeadLetter((l) => l.reason === 'identity_mismatch' && l.data.includes(`${run}-spoof`), 'subject / body mismatch');

      await publishResult(result('wr-never-started', 'issue', `${run}-orphan`, { body: ADVANCE }));
      await waitDeadLetter((l) => l.reason === 'not_found' && l.data.includes(`${run}-orphan`), 'result for an unknown run');

      // None of it touched the run, and the router still routes a good result.
      expect((await events(run)).map((e) => e.type)).toEqual(['run.started', 'run.routed']);
      await publishResult(result(run, 'issue', `${run}-good`, { body: ADVANCE }));
      const routed = (await waitEvents<RoutedPayload>(run, 'run.routed', 2))[1]!;
      expect(routed.target).toEqual({ agent: 'architect', step: 'analyze' });
    });

    it('a run start for a workflow the project does not define is dead-lettered with unknown_workflow', async () => {
      const id = `wr-nowf-${randomBytes(3).toString('hex')}`;
      await publishRaw(RouterSubjects.runStart(prefix, 'demo'), JSON.stringify({ workflow_run_id: id, project: 'demo', workflow: 'nope', started_by: 'sam' }));
      const letter = await waitDeadLetter((l) => l.reason === 'unknown_workflow' && l.data.includes(id), 'start of an unknown workflow');
      expect(letter.detail).toContain("workflow 'nope'");
      expect(await events(id)).toHaveLength(0);
    });

    it('a start under a taken run id by other people is dead-lettered run_already_started even while the run is still at its start; the same start again changes nothing', async () => {
      const run = await startRun('feature');
      await waitEvents(run, 'run.routed');
      const start = { workflow_run_id: run, project: 'demo', workflow: 'feature', started_by: 'sam', issue_author: 'ivy', input: 'build the thing' };
      // The first start's events are still the run's tail: before, this was taken for a retry of it.
      await publishRaw(RouterSubjects.runStart(prefix, 'demo'), JSON.stringify({ ...start, started_by: 'mallory' }));
      const letter = await waitDeadLetter((l) => l.reason === 'run_already_started' && l.data.includes('mallory') && l.data.includes(run), 'the other start');
      expect(letter.detail).toContain(run);
      await publishRaw(RouterSubjects.runStart(prefix, 'demo'), JSON.stringify(start));
      await publishResult(result(run, 'issue', `${run}-after`, { body: ADVANCE }));
      await waitEvents(run, 'run.routed', 2);
      expect((await events(run)).map((e) => e.type)).toEqual(['run.started', 'run.routed', 'run.result_recorded', 'run.routed']);
    });

    it('an invalid sentinel is not a rejection: it is the no-action default, with the parse diagnostic in the reason', async () => {
      const run = await startRun('feature');
      await waitEvents(run, 'run.routed');
      await publishResult(result(run, 'issue', `${run}-i1`, { body: 'answer\n<!-- AGENT_RUN_CONFIG {"dispatch": {"status": -->' }));
      const [held] = await waitEvents<{ reason: string }>(run, 'run.held');
      expect(held!.reason).toMatch(/^no-action default: agent emitted no decision and the AGENT_RUN_CONFIG sentinel could not be parsed \(.+\)$/);
      const [recorded] = await payloads<{ signal: { kind: string } }>(run, 'run.result_recorded');
      expect(recorded!.signal.kind).toBe('invalid');
      expect(await payloads(run, 'run.result_rejected')).toHaveLength(0);
    });

    it('an unknown agent, the wrong agent and a result for a finished run are recorded as run.result_rejected', async () => {
      const run = await startRun('feature');
      await waitEvents(run, 'run.routed');
      await publishResult(result(run, 'ghost', `${run}-ghost`, { body: ADVANCE }));
      await publishResult(result(run, 'architect', `${run}-early`, { body: ADVANCE }));
      const rejected = await waitEvents<{ result_id: string; code: string }>(run, 'run.result_rejected', 2);
      expect(rejected.map((r) => [r.result_id, r.code])).toEqual([
        [`${run}-ghost`, 'unknown_agent'],
        [`${run}-early`, 'unexpected_agent'],
      ]);

      // Still serving: the expected agent is routed; then the run ends and a late result is refused.
      await publishResult(result(run, 'issue', `${run}-i1`, { body: sentinel({ dispatch: { status: 'terminate', reason: 'duplicate issue' } }) }));
      await waitEvents(run, 'run.terminated');
      await publishResult(result(run, 'issue', `${run}-late`, { body: ADVANCE }));
      const all = await waitEvents<{ result_id: string; code: string }>(run, 'run.result_rejected', 3);
      expect(all[2]).toMatchObject({ result_id: `${run}-late`, code: 'run_not_running' });
      await drained(batonStreamNames(prefix).inbox, RouterPatterns.agentResult);
      expect(await payloads(run, 'run.result_rejected')).toHaveLength(3); // redelivery-free: recorded once each
    });
  });

  describe("the claim rule (issue 11): a result is accepted only under the current claim of the run's current handoff", () => {
    const refund = { name: 'refund', args: { order: 'o-77', amount_usd: 5000, to_account: 'attacker' }, call_id: 'forged-1' };
    const forged: Partial<AgentResult> = { body: 'Refund needs approval.', stop: { why: 'policy', detail: 'refund over the cap' }, pending_tool_call: refund };
    type Refusal = { result_id: string; code: string; agent: string };

    it('the attack: a result with no claim carrying a policy stop and a pending refund is refused; no stop packet, no notice, nothing for the inbox, nothing to approve', async () => {
      const run = await startRun('feature');
      const [entry] = await waitEvents<RoutedPayload>(run, 'run.routed');

      // No handoff_id, no claim_id: claim_required.
      await publishUnclaimed(result(run, 'issue', `${run}-forged`, forged));
      // The right handoff and a made-up claim while nobody holds it: handoff_not_claimed.
      await publishUnclaimed(result(run, 'issue', `${run}-forged2`, { ...forged, handoff_id: entry!.handoff_id, claim_id: 'claim-made-up' }));
      const refused = await waitEvents<Refusal>(run, 'run.result_rejected', 2);
      expect(refused.map((r) => [r.result_id, r.code, r.agent])).toEqual([
        [`${run}-forged`, 'claim_required', 'issue'],
        [`${run}-forged2`, 'handoff_not_claimed', 'issue'],
      ]);

      // The real agent claims; a result under another claim id is still refused (claim_mismatch).
      const claimId = await claimHandoff(store, 'demo', entry!.handoff_id, 'issue');
      expect(claimId).not.toBeNull();
      await publishUnclaimed(result(run, 'issue', `${run}-forged3`, { ...forged, handoff_id: entry!.handoff_id, claim_id: 'claim-made-up' }));
      const third = (await waitEvents<Refusal>(run, 'run.result_rejected', 3))[2]!;
      expect(third).toMatchObject({ result_id: `${run}-forged3`, code: 'claim_mismatch' });
      // A refusal records the handoff and claim the result named (the loop guards read them); none when it named none.
      const named = await payloads<Record<string, unknown>>(run, 'run.result_rejected');
      expect(named.map((r) => [r['handoff_id'], r['claim_id']])).toEqual([
        [undefined, undefined],
        [entry!.handoff_id, 'claim-made-up'],
        [entry!.handoff_id, 'claim-made-up'],
      ]);

      // An operator cannot approve what never became a stop packet.
      await publishRaw(
        `${prefix}.in.demo.answer`,
        JSON.stringify({
          workflow_run_id: run,
          project: 'demo',
          actor_role: 'operator',
          answer: {
            kind: 'stop_answer',
            answer: {
              packet_id: `stop-r-${run}-forged`,
              answer_id: `${run}-approve`,
              answered_by: 'olga',
              answered_at: NOW,
              action: 'approve',
              pending_digest: pendingDigest(refund),
            },
          },
        }),
      );
      const fourth = (await waitEvents<Refusal>(run, 'run.result_rejected', 4))[3]!;
      expect(fourth).toMatchObject({ result_id: `${run}-approve`, code: 'run_not_stopped', agent: 'operator' });

      await drained(batonStreamNames(prefix).inbox, RouterPatterns.agentResult);
      await drained(batonStreamNames(prefix).events, RouterPatterns.runEvents);
      const types = (await events(run)).map((e) => e.type);
      // The inbox projects run.stopped and run.held (and handoff returns): the run has none.
      expect(types).toEqual(['run.started', 'run.routed', 'run.result_rejected', 'run.result_rejected', 'run.result_rejected', 'run.result_rejected']);
      expect(notices.filter((n) => n.workflow_run_id === run)).toEqual([]);
      expect(ledgerRequests.filter((r) => r.body['workflow_run_id'] === run && r.command === 'create')).toHaveLength(1); // the entry handoff only

      // The claim holder's own result goes through (and may stop the run for a person).
      await publishUnclaimed(result(run, 'issue', `${run}-real`, { body: ADVANCE, handoff_id: entry!.handoff_id, claim_id: claimId! }));
      const next = (await waitEvents<RoutedPayload>(run, 'run.routed', 2))[1]!;
      expect(next.target).toEqual({ agent: 'architect', step: 'analyze' });
    });

    it('a result for a handoff claimed by another agent, or for the previous handoff, is refused', async () => {
      const run = await startRun('feature');
      const [entry] = await waitEvents<RoutedPayload>(run, 'run.routed');
      // The entry handoff is addressed to issue; it is claimed by issue and the run moves on to architect.
      await publishResult(result(run, 'issue', `${run}-i1`, { body: ADVANCE }));
      const second = (await waitEvents<RoutedPayload>(run, 'run.routed', 2))[1]!;
      expect(second.target.agent).toBe('architect');
      const issueClaim = await claimHandoff(store, 'demo', entry!.handoff_id, 'issue');
      const architectClaim = await claimHandoff(store, 'demo', second.handoff_id, 'architect');
      // architect presents issue's old claim on the old handoff; then issue's claim on architect's handoff.
      await publishUnclaimed(result(run, 'architect', `${run}-old`, { body: ADVANCE, handoff_id: entry!.handoff_id, claim_id: issueClaim! }));
      await publishUnclaimed(result(run, 'architect', `${run}-theirs`, { body: ADVANCE, handoff_id: second.handoff_id, claim_id: issueClaim! }));
      const refused = await waitEvents<Refusal>(run, 'run.result_rejected', 2);
      expect(refused.map((r) => [r.result_id, r.code])).toEqual([
        [`${run}-old`, 'stale_handoff'],
        [`${run}-theirs`, 'claim_mismatch'],
      ]);
      await publishUnclaimed(result(run, 'architect', `${run}-a1`, { body: ADVANCE, handoff_id: second.handoff_id, claim_id: architectClaim! }));
      expect((await waitEvents<RoutedPayload>(run, 'run.routed', 3))[2]!.target.agent).toBe('reviewer');
    });
  });

  describe('rule 4b: a result the inbox stored before its lease ran out is accepted after the watchdog requeued its claim', () => {
    it('stored by the expiry: recorded under the lapsed claim and routed; stored after it: refused handoff_not_claimed, saying when the claim lapsed', async () => {
      const run = await startRun('feature');
      const [entry] = await waitEvents<RoutedPayload>(run, 'run.routed');
      // The claim's lease ends 60 s from now; the watchdog (its clock ahead) requeues it before the
      // router reads the result, which the inbox stores now, inside the lease.
      const claimId = await claimHandoff(store, 'demo', entry!.handoff_id, 'issue', { leaseMs: 60_000 });
      await lapseClaim(store, 'demo', entry!.handoff_id);
      await publishUnclaimed(result(run, 'issue', `${run}-in-time`, { body: ADVANCE, handoff_id: entry!.handoff_id, claim_id: claimId! }));
      const [recorded] = await waitEvents<Record<string, unknown>>(run, 'run.result_recorded');
      expect(recorded).toMatchObject({ result_id: `${run}-in-time`, handoff_id: entry!.handoff_id, claim_id: claimId });
      const next = (await waitEvents<RoutedPayload>(run, 'run.routed', 2))[1]!;
      expect(next.target).toEqual({ agent: 'architect', step: 'analyze' });
      // The router then has the ledger close the handoff under that claim (the ledger voids the lapse, rule 4a).
      await waitFor(async () => (requestsFor('complete_from_result', entry!.handoff_id)[0]?.body['claim_id'] === claimId ? true : undefined), 'the completion');

      // architect's claim has a 1 s lease that has run out when its result is stored.
      const architectClaim = await claimHandoff(store, 'demo', next.handoff_id, 'architect', { leaseMs: 1_000 });
      const expiry = await lapseClaim(store, 'demo', next.handoff_id);
      await sleep(Math.max(0, Date.parse(expiry) - Date.now()) + 50);
      await publishUnclaimed(result(run, 'architect', `${run}-late`, { body: ADVANCE, handoff_id: next.handoff_id, claim_id: architectClaim! }));
      const [refused] = await waitEvents<{ result_id: string; code: string; message: string }>(run, 'run.result_rejected');
      expect(refused).toMatchObject({ result_id: `${run}-late`, code: 'handoff_not_claimed' });
      expect(refused!.message).toContain(`its claim ${architectClaim} lapsed at ${expiry} and it was stored at `);
    });
  });

  describe('a result cut short between its appends (run.result_recorded stored, run.routed lost)', () => {
    it('is routed on its redelivery under the claim it was recorded under, though that claim lapsed and its agent claimed the handoff again since (and a refusal was recorded in between)', async () => {
      const run = await startRun('feature');
      const [entry] = await waitEvents<RoutedPayload>(run, 'run.routed');
      const claimId = await claimHandoff(store, 'demo', entry!.handoff_id, 'issue', { leaseMs: 1_000 });
      const cut = result(run, 'issue', `${run}-cut`, { body: ADVANCE, handoff_id: entry!.handoff_id, claim_id: claimId! });
      // The router's first attempt, as it stores it (its event ids, its decider), accepted under
      // the current claim — but only its first event reached the stream (the second publish timed out).
      const ref = { project: 'demo', kind: 'run' as const, id: run };
      const definitions = (await store.current(definitionRef('demo'), definitionDecider)).state;
      const firstEventOnly: typeof routerRunDecider = {
        ...routerRunDecider,
        decide: (command, state) => {
          const decided = routerRunDecider.decide(command, state);
          return decided.ok ? { ok: true, events: decided.events.slice(0, 1) } : decided;
        },
      };
      const now = new Date().toISOString();
      const first = await store.handleCommand(
        ref,
        firstEventOnly,
        {
          kind: 'result',
          result: cut,
          definitions,
          metadata: { now, actor: 'issue' },
          handoff: { handoff_id: entry!.handoff_id, status: 'claimed', claim: { claim_id: claimId!, claimed_by: 'issue' } },
        },
        { occurredAt: now, actor: 'issue', origin: 'agent', causationId: cut.result_id, correlationId: run, ...eventIdsFor(ref, 'result', cut.result_id) },
      );
      expect(first.ok && first.events.map((e) => e.type)).toEqual(['run.result_recorded']);
      // Before the redelivery: the claim's lease runs out, the watchdog requeues it, the agent
      // claims the handoff anew; a forged result of another agent is refused on the run meanwhile.
      const expiry = await lapseClaim(store, 'demo', entry!.handoff_id);
      await sleep(Math.max(0, Date.parse(expiry) - Date.now()) + 50);
      const again = await claimHandoff(store, 'demo', entry!.handoff_id, 'issue', { create: false, round: 2 });
      expect(again).not.toBe(claimId);
      await publishUnclaimed(result(run, 'architect', `${run}-forged`, { body: ADVANCE }));
      await waitEvents(run, 'run.result_rejected');
      // The redelivery: judged on the claim now (another one), it was refused and the run never moved on.
      await publishUnclaimed(cut);
      const routed = await waitEvents<RoutedPayload>(run, 'run.routed', 2);
      expect(routed[1]!.target).toEqual({ agent: 'architect', step: 'analyze' });
      expect((await events(run)).map((e) => e.type)).toEqual(['run.started', 'run.routed', 'run.result_recorded', 'run.result_rejected', 'run.routed']);
      expect((await payloads<{ result_id: string }>(run, 'run.result_rejected')).map((r) => r.result_id)).toEqual([`${run}-forged`]);
      // The ledger is asked to complete the handoff under the claim the result was recorded under.
      await waitFor(async () => (requestsFor('complete_from_result', entry!.handoff_id)[0]?.body['claim_id'] === claimId ? true : undefined), 'the completion');
    });
  });

  describe("a person's abandon and the agent's result cross (docs/runs.md)", () => {
    it('the result read first moves the run on and the later abandon holds nothing; the abandon read first refuses the result and holds the run', async () => {
      const first = await startRun('feature');
      const [entry] = await waitEvents<RoutedPayload>(first, 'run.routed');
      const firstClaim = await claimHandoff(store, 'demo', entry!.handoff_id, 'issue', { workflowRunId: first });
      await publishUnclaimed(result(first, 'issue', `${first}-r`, { body: ADVANCE, handoff_id: entry!.handoff_id, claim_id: firstClaim! }));
      await waitEvents(first, 'run.routed', 2);
      await abandonHandoff(store, 'demo', entry!.handoff_id);

      const second = await startRun('feature');
      const [entry2] = await waitEvents<RoutedPayload>(second, 'run.routed');
      const claimId = await claimHandoff(store, 'demo', entry2!.handoff_id, 'issue', { workflowRunId: second });
      await abandonHandoff(store, 'demo', entry2!.handoff_id);
      const [held] = await waitEvents<{ reason: string }>(second, 'run.held');
      expect(held!.reason).toContain(`handoff ${entry2!.handoff_id} of 'issue' ended without a result (handoff_abandoned): abandoned by olga`);
      await publishUnclaimed(result(second, 'issue', `${second}-r`, { body: ADVANCE, handoff_id: entry2!.handoff_id, claim_id: claimId! }));
      // Read after the hold: the run takes no result (before it, the abandoned handoff's claim would refuse it: handoff_not_claimed).
      expect((await waitEvents<{ code: string }>(second, 'run.result_rejected'))[0]).toMatchObject({ code: 'run_not_running' });

      // By now the first run's abandon has been read too (the events consumer is drained): it held nothing.
      await drained(batonStreamNames(prefix).events, RouterPatterns.handoffEvents);
      expect((await events(first)).map((e) => e.type)).toEqual(['run.started', 'run.routed', 'run.result_recorded', 'run.routed']);
    });
  });

  describe('operator answers', () => {
    const holdAnswer = (run: string, answerId: string, role: string, action = 'continue') => ({
      workflow_run_id: run,
      project: 'demo',
      actor_role: role,
      answer: { kind: 'hold_answer', answer: { answer_id: answerId, action, answered_by: 'olga', answered_at: NOW } },
    });
    const publishAnswer = (body: unknown) => publishRaw(`${prefix}.in.demo.answer`, JSON.stringify(body));

    it('only an operator resumes a held run; a refused or stale answer is recorded, a repeated one changes nothing', async () => {
      const run = await startRun('feature');
      await waitEvents(run, 'run.routed');
      await publishResult(result(run, 'issue', `${run}-i1`, { body: 'no decision' }));
      await waitEvents(run, 'run.held');

      await publishAnswer(holdAnswer(run, `${run}-viewer`, 'viewer'));
      const [forbidden] = await waitEvents<{ result_id: string; code: string; agent: string }>(run, 'run.result_rejected');
      expect(forbidden).toMatchObject({ result_id: `${run}-viewer`, code: 'answer_forbidden', agent: 'operator' });

      await publishAnswer(holdAnswer(run, `${run}-ok`, 'operator'));
      const [resumed] = await waitEvents<{ answer_id: string }>(run, 'run.resumed');
      expect(resumed!.answer_id).toBe(`${run}-ok`);
      const routed = (await waitEvents<RoutedPayload>(run, 'run.routed', 2))[1]!;
      expect(routed.target).toEqual({ agent: 'architect', step: 'analyze' }); // the edge the no-action hold did not take
      expect(routed.decision).toMatchObject({ rule: 'resume', dispatch: { origin: 'human' } });

      await publishAnswer(holdAnswer(run, `${run}-ok`, 'operator')); // the same answer again
      await publishAnswer(holdAnswer(run, `${run}-stale`, 'operator')); // the run is no longer held
      const rejected = await waitEvents<{ result_id: string; code: string }>(run, 'run.result_rejected', 2);
      expect(rejected[1]).toMatchObject({ result_id: `${run}-stale`, code: 'run_not_held' });
      await drained(batonStreamNames(prefix).inbox, RouterPatterns.operatorAnswer);
      expect(await payloads(run, 'run.resumed')).toHaveLength(1);
      expect(await payloads(run, 'run.routed')).toHaveLength(2);
    });

    it("a human gate's pending call: the agent advanced with a call pending into the gate, the hold carries it, and the person's continue hands it to the gated step's handoff (not approved)", async () => {
      const refund = { name: 'refund', args: { amount: 40, order: 99 }, call_id: 'call-7' };
      const run = await startRun('gated');
      await waitEvents(run, 'run.routed');
      await publishResult(result(run, 'issue', `${run}-i1`, { body: ADVANCE, pending_tool_call: refund }));
      const [held] = await waitEvents<{ hold_kind: string; pending_call?: unknown }>(run, 'run.held');
      expect(held).toMatchObject({ hold_kind: 'human_gate', pending_call: refund });

      await publishAnswer(holdAnswer(run, `${run}-go`, 'operator'));
      const routed = (await waitEvents<RoutedPayload & { pending_call?: unknown; approved_call?: unknown }>(run, 'run.routed', 2))[1]!;
      expect(routed).toMatchObject({ target: { agent: 'architect', step: 'analyze' }, pending_call: refund });
      expect(routed.approved_call).toBeUndefined();
      const create = await waitFor(() => requestsFor('create', routed.handoff_id)[0], 'the ledger create carrying the pending call');
      expect(create.body).toMatchObject({ to_agent: 'architect', context: { pending_call: refund } });
      expect(create.body['context']).not.toHaveProperty('approved_call');
    });

    it('an answer without a valid actor_role is dead-lettered', async () => {
      await publishAnswer({ ...holdAnswer('wr-x', 'ans-norole', 'operator'), actor_role: 'root' });
      await waitDeadLetter((l) => l.reason === 'schema_violation' && l.data.includes('ans-norole'), 'answer with a bad role');
    });
  });

  describe('stop packets answered by operators (seed 003, issue 5 approval gates and budget stops)', () => {
    const refund = { name: 'refund', args: { amount: 40, order: 99 }, call_id: 'call-1' };
    const stopAnswer = (run: string, packetId: string, answerId: string, role: string, fields: Record<string, unknown>) => ({
      workflow_run_id: run,
      project: 'demo',
      actor_role: role,
      answer: { kind: 'stop_answer', answer: { packet_id: packetId, answer_id: answerId, answered_by: 'olga', answered_at: NOW, ...fields } },
    });
    const publishAnswer = (body: unknown) => publishRaw(`${prefix}.in.demo.answer`, JSON.stringify(body));
    type StoppedPayload = {
      packet: {
        packet_id: string;
        why: string;
        pending: unknown;
        pending_digest: string | null;
        cap?: unknown;
        trace_ids: string[];
        next_form: { kind: string } | null;
      };
    };
    type Refusal = { result_id: string; code: string; agent: string };

    /** Start a `feature` run and have its first agent (issue) stop with `stop` / `extra`. */
    const stoppedRun = async (extra: Partial<AgentResult>) => {
      const run = await startRun('feature');
      await waitEvents(run, 'run.routed');
      await publishResult(result(run, 'issue', `${run}-i1`, extra));
      const [stopped] = await waitEvents<StoppedPayload>(run, 'run.stopped');
      return { run, packet: stopped!.packet };
    };

    it('approval gate: the frozen call waits for a person; approve runs exactly that call once, and every other answer is refused and recorded', async () => {
      const { run, packet } = await stoppedRun({
        body: 'Refund needs approval.',
        stop: { why: 'policy', detail: 'refund over the cap' },
        pending_tool_call: refund,
      });
      expect(packet).toMatchObject({ why: 'policy', pending: refund, pending_digest: pendingDigest(refund), next_form: { kind: 'approve_deny' } });

      // While stopped, the agent cannot carry on by itself, a viewer cannot approve, and an
      // approve that does not prove which call it saw is stale (fail closed).
      await publishResult(result(run, 'issue', `${run}-i2`, { body: ADVANCE }));
      await publishAnswer(stopAnswer(run, packet.packet_id, `${run}-viewer`, 'viewer', { action: 'approve', pending_digest: packet.pending_digest }));
      await publishAnswer(stopAnswer(run, packet.packet_id, `${run}-nodigest`, 'operator', { action: 'approve' }));
      await publishAnswer(
        stopAnswer(run, packet.packet_id, `${run}-otherdigest`, 'operator', {
          action: 'approve',
          pending_digest: pendingDigest({ ...refund, args: { amount: 4000, order: 99 } }),
        }),
      );
      const refused = await waitEvents<Refusal>(run, 'run.result_rejected', 4);
      // Results and answers arrive on different consumers, so the refusals are compared as a set.
      expect(refused.map((r) => [r.result_id, r.code]).sort()).toEqual(
        [
          [`${run}-i2`, 'run_not_running'],
          [`${run}-viewer`, 'answer_forbidden'],
          [`${run}-nodigest`, 'stale_answer'],
          [`${run}-otherdigest`, 'stale_answer'],
        ].sort(),
      );
      expect(await payloads(run, 'run.routed')).toHaveLength(1); // nothing ran

      await publishAnswer(stopAnswer(run, packet.packet_id, `${run}-ok`, 'operator', { action: 'approve', pending_digest: packet.pending_digest }));
      const routed = (await waitEvents<RoutedPayload & { approved_call?: unknown }>(run, 'run.routed', 2))[1]!;
      expect(routed).toMatchObject({
        target: { agent: 'issue', step: 'triage' },
        approved_call: refund,
        decision: { rule: 'resume', dispatch: { origin: 'human' } },
      });
      const create = await waitFor(() => requestsFor('create', routed.handoff_id)[0], 'the ledger create carrying the approved call');
      expect(create.body).toMatchObject({ to_agent: 'issue', context: { approved_call: refund } });

      // The same answer redelivered changes nothing; a second approval is refused (nothing is stopped).
      await publishAnswer(stopAnswer(run, packet.packet_id, `${run}-ok`, 'operator', { action: 'approve', pending_digest: packet.pending_digest }));
      await publishAnswer(stopAnswer(run, packet.packet_id, `${run}-again`, 'operator', { action: 'approve', pending_digest: packet.pending_digest }));
      const all = await waitEvents<Refusal>(run, 'run.result_rejected', 5);
      expect(all[4]).toMatchObject({ result_id: `${run}-again`, code: 'run_not_stopped', agent: 'operator' });
      await drained(batonStreamNames(prefix).inbox, RouterPatterns.operatorAnswer);
      const approvals = (await payloads<{ approved_call?: unknown }>(run, 'run.routed')).filter((r) => r.approved_call !== undefined);
      expect(approvals).toEqual([expect.objectContaining({ approved_call: refund })]);
      expect(await payloads(run, 'run.resumed')).toHaveLength(1);
      expect(requestsFor('create', routed.handoff_id)).toHaveLength(1);
    });

    it('deny stops the run: the frozen call never runs and a later approve is refused', async () => {
      const { run, packet } = await stoppedRun({ body: 'Refund needs approval.', stop: { why: 'policy' }, pending_tool_call: refund });
      await publishAnswer(stopAnswer(run, packet.packet_id, `${run}-deny`, 'operator', { action: 'deny', note: 'not for this customer' }));
      const [terminated] = await waitEvents<{ reason: string }>(run, 'run.terminated');
      expect(terminated!.reason).toContain('denied by olga');
      await publishAnswer(stopAnswer(run, packet.packet_id, `${run}-late`, 'operator', { action: 'approve', pending_digest: packet.pending_digest }));
      const [late] = await waitEvents<Refusal>(run, 'run.result_rejected');
      expect(late).toMatchObject({ result_id: `${run}-late`, code: 'run_not_stopped' });
      const routes = await payloads<{ approved_call?: unknown }>(run, 'run.routed');
      expect(routes).toHaveLength(1);
      expect(routes.some((r) => r.approved_call !== undefined)).toBe(false);
    });

    it('budget stop: only an operator lifts it, only above the cap the agent hit, and the agent carries on with the raised cap', async () => {
      const cap = { name: 'tool_calls', limit: 20, used: 20 };
      const { run, packet } = await stoppedRun({ body: 'Out of budget.', stop: { why: 'budget', cap }, budget_used: { tool_calls: 20 } });
      expect(packet).toMatchObject({ why: 'budget', cap, pending: null, next_form: { kind: 'raise_cap' } });

      await publishResult(result(run, 'issue', `${run}-i2`, { body: ADVANCE })); // the agent cannot lift it
      await publishAnswer(stopAnswer(run, packet.packet_id, `${run}-agent`, 'agent', { action: 'raise_cap', cap: 40 }));
      await publishAnswer(stopAnswer(run, packet.packet_id, `${run}-viewer`, 'viewer', { action: 'raise_cap', cap: 40 }));
      await publishAnswer(stopAnswer(run, packet.packet_id, `${run}-low`, 'operator', { action: 'raise_cap', cap: 20 }));
      await publishAnswer(stopAnswer(run, packet.packet_id, `${run}-approve`, 'operator', { action: 'approve', pending_digest: 'x' }));
      const refused = await waitEvents<Refusal>(run, 'run.result_rejected', 5);
      expect(refused.map((r) => [r.result_id, r.code]).sort()).toEqual(
        [
          [`${run}-i2`, 'run_not_running'],
          [`${run}-agent`, 'answer_forbidden'],
          [`${run}-viewer`, 'answer_forbidden'],
          [`${run}-low`, 'cap_not_raised'],
          [`${run}-approve`, 'answer_not_allowed'],
        ].sort(),
      );
      expect(await payloads(run, 'run.routed')).toHaveLength(1);

      await publishAnswer(stopAnswer(run, packet.packet_id, `${run}-raise`, 'admin', { action: 'raise_cap', cap: 40 }));
      const routed = (await waitEvents<RoutedPayload & { raised_cap?: number }>(run, 'run.routed', 2))[1]!;
      expect(routed).toMatchObject({ target: { agent: 'issue' }, raised_cap: 40 });
      const create = await waitFor(() => requestsFor('create', routed.handoff_id)[0], 'the ledger create carrying the raised cap');
      expect(create.body).toMatchObject({ context: { raised_cap: 40 } });
    });

    it("an outside stop is the watchdog's (origin watchdog) only when it names the watchdog; any other is the admin connection's (actor admin, origin operator), never the person its body names", async () => {
      const byWatchdog = await startRun('feature');
      await waitEvents(byWatchdog, 'run.routed');
      await publishStopRequest(byWatchdog, { packet_id: `wd-x:${byWatchdog}`, why: 'thrash', detail: 'ping-pong' });
      const byPerson = await startRun('feature');
      await waitEvents(byPerson, 'run.routed');
      await publishStopRequest(byPerson, { packet_id: `op-x:${byPerson}`, why: 'guard_failed', detail: 'stopped by hand', requested_by: 'olga' });
      await waitEvents(byWatchdog, 'run.stopped');
      await waitEvents(byPerson, 'run.stopped');
      const attribution = async (run: string) =>
        (await events(run)).filter((e) => e.type === 'run.stopped' || e.type === 'run.notice_emitted').map((e) => `${e.type} ${e.actor} ${e.origin}`);
      expect(await attribution(byWatchdog)).toEqual(['run.stopped baton-watchdog watchdog', 'run.notice_emitted baton-watchdog watchdog']);
      // The body names a person: a claim; the sender (the admin connection) is the actor.
      expect(await attribution(byPerson)).toEqual(['run.stopped admin operator', 'run.notice_emitted admin operator']);
      // The person it named is kept beside the actor, as on_behalf_of (the watchdog's stop names nobody).
      const stoppedData = async (run: string) => (await events(run)).find((e) => e.type === 'run.stopped')?.payload as { on_behalf_of?: string };
      expect((await stoppedData(byPerson)).on_behalf_of).toBe('olga');
      expect((await stoppedData(byWatchdog)).on_behalf_of).toBeUndefined();
    });

    it("a stop request may not take a packet id Baton derives (stop-…): another run's open packet stays its own", async () => {
      // A run stopped by its agent: its packet id is the router's, visible in every view.
      const { run: victim, packet } = await stoppedRun({ body: 'Refund needs approval.', stop: { why: 'policy' }, pending_tool_call: refund });
      expect(packet.packet_id.startsWith('stop-')).toBe(true);
      const other = await startRun('feature');
      await waitEvents(other, 'run.routed');
      await publishStopRequest(other, { packet_id: packet.packet_id, why: 'guard_failed', detail: 'take its id' });
      const letter = await waitDeadLetter(
        (l) => l.reason === 'schema_violation' && l.data.includes(`"workflow_run_id":"${other}"`),
        'the stop naming a derived packet id',
      );
      expect(letter.detail).toContain('packet ids starting "stop-"');
      expect(await payloads(other, 'run.stopped')).toEqual([]);
      expect((await payloads<StoppedPayload>(victim, 'run.stopped'))[0]!.packet.packet_id).toBe(packet.packet_id);
    });

    it("the watchdog's hop-budget stop names its cap and links the trace it came in: the packet carries both, so a raise that does not exceed the hop limit is refused cap_not_raised", async () => {
      const run = await startRun('feature');
      await waitEvents(run, 'run.routed');
      const cap = { name: 'hops', limit: 1, used: 2 };
      const packetId = `wd-guard:${run}`;
      // The trace of the event that tripped the guard, which the watchdog's request continues.
      const tripped = hopTrace(undefined);
      await publishStopRequest(
        run,
        {
          packet_id: packetId,
          why: 'budget',
          detail: 'hop budget spent: hop 2 of 1',
          tried: ['hop 2: start → issue'],
          cap,
          cause: { kind: 'loop_guard', guard: 'hop_budget', event_id: 'ev-1' },
        },
        tripped.traceparent,
      );
      const [stopped] = await waitEvents<StoppedPayload>(run, 'run.stopped');
      expect(stopped!.packet).toMatchObject({ packet_id: packetId, why: 'budget', cap, next_form: { kind: 'raise_cap' } });
      // The packet links the trace the request came in: an SRE follows the stop to what tripped it.
      expect(stopped!.packet.trace_ids).toEqual([tripped.traceId]);
      // The handoff the stopped agent was working on is dead (an answer routes on with a new one): abandoned, once.
      const [routedBefore] = await payloads<RoutedPayload>(run, 'run.routed');
      const abandon = await waitFor(() => requestsFor('abandon', routedBefore!.handoff_id)[0], 'the stopped run’s handoff abandoned');
      expect(abandon.body).toMatchObject({ idempotency_key: `stop:${packetId}`, reason: expect.stringContaining(`stopped (budget, packet ${packetId})`) });

      await publishAnswer(stopAnswer(run, packetId, `${run}-same`, 'operator', { action: 'raise_cap', cap: 1 }));
      const [refused] = await waitEvents<Refusal>(run, 'run.result_rejected');
      expect(refused).toMatchObject({ result_id: `${run}-same`, code: 'cap_not_raised' });
      expect(await payloads(run, 'run.resumed')).toHaveLength(0);

      await publishAnswer(stopAnswer(run, packetId, `${run}-raise`, 'operator', { action: 'raise_cap', cap: 10 }));
      const routed = (await waitEvents<RoutedPayload & { raised_cap?: number }>(run, 'run.routed', 2))[1]!;
      expect(routed).toMatchObject({ raised_cap: 10 });
    });
  });

  describe('stops asked for an escalated handoff', () => {
    it("records the escalated handoff the watchdog names on run.stopped (its project, and a lead's consult when one was given): the inbox closes the escalation's item with it", async () => {
      const stopFor = async (run: string, why: string, cause: Record<string, unknown>) => {
        await publishStopRequest(run, { packet_id: `wd-esc:${run}`, why, detail: 'a stop from outside', cause });
        const [stopped] = await waitEvents<{ escalation?: unknown }>(run, 'run.stopped');
        return stopped!;
      };
      const escalated = (handoff: Record<string, unknown>) => ({ kind: 'handoff_escalated', event_id: 'ev-esc', ...handoff });
      const local = await startRun('feature');
      await waitEvents(local, 'run.routed');
      expect((await stopFor(local, 'guard_failed', escalated({ handoff_id: 'h-local' }))).escalation).toEqual({ project: 'demo', handoff_id: 'h-local' });
      const crossed = await startRun('feature');
      await waitEvents(crossed, 'run.routed');
      expect(
        (await stopFor(crossed, 'guard_failed', escalated({ handoff_id: 'h-cross', project: 'other', consult_handoff_id: 'esc-h-cross' }))).escalation,
      ).toEqual({
        project: 'other',
        handoff_id: 'h-cross',
        consult_handoff_id: 'esc-h-cross',
      });
      // A loop guard's stop names no handoff.
      const guarded = await startRun('feature');
      await waitEvents(guarded, 'run.routed');
      expect(await stopFor(guarded, 'thrash', { kind: 'loop_guard', guard: 'ping_pong', event_id: 'ev-g' })).not.toHaveProperty('escalation');
    });
  });

  describe('the dispatch reactor', () => {
    it('an unreachable ledger is retried until it answers: the handoff is created once it is back', async () => {
      expect((await publishDefinition(definition('late'), 'late')).ok).toBe(true);
      const run = await startRun('feature', 'late');
      const [routed] = await waitEvents<RoutedPayload>(run, 'run.routed', 1, 'late');
      await sleep(300); // the first attempt finds no ledger and is naked with a delay
      expect(requestsFor('create', routed!.handoff_id)).toHaveLength(0);
      serveLedger('late');
      const create = await waitFor(() => requestsFor('create', routed!.handoff_id)[0], 'the create after the ledger came back');
      expect(create.body).toMatchObject({ to_agent: 'issue', idempotency_key: expect.any(String) });
    });

    it('a run keeps the workflow version it started with after a new definition drops it', async () => {
      expect((await publishDefinition(definition('pin'), 'pin')).ok).toBe(true);
      serveLedger('pin');
      const run = await startRun('design', 'pin');
      await waitEvents(run, 'run.routed', 1, 'pin');
      const v2 = definition('pin');
      v2.workflows = [{ ...v2.workflows[0]!, version: 2, steps: [{ id: 'analyze', agent: 'architect', terminal: true }] }] as typeof v2.workflows;
      v2.workflows[0]!.entry = 'analyze';
      const published = await publishDefinition(v2, 'pin');
      expect(published).toMatchObject({ ok: true, changed: true });

      await publishResult(result(run, 'architect', `${run}-a1`, { body: ADVANCE }, 'pin'));
      const next = (await waitEvents<RoutedPayload>(run, 'run.routed', 2, 'pin'))[1]!;
      expect(next.target).toEqual({ agent: 'context', step: 'context' }); // v1's edge, not v2's terminal step
    });

    /** A `design` run in a project of its own, its entry handoff created, then the architect's result: the second step's routing and its create. */
    const firstHop = async (project: string, ledger: { combined?: boolean } = {}) => {
      expect((await publishDefinition(definition(project), project)).ok).toBe(true);
      serveLedger(project, ledger);
      const run = await startRun('design', project);
      const entry = (await waitEvents<RoutedPayload>(run, 'run.routed', 1, project))[0]!;
      await waitFor(() => requestsFor('create', entry.handoff_id)[0], 'the entry handoff');
      await publishResult(result(run, 'architect', `${run}-a1`, { body: ADVANCE }, project));
      const next = (await waitEvents<RoutedPayload>(run, 'run.routed', 2, project))[1]!;
      const create = await waitFor(() => requestsFor('create', next.handoff_id)[0], 'the create for the second step');
      return { run, entry, next, create };
    };

    it("a result's hop goes to the ledger from the command that recorded it, ahead of its events' deliveries, and only once", async () => {
      const { run, entry, next, create } = await firstHop('ahead');
      // Session 47's CI once timed out here at 10 s (under load, cause not found).
      await drained(batonStreamNames(prefix).events, RouterPatterns.runEvents, 40_000);

      // The request carries the span of the hop that recorded the result (the same `traceparent` the
      // router stored with `run.result_recorded`); a request from the event's delivery would carry
      // a span of that delivery's own.
      const recorded = (await events(run, 'ahead')).find((e) => e.type === 'run.result_recorded')!;
      const stored = await nats.jsm.streams.getMessage(batonStreamNames(prefix).events, { seq: recorded.seq });
      expect(stored.header.get('traceparent')).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
      expect(create.via).toBe('complete_then_create');
      expect(create.traceparent).toBe(stored.header.get('traceparent'));
      // Both deliveries came after and asked nothing more: one completion, one creation.
      expect(requestsFor('complete_from_result', entry.handoff_id).map((r) => r.via)).toEqual(['complete_then_create']);
      expect(requestsFor('create', next.handoff_id)).toHaveLength(1);
    }, 60_000);

    // Last in the file: after an `unknown_command` the reactor sends separate requests for a minute.
    it('a ledger without complete_then_create (unknown_command) gets the completion and the creation as separate requests', async () => {
      const { create } = await firstHop('legacy', { combined: false });
      expect(create.via).toBeUndefined();
      const tried = ledgerRequests.filter((r) => r.project === 'legacy').map((r) => r.command);
      expect(tried).toEqual(['create', 'complete_then_create', 'complete_from_result', 'create']);
    });
  });
});

interface RoutedPayload {
  handoff_id: string;
  target: { agent: string; step: string };
  decision: Record<string, unknown>;
}
