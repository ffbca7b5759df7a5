import { AckPolicy, headers as natsHeaders } from 'nats';
import { batonStreamNames, batonTopology, hopTrace, LedgerClient, provision, TRACEPARENT_HEADER, type HopTrace } from '@baton/eventstore';
import { Principals, type EventEnvelope, type HandoffEventData } from '@baton/contracts';
import { waitFor } from '@baton/wait';
import { EscalationStopper } from './escalation/escalation-stopper';
import { StopRunRequestSchema, stopPacketId, stopRequestSubject } from './escalation/stop-request';
import { GuardRunner } from './guards/guard-runner';
import { appendRunEvents, PROJECT, route, sleep, startHarness, stopRequests, stopRequestsSoon, type Harness } from './int/support';

const LEASE_MS = 1_000; // the shortest lease the wire schema allows

/** The target project of the cross-project handoffs. */
const OTHER = 'other';
const alice = Principals.agent(PROJECT, 'alice');
const bob = Principals.agent(PROJECT, 'bob');
/** A run step's handoff is the router's create: an agent names a run only while the run waits for it (`not_in_run`). */
const router = Principals.service('router');

let h: Harness;
let client: LedgerClient;
let n = 0;

beforeEach(async () => {
  h = await startHarness();
  client = new LedgerClient(h.nats, h.prefix, { as: bob, attempts: 1 });
});

afterEach(async () => {
  await h.cleanup();
});

/**
 * Create a handoff from alice to bob and let bob claim it; resolves with its id and the claim. One
 * naming a run is a step of it the router routed from alice to bob, created by the router.
 */
async function createAndClaim(opts: { leaseMs?: number; maxRetries?: number; workflowRunId?: string; escalateTo?: string; trace?: HopTrace } = {}) {
  const id = `h-${++n}`;
  const created = await client.create(
    PROJECT,
    {
      handoff_id: id,
      from_agent: 'alice',
      to_agent: 'bob',
      summary: 'write the parser',
      max_retries: opts.maxRetries ?? 3,
      ...(opts.workflowRunId ? { workflow_run_id: opts.workflowRunId } : {}),
      ...(opts.escalateTo ? { escalate_to: opts.escalateTo } : {}),
      idempotency_key: `create-${id}`,
    },
    { as: opts.workflowRunId ? router : alice },
  );
  if (!created.ok) throw new Error(`create refused: ${JSON.stringify(created.error)}`);
  const claimed = await client.claim(
    PROJECT,
    { handoff_id: id, lease_ms: opts.leaseMs ?? LEASE_MS, idempotency_key: `claim-${id}` },
    opts.trace !== undefined ? { trace: opts.trace } : undefined,
  );
  if (!claimed.ok || !claimed.handoff.claim_id || !claimed.handoff.lease_expires_at) throw new Error(`claim refused: ${JSON.stringify(claimed)}`);
  return { id, claimId: claimed.handoff.claim_id, leaseExpiresAt: Date.parse(claimed.handoff.lease_expires_at) };
}

async function countOf(handoffId: string, type: string): Promise<number> {
  return (await h.events(handoffId)).filter((e) => e.type === type).length;
}

async function pendingAgain(handoffId: string) {
  return waitFor(
    async () => {
      const state = await h.state(handoffId);
      return state.status === 'pending' ? state : undefined;
    },
    `${handoffId} to be pending again`,
    { timeoutMs: 8000 },
  );
}

