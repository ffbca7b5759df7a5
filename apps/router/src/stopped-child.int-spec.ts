import { Subjects, type AgentResult, type RouteCause } from '@baton/contracts';
import { compileProject, LOAN_EXAMPLE_YAML } from '@baton/definitions';
import type { RunState } from '@baton/domain';
import type { JetStreamEventStore, NatsHandle, StoredEvent } from '@baton/eventstore';
import { waitFor } from '@baton/wait';
import { HANDOFF_NOT_OFFERED_CODE } from './dispatch/dispatch-reactor';
import { claimHandoff, publishDefinition, shipDefinition, sleep, startInProcess, type InProcessDeployment } from './int/support';
import { routerRunDecider } from './runs/router-run.decider';

/*
 * The mesh audit (finding 1): a run stopped from outside (the watchdog's circuit) while its returnable
 * child is pending kept the child "pending" and the parent "waiting" for ever — even once the stop was
 * answered and the run terminated — and no `run.handoff_completed` was recorded; and the child's
 * handoff was still created (and offered) after the run had stopped. docs/returnable-handoffs.md,
 * ON_FAILURE: "when the run was stopped from outside … the child's end is recorded
 * (`run.handoff_completed`) and the run stays stopped"; seed 001: "delegation always comes back or
 * escalates; it is never silently lost".
 *
 * Router and ledger in-process on a random prefix, real NATS; the stop is the watchdog's request on
 * `<prefix>.in.<project>.stop` (`circuit_open`), published directly. Seed 001's loan example: the
 * supervisor hands off to Income_Capture_Agent (RETURN: true) at the run's start.
 */

const encoder = new TextEncoder();
const CHILD = 'Income_Capture_Agent';
/** Past the attempts of one ledger call of the router's (ledger-outage.int-spec.ts waits as long). */
const LEDGER_ATTEMPTS_MS = 7_000;

