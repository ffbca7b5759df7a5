import { randomBytes } from 'node:crypto';
import { createEventRegistry, handoffToolName, MsgIds, Subjects, type HandoffToolCall, type StopPacket } from '@baton/contracts';
import {
  evolveMesh,
  initialMeshState,
  meshEntryHandoffId,
  meshHandoffId,
  meshResumeHandoffId,
  meshStopId,
  type MeshEvent,
  type MeshState,
} from '@baton/domain';
import { batonStreamNames, connectNats, DlqHeader, JetStreamEventStore, type NatsHandle, type StoredEvent } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { publishMeshResult, startMesh, type MeshTurnInput } from '@baton/sdk';
import { waitFor } from '@baton/wait';
// The real ledger in-process (a test-only cross-app import, like libs/sdk/src/sdk-ledger.int-spec.ts).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../../ledger/src/ledger';
import { startRouter } from '../router.app';
import { claimHandoff, deleteStreams, publishDefinition } from '../int/support';

/*
 * Handoff meshes through the real services over the real NATS: the router (mesh aggregate,
 * mesh reactor) and the real ledger in-process, a random prefix, turns published with the SDK.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const PROJECT = 'meshdemo';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

const definition = {
  project: PROJECT,
  agents: [
    { name: 'triage', role: 'Front desk' },
    { name: 'billing', role: 'Billing specialist' },
    { name: 'tech', role: 'Technical support' },
  ],
  workflows: [],
  meshes: [
    {
      name: 'support',
      entry: 'triage',
      handoffs: { triage: ['billing', 'tech'], billing: ['triage'], tech: ['triage'] },
      outputs: ['triage'],
      max_iterations: 4,
    },
  ],
};

describe('handoff meshes through the router and the ledger (real NATS)', () => {
  const prefix = `mz${randomBytes(5).toString('hex')}`;
  const env = { ...process.env, NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: process.env['MESH_LOG'] ?? 'error' };
  let router: RunningService;
  let ledger: RunningService;
  let nats: NatsHandle;
  let store: JetStreamEventStore;
  let counter = 0;

  const meshEvents = async (id: string): Promise<StoredEvent[]> => (await store.read({ project: PROJECT, kind: 'mesh', id })).events;
  const waitMesh = (id: string, type: string, count = 1) =>
    waitFor(async () => {
      const found = (await meshEvents(id)).filter((e) => e.type === type);
      return found.length >= count ? found.map((e) => e.payload as Record<string, unknown>) : undefined;
    }, `${count} × ${type} on ${id}`);
  const waitHandoff = (id: string, type = 'handoff.created') =>
    waitFor(
      async () =>
        (await store.read({ project: PROJECT, kind: 'handoff', id })).events.find((e) => e.type === type)?.payload as Record<string, unknown> | undefined,
      `${type} on ${id}`,
    );
  const offerFor = (agent: string, handoffId: string) =>
    waitFor(async () => {
      const msg = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { last_by_subj: Subjects.offer(prefix, PROJECT, agent) }).catch(() => null);
      const body = msg ? (JSON.parse(decoder.decode(msg.data)) as Record<string, unknown>) : null;
      return body && body['id'] === handoffId ? body : undefined;
    }, `an offer of ${handoffId} to ${agent}`);

  const begin = async () => {
    const id = `mesh-${++counter}`;
    await startMesh({ js: nats.js, prefix }, { mesh_run_id: id, project: PROJECT, mesh: 'support', input: 'I was charged twice', started_by: 'sam' });
    // An agent takes its first turn only once it was offered one: wait for the entry handoff.
    await waitHandoff(meshEntryHandoffId(id));
    return id;
  };
  const meshState = async (id: string): Promise<MeshState> =>
    (await meshEvents(id)).reduce((s, e) => evolveMesh(s, { type: e.type, data: e.payload } as MeshEvent), initialMeshState());
  /**
   * An agent's turn as its SDK takes it (claim rule, docs/runs.md): once it is `agent`'s turn, the
   * turn's handoff (`handoffId`, else the mesh's current one) is claimed from the ledger's stream
   * and the turn names it and the claim. A mesh that does not exist gets the turn unclaimed.
   */
  /** A turn: its handoff calls name targets, each with the call's arguments when given as `{ target, arguments }`. */
  type Target = string | { target: string; arguments: Record<string, unknown> };
  /** `extra`: the turn's evidence, or its own stop (`stop`, `pending_tool_call`). Resolves with the handoff the turn answered. */
  const say = async (
    meshRunId: string,
    resultId: string,
    agent: string,
    text: string,
    targets: Target[],
    handoffId?: string,
    extra: Pick<MeshTurnInput, 'evidence' | 'stop' | 'pending_tool_call'> = {},
  ) => {
    let claim: { handoff_id: string; claim_id: string } | null = null;
    if ((await meshState(meshRunId)).status !== 'none') {
      const current =
        handoffId ??
        (await waitFor(async () => {
          const state = await meshState(meshRunId);
          return state.status !== 'none' && state.speaker === agent ? state.handoff_id : undefined;
        }, `${agent}'s turn in ${meshRunId}`));
      await waitHandoff(current); // created by the ledger's reaction to the mesh event
      const claimId = await claimHandoff(store, PROJECT, current, agent, { create: false });
      claim = { handoff_id: current, claim_id: claimId ?? 'claim-not-held' };
    }
    await publishMeshResult(
      { js: nats.js, prefix },
      {
        project: PROJECT,
        mesh_run_id: meshRunId,
        agent,
        result_id: resultId,
        text,
        handoff_tool_calls: targets.map(
          (t, i): HandoffToolCall =>
            typeof t === 'string'
              ? { tool: handoffToolName(t), call_id: `${resultId}-c${i}` }
              : { tool: handoffToolName(t.target), call_id: `${resultId}-c${i}`, arguments: t.arguments },
        ),
        ...(claim ?? {}),
        ...extra,
      },
    );
    return claim?.handoff_id;
  };

  const deadLetters = async () => {
    const stream = batonStreamNames(prefix).dlq;
    const info = await nats.jsm.streams.info(stream);
    const out: Array<{ reason: string; original: string }> = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      const msg = await nats.jsm.streams.getMessage(stream, { seq }).catch(() => null);
      if (msg) out.push({ reason: msg.header.get(DlqHeader.reason), original: msg.header.get(DlqHeader.subject) });
    }
    return out;
  };

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    ledger = await startLedger(env);
    router = await startRouter(env);
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    expect(await publishDefinition(nats, prefix, PROJECT, definition)).toMatchObject({ ok: true });
  }, 30_000);

  afterAll(async () => {
    await router?.stop();
    await ledger?.stop();
    await deleteStreams(nats, prefix);
    await nats.close();
  }, 30_000);

  it("triage hands to billing, billing hands back to triage, triage ends: the mesh completes with triage's output", async () => {
    const id = await begin();
    const entry = meshEntryHandoffId(id);
    expect(await waitHandoff(entry)).toMatchObject({ to_agent: 'triage', workflow_run_id: id });
    expect(await offerFor('triage', entry)).toMatchObject({ to_agent: 'triage' }); // the offer reaches the agent's SDK subject

    await say(
      id,
      `${id}-r1`,
      'triage',
      'Let me get billing.',
      [{ target: 'billing', arguments: { reason: 'a duplicate charge', message: 'card ending 4242' } }],
      entry,
    );
    const toBilling = meshHandoffId(id, `${id}-r1`);
    const created = await waitHandoff(toBilling);
    expect(created).toMatchObject({ from_agent: 'triage', to_agent: 'billing' });
    expect((created['context'] as { mesh: { transcript: unknown[]; handoff_tools: unknown[] } }).mesh).toMatchObject({
      turn: 2,
      // What triage wrote for billing in its call reaches billing with the offer.
      handover: { reason: 'a duplicate charge', message: 'card ending 4242' },
      transcript: [{ agent: 'triage', text: 'Let me get billing.' }],
      handoff_tools: [{ name: 'handoff_to_triage', target: 'triage' }],
    });
    // The turn closed the handoff it answered; without evidence the ledger's floor made it partial.
    const first = await waitHandoff(entry, 'handoff.completed_by_result');
    expect(first['report']).toMatchObject({ outcome: 'partial' });
    expect(first['evidence_floor']).toBeDefined();

    // A turn with evidence closes its handoff as completed (the evidence travels with the turn).
    await say(id, `${id}-r2`, 'billing', 'Refunded the duplicate charge.', ['triage'], toBilling, { evidence: { artifacts: ['refund RF-1042'] } });
    const closed = await waitHandoff(toBilling, 'handoff.completed_by_result');
    expect(closed['report']).toMatchObject({ outcome: 'completed', evidence: { artifacts: ['refund RF-1042'] } });
    expect(closed['evidence_floor']).toBeUndefined();
    await waitHandoff(meshHandoffId(id, `${id}-r2`));
    await say(id, `${id}-r3`, 'triage', 'Your refund is on its way.', []);
    const [completed] = await waitMesh(id, 'mesh.completed');
    expect(completed).toMatchObject({ agent: 'triage', turns: 3, output: { agent: 'triage', text: 'Your refund is on its way.' } });
    expect((await meshEvents(id)).map((e) => e.type)).toEqual([
      'mesh.started',
      'mesh.turn_recorded',
      'mesh.handed_off',
      'mesh.turn_recorded',
      'mesh.handed_off',
      'mesh.turn_recorded',
      'mesh.completed',
    ]);
  }, 30_000);

  it("the claim rule: a turn without the speaker's current claim is recorded as mesh.turn_rejected and routes nothing; the claimed turn then routes", async () => {
    const id = await begin();
    const entry = meshEntryHandoffId(id);
    const unclaimed = (resultId: string, extra: { handoff_id?: string; claim_id?: string }) =>
      publishMeshResult(
        { js: nats.js, prefix },
        {
          project: PROJECT,
          mesh_run_id: id,
          agent: 'triage',
          result_id: resultId,
          text: 'over to billing',
          handoff_tool_calls: [{ tool: handoffToolName('billing') }],
          ...extra,
        },
      );
    await unclaimed(`${id}-x1`, {});
    await unclaimed(`${id}-x2`, { handoff_id: entry, claim_id: 'claim-made-up' });
    const refused = await waitMesh(id, 'mesh.turn_rejected', 2);
    expect(refused.map((r) => [r['result_id'], r['code']])).toEqual([
      [`${id}-x1`, 'claim_required'],
      [`${id}-x2`, 'handoff_not_claimed'],
    ]);
    expect((await meshEvents(id)).map((e) => e.type)).toEqual(['mesh.started', 'mesh.turn_rejected', 'mesh.turn_rejected']);
    await say(id, `${id}-r1`, 'triage', 'Let me get billing.', ['billing']);
    await waitMesh(id, 'mesh.handed_off');
  }, 30_000);

  it('a ping-pong until the cap ends as mesh.stopped with why thrash (a stop packet, not an error), and a not-granted call is recorded as ignored', async () => {
    const id = await begin();
    await say(id, `${id}-p1`, 'triage', 'billing?', ['billing']);
    await say(id, `${id}-p2`, 'billing', 'tech!', ['tech', 'triage']); // billing may not reach tech: ignored; routes to triage
    await say(id, `${id}-p3`, 'triage', 'billing?', ['billing']);
    await say(id, `${id}-p4`, 'billing', 'triage!', ['triage']);
    const [stopped] = await waitMesh(id, 'mesh.stopped');
    const packet = stopped!['packet'] as StopPacket;
    expect(packet).toMatchObject({ stop: 'handoff', why: 'thrash', workflow_run_id: id, agent: 'billing', goal_done: false, status: 'open' });
    expect(packet.next_form?.kind).toBe('raise_cap');
    expect(packet.cap).toEqual({ name: 'max_iterations', limit: 4, used: 4 });
    const [notice] = await waitMesh(id, 'mesh.notice_emitted');
    expect(notice).toMatchObject({ notice: { reason: 'stop', recipient: { handle: 'sam', source: 'started_by' }, stop_id: packet.packet_id } });
    const [ignored] = await waitMesh(id, 'mesh.handoff_ignored');
    expect(ignored).toMatchObject({ agent: 'billing', tool: 'handoff_to_tech', reason: 'not_granted' });
    expect((await meshEvents(id)).some((e) => e.type === 'mesh.completed')).toBe(false);
    // The cap is Baton's rule: its stop and notice speak for the router, origin engine_fallback; the turn that hit it is billing's.
    const who = (await meshEvents(id)).map((e) => [e.type, e.actor, e.origin]);
    expect(who.slice(-3)).toEqual([
      ['mesh.turn_recorded', 'billing', 'agent'],
      ['mesh.stopped', 'baton-router', 'engine_fallback'],
      ['mesh.notice_emitted', 'baton-router', 'engine_fallback'],
    ]);
  }, 30_000);

  /** Ping-pong triage ⇄ billing until the cap (4) stops the mesh; returns the stop packet's id. */
  const pingPongToCap = async (id: string): Promise<string> => {
    await say(id, `${id}-p1`, 'triage', 'billing?', ['billing']);
    await say(id, `${id}-p2`, 'billing', 'triage!', ['triage']);
    await say(id, `${id}-p3`, 'triage', 'billing?', ['billing']);
    await say(id, `${id}-p4`, 'billing', 'triage!', ['triage']);
    await waitMesh(id, 'mesh.stopped');
    return meshStopId(id, `${id}-p4`);
  };
  const answerMesh = (id: string, answer: Record<string, unknown>, actorRole = 'operator') =>
    nats.js.publish(
      Subjects.meshAnswer(prefix, PROJECT),
      encoder.encode(
        JSON.stringify({
          mesh_run_id: id,
          project: PROJECT,
          actor_role: actorRole,
          answer: { answered_by: 'olga', answered_at: new Date().toISOString(), ...answer },
        }),
      ),
      { msgID: MsgIds.meshAnswer(PROJECT, id, String(answer['answer_id'])) },
    );

  it('answering a mesh stop: a viewer is refused (recorded), raise_cap continues the mesh with the agent the last turn handed off to, and it completes', async () => {
    const id = await begin();
    const packetId = await pingPongToCap(id);
    await answerMesh(id, { packet_id: packetId, answer_id: `${id}-a0`, action: 'raise_cap', cap: 6 }, 'viewer');
    const [refused] = await waitMesh(id, 'mesh.turn_rejected');
    expect(refused).toMatchObject({ result_id: `${id}-a0`, agent: 'operator', code: 'answer_forbidden' });

    await answerMesh(id, { packet_id: packetId, answer_id: `${id}-a1`, action: 'raise_cap', cap: 6 });
    const [answered] = await waitMesh(id, 'mesh.stop_answered');
    expect(answered).toMatchObject({ packet_id: packetId, effect: { kind: 'raise_cap', cap: 6 }, max_iterations: 6 });
    const resumed = meshResumeHandoffId(id, `${id}-a1`);
    expect(await waitHandoff(resumed)).toMatchObject({ from_agent: 'billing', to_agent: 'triage' });
    await say(id, `${id}-r5`, 'triage', 'Sorted after all.', [], resumed);
    const [completed] = await waitMesh(id, 'mesh.completed');
    expect(completed).toMatchObject({ turns: 5, output: { agent: 'triage', text: 'Sorted after all.' } });
  }, 30_000);

  it("an agent's own stop: the turn stops the mesh with its packet (its calls not followed); approve hands the turn back with the frozen call on its handoff, and the mesh goes on", async () => {
    const id = await begin();
    await say(id, `${id}-p1`, 'triage', 'billing?', ['billing']);
    const refund = { name: 'refund', args: { order_id: 99, amount: 40 }, call_id: 'call-1' };
    const current = (await say(id, `${id}-p2`, 'billing', 'A refund over 30 needs a person.', ['triage'], undefined, {
      stop: { why: 'policy', detail: 'refund over 30' },
      pending_tool_call: refund,
    }))!;
    const [stopped] = await waitMesh(id, 'mesh.stopped');
    const packet = stopped!['packet'] as StopPacket;
    expect(stopped).not.toHaveProperty('refused');
    expect(packet).toMatchObject({ why: 'policy', agent: 'billing', detail: 'refund over 30', pending: refund, next_form: { kind: 'approve_deny' } });
    expect(packet.trace_ids).toHaveLength(1); // the trace the turn came in
    const [notice] = await waitMesh(id, 'mesh.notice_emitted');
    expect(notice).toMatchObject({ notice: { reason: 'stop', stop_id: packet.packet_id } });
    expect((await meshEvents(id)).filter((e) => e.type === 'mesh.handed_off')).toHaveLength(1); // only triage → billing

    await answerMesh(id, { packet_id: packet.packet_id, answer_id: `${id}-a1`, action: 'approve', pending_digest: packet.pending_digest });
    const resumed = meshResumeHandoffId(id, `${id}-a1`);
    const created = await waitHandoff(resumed);
    expect(created).toMatchObject({ from_agent: 'billing', to_agent: 'billing', context: { approved_call: refund } });
    // Provenance: the answer is the operator's (as a run's), the handoff it made a person's decision,
    // a turn's handoff the agent's, the entry handoff Baton's own.
    const answered = (await meshEvents(id)).find((e) => e.type === 'mesh.stop_answered')!;
    expect([answered.actor, answered.origin]).toEqual(['olga', 'operator']);
    const createdOrigin = async (handoffId: string) => (await store.read({ project: PROJECT, kind: 'handoff', id: handoffId })).events[0]!.origin;
    expect(await createdOrigin(resumed)).toBe('human');
    expect(await createdOrigin(current)).toBe('agent');
    expect(await createdOrigin(meshEntryHandoffId(id))).toBe('engine_fallback');
    await say(id, `${id}-p3`, 'billing', 'Refunded; back to you.', ['triage'], resumed);
    await say(id, `${id}-p4`, 'triage', 'All sorted.', []);
    const [completed] = await waitMesh(id, 'mesh.completed');
    expect(completed).toMatchObject({ turns: 4, output: { agent: 'triage', text: 'All sorted.' } });
  }, 30_000);

  it("the watchdog's stop request for a mesh run (a turn escalated with nobody to take it) stops the mesh with a packet and one notice, once", async () => {
    const id = await begin();
    await say(id, `${id}-p1`, 'triage', 'billing?', ['billing']);
    // The turn and the stop request travel on different subjects: the stop is asked once billing speaks.
    await waitMesh(id, 'mesh.handed_off');
    const request = {
      packet_id: `wd-esc:${id}`,
      workflow_run_id: id,
      project: PROJECT,
      why: 'guard_failed',
      tried: ['retry cap 3 reached (lease_expired)'],
      detail: 'nobody to escalate to (guard_failed)',
      requested_by: 'baton-watchdog',
    };
    for (let i = 0; i < 2; i++) await nats.js.publish(Subjects.stopRequest(prefix, PROJECT), encoder.encode(JSON.stringify(request)));
    const [stopped] = await waitMesh(id, 'mesh.stopped');
    expect(stopped).toMatchObject({ result_id: `wd-esc:${id}`, packet: { why: 'guard_failed', agent: 'billing', next_form: { kind: 'acknowledge' } } });
    const [notice] = await waitMesh(id, 'mesh.notice_emitted');
    expect(notice).toMatchObject({ notice: { reason: 'stop', stop_id: `wd-esc:${id}` } });
    const stopEvent = (await meshEvents(id)).find((e) => e.type === 'mesh.stopped')!;
    expect([stopEvent.actor, stopEvent.origin]).toEqual(['baton-watchdog', 'watchdog']);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await meshEvents(id)).filter((e) => e.type === 'mesh.stopped')).toHaveLength(1);
    expect((await deadLetters()).filter((d) => d.original.endsWith('.stop'))).toEqual([]);
  }, 30_000);

  it('answering a mesh stop: deny ends the mesh (mesh.terminated); a second answer is refused as already answered', async () => {
    const id = await begin();
    const packetId = await pingPongToCap(id);
    await answerMesh(id, { packet_id: packetId, answer_id: `${id}-a1`, action: 'deny', note: 'they keep looping' });
    const [terminated] = await waitMesh(id, 'mesh.terminated');
    expect(terminated).toMatchObject({ origin: 'operator', answer_id: `${id}-a1` });
    await answerMesh(id, { packet_id: packetId, answer_id: `${id}-a2`, action: 'raise_cap', cap: 9 });
    const [refused] = await waitMesh(id, 'mesh.turn_rejected');
    expect(refused).toMatchObject({ result_id: `${id}-a2`, code: 'stop_already_answered' });
    const types = (await meshEvents(id)).map((e) => e.type);
    expect(types.filter((t) => t === 'mesh.terminated')).toHaveLength(1);
    expect(types).not.toContain('mesh.completed');
  }, 30_000);

  it('a mesh survives a restart of every service mid-run and continues from the log', async () => {
    const id = await begin();
    await say(id, `${id}-r1`, 'triage', 'Over to billing.', ['billing']);
    await waitHandoff(meshHandoffId(id, `${id}-r1`));

    await router.stop();
    await ledger.stop();
    // While everything is down, billing's turn is published: the inbox stream holds it.
    await say(id, `${id}-r2`, 'billing', 'Back to you, triage.', ['triage'], meshHandoffId(id, `${id}-r1`));
    ledger = await startLedger(env);
    router = await startRouter(env);

    const [handedBack] = await waitMesh(id, 'mesh.handed_off', 2).then((all) => all.slice(1));
    expect(handedBack).toMatchObject({ from: 'billing', to: 'triage', turn: 3 });
    expect(await waitHandoff(meshHandoffId(id, `${id}-r2`))).toMatchObject({ to_agent: 'triage' });
    await say(id, `${id}-r3`, 'triage', 'All sorted.', []);
    const [completed] = await waitMesh(id, 'mesh.completed');
    expect(completed).toMatchObject({ turns: 3, output: { agent: 'triage', text: 'All sorted.' } });
  }, 40_000);

  it('a mesh start records its actor from the subject: the agent `…mesh_start.<agent>` names, `project-client` on the shared subject, never the body', async () => {
    const shared = await begin();
    const named = `mesh-${++counter}`;
    await startMesh(
      { js: nats.js, prefix, agent: 'billing' },
      { mesh_run_id: named, project: PROJECT, mesh: 'support', input: 'Where is my refund?', started_by: 'sam' },
    );
    await waitHandoff(meshEntryHandoffId(named));
    const actorOf = async (id: string) => (await store.read({ project: PROJECT, kind: 'mesh', id })).events.find((e) => e.type === 'mesh.started');
    expect([(await actorOf(shared))?.actor, (await actorOf(named))?.actor]).toEqual(['project-client', 'billing']);
    expect((await actorOf(named))?.origin).toBe('agent');
    expect((await actorOf(named))?.payload).toMatchObject({ started_by: 'sam' });
  }, 30_000);

  it('bad input is dead-lettered with its reason: malformed JSON, a turn for an unknown mesh, an unknown mesh start, another start under a taken id (while the mesh is still at its start)', async () => {
    await nats.js.publish(Subjects.meshResult(prefix, PROJECT, 'triage'), encoder.encode('{"result_id":'));
    await say('no-such-mesh', 'ghost-r1', 'triage', 'hello', []);
    await nats.js.publish(Subjects.meshStart(prefix, PROJECT), encoder.encode(JSON.stringify({ mesh_run_id: 'm-x', project: PROJECT, mesh: 'nope' })));
    const taken = await begin();
    const again = { mesh_run_id: taken, project: PROJECT, mesh: 'support', input: 'I was charged twice', started_by: 'sam' };
    // The same start again changes nothing; one by someone else is another mesh run, refused.
    await nats.js.publish(Subjects.meshStart(prefix, PROJECT), encoder.encode(JSON.stringify(again)));
    await nats.js.publish(Subjects.meshStart(prefix, PROJECT), encoder.encode(JSON.stringify({ ...again, started_by: 'mallory' })));
    const letters = await waitFor(async () => {
      const all = await deadLetters();
      return all.length >= 4 ? all : undefined;
    }, 'four dead letters');
    expect(letters.map((l) => [l.reason, l.original]).sort()).toEqual([
      ['malformed_json', Subjects.meshResult(prefix, PROJECT, 'triage')],
      ['mesh_already_started', Subjects.meshStart(prefix, PROJECT)],
      ['not_found', Subjects.meshResult(prefix, PROJECT, 'triage')],
      ['unknown_mesh', Subjects.meshStart(prefix, PROJECT)],
    ]);
    expect((await meshEvents(taken)).map((e) => e.type)).toEqual(['mesh.started']);
  }, 30_000);
});