describe('watchdog: lease expiry → requeue', () => {
  it('after the lease expires the handoff is requeued exactly once: one handoff.lease_expired, pending with retry_count 1', async () => {
    const watchdog = await h.startWatchdog('wd-a');
    const { id, claimId, leaseExpiresAt } = await createAndClaim();

    const state = await pendingAgain(id);
    expect(state.status === 'pending' && state.retry.retry_count).toBe(1);
    await sleep(500); // several more ticks: nothing more happens
    const expired = (await h.events(id)).filter((e) => e.type === 'handoff.lease_expired');
    expect(expired).toHaveLength(1);
    expect(expired[0]!.payload).toMatchObject({ claim_id: claimId, retry_count: 1, idempotency_key: `requeue:${id}:${claimId}` });
    // Never before the lease ran out.
    expect(Date.parse(expired[0]!.occurredAt)).toBeGreaterThanOrEqual(leaseExpiresAt);
    expect(watchdog.outcomes.filter((o) => o.kind === 'requeued').map((o) => o.deadline.handoffId)).toContain(id);
  });

  it("the requeue continues the trace of the claim it ends: the run's trace, not one of the watchdog's own", async () => {
    await h.startWatchdog('wd-a');
    const claimTrace = hopTrace(undefined);
    const { id } = await createAndClaim({ trace: claimTrace });
    await pendingAgain(id);
    const expired = (await h.events(id)).find((e) => e.type === 'handoff.lease_expired')!;
    const stored = await h.nats.jsm.streams.getMessage(batonStreamNames(h.prefix).events, { seq: expired.seq });
    expect(stored.header.get(TRACEPARENT_HEADER).split('-')[1]).toBe(claimTrace.traceId);
  });

  it('two watchdog instances running at once still requeue each expired lease exactly once', async () => {
    const a = await h.startWatchdog('wd-a');
    const b = await h.startWatchdog('wd-b');
    const claims = await Promise.all([createAndClaim(), createAndClaim(), createAndClaim(), createAndClaim()]);

    for (const { id } of claims) await pendingAgain(id);
    await sleep(800); // past the retry delay: a confirmation round would show up now
    for (const { id } of claims) {
      expect(await countOf(id, 'handoff.lease_expired')).toBe(1);
      const state = await h.state(id);
      expect(state.status === 'pending' && state.retry.retry_count).toBe(1);
    }
    // Both instances were watching the same leases (each tracked and tried them).
    const attempted = (outcomes: typeof a.outcomes) => new Set(outcomes.map((o) => o.deadline.handoffId));
    expect(attempted(a.outcomes).size + attempted(b.outcomes).size).toBeGreaterThanOrEqual(claims.length);
  });

  it('rule 4a: a lease whose claim an accepted result answered is held back past its expiry, then requeued if no completion comes', async () => {
    const watchdog = await h.startWatchdog('wd-a', { WATCHDOG_ANSWERED_HOLD_MS: '1500' });
    const { id, claimId, leaseExpiresAt } = await createAndClaim();
    const other = await createAndClaim();
    // The router accepted bob's result under the claim (its completion of the handoff is still to come).
    const recorded = (claim: string, handoff: string, result: string) => ({
      type: 'run.result_recorded',
      payload: {
        result_id: result,
        run_id: `ar-${result}`,
        agent: 'bob',
        step: 's',
        signal: { kind: 'absent' },
        handoff_id: handoff,
        claim_id: claim,
        recorded_at: new Date().toISOString(),
      },
    });
    // One result names the claim; one names a claim the other handoff does not hold (nothing held).
    await appendRunEvents(h, 'run-answered', [recorded(claimId, id, 'r-1'), recorded('c-not-held', other.id, 'r-2')]);

    await pendingAgain(other.id);
    await sleep(Math.max(0, leaseExpiresAt + 900 - Date.now())); // well past the expiry, within the hold
    expect((await h.state(id)).status).toBe('claimed');
    expect(watchdog.outcomes.filter((o) => o.deadline.handoffId === id)).toEqual([]);

    // No completion came: after expiry + hold the lease is requeued like any other.
    await pendingAgain(id);
    const [expired] = (await h.events(id)).filter((e) => e.type === 'handoff.lease_expired');
    expect(Date.parse(expired!.occurredAt)).toBeGreaterThanOrEqual(leaseExpiresAt + 1500);
  });

  it('a heartbeat before expiry prevents the requeue (until the extended lease runs out)', async () => {
    const watchdog = await h.startWatchdog('wd-a');
    const { id, claimId, leaseExpiresAt } = await createAndClaim();
    await sleep(300);
    const beat = await client.heartbeat(PROJECT, { handoff_id: id, claim_id: claimId, lease_ms: 2_500, idempotency_key: `hb-${id}` });
    expect(beat.ok).toBe(true);
    const extendedTo = Date.parse((beat.ok && beat.handoff.lease_expires_at) || '');

    await sleep(Math.max(0, leaseExpiresAt - Date.now()) + 800); // well past the original expiry
    expect((await h.state(id)).status).toBe('claimed');
    expect(await countOf(id, 'handoff.lease_expired')).toBe(0);
    expect(watchdog.outcomes.filter((o) => o.deadline.handoffId === id)).toEqual([]);

    // The watchdog was watching: the extended lease is requeued once it runs out.
    await pendingAgain(id);
    const expired = (await h.events(id)).filter((e) => e.type === 'handoff.lease_expired');
    expect(expired).toHaveLength(1);
    expect(expired[0]!.payload).toMatchObject({ lease_expires_at: new Date(extendedTo).toISOString() });
  });

  it('restart: a new watchdog rebuilds the deadlines from the events stream and requeues a lease claimed while none ran', async () => {
    const first = await h.startWatchdog('wd-first');
    const released = await createAndClaim();
    const releasedReply = await client.release(PROJECT, {
      handoff_id: released.id,
      claim_id: released.claimId,
      reason: 'no time',
      idempotency_key: `rel-${released.id}`,
    });
    expect(releasedReply.ok).toBe(true);
    await first.stop();

    const { id, claimId } = await createAndClaim();
    await sleep(LEASE_MS + 300);
    expect((await h.state(id)).status).toBe('claimed'); // expired, but nobody was watching

    const second = await h.startWatchdog('wd-second');
    const url = await second.service.app.getUrl();
    const status = await waitFor(
      async () => {
        const body = (await (await fetch(`${url}/watchdog/status`)).json()) as {
          caught_up: boolean;
          last_seq: number;
          stream: { read_seq: number; behind: number | null };
        };
        return body.caught_up && body.stream.behind === 0 ? body : undefined;
      },
      'the deadline table to catch up',
      { timeoutMs: 8000 },
    );
    expect(status.last_seq).toBeGreaterThan(0);
    // How far it has read the events stream: all of it.
    expect(status.stream.read_seq).toBeGreaterThanOrEqual(status.last_seq);

    await pendingAgain(id);
    expect(await countOf(id, 'handoff.lease_expired')).toBe(1);
    expect(second.outcomes.some((o) => o.kind === 'requeued' && o.deadline.claimId === claimId)).toBe(true);
    // A claim that ended before the restart is not rebuilt into the table.
    expect(second.outcomes.filter((o) => o.deadline.handoffId === released.id)).toEqual([]);
    expect((await h.state(released.id)).status).toBe('released');
  });
});

