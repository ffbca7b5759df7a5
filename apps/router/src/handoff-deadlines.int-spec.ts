import { randomBytes } from 'node:crypto';
import { createEventRegistry, Principals, Subjects, type AgentResult, type ProjectDefinition } from '@baton/contracts';
import { compileProject, LOAN_EXAMPLE_YAML } from '@baton/definitions';
import { connectNats, JetStreamEventStore, LedgerClient, type NatsHandle, type StoredEvent } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// The real ledger and watchdog in-process (test-only cross-app imports, like meshes.int-spec.ts).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../ledger/src/ledger';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startWatchdog } from '../../watchdog/src/bootstrap';
import { startRouter } from './router.app';
import { claimHandoff, currentHandoff, deleteStreams, publishDefinition, sleep } from './int/support';

/*
 * Issue 5 through the real services over the real NATS: "A returnable handoff has a deadline: past
 * it, `handoff_completed` with outcome `timeout`, and the parent resumes according to its
 * `ON_FAILURE`. Delegation always comes back or escalates; it is never silently lost."
 *
 * Router (run aggregate, dispatch reactor, handoff-deadline reactor), ledger (handoff aggregate)
 * and watchdog (deadline loop, 200 ms ticks) run in-process on a random prefix. Seed 001's loan
 * example gets `DEADLINE: 1.5s` on its returnable route; Income_Capture_Agent never answers.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const encoder = new TextEncoder();
const DEFAULT_RESPOND = 'ON_FAILURE: RESPOND "I cannot collect your income details right now. Please try again later."';
const SORRY = 'Our income specialist did not answer in time. Please try again later.';

/** The loan example with `DEADLINE: 1.5s` and the given ON_FAILURE on its returnable route. */
function definition(project: string, onFailure: string): ProjectDefinition {
  const text = LOAN_EXAMPLE_YAML.replace('project: loans', `project: ${project}`).replace(`    ${DEFAULT_RESPOND}`, `    ${onFailure}\n    DEADLINE: 1.5s`);
  const compiled = compileProject([{ path: 'loans.yaml', text }]);
  if (compiled.project === null) throw new Error(JSON.stringify(compiled.diagnostics));
  return compiled.project;
}

