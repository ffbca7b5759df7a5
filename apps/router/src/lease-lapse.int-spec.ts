import { handoffToolName, Principals, Subjects, type AgentResult } from '@baton/contracts';
import { meshEntryHandoffId } from '@baton/domain';
import { LedgerClient, type JetStreamEventStore, type NatsHandle, type StoredEvent } from '@baton/eventstore';
import { waitFor } from '@baton/wait';
import { publishDefinition, sleep, startInProcess, type InProcessDeployment } from './int/support';

/*
 * docs/handoffs.md rule 4b through the real router and the real ledger over the real NATS, with no
 * watchdog at all: a claim whose lease ran out stays `claimed` in the ledger until a requeue that
 * never comes. The line a late result meets is the lease's expiry against the time the inbox stored
 * the result — not whether the watchdog has requeued yet (a mesh audit found a result stored 215 ms
 * after the expiry accepted because the watchdog's tick had not come, and the same result refused
 * when it had).
 */

const PROJECT = 'lapse';
const LEASE_MS = 1_000;
const encoder = new TextEncoder();
const ADVANCE = `Done.\n<!-- AGENT_RUN_CONFIG ${JSON.stringify({ dispatch: { status: 'advance' } })} -->`;

const definition = {
  project: PROJECT,
  agents: [
    { name: 'issue', role: 'Triage' },
    { name: 'architect', role: 'Architect' },
    { name: 'triage', role: 'Front desk' },
    { name: 'billing', role: 'Billing specialist' },
  ],
  workflows: [
    {
      name: 'feature',
      version: 1,
      entry: 'triage',
      steps: [
        { id: 'triage', agent: 'issue', next: 'analyze' },
        { id: 'analyze', agent: 'architect', terminal: true },
      ],
    },
  ],
  meshes: [{ name: 'support', entry: 'triage', handoffs: { triage: ['billing'], billing: ['triage'] }, outputs: ['triage'], max_iterations: 4 }],
};

interface Refusal {
  result_id: string;
  code: string;
  message: string;
}

