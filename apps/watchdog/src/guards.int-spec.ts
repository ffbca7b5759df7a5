import { Principals } from '@baton/contracts';
import { batonStreamNames, batonTopology, hopTrace, LedgerClient, provision } from '@baton/eventstore';
import { waitFor } from '@baton/wait';
import {
  PROJECT,
  route as supportRoute,
  sleep,
  startHarness,
  stopRequestMessages,
  stopRequests as supportStopRequests,
  stopRequestsSoon,
  type Harness,
} from './int/support';

let h: Harness;

beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => {
  await h.cleanup();
});

/** Append `run.routed` events for run `run`: the agents visited in order (first from the start). */
const route = (run: string, agents: string[], firstHop = 1, project = PROJECT) => supportRoute(h, run, agents, firstHop, project);

const stopRequests = () => supportStopRequests(h);
/** The agent whose circuit a loop guard's stop request names (none for other stops). */
const guardAgent = (stop: Awaited<ReturnType<typeof stopRequests>>[number]) => (stop.cause?.kind === 'loop_guard' ? stop.cause.agent : undefined);

/** Two handoffs of `agent`'s, on runs `<tag>-1` and `<tag>-2`, claimed with a 1 s lease; resolves with the claims once both lapsed. */
async function lapseTwo(agent: string, tag: string): Promise<{ id: string; claimId: string; run: string }[]> {
  // The run's step handoff to `agent` is the router's create (an agent names a run only while it waits for that agent: `not_in_run`).
  const router = new LedgerClient(h.nats, h.prefix, { as: Principals.service('router'), attempts: 1 });
  const worker = new LedgerClient(h.nats, h.prefix, { as: Principals.agent(PROJECT, agent), attempts: 1 });
  const claims: { id: string; claimId: string; run: string }[] = [];
  for (const i of [1, 2]) {
    const id = `${tag}-h${i}`;
    const run = `${tag}-${i}`;
    await route(run, [agent]);
    const created = await router.create(PROJECT, {
      handoff_id: id,
      from_agent: 'alice',
      to_agent: agent,
      summary: 'x',
      workflow_run_id: run,
      idempotency_key: `c-${id}`,
    });
    expect(created).toMatchObject({ ok: true });
    const claimed = await worker.claim(PROJECT, { handoff_id: id, lease_ms: 1000, idempotency_key: `k-${id}` });
    if (!claimed.ok || claimed.handoff.claim_id === undefined) throw new Error(`claim refused: ${JSON.stringify(claimed)}`);
    claims.push({ id, claimId: claimed.handoff.claim_id, run });
  }
  for (const { id } of claims) await waitFor(async () => ((await h.state(id)).status === 'pending' ? true : undefined), `${id} requeued`, { timeoutMs: 8000 });
  return claims;
}

/** The router closing a lapsed claim's handoff with a result the inbox stored in time: the completion voids the lapse (rule 4b). */
async function voidLapse(claim: { id: string; claimId: string; run: string }, agent: string, resultId: string) {
  const router = new LedgerClient(h.nats, h.prefix, { as: Principals.service('router'), attempts: 1 });
  return router.completeFromResult(PROJECT, {
    handoff_id: claim.id,
    result_id: resultId,
    agent,
    claim_id: claim.claimId,
    workflow_run_id: claim.run,
    idempotency_key: `cfr-${resultId}`,
  });
}

