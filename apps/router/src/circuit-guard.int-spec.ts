import { Principals, Subjects, type AgentResult, type StopPacket } from '@baton/contracts';
import { LedgerClient, type JetStreamEventStore, type NatsHandle, type StoredEvent } from '@baton/eventstore';
import { waitFor } from '@baton/wait';
import { publishDefinition, shipDefinition, sleep, startInProcess, type InProcessDeployment } from './int/support';

/*
 * The circuit per agent through the real services over the real NATS (router, ledger, watchdog
 * in-process on a random prefix; WATCHDOG_CIRCUIT_FAILURES at its default, 3).
 *
 * A security audit: an agent with only its own credentials published three results naming three
 * runs of another agent's work (their step handoffs, `ho-s-<run>`, and a made-up claim). The router
 * refused each (`unexpected_agent`) and each refusal counted toward the sender's circuit — as it
 * should — but when the circuit opened the watchdog stopped the run the third result named, and the
 * packet blamed that run's agent. A circuit stops only a run of the agent's own failure, and its
 * packet names the agent whose circuit opened (docs/governance.md, circuit per agent).
 */

const encoder = new TextEncoder();
const ADVANCE = `Done.\n<!-- AGENT_RUN_CONFIG ${JSON.stringify({ dispatch: { status: 'advance' } })} -->`;