describe('a run stopped while its returnable child is pending (router + ledger, real NATS)', () => {
  let deployment: InProcessDeployment | undefined;
  let prefix: string;
  let nats: NatsHandle;
  let store: JetStreamEventStore;
  let counter = 0;

  const events = async (project: string, kind: 'run' | 'handoff', id: string): Promise<StoredEvent[]> => (await store.read({ project, kind, id })).events;
  const payloads = async (project: string, run: string, type: string) =>
    (await events(project, 'run', run)).filter((e) => e.type === type).map((e) => e.payload as Record<string, unknown>);
  const waitEvent = (project: string, run: string, type: string, timeoutMs = 15_000) =>
    waitFor(async () => (await payloads(project, run, type))[0], `${type} on ${run}`, { timeoutMs });
  const fold = async (project: string, run: string): Promise<RunState> => (await store.current({ project, kind: 'run', id: run }, routerRunDecider)).state;

  const define = async (project: string) => {
    const compiled = compileProject([{ path: 'loans.yaml', text: LOAN_EXAMPLE_YAML.replace('project: loans', `project: ${project}`) }]);
    if (compiled.project === null) throw new Error(JSON.stringify(compiled.diagnostics));
    expect(await publishDefinition(nats, prefix, project, compiled.project)).toMatchObject({ ok: true });
  };
  /** Start a loan run; resolves with its returnable child handoff (Loan_Supervisor → Income_Capture_Agent). */
  const start = async (project: string) => {
    const run = `wr-${++counter}`;
    const body = { workflow_run_id: run, project, workflow: 'loan_session', started_by: 'sam', input: 'I want a loan offer' };
    await nats.js.publish(Subjects.runStart(prefix, project), encoder.encode(JSON.stringify(body)));
    const handoff = await waitEvent(project, run, 'run.handoff');
    expect(handoff).toMatchObject({ to: CHILD, returnExpected: true });
    return { run, child: String(handoff['handoffId']) };
  };
  /** The watchdog's stop of `run` (its circuit for the child's agent opened). */
  const stop = async (project: string, run: string) => {
    const request = { packet_id: `wd-${run}`, workflow_run_id: run, project, why: 'circuit_open', tried: [CHILD], requested_by: 'baton-watchdog' };
    await nats.js.publish(Subjects.stopRequest(prefix, project), encoder.encode(JSON.stringify(request)));
    const stopped = await waitEvent(project, run, 'run.stopped');
    return (stopped['packet'] as { packet_id: string }).packet_id;
  };
  const answer = async (project: string, run: string, packetId: string, action: string) => {
    const body = {
      workflow_run_id: run,
      project,
      actor_role: 'operator',
      answer: {
        kind: 'stop_answer',
        answer: { packet_id: packetId, answer_id: `ans-${run}`, answered_by: 'olga', answered_at: new Date().toISOString(), action },
      },
    };
    await nats.js.publish(`${prefix}.in.${project}.answer`, encoder.encode(JSON.stringify(body)));
  };
  const expectNoLiveChild = (state: RunState) => {
    expect(state.status).not.toBe('none');
    if (state.status === 'none') return;
    expect(state.pendingHandoff).toBeNull();
    expect(state.waitingParents).toEqual([]);
  };

  beforeAll(async () => {
    // No ledger yet: the first test stops a run whose child's handoff the router cannot create yet.
    deployment = await startInProcess({ tag: 'sc', services: ['router'] });
    ({ prefix, nats, store } = deployment);
    for (const project of ['scearly', 'sclate']) await define(project);
    expect(await publishDefinition(nats, prefix, 'schop', shipDefinition('schop'))).toMatchObject({ ok: true });
  }, 30_000);

  afterAll(() => deployment?.close(), 30_000);

  it("a run stopped after it routed to the child but before the child's handoff was created: the handoff is never created or offered, and the child's end is recorded", async () => {
    const project = 'scearly';
    const { run, child } = await start(project);
    // The routed event waits for a ledger; the run stops meanwhile (it stands after the route in the run's stream).
    await stop(project, run);
    // A ledger call sent before the stop (its attempts take about five seconds) would still create the
    // handoff once a ledger answers — decided before the stop, which the stop's abandon then ends. Let
    // it give up first: its redelivery decides after the stop.
    await sleep(LEDGER_ATTEMPTS_MS);
    await deployment!.start('ledger');

    const completed = await waitFor(
      async () => (await payloads(project, run, 'run.handoff_completed')).find((p) => p['handoffId'] === child),
      'the child`s end on the run',
      { timeoutMs: 40_000 },
    );
    expect(completed).toMatchObject({
      to: CHILD,
      outcome: 'error',
      code: HANDOFF_NOT_OFFERED_CODE,
      cause: expect.stringMatching(/^handoff_ended: not offered: run .* was stopped \(circuit_open/),
    });
    // The stop's own abandon found no handoff; nobody was offered work the stop had already taken away.
    await sleep(1_000);
    expect(await events(project, 'handoff', child)).toEqual([]);
    // The run stays stopped (ON_FAILURE does not run over a stop), with no live child or waiting parent.
    const state = await fold(project, run);
    expect(state.status).toBe('stopped');
    expectNoLiveChild(state);
    expect((await payloads(project, run, 'run.awaiting_input')).length).toBe(0);
  }, 60_000);

  it("a hop's next handoff (a result's route) is not created either when the run stopped after the route: the finished handoff is completed, the next never offered", async () => {
    const project = 'schop';
    // No ledger while the hop is recorded, so neither its dispatch ahead nor its deliveries can create the next handoff before the stop.
    await deployment!.stop('ledger');
    const run = `wr-${++counter}`;
    const start = { workflow_run_id: run, project, workflow: 'ship', started_by: 'sam', input: 'ship it' };
    await nats.js.publish(Subjects.runStart(prefix, project), encoder.encode(JSON.stringify(start)));
    const first = String((await waitEvent(project, run, 'run.routed'))['handoff_id']);
    // coder's SDK claims its handoff (written as the ledger would) and sends its result: the run routes to reviewer.
    const claimId = await claimHandoff(store, project, first, 'coder', { workflowRunId: run });
    const result: AgentResult = {
      result_id: `res-${run}`,
      run_id: `ar-${run}`,
      project,
      workflow_run_id: run,
      agent: 'coder',
      produced_at: new Date().toISOString(),
      body: `Done.\n<!-- AGENT_RUN_CONFIG ${JSON.stringify({ dispatch: { status: 'advance' } })} -->`,
      handoff_id: first,
      claim_id: claimId!,
    };
    await nats.js.publish(Subjects.agentResult(prefix, project, 'coder'), encoder.encode(JSON.stringify(result)));
    const next = await waitFor(async () => (await payloads(project, run, 'run.routed')).find((p) => p['handoff_id'] !== first), 'the route to reviewer');
    const nextId = String(next['handoff_id']);
    expect(next).toMatchObject({ target: { agent: 'reviewer' } });
    await stop(project, run);
    // A ledger call sent before the stop (its attempts take about five seconds) would still create the
    // handoff once a ledger answers — decided before the stop, which the stop's abandon then ends. Let
    // it give up first: its redelivery decides after the stop.
    await sleep(LEDGER_ATTEMPTS_MS);
    await deployment!.start('ledger');

    // The finished handoff is completed by coder's result; reviewer's is never created.
    await waitFor(
      async () => (await events(project, 'handoff', first)).find((e) => e.type === 'handoff.completed_by_result'),
      'the completion of coder`s handoff',
      { timeoutMs: 40_000 },
    );
    await sleep(1_500);
    expect(await events(project, 'handoff', nextId)).toEqual([]);
    expect((await fold(project, run)).status).toBe('stopped');
  }, 60_000);

  it("a run stopped while its child's handoff is open: the router abandons it and the run records the child's end; answered, the run ends with no pending child", async () => {
    const project = 'sclate';
    const { run, child } = await start(project);
    await waitFor(async () => (await events(project, 'handoff', child)).find((e) => e.type === 'handoff.created'), 'the child`s handoff');
    const packetId = await stop(project, run);

    const abandoned = await waitFor(async () => (await events(project, 'handoff', child)).find((e) => e.type === 'handoff.abandoned'), 'the stop`s abandon');
    expect(abandoned.payload).toMatchObject({ abandoned_by: 'baton-router' });
    const completed = await waitFor(
      async () => (await payloads(project, run, 'run.handoff_completed')).find((p) => p['handoffId'] === child),
      'the child`s end on the run',
    );
    expect(completed).toMatchObject({
      to: CHILD,
      outcome: 'error',
      code: 'handoff_abandoned',
      cause: expect.stringMatching(/^handoff_ended: abandoned by baton-router: run /),
    });
    const stopped = await fold(project, run);
    expect(stopped.status).toBe('stopped');
    expectNoLiveChild(stopped);

    await answer(project, run, packetId, 'acknowledge');
    await waitEvent(project, run, 'run.terminated');
    const ended = await fold(project, run);
    expect(ended.status).toBe('terminated');
    expectNoLiveChild(ended);
    // Recorded once: the router's abandon is news to the run once.
    expect((await payloads(project, run, 'run.handoff_completed')).filter((p) => p['handoffId'] === child)).toHaveLength(1);
    // No hold or ON_FAILURE reply came from the router's own abandon.
    const causes = (await payloads(project, run, 'run.held')).map((p) => p['cause'] as RouteCause);
    expect(causes).toEqual([]);
  }, 40_000);
});