describe('rule 4b: a result stored after its lease ran out is refused whether or not the watchdog requeued yet (router + ledger, no watchdog, real NATS)', () => {
  let deployment: InProcessDeployment | undefined;
  let prefix: string;
  let nats: NatsHandle;
  let store: JetStreamEventStore;
  let counter = 0;

  const read = async (kind: 'run' | 'mesh' | 'handoff', id: string): Promise<StoredEvent[]> => (await store.read({ project: PROJECT, kind, id })).events;
  const waitEvents = <T>(kind: 'run' | 'mesh' | 'handoff', id: string, type: string, count = 1) =>
    waitFor(async () => {
      const found = (await read(kind, id)).filter((e) => e.type === type);
      return found.length >= count ? found.map((e) => e.payload as T) : undefined;
    }, `${count} × ${type} on ${id}`);

  /** The agent claims `handoffId` through the ledger, as its SDK does, with a 1 s lease and no heartbeat. */
  const claim = async (agent: string, handoffId: string, leaseMs = LEASE_MS) => {
    await waitEvents('handoff', handoffId, 'handoff.created');
    const client = new LedgerClient(nats, prefix, { as: Principals.agent(PROJECT, agent) });
    const claimed = await client.claim(PROJECT, { handoff_id: handoffId, lease_ms: leaseMs, idempotency_key: `claim-${handoffId}` });
    if (!claimed.ok) throw new Error(`claim of ${handoffId}: ${claimed.error.code}`);
    const { claim_id: claimId, lease_expires_at: expiry } = claimed.handoff;
    if (claimId === undefined || expiry === undefined) throw new Error(`claim of ${handoffId} holds no lease`);
    return { client, claimId, expiry };
  };
  /** Wait until the lease is past, by a margin well over the few milliseconds of a publish. */
  const pastExpiry = (expiry: string) => sleep(Math.max(0, Date.parse(expiry) - Date.now()) + 250);
  const result = (run: string, agent: string, resultId: string, handoffId: string, claimId: string): AgentResult => ({
    result_id: resultId,
    run_id: `ar-${resultId}`,
    project: PROJECT,
    workflow_run_id: run,
    agent,
    produced_at: new Date().toISOString(),
    body: ADVANCE,
    handoff_id: handoffId,
    claim_id: claimId,
  });
  const publishResult = (r: AgentResult) => nats.js.publish(Subjects.agentResult(prefix, PROJECT, r.agent), encoder.encode(JSON.stringify(r)));
  const startRun = async () => {
    const run = `wr-${++counter}`;
    await nats.js.publish(
      Subjects.runStart(prefix, PROJECT),
      encoder.encode(JSON.stringify({ workflow_run_id: run, project: PROJECT, workflow: 'feature', started_by: 'sam', input: 'go' })),
    );
    const [routed] = await waitEvents<{ handoff_id: string }>('run', run, 'run.routed');
    return { run, handoffId: routed!.handoff_id };
  };
  /** The handoff's events as the ledger stored them: their types, in order. */
  const handoffTypes = async (handoffId: string) => (await read('handoff', handoffId)).map((e) => e.type);

  beforeAll(async () => {
    deployment = await startInProcess({ tag: 'll', services: ['ledger', 'router'] });
    ({ prefix, nats, store } = deployment);
    expect(await publishDefinition(nats, prefix, PROJECT, definition)).toMatchObject({ ok: true });
  }, 30_000);

  afterAll(() => deployment?.close(), 30_000);

  it('a workflow result stored after the expiry, the claim still current (no requeue): refused handoff_not_claimed, saying when each happened; a heartbeat cannot revive the lease', async () => {
    const { run, handoffId } = await startRun();
    const { client, claimId, expiry } = await claim('issue', handoffId);
    await pastExpiry(expiry);
    // The lapsed lease cannot be renewed: the ledger refuses the heartbeat and keeps the expiry.
    const beat = await client.heartbeat(PROJECT, { handoff_id: handoffId, claim_id: claimId, idempotency_key: `beat-${handoffId}` });
    expect(beat).toMatchObject({ ok: false, error: { code: 'lease_expired', details: { lease_expires_at: expiry } } });

    await publishResult(result(run, 'issue', `${run}-late`, handoffId, claimId));
    const [refused] = await waitEvents<Refusal>('run', run, 'run.result_rejected');
    expect(refused).toMatchObject({ result_id: `${run}-late`, code: 'handoff_not_claimed' });
    expect(refused!.message).toMatch(
      new RegExp(
        `^handoff ${handoffId} is claimed, but its lease ran out: .*; its claim ${claimId} lapsed at ${expiry.replace(/\./g, '\\.')} and it was stored at \\S+Z$`,
      ),
    );
    const storedAt = Date.parse(refused!.message.slice(refused!.message.lastIndexOf(' ') + 1));
    expect(storedAt).toBeGreaterThan(Date.parse(expiry));

    // Nothing moved: the run is still on the handoff, and the ledger was never asked to close it —
    // it stays claimed under the lapsed claim until the watchdog requeues it.
    expect((await read('run', run)).map((e) => e.type)).toEqual(['run.started', 'run.routed', 'run.result_rejected']);
    expect(await handoffTypes(handoffId)).toEqual(['handoff.created', 'handoff.claimed']);
  }, 20_000);

  it('a workflow result stored before the expiry but read after it (the router down meanwhile) is recorded: the store time decides, not the read', async () => {
    const { run, handoffId } = await startRun();
    // The router is stopped before the claim, and the lease is longer than the others: the result
    // must be stored before the expiry however slow the machine (a router's shutdown inside a 1 s
    // lease once took longer than the lease on a loaded CI machine, and the result came too late).
    await deployment!.stop('router');
    const { claimId, expiry } = await claim('issue', handoffId, 3 * LEASE_MS);
    await publishResult(result(run, 'issue', `${run}-in-time`, handoffId, claimId));
    expect(Date.now()).toBeLessThan(Date.parse(expiry));
    await pastExpiry(expiry);
    await deployment!.start('router');
    const [recorded] = await waitEvents<Record<string, unknown>>('run', run, 'run.result_recorded');
    expect(recorded).toMatchObject({ result_id: `${run}-in-time`, handoff_id: handoffId, claim_id: claimId });
    // The ledger closes the handoff under that claim, though its lease has run out since.
    await waitEvents('handoff', handoffId, 'handoff.completed_by_result');
    expect(await handoffTypes(handoffId)).toEqual(['handoff.created', 'handoff.claimed', 'handoff.completed_by_result']);
  }, 30_000);

  it('a mesh turn stored after the expiry, the claim still current (no requeue): mesh.turn_rejected handoff_not_claimed, nothing recorded, the handoff still claimed', async () => {
    const mesh = `m-${++counter}`;
    // As the SDK's startMesh and publishMeshResult publish them (the raw subjects: no SDK import in the router's tests).
    await nats.js.publish(
      Subjects.meshStart(prefix, PROJECT),
      encoder.encode(JSON.stringify({ mesh_run_id: mesh, project: PROJECT, mesh: 'support', input: 'I was charged twice', started_by: 'sam' })),
    );
    const entry = meshEntryHandoffId(mesh);
    const { claimId, expiry } = await claim('triage', entry);
    await pastExpiry(expiry);
    const turn: AgentResult = {
      ...result(mesh, 'triage', `${mesh}-late`, entry, claimId),
      body: 'Over to billing.',
      handoff_tool_calls: [{ tool: handoffToolName('billing'), call_id: `${mesh}-c0` }],
    };
    await nats.js.publish(Subjects.meshResult(prefix, PROJECT, 'triage'), encoder.encode(JSON.stringify(turn)));
    const [refused] = await waitEvents<Refusal>('mesh', mesh, 'mesh.turn_rejected');
    expect(refused).toMatchObject({ result_id: `${mesh}-late`, code: 'handoff_not_claimed' });
    expect(refused!.message).toContain(`its claim ${claimId} lapsed at ${expiry} and it was stored at `);
    expect((await read('mesh', mesh)).map((e) => e.type)).toEqual(['mesh.started', 'mesh.turn_rejected']);
    expect(await handoffTypes(entry)).toEqual(['handoff.created', 'handoff.claimed']);
  }, 20_000);
});