describe('a returnable handoff has a deadline (issue 5; router + ledger + watchdog, real NATS)', () => {
  const prefix = `dl${randomBytes(5).toString('hex')}`;
  const env = { ...process.env, NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error', WATCHDOG_TICK_MS: '200', WATCHDOG_RETRY_MS: '300' };
  let nats: NatsHandle;
  let store: JetStreamEventStore;
  let router: RunningService | undefined;
  let ledger: RunningService | undefined;
  let watchdog: RunningService | undefined;
  let counter = 0;

  const events = async (project: string, kind: 'run' | 'handoff', id: string): Promise<StoredEvent[]> => (await store.read({ project, kind, id })).events;
  const payloads = async (project: string, runId: string, type: string) =>
    (await events(project, 'run', runId)).filter((e) => e.type === type).map((e) => e.payload as Record<string, unknown>);
  const waitEvent = (project: string, runId: string, type: string) => waitFor(async () => (await payloads(project, runId, type))[0], `${type} on ${runId}`);

  const start = async (project: string) => {
    const id = `wr-${++counter}`;
    const body = { workflow_run_id: id, project, workflow: 'loan_session', started_by: 'sam', input: 'I want a loan offer' };
    await nats.js.publish(Subjects.runStart(prefix, project), encoder.encode(JSON.stringify(body)));
    const handoff = await waitEvent(project, id, 'run.handoff');
    expect(handoff).toMatchObject({ to: 'Income_Capture_Agent', returnExpected: true });
    return { run: id, handoffId: String(handoff['handoffId']) };
  };
  /** An agent's result as its SDK sends it: the run's current handoff (created by the ledger) claimed first (claim rule, docs/runs.md). */
  const reply = async (project: string, runId: string, agent: string, extra: Partial<AgentResult> = {}) => {
    const id = `res-${++counter}`;
    const current = await currentHandoff(store, project, runId);
    const claim =
      current === null
        ? {}
        : { handoff_id: current.handoffId, claim_id: (await claimHandoff(store, project, current.handoffId, agent, { create: false })) ?? 'claim-not-held' };
    const result: AgentResult = {
      result_id: id,
      run_id: `ar-${id}`,
      project,
      workflow_run_id: runId,
      agent,
      produced_at: new Date().toISOString(),
      ...claim,
      ...extra,
    };
    return nats.js.publish(Subjects.agentResult(prefix, project, agent), encoder.encode(JSON.stringify(result)));
  };
  /** The child agent, as its SDK would, takes its handoff in `dlended`: the ledger client and the claim id. */
  const claimAsChild = async (handoffId: string) => {
    const child = new LedgerClient(nats, prefix, { as: Principals.agent('dlended', 'Income_Capture_Agent') });
    const claimed = await child.claim('dlended', { handoff_id: handoffId, idempotency_key: `claim-${handoffId}` });
    expect(claimed.ok).toBe(true);
    return { child, claimId: claimed.ok ? claimed.handoff.claim_id! : '' };
  };
  /** The ledger's handoff.created of the child: it carries deadline_at = the route's time + 1.5 s. */
  const childCreated = (project: string, handoffId: string) =>
    waitFor(async () => (await events(project, 'handoff', handoffId)).find((e) => e.type === 'handoff.created'), `the ledger handoff ${handoffId}`);

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    ledger = await startLedger(env);
    router = await startRouter(env);
    watchdog = await startWatchdog({ env });
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    for (const [project, onFailure] of [
      ['dlrespond', `ON_FAILURE: RESPOND "${SORRY}"`],
      ['dlcontinue', 'ON_FAILURE: continue'],
      ['dlescalate', 'ON_FAILURE: ESCALATE'],
    ] as const) {
      expect(await publishDefinition(nats, prefix, project, definition(project, onFailure))).toMatchObject({ ok: true });
    }
    // The loan example as written (its RESPOND, the default deadline): a child that fails its handoff itself.
    const plain = compileProject([{ path: 'loans.yaml', text: LOAN_EXAMPLE_YAML.replace('project: loans', 'project: dlended') }]).project!;
    expect(await publishDefinition(nats, prefix, 'dlended', plain)).toMatchObject({ ok: true });
  }, 30_000);

  afterAll(async () => {
    await watchdog?.stop();
    await router?.stop();
    await ledger?.stop();
    await deleteStreams(nats, prefix);
    await nats.close();
  }, 30_000);

  it('a child that never returns: past the deadline the run records handoff_completed (timeout) and the parent resumes per ON_FAILURE RESPOND', async () => {
    const { run, handoffId } = await start('dlrespond');
    const created = await childCreated('dlrespond', handoffId);
    const routedAt = Date.parse(String((await waitEvent('dlrespond', run, 'run.routed'))['routed_at']));
    expect(Date.parse(String((created.payload as { deadline_at?: string }).deadline_at))).toBe(routedAt + 1500);

    const completed = await waitFor(
      async () => (await payloads('dlrespond', run, 'run.handoff_completed')).find((p) => p['outcome'] === 'timeout'),
      'the timeout',
    );
    expect(completed).toMatchObject({
      handoffId,
      from: 'Loan_Supervisor',
      to: 'Income_Capture_Agent',
      code: 'deadline',
      onFailure: 'respond',
      cause: expect.stringMatching(/^deadline_expired: /),
    });
    expect(completed['durationMs']).toBeGreaterThanOrEqual(1500);
    const resumed = await waitEvent('dlrespond', run, 'run.awaiting_input');
    expect(resumed).toMatchObject({ agent: 'Loan_Supervisor', reply: SORRY });
    // The ledger's side: the child handoff failed with terminal_reason deadline, exactly once.
    const handoffEvents = await events('dlrespond', 'handoff', handoffId);
    expect(handoffEvents.filter((e) => e.type === 'handoff.deadline_expired')).toHaveLength(1);
    // Applied once, even though the handoff-event consumer keeps running.
    await sleep(600);
    expect((await payloads('dlrespond', run, 'run.handoff_completed')).filter((p) => p['outcome'] === 'timeout')).toHaveLength(1);
  }, 20_000);

  it('a child that fails its handoff (or a person who abandons it) is a failure of the route, not a wait: handoff_completed (error) and ON_FAILURE at once, not at the deadline', async () => {
    const { run, handoffId } = await start('dlended');
    await childCreated('dlended', handoffId);
    const { child, claimId } = await claimAsChild(handoffId);
    const failed = await child.fail('dlended', {
      handoff_id: handoffId,
      claim_id: claimId,
      reason: 'the income service is down',
      idempotency_key: `fail-${handoffId}`,
    });
    expect(failed.ok).toBe(true);
    const completed = await waitFor(async () => (await payloads('dlended', run, 'run.handoff_completed')).find((p) => p['outcome'] === 'error'), 'the failure');
    expect(completed).toMatchObject({
      handoffId,
      to: 'Income_Capture_Agent',
      code: 'handoff_failed',
      onFailure: 'respond',
      cause: 'handoff_ended: failed by Income_Capture_Agent: the income service is down',
    });
    expect(await waitEvent('dlended', run, 'run.awaiting_input')).toMatchObject({ agent: 'Loan_Supervisor' });
  }, 20_000);

  it('seed 001: a child whose agent gave up on the offer before claiming it (give_up_offer, as the SDK sends after maxDeliver) failed before it accepted: ON_FAILURE at once, no retry round', async () => {
    const { run, handoffId } = await start('dlended');
    const created = await childCreated('dlended', handoffId);
    const child = new LedgerClient(nats, prefix, { as: Principals.agent('dlended', 'Income_Capture_Agent') });
    const gaveUp = await child.giveUpOffer('dlended', {
      handoff_id: handoffId,
      offered_version: 1,
      deliveries: 5,
      reason: 'onOffer threw: no model credentials',
      idempotency_key: `give_up:${handoffId}:${created.id}`,
    });
    expect(gaveUp).toMatchObject({
      ok: true,
      handoff: { status: 'failed', offer_given_up: { by: 'Income_Capture_Agent', deliveries: 5, reason: 'onOffer threw: no model credentials' } },
    });
    const completed = await waitFor(async () => (await payloads('dlended', run, 'run.handoff_completed')).find((p) => p['outcome'] === 'error'), 'the give-up');
    expect(completed).toMatchObject({
      handoffId,
      code: 'handoff_failed',
      onFailure: 'respond',
      cause:
        'handoff_ended: failed by Income_Capture_Agent: offer given up unclaimed by Income_Capture_Agent after 5 deliveries: onOffer threw: no model credentials',
    });
    expect(await waitEvent('dlended', run, 'run.awaiting_input')).toMatchObject({ agent: 'Loan_Supervisor' });
  }, 20_000);

  it('a child that releases its handoff (declines it: a released handoff is never offered again) is a failure of the route too: handoff_completed (error), ON_FAILURE at once', async () => {
    const { run, handoffId } = await start('dlended');
    await childCreated('dlended', handoffId);
    const { child, claimId } = await claimAsChild(handoffId);
    const released = await child.release('dlended', {
      handoff_id: handoffId,
      claim_id: claimId,
      reason: 'not my kind of work',
      idempotency_key: `release-${handoffId}`,
    });
    expect(released).toMatchObject({ ok: true, handoff: { status: 'released' } });
    const completed = await waitFor(async () => (await payloads('dlended', run, 'run.handoff_completed')).find((p) => p['outcome'] === 'error'), 'the release');
    expect(completed).toMatchObject({
      handoffId,
      code: 'handoff_released',
      onFailure: 'respond',
      cause: 'handoff_ended: released by Income_Capture_Agent: not my kind of work',
    });
    expect(await waitEvent('dlended', run, 'run.awaiting_input')).toMatchObject({ agent: 'Loan_Supervisor' });
  }, 20_000);

  it('a child that returns its handoff (a report for review, not a result) and whose handback is accepted ended without a result: handoff_completed (error, handoff_returned), ON_FAILURE at once — the run never waits on a closed handoff', async () => {
    const { run, handoffId } = await start('dlended');
    await childCreated('dlended', handoffId);
    const { child, claimId } = await claimAsChild(handoffId);
    const returned = await child.return('dlended', {
      handoff_id: handoffId,
      claim_id: claimId,
      report: { summary: 'income collected elsewhere', outcome: 'completed', evidence: { tests_run: ['income.spec: 3 passed'] } },
      idempotency_key: `return-${handoffId}`,
    });
    expect(returned).toMatchObject({ ok: true, handoff: { status: 'returned' } });
    const record = returned.ok ? returned.handoff : null;
    // While the handback is under review the run waits: nothing has ended yet.
    await sleep(300);
    expect((await payloads('dlended', run, 'run.handoff_completed')).filter((p) => p['outcome'] === 'error')).toEqual([]);
    // The reviewer (the delegator, or a person when there is none) accepts it: the handoff is completed, and no result ever came.
    const recipient = record!.handback_recipient!;
    const reviewer =
      'to_agent' in recipient
        ? new LedgerClient(nats, prefix, { as: Principals.agent('dlended', recipient.to_agent) })
        : new LedgerClient(nats, prefix, { as: Principals.operator('admin') });
    const handbackId = record!.handback_id!;
    await waitFor(async () => (await events('dlended', 'handoff', handbackId)).length > 0 || undefined, `the handback ${handbackId}`);
    expect(await reviewer.decideHandback('dlended', { handoff_id: handbackId, decision: 'accept', idempotency_key: `accept-${handbackId}` })).toMatchObject({
      ok: true,
    });
    const completed = await waitFor(async () => (await payloads('dlended', run, 'run.handoff_completed')).find((p) => p['outcome'] === 'error'), 'the ending');
    expect(completed).toMatchObject({
      handoffId,
      code: 'handoff_returned',
      onFailure: 'respond',
      cause: expect.stringMatching(/^handoff_ended: returned, its handback accepted by \S+: handback /),
    });
    expect(await waitEvent('dlended', run, 'run.awaiting_input')).toMatchObject({ agent: 'Loan_Supervisor' });
  }, 20_000);

  it('ON_FAILURE continue: past the deadline the parent gets control back and waits for the customer', async () => {
    const { run } = await start('dlcontinue');
    const completed = await waitFor(
      async () => (await payloads('dlcontinue', run, 'run.handoff_completed')).find((p) => p['outcome'] === 'timeout'),
      'the timeout',
    );
    expect(completed).toMatchObject({ onFailure: 'continue' });
    expect(await waitEvent('dlcontinue', run, 'run.awaiting_input')).toMatchObject({ agent: 'Loan_Supervisor', reply: null });
  }, 20_000);

  it('ON_FAILURE ESCALATE: past the deadline the run is held for a person with one notice — delegation escalates, never silently lost', async () => {
    const { run } = await start('dlescalate');
    const completed = await waitFor(
      async () => (await payloads('dlescalate', run, 'run.handoff_completed')).find((p) => p['outcome'] === 'timeout'),
      'the timeout',
    );
    expect(completed).toMatchObject({ onFailure: 'escalate' });
    expect(await waitEvent('dlescalate', run, 'run.held')).toMatchObject({ pending_target: { agent: 'Loan_Supervisor' } });
    expect(await payloads('dlescalate', run, 'run.notice_emitted')).toHaveLength(1);
  }, 20_000);

  it('a child that answers before the deadline: its handoff completes, nothing expires, and no timeout is recorded', async () => {
    const { run, handoffId } = await start('dlrespond');
    await childCreated('dlrespond', handoffId);
    await reply('dlrespond', run, 'Income_Capture_Agent', { body: 'What is your annual income?' });
    expect(await waitEvent('dlrespond', run, 'run.awaiting_input')).toMatchObject({ agent: 'Income_Capture_Agent' });
    await sleep(2500); // well past the 1.5 s deadline, with 200 ms watchdog ticks
    const outcomes = (await payloads('dlrespond', run, 'run.handoff_completed')).map((p) => p['outcome']);
    expect(outcomes).toEqual(['success']);
    expect((await events('dlrespond', 'handoff', handoffId)).map((e) => e.type)).not.toContain('handoff.deadline_expired');
  }, 20_000);
});