describe('watchdog: retry cap with no lead anywhere → stop the run', () => {
  it('with the defaults (max_retries 3, WATCHDOG_CIRCUIT_FAILURES 3) a run step that lapses again and again reaches its cap and is escalated: its lapses count once against the circuit, which stops nothing first', async () => {
    await h.startWatchdog('wd-a');
    const { id } = await createAndClaim({ maxRetries: 3, workflowRunId: 'run-cap' });
    // Three lapses requeue it (retry_count 1, 2, 3); bob claims it again each time.
    for (let lapse = 1; lapse <= 3; lapse++) {
      const state = await pendingAgain(id);
      expect(state.retry.retry_count).toBe(lapse);
      expect(await client.claim(PROJECT, { handoff_id: id, lease_ms: LEASE_MS, idempotency_key: `claim-${id}-${lapse}` })).toMatchObject({ ok: true });
    }
    // The fourth lapse is past the cap: escalated; with no lead the run is stopped guard_failed.
    const stops = await stopRequestsSoon(h, 'the escalation stop', { timeoutMs: 8000 });
    await sleep(500);
    expect((await stopRequests(h)).map((s) => [s.workflow_run_id, s.why])).toEqual([['run-cap', 'guard_failed']]);
    expect(stops[0]).toMatchObject({ cause: { kind: 'handoff_escalated', handoff_id: id } });
    expect(await h.state(id)).toMatchObject({ status: 'failed', terminal_reason: expect.stringContaining('retry cap 3 reached (lease_expired)') });
  }, 30_000);

  it('handoff.escalated with stop_why asks the router to stop the run of that handoff, once; a handoff with no run is left', async () => {
    await h.startWatchdog('wd-a');
    await h.startWatchdog('wd-b');
    const withRun = await createAndClaim({ maxRetries: 0, workflowRunId: 'run-7' });
    const withoutRun = await createAndClaim({ maxRetries: 0 });

    const inbox = batonStreamNames(h.prefix).inbox;
    const subject = stopRequestSubject(h.prefix, PROJECT);
    const message = await waitFor(
      async () => {
        try {
          return await h.nats.jsm.streams.getMessage(inbox, { last_by_subj: subject });
        } catch {
          return undefined;
        }
      },
      'a stop request',
      { timeoutMs: 8000 },
    );
    const request = StopRunRequestSchema.parse(message.json());
    const escalated = (await h.events(withRun.id)).find((e) => e.type === 'handoff.escalated')!;
    expect(escalated.payload).toMatchObject({ outcome: { stop_why: 'guard_failed' } });
    expect(request).toMatchObject({
      packet_id: stopPacketId(escalated.id),
      workflow_run_id: 'run-7',
      project: PROJECT,
      why: 'guard_failed',
      requested_by: 'baton-watchdog',
      cause: { kind: 'handoff_escalated', handoff_id: withRun.id, event_id: escalated.id },
    });
    // No lead: the cause names no consult, and the handoff is in the run's project.
    expect(Object.keys(request.cause ?? {}).sort()).toEqual(['event_id', 'handoff_id', 'kind']);

    // The stop request continues the escalation's trace (a hop of its own: same trace id, another
    // span), so one trace links the watchdog's requeue, the escalation and the run's stop.
    const traceOf = (traceparent: string | undefined) => /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(traceparent ?? '');
    const stored = await h.nats.jsm.streams.getMessage(batonStreamNames(h.prefix).events, { seq: escalated.seq });
    const escalationTrace = traceOf(stored.header.get('traceparent'));
    const requestTrace = traceOf(message.header.get('traceparent'));
    expect(escalationTrace).not.toBeNull();
    expect(requestTrace?.[1]).toBe(escalationTrace?.[1]);
    expect(requestTrace?.[2]).not.toBe(escalationTrace?.[2]);

    // The run-less handoff escalated too, but nothing was asked for it; the run's request is stored once.
    await waitFor(async () => (await countOf(withoutRun.id, 'handoff.escalated')) === 1, 'the second escalation', { timeoutMs: 8000 });
    await sleep(500);
    const info = await h.nats.jsm.streams.info(inbox, { subjects_filter: subject });
    expect(info.state.subjects?.[subject]).toBe(1);
    expect((await h.state(withRun.id)).status).toBe('failed');
  });

  it("escalated to a lead: the lead gets the consult (the ledger's policy, tested there), and the handoff's run — whose handoff is failed all the same — is stopped guard_failed naming the consult, not left waiting", async () => {
    await h.startWatchdog('wd-a');
    const handoff = await createAndClaim({ maxRetries: 0, workflowRunId: 'run-lead', escalateTo: 'carol' });
    const requests = await stopRequestsSoon(h, 'a stop request', { timeoutMs: 8000 });
    const escalated = (await h.events(handoff.id)).find((e) => e.type === 'handoff.escalated')!;
    const { outcome } = escalated.payload as { outcome: { escalate_to: string; consult_handoff_id: string } };
    expect(outcome).toMatchObject({ escalate_to: 'carol' });
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({ packet_id: stopPacketId(escalated.id), workflow_run_id: 'run-lead', project: PROJECT, why: 'guard_failed' });
    expect(requests[0]!.detail).toContain(`escalated to carol (consult ${outcome.consult_handoff_id})`);
    expect(requests[0]!.cause).toEqual({
      kind: 'handoff_escalated',
      handoff_id: handoff.id,
      event_id: escalated.id,
      consult_handoff_id: outcome.consult_handoff_id,
    });
    expect((await h.state(handoff.id)).status).toBe('failed');
  });

  it('an offer its agent gave up on before any claim, past the retry cap with nobody to escalate to: the handoff`s run is stopped guard_failed naming it — a person sees it in the inbox instead of a run waiting on a handoff offered to nobody', async () => {
    await h.startWatchdog('wd-a');
    const id = `h-${++n}`;
    const created = await client.create(
      PROJECT,
      {
        handoff_id: id,
        from_agent: 'alice',
        to_agent: 'bob',
        summary: 'write the parser',
        max_retries: 0,
        workflow_run_id: 'run-gave-up',
        idempotency_key: `create-${id}`,
      },
      { as: router },
    );
    if (!created.ok) throw new Error(`create refused: ${JSON.stringify(created.error)}`);
    const gaveUp = await client.giveUpOffer(PROJECT, {
      handoff_id: id,
      offered_version: created.handoff.version,
      deliveries: 5,
      reason: 'onOffer failed 5 times: model endpoint down',
      idempotency_key: `give_up:${id}:1`,
    });
    expect(gaveUp).toMatchObject({ ok: true, handoff: { status: 'failed', offer_given_up: { by: 'bob' } } });
    const requests = await stopRequestsSoon(h, 'a stop request', { timeoutMs: 8000 });
    const escalated = (await h.events(id)).find((e) => e.type === 'handoff.escalated')!;
    expect(escalated.payload).toMatchObject({ cause: 'offer_given_up', given_up: { by: 'bob', deliveries: 5 }, outcome: { stop_why: 'guard_failed' } });
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({
      packet_id: stopPacketId(escalated.id),
      workflow_run_id: 'run-gave-up',
      project: PROJECT,
      why: 'guard_failed',
      tried: [`handoff ${id}: 0 retries after offer_given_up`],
      cause: { kind: 'handoff_escalated', handoff_id: id, event_id: escalated.id },
    });
  });

  it('an escalation event that does not decode is rejected with its code and counted; it asks for nothing and the watchdog keeps serving', async () => {
    const watchdog = await h.startWatchdog('wd-a');
    const bad = new TextEncoder().encode('{"type":"handoff.escalated","payload":');
    const hdrs = natsHeaders();
    hdrs.set('Baton-Event-Type', 'handoff.escalated');
    await h.nats.js.publish(`${h.prefix}.ev.${PROJECT}.handoff.h-bad`, bad, { headers: hdrs });
    const invalid = natsHeaders();
    invalid.set('Baton-Event-Type', 'handoff.escalated');
    await h.nats.js.publish(
      `${h.prefix}.ev.${PROJECT}.handoff.h-invalid`,
      new TextEncoder().encode(JSON.stringify({ type: 'handoff.escalated', payload: {} })),
      { headers: invalid },
    );

    // The events follower logs each with its rejection code and goes on (the ledger's, router's and
    // notifier's durables dead-letter them); the guards' status counts them.
    const guards = watchdog.service.app.get(GuardRunner);
    await waitFor(async () => guards.status().events_rejected === 2 || undefined, 'two rejected events', { timeoutMs: 8000 });
    const url = await watchdog.service.app.getUrl();
    const status = (await (await fetch(`${url}/watchdog/status`)).json()) as { guards: { events_rejected: number; caught_up: boolean } };
    expect(status.guards).toMatchObject({ events_rejected: 2, caught_up: true });

    // Still serving: a lease claimed afterwards is requeued; nothing was asked of the router.
    const { id } = await createAndClaim();
    await pendingAgain(id);
    expect(watchdog.outcomes.some((o) => o.kind === 'requeued' && o.deadline.handoffId === id)).toBe(true);
    expect(await stopRequests(h)).toEqual([]);
    expect(guards.status().escalation_stops_requested).toBe(0);
  });

  /** Escalate a claimed handoff of `run` with no watchdog running: requeue its expired lease as the watchdog would. */
  async function escalateWhileNoWatchdog(run: string) {
    const handoff = await createAndClaim({ maxRetries: 0, workflowRunId: run });
    await sleep(Math.max(0, handoff.leaseExpiresAt - Date.now()) + 50);
    const asWatchdog = new LedgerClient(h.nats, h.prefix, { as: Principals.service('watchdog'), attempts: 1 });
    const reply = await asWatchdog.requeueExpired(PROJECT, {
      handoff_id: handoff.id,
      claim_id: handoff.claimId,
      idempotency_key: `requeue:${handoff.id}:${handoff.claimId}`,
    });
    expect(reply.ok).toBe(true);
    const escalated = (await h.events(handoff.id)).find((e) => e.type === 'handoff.escalated');
    expect(escalated?.payload).toMatchObject({ outcome: { stop_why: 'guard_failed' } });
    return { handoff, escalated: escalated! };
  }

  it('an escalation stored while no watchdog ran stops its run at the next start, once the replay has caught up', async () => {
    await route(h, 'run-live', ['bob']);
    const { handoff, escalated } = await escalateWhileNoWatchdog('run-live');

    const watchdog = await h.startWatchdog('wd-a');
    const guards = watchdog.service.app.get(GuardRunner);
    const requests = await stopRequestsSoon(h, 'a stop request', { timeoutMs: 8000 });
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({
      packet_id: stopPacketId(escalated.id),
      workflow_run_id: 'run-live',
      cause: { kind: 'handoff_escalated', handoff_id: handoff.id, event_id: escalated.id },
    });
    expect(guards.status()).toMatchObject({ caught_up: true, escalation_stops_requested: 1 });

    // A second start replays the same escalation: the run is still live (no router here to stop
    // it), so it asks again, with the same packet id, and the inbox stores the request once.
    await watchdog.stop();
    const again = await h.startWatchdog('wd-b');
    await waitFor(async () => again.service.app.get(GuardRunner).status().escalation_stops_requested === 1 || undefined, 'the replayed request', {
      timeoutMs: 8000,
    });
    expect(await stopRequests(h)).toHaveLength(1);
  });

  it('a stop request whose id another publisher took first (an agent may set any Nats-Msg-Id on its own subject) is still stored, under another id', async () => {
    await route(h, 'run-squat', ['bob']);
    const { escalated } = await escalateWhileNoWatchdog('run-squat');
    const id = `stop:${PROJECT}:${stopPacketId(escalated.id)}`;
    await h.nats.js.publish(`${h.prefix}.in.${PROJECT}.result.mallory`, new TextEncoder().encode('{}'), { msgID: id });
    await h.startWatchdog('wd-a');
    const requests = await stopRequestsSoon(h, 'a stop request', { timeoutMs: 8000 });
    expect(requests).toEqual([expect.objectContaining({ packet_id: stopPacketId(escalated.id), workflow_run_id: 'run-squat' })]);
    const stored = await h.nats.jsm.streams.getMessage(batonStreamNames(h.prefix).inbox, { last_by_subj: stopRequestSubject(h.prefix, PROJECT) });
    expect(stored.header.get('Nats-Msg-Id')).toMatch(new RegExp(`^${id}:1:\\d+$`));
  });

  it('an escalation stored while no watchdog ran asks for nothing at the next start when its run has ended since', async () => {
    await route(h, 'run-ended', ['bob']);
    await escalateWhileNoWatchdog('run-ended');
    await appendRunEvents(h, 'run-ended', [
      { type: 'run.terminated', payload: { reason: 'operator ended it', origin: 'operator', terminated_at: new Date().toISOString() } },
    ]);

    const watchdog = await h.startWatchdog('wd-a');
    const guards = watchdog.service.app.get(GuardRunner);
    await waitFor(async () => guards.status().caught_up || undefined, 'the replay to catch up', { timeoutMs: 8000 });
    await sleep(500);
    expect(await stopRequests(h)).toEqual([]);
    expect(guards.status().escalation_stops_requested).toBe(0);
  });

  it('a stop request that cannot be stored (the inbox stream gone) is retried until it is, once the stream is back', async () => {
    const watchdog = await h.startWatchdog('wd-a');
    const guards = watchdog.service.app.get(GuardRunner);
    await waitFor(async () => guards.status().caught_up || undefined, 'the follower to catch up', { timeoutMs: 8000 });
    const inbox = batonStreamNames(h.prefix).inbox;
    await h.nats.jsm.streams.delete(inbox);

    const { id } = await createAndClaim({ maxRetries: 0, workflowRunId: 'run-retry' });
    await waitFor(async () => (await countOf(id, 'handoff.escalated')) === 1 || undefined, 'the escalation', { timeoutMs: 8000 });
    await sleep(1200); // a few attempts fail: no stream stores the stop subject
    expect(guards.status().escalation_stops_requested).toBe(0);

    await provision(h.nats.jsm, { streams: batonTopology(h.prefix).streams });
    const requests = await stopRequestsSoon(h, 'the retried stop request', { timeoutMs: 15000 });
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({ workflow_run_id: 'run-retry', cause: { kind: 'handoff_escalated', handoff_id: id } });
    expect(guards.status().escalation_stops_requested).toBe(1);
  });

  /**
   * A cross-project handoff: alice (of PROJECT) delegates to bob of OTHER for her run `run`; the
   * handoff lives in OTHER with `source_project` PROJECT. Bob claims it there with `max_retries` 0,
   * so its lease expiring escalates it with a stop (no lead anywhere).
   */
  async function createCrossAndClaim(run: string) {
    const id = `hx-${++n}`;
    // Her run waits for her (its current agent): only then may she name it (`not_in_run`).
    await route(h, run, ['alice']);
    const created = await client.create(
      PROJECT,
      {
        handoff_id: id,
        from_agent: 'alice',
        to_agent: 'bob',
        summary: 'review the schema in the other project',
        max_retries: 0,
        workflow_run_id: run,
        target_project: OTHER,
        cto_override: 'dec-1',
        idempotency_key: `create-${id}`,
      },
      { as: alice },
    );
    if (!created.ok) throw new Error(`create refused: ${JSON.stringify(created.error)}`);
    expect(created.handoff).toMatchObject({ project: OTHER, source_project: PROJECT, workflow_run_id: run });
    const bobThere = new LedgerClient(h.nats, h.prefix, { as: Principals.agent(OTHER, 'bob'), attempts: 1 });
    const claimed = await bobThere.claim(OTHER, { handoff_id: id, lease_ms: LEASE_MS, idempotency_key: `claim-${id}` });
    if (!claimed.ok || !claimed.handoff.claim_id || !claimed.handoff.lease_expires_at) throw new Error(`claim refused: ${JSON.stringify(claimed)}`);
    return { id, claimId: claimed.handoff.claim_id, leaseExpiresAt: Date.parse(claimed.handoff.lease_expires_at) };
  }

  it("a cross-project handoff escalated with stop_why stops its run in the source project, never the target project's run of that id", async () => {
    // Both projects have a live run `run-x`: only the source project's is the handoff's.
    await route(h, 'run-x', ['alice']);
    await route(h, 'run-x', ['carol'], 1, OTHER);
    await h.startWatchdog('wd-a');
    const handoff = await createCrossAndClaim('run-x');

    const requests = await stopRequestsSoon(h, 'a stop request in the source project', { timeoutMs: 8000 });
    const escalated = (await h.events(handoff.id, OTHER)).find((e) => e.type === 'handoff.escalated')!;
    expect(escalated.payload).toMatchObject({ outcome: { stop_why: 'guard_failed' } });
    expect(requests).toEqual([
      expect.objectContaining({
        packet_id: stopPacketId(escalated.id),
        project: PROJECT,
        workflow_run_id: 'run-x',
        why: 'guard_failed',
        // The handoff lives in the target project: the cause says so (the run's stop records it).
        cause: { kind: 'handoff_escalated', handoff_id: handoff.id, event_id: escalated.id, project: OTHER },
      }),
    ]);
    const stored = await h.nats.jsm.streams.getMessage(batonStreamNames(h.prefix).inbox, { last_by_subj: stopRequestSubject(h.prefix, PROJECT) });
    expect(stored.header.get('Nats-Msg-Id')).toBe(`stop:${PROJECT}:${stopPacketId(escalated.id)}`);
    await sleep(500);
    expect(await stopRequests(h, OTHER)).toEqual([]);
  });

  it("a cross-project escalation stored while no watchdog ran stops the source project's run at the next start, while that run is live", async () => {
    await route(h, 'run-y', ['alice']);
    await route(h, 'run-y', ['carol'], 1, OTHER);
    const handoff = await createCrossAndClaim('run-y');
    await sleep(Math.max(0, handoff.leaseExpiresAt - Date.now()) + 50);
    const asWatchdog = new LedgerClient(h.nats, h.prefix, { as: Principals.service('watchdog'), attempts: 1 });
    const reply = await asWatchdog.requeueExpired(OTHER, {
      handoff_id: handoff.id,
      claim_id: handoff.claimId,
      idempotency_key: `requeue:${handoff.id}:${handoff.claimId}`,
    });
    expect(reply.ok).toBe(true);
    // The target project's run of the same id ends: that must not matter, the source's is live.
    await appendRunEvents(
      h,
      'run-y',
      [{ type: 'run.terminated', payload: { reason: 'operator ended it', origin: 'operator', terminated_at: new Date().toISOString() } }],
      OTHER,
    );

    const watchdog = await h.startWatchdog('wd-a');
    const requests = await stopRequestsSoon(h, 'the replayed stop request in the source project', { timeoutMs: 8000 });
    expect(requests).toEqual([
      expect.objectContaining({ project: PROJECT, workflow_run_id: 'run-y', cause: expect.objectContaining({ handoff_id: handoff.id }) }),
    ]);
    expect(watchdog.service.app.get(GuardRunner).status()).toMatchObject({ caught_up: true, escalation_stops_requested: 1 });
    expect(await stopRequests(h, OTHER)).toEqual([]);
  });

  it("the escalation stopper, reading a cross-project handoff's events itself (no run known), asks the source project to stop the run", async () => {
    const handoff = await createCrossAndClaim('run-z');
    await sleep(Math.max(0, handoff.leaseExpiresAt - Date.now()) + 50);
    const asWatchdog = new LedgerClient(h.nats, h.prefix, { as: Principals.service('watchdog'), attempts: 1 });
    await asWatchdog.requeueExpired(OTHER, { handoff_id: handoff.id, claim_id: handoff.claimId, idempotency_key: `requeue:${handoff.id}` });
    const escalated = (await h.events(handoff.id, OTHER)).find((e) => e.type === 'handoff.escalated')!;
    // No run event anywhere: the guards' replay asks nothing (the run is not known live), so the
    // only request is the one the stopper makes below from the handoff's own events.
    const watchdog = await h.startWatchdog('wd-a');
    await watchdog.service.app.get(GuardRunner).caughtUp();
    const stopper = watchdog.service.app.get(EscalationStopper);
    const result = await stopper.handle(escalated as unknown as EventEnvelope<HandoffEventData<'handoff.escalated'>>);
    expect(result).toMatchObject({ kind: 'stop_requested', request: { project: PROJECT, workflow_run_id: 'run-z' } });
    expect(await stopRequests(h)).toEqual([expect.objectContaining({ project: PROJECT, workflow_run_id: 'run-z', packet_id: stopPacketId(escalated.id) })]);
    expect(await stopRequests(h, OTHER)).toEqual([]);
  });

  it('retires the durable earlier watchdogs read escalations from (watchdog_escalations)', async () => {
    const events = batonStreamNames(h.prefix).events;
    await h.nats.jsm.consumers.add(events, {
      durable_name: 'watchdog_escalations',
      ack_policy: AckPolicy.Explicit,
      filter_subject: `${h.prefix}.ev.*.handoff.*`,
    });
    await h.startWatchdog('wd-a');
    await expect(h.nats.jsm.consumers.info(events, 'watchdog_escalations')).rejects.toThrow(/consumer not found/);
  });
});