describe('circuit per agent through the router, ledger and watchdog (real NATS)', () => {
  let deployment: InProcessDeployment | undefined;
  let prefix: string;
  let nats: NatsHandle;
  let store: JetStreamEventStore;
  let counter = 0;

  const events = async (project: string, kind: 'run' | 'handoff', id: string): Promise<StoredEvent[]> => (await store.read({ project, kind, id })).events;
  const payloads = async (project: string, run: string, type: string) =>
    (await events(project, 'run', run)).filter((e) => e.type === type).map((e) => e.payload as Record<string, unknown>);
  const types = async (project: string, run: string) => (await events(project, 'run', run)).map((e) => e.type);
  const stopPacket = (project: string, run: string) =>
    waitFor(async () => (await payloads(project, run, 'run.stopped'))[0]?.['packet'] as StopPacket | undefined, `run.stopped on ${run}`, { timeoutMs: 15_000 });

  /** Start a `ship` run; resolves once the ledger created its step handoff for coder. */
  const startRun = async (project: string): Promise<{ run: string; handoff: string }> => {
    const run = `wr-${++counter}`;
    const body = { workflow_run_id: run, project, workflow: 'ship', started_by: 'sam', input: 'ship it' };
    await nats.js.publish(Subjects.runStart(prefix, project), encoder.encode(JSON.stringify(body)));
    const routed = await waitFor(async () => (await payloads(project, run, 'run.routed'))[0], `run.routed of ${run}`);
    const handoff = String(routed['handoff_id']);
    await waitFor(async () => ((await events(project, 'handoff', handoff)).length > 0 ? true : undefined), `the ledger's handoff ${handoff}`);
    return { run, handoff };
  };
  /** An agent's result, published on its own subject (`<prefix>.in.<project>.result.<agent>`). */
  const publishResult = async (project: string, agent: string, run: string, extra: Partial<AgentResult>) => {
    const id = `res-${++counter}`;
    const result: AgentResult = { result_id: id, run_id: `ar-${id}`, project, workflow_run_id: run, agent, produced_at: new Date().toISOString(), ...extra };
    await nats.js.publish(Subjects.agentResult(prefix, project, agent), encoder.encode(JSON.stringify(result)));
    return id;
  };
  const agentClient = (project: string, agent: string) => new LedgerClient(nats, prefix, { as: Principals.agent(project, agent), attempts: 1 });
  const claim = async (project: string, agent: string, handoff: string): Promise<string> => {
    const claimed = await agentClient(project, agent).claim(project, { handoff_id: handoff, idempotency_key: `claim-${handoff}-${agent}` });
    if (!claimed.ok || claimed.handoff.claim_id === undefined) throw new Error(`claim refused: ${JSON.stringify(claimed)}`);
    return claimed.handoff.claim_id;
  };

  beforeAll(async () => {
    deployment = await startInProcess({ tag: 'cg', services: ['ledger', 'router', 'watchdog'] });
    ({ prefix, nats, store } = deployment);
    for (const project of ['cgattack', 'cgdelegate'])
      expect(await publishDefinition(nats, prefix, project, shipDefinition(project, { helper: true }))).toMatchObject({ ok: true });
  }, 30_000);

  afterAll(() => deployment?.close(), 30_000);

  it("the audit's attack: three results of reviewer naming three of coder's runs open REVIEWER's circuit and stop none of those runs; the next run routed to reviewer is held, its packet naming reviewer", async () => {
    const project = 'cgattack';
    const victims = [await startRun(project), await startRun(project), await startRun(project)];
    // reviewer, with nothing but its own subject, names each victim's step handoff and a made-up claim.
    for (const { run, handoff } of victims) await publishResult(project, 'reviewer', run, { body: 'x', handoff_id: handoff, claim_id: 'claim-made-up' });
    for (const { run } of victims) {
      const [refused] = await waitFor(async () => {
        const found = await payloads(project, run, 'run.result_rejected');
        return found.length > 0 ? found : undefined;
      }, `the refusal on ${run}`);
      expect(refused).toMatchObject({ agent: 'reviewer', code: 'unexpected_agent', refused: 'result' });
    }

    // Coder's own work goes on: its result on a fourth run routes it to reviewer, whose circuit is
    // open — the watchdog (which reads the events in order, so it has counted the three refusals)
    // holds that dispatch: the run stops circuit_open, the packet naming reviewer.
    const fourth = await startRun(project);
    const claimId = await claim(project, 'coder', fourth.handoff);
    await publishResult(project, 'coder', fourth.run, { body: ADVANCE, handoff_id: fourth.handoff, claim_id: claimId });
    const held = await stopPacket(project, fourth.run);
    expect(held).toMatchObject({ why: 'circuit_open', agent: 'reviewer', tried: ['reviewer'] });

    // The victims run on, waiting for coder: no stop, no notice, nothing for the inbox.
    await sleep(500);
    for (const { run } of victims) {
      expect(await types(project, run)).toEqual(['run.started', 'run.routed', 'run.result_rejected']);
    }
  }, 40_000);

  it('a circuit that does stop a run whose agent is another (a child handoff of the run failed by its claimer) names the agent whose circuit opened, not the run`s agent', async () => {
    const project = 'cgdelegate';
    const runs = [await startRun(project), await startRun(project), await startRun(project)];
    // coder delegates a piece of each run's work to helper, which takes it and fails it.
    for (const [i, { run }] of runs.entries()) {
      const child = `kid-${run}`;
      const created = await agentClient(project, 'coder').create(project, {
        handoff_id: child,
        from_agent: 'coder',
        to_agent: 'helper',
        summary: 'a piece of the work',
        workflow_run_id: run,
        idempotency_key: `create-${child}`,
      });
      expect(created).toMatchObject({ ok: true });
      const claimId = await claim(project, 'helper', child);
      const failed = await agentClient(project, 'helper').fail(project, {
        handoff_id: child,
        claim_id: claimId,
        reason: `down (${i})`,
        idempotency_key: `fail-${child}`,
      });
      expect(failed).toMatchObject({ ok: true });
    }
    // helper's third failure opens its circuit and stops the run of that failure, which waits for coder.
    const packet = await stopPacket(project, runs[2]!.run);
    expect(packet).toMatchObject({ why: 'circuit_open', agent: 'helper', tried: ['helper'], step: 'code' });
    const [notice] = await payloads(project, runs[2]!.run, 'run.notice_emitted');
    expect(notice?.['notice']).toMatchObject({ agent: 'helper' });
    for (const { run } of runs.slice(0, 2)) expect(await types(project, run)).not.toContain('run.stopped');
  }, 40_000);
});