describe('watchdog loop guards (real NATS): each leaves the loop as a stop request, never an exception', () => {
  it('hop budget per run: a hop past WATCHDOG_MAX_HOPS asks the router to stop the run (why budget, naming the hops cap), once with two watchdogs', async () => {
    await h.startWatchdog('wd-a', { WATCHDOG_MAX_HOPS: '3' });
    await h.startWatchdog('wd-b', { WATCHDOG_MAX_HOPS: '3' });
    await route('run-hops', ['a', 'b', 'c', 'd', 'e']);
    const stops = await stopRequestsSoon(h, 'a stop request', { timeoutMs: 8000 });
    await sleep(300);
    expect(await stopRequests()).toHaveLength(1);
    expect(stops[0]).toMatchObject({ workflow_run_id: 'run-hops', why: 'budget', cause: { kind: 'loop_guard', guard: 'hop_budget' } });
    // The packet names the cap, so an operator's raise that does not exceed it is refused (cap_not_raised).
    expect(stops[0]!.cap).toEqual({ name: 'hops', limit: 3, used: 4 });
  });

  it("a loop guard's stop request that cannot be stored (the inbox stream gone) is retried until it is: the tripped guard asks nothing more, so giving up would let the loop go on", async () => {
    await h.startWatchdog('wd-a', { WATCHDOG_MAX_HOPS: '2' });
    await h.nats.jsm.streams.delete(batonStreamNames(h.prefix).inbox);
    await route('run-outage', ['a', 'b', 'c', 'd']);
    // Past the five attempts (0.5 s × 1…5 apart) a request used to get before it was given up on.
    await sleep(9_000);
    await provision(h.nats.jsm, { streams: batonTopology(h.prefix).streams });
    const stops = await stopRequestsSoon(h, 'the retried stop request', { timeoutMs: 15_000 });
    expect(stops).toEqual([expect.objectContaining({ workflow_run_id: 'run-outage', why: 'budget' })]);
  }, 40_000);

  it("a loop guard's stop request continues the trace of the event that tripped the guard (the router links it on the packet)", async () => {
    await h.startWatchdog('wd-a', { WATCHDOG_MAX_HOPS: '2' });
    await route('run-traced', ['a', 'b']);
    const tripping = hopTrace(undefined);
    await supportRoute(h, 'run-traced', ['c'], 3, PROJECT, tripping);
    await stopRequestsSoon(h, 'a stop request', { timeoutMs: 8000 });
    const [stored] = await stopRequestMessages(h);
    expect(stored!.request).toMatchObject({ workflow_run_id: 'run-traced', why: 'budget' });
    expect(stored!.traceparent?.split('-')[1]).toBe(tripping.traceId);
  });

  it('ping-pong per edge: A→B→A→B… past WATCHDOG_MAX_ALTERNATIONS stops the run with why thrash', async () => {
    await h.startWatchdog('wd-a', { WATCHDOG_MAX_ALTERNATIONS: '2' });
    await route('run-pp', ['a', 'b', 'a', 'b', 'a']);
    const stops = await stopRequestsSoon(h, 'a thrash stop', { timeoutMs: 8000 });
    expect(stops[0]).toMatchObject({ workflow_run_id: 'run-pp', why: 'thrash', cause: { kind: 'loop_guard', guard: 'ping_pong' } });
  });

  it('circuit per agent: K consecutive failures of an agent open its circuit (why circuit_open); a dispatch to it is stopped', async () => {
    await h.startWatchdog('wd-a', { WATCHDOG_CIRCUIT_FAILURES: '2', WATCHDOG_CIRCUIT_COOLDOWN_MS: '600000' });
    const ops = new LedgerClient(h.nats, h.prefix, { as: Principals.operator('notifier'), operator: { name: 'ops', role: 'operator' }, attempts: 1 });
    const alice = new LedgerClient(h.nats, h.prefix, { as: Principals.agent(PROJECT, 'alice'), attempts: 1 });
    const flaky = new LedgerClient(h.nats, h.prefix, { as: Principals.agent(PROJECT, 'flaky'), attempts: 1 });
    for (const i of [1, 2]) {
      const id = `cf-${i}`;
      // alice delegates a piece of her run: the run waits for her (`not_in_run` otherwise).
      await route(`run-c${i}`, ['alice']);
      await alice.create(PROJECT, {
        handoff_id: id,
        from_agent: 'alice',
        to_agent: 'flaky',
        summary: 'x',
        workflow_run_id: `run-c${i}`,
        idempotency_key: `c-${id}`,
      });
      // flaky takes the work; an operator fails it: flaky's failure (it held the claim).
      expect(await flaky.claim(PROJECT, { handoff_id: id, idempotency_key: `k-${id}` })).toMatchObject({ ok: true });
      const failed = await ops.fail(PROJECT, { handoff_id: id, reason: 'crashed', idempotency_key: `f-${id}` });
      expect(failed.ok).toBe(true);
    }
    const opened = await waitFor(async () => (await stopRequests()).find((s) => s.why === 'circuit_open'), 'the circuit-open stop', { timeoutMs: 8000 });
    expect(opened).toMatchObject({ workflow_run_id: 'run-c2', cause: { kind: 'loop_guard', guard: 'circuit', agent: 'flaky' } });
    await route('run-other', ['alice', 'flaky']);
    const held = await waitFor(async () => (await stopRequests()).find((s) => s.workflow_run_id === 'run-other'), 'the held dispatch', { timeoutMs: 8000 });
    expect(held.why).toBe('circuit_open');
  });

  it('circuit opened by lease lapses (rule 4b): its stop waits for the lapse to settle and is dropped when a result stored in time voids the lapse; without one it is requested', async () => {
    await h.startWatchdog('wd-a', { WATCHDOG_CIRCUIT_FAILURES: '2', WATCHDOG_CIRCUIT_COOLDOWN_MS: '600000', WATCHDOG_LAPSE_SETTLE_MS: '2500' });
    const router = new LedgerClient(h.nats, h.prefix, { as: Principals.service('router'), attempts: 1 });

    // The second lapse opens slow's circuit; the router then accepts the result slow's inbox stored
    // in time and closes the handoff under the lapsed claim: the completion voids the lapse.
    const voided = await lapseTwo('slow', 'lv');
    const last = voided[1]!;
    const completed = await router.completeFromResult(PROJECT, {
      handoff_id: last.id,
      result_id: 'r-in-time',
      agent: 'slow',
      claim_id: last.claimId,
      workflow_run_id: last.run,
      idempotency_key: 'cfr-r-in-time',
    });
    expect(completed).toMatchObject({ ok: true, handoff: { status: 'completed' } });
    // Past the settle: no stop for slow's run.
    await sleep(3500);
    expect((await stopRequests()).filter((s) => guardAgent(s) === 'slow')).toEqual([]);

    // Nothing voids dead's lapses: its stop is requested once the lapse has settled, not before.
    const lapsed = await lapseTwo('dead', 'ld');
    const lapsedAt = Date.now();
    const stop = await waitFor(async () => (await stopRequests()).find((s) => s.why === 'circuit_open' && guardAgent(s) === 'dead'), 'the settled stop', {
      timeoutMs: 10_000,
    });
    expect(stop.workflow_run_id).toBe(lapsed[1]!.run);
    expect(Date.now() - lapsedAt).toBeGreaterThanOrEqual(1500);
  }, 40_000);

  it('a circuit stop a lapse tripped waits out every lapse that re-opened the circuit meanwhile: when those are voided too, it is dropped (an overloaded router, not a failing agent)', async () => {
    await h.startWatchdog('wd-a', { WATCHDOG_CIRCUIT_FAILURES: '2', WATCHDOG_CIRCUIT_COOLDOWN_MS: '600000', WATCHDOG_LAPSE_SETTLE_MS: '4000' });
    // Two lapses open busy's circuit (a stop settling until 4 s after the second); the first
    // lapse's result is recorded late, which voids it and closes the circuit.
    const first = await lapseTwo('busy', 'ro');
    const firstAt = Date.now();
    expect(await voidLapse(first[1]!, 'busy', 'r-ro-2')).toMatchObject({ ok: true });
    // Two more lapses re-open it before the first stop has settled.
    const second = await lapseTwo('busy', 'rt');
    // Past the first stop's settle: the circuit is open again, on lapses that have not settled.
    await sleep(Math.max(0, firstAt + 4_500 - Date.now()));
    expect((await stopRequests()).filter((s) => guardAgent(s) === 'busy')).toEqual([]);
    // Their results are recorded late too: every lapse was the router's backlog, none the agent's.
    expect(await voidLapse(second[1]!, 'busy', 'r-rt-2')).toMatchObject({ ok: true });
    await sleep(5_000);
    expect((await stopRequests()).filter((s) => guardAgent(s) === 'busy')).toEqual([]);
  }, 40_000);

  it("circuit per agent, cross-project: failures of another project's agent on handoffs of this project's runs stop this project's run", async () => {
    const OTHER = 'other';
    await h.startWatchdog('wd-a', { WATCHDOG_CIRCUIT_FAILURES: '2', WATCHDOG_CIRCUIT_COOLDOWN_MS: '600000' });
    const ops = new LedgerClient(h.nats, h.prefix, { as: Principals.operator('notifier'), operator: { name: 'ops', role: 'operator' }, attempts: 1 });
    const alice = new LedgerClient(h.nats, h.prefix, { as: Principals.agent(PROJECT, 'alice'), attempts: 1 });
    const flakyThere = new LedgerClient(h.nats, h.prefix, { as: Principals.agent(OTHER, 'flaky'), attempts: 1 });
    // OTHER has runs of the same ids: none of them is these handoffs' run.
    for (const i of [1, 2]) await route(`run-x${i}`, ['carol'], 1, OTHER);
    for (const i of [1, 2]) {
      const id = `xcf-${i}`;
      // alice delegates a piece of her run (of PROJECT) to OTHER: the run waits for her (`not_in_run` otherwise).
      await route(`run-x${i}`, ['alice']);
      const created = await alice.create(PROJECT, {
        handoff_id: id,
        from_agent: 'alice',
        to_agent: 'flaky',
        summary: 'x',
        workflow_run_id: `run-x${i}`,
        target_project: OTHER,
        cto_override: 'dec-1',
        idempotency_key: `c-${id}`,
      });
      expect(created).toMatchObject({ ok: true, handoff: { project: OTHER, source_project: PROJECT } });
      expect(await flakyThere.claim(OTHER, { handoff_id: id, idempotency_key: `k-${id}` })).toMatchObject({ ok: true });
      const failed = await ops.fail(OTHER, { handoff_id: id, reason: 'crashed', idempotency_key: `f-${id}` });
      expect(failed.ok).toBe(true);
    }
    const opened = await waitFor(async () => (await stopRequests()).find((s) => s.why === 'circuit_open'), 'the circuit-open stop in the source project', {
      timeoutMs: 8000,
    });
    expect(opened).toMatchObject({ project: PROJECT, workflow_run_id: 'run-x2', cause: { kind: 'loop_guard', guard: 'circuit', agent: 'flaky' } });
    await sleep(300);
    expect(await supportStopRequests(h, OTHER)).toEqual([]);
  });

  it('deadline: past deadline_at the handoff is expired exactly once even with two watchdogs (handoff.deadline_expired)', async () => {
    await h.startWatchdog('wd-a');
    await h.startWatchdog('wd-b');
    const ops = new LedgerClient(h.nats, h.prefix, { as: Principals.agent(PROJECT, 'alice'), attempts: 1 });
    await ops.create(PROJECT, {
      handoff_id: 'dl-1',
      from_agent: 'alice',
      to_agent: 'bob',
      summary: 'x',
      deadline_at: new Date(Date.now() + 500).toISOString(),
      idempotency_key: 'c-dl-1',
    });
    await waitFor(async () => (await h.state('dl-1')).status === 'failed', 'the deadline to expire', { timeoutMs: 8000 });
    await sleep(800);
    const events = await h.events('dl-1');
    expect(events.filter((e) => e.type === 'handoff.deadline_expired')).toHaveLength(1);
    expect(await h.state('dl-1')).toMatchObject({ status: 'failed', terminal_reason: 'deadline' });
  });
});
