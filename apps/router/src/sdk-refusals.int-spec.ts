import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Principals, Subjects } from '@baton/contracts';
import { deploymentStreamNames, connectNats, LedgerClient, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
import {
  ClaimLostError,
  createBatonClient,
  LedgerCommandError,
  NotClaimedError,
  publishMeshResult,
  startMesh,
  type BatonAgent,
  type HandoffOffer,
  type OfferSubscription,
  type ResultRefusal,
} from '@baton/sdk';
// The real ledger and watchdog in-process with the router (test-only cross-app imports, like
// circuit-guard.int-spec.ts): the SDK proven against what the services say. It lives here, not in
// libs/sdk, because the router's own specs use the SDK (a spec of the SDK starting the router would
// make the projects depend on each other).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../ledger/src/ledger';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startWatchdog } from '../../watchdog/src/bootstrap';
import { startRouter } from './router.app';

/*
 * What an agent hears when its work is refused or taken away, through the real services over the
 * real NATS (ledger, router and watchdog in process, a random prefix). Today's mesh audit:
 *
 * - a claim kept past its handoff's deadline (or abandoned under it) was lost with
 *   `handoff_not_claimed` and the advice "claim() it again", though the handoff had ENDED: the SDK
 *   now says how from the ledger's refusal (`lostBy` `deadline_passed`…, `handoffEnded`) and gives
 *   no such advice;
 * - a late mesh turn (or workflow result) resolved `{ seq }` and its refusal was only in the mesh
 *   view, which an agent may not read: the router now tells the agent (`onResultRefused`).
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const P = 'refusals';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

const definition = {
  project: P,
  lead: 'lena',
  agents: [{ name: 'alice' }, { name: 'bob' }, { name: 'carol' }, { name: 'lena' }],
  workflows: [
    {
      name: 'ship',
      version: 1,
      entry: 'code',
      steps: [
        { id: 'code', agent: 'bob', next: 'review' },
        { id: 'review', agent: 'carol', terminal: true },
      ],
    },
  ],
  meshes: [{ name: 'duo', entry: 'bob', handoffs: { bob: ['carol'], carol: ['bob'] }, outputs: ['bob'], max_iterations: 4 }],
};

/** One offer bob took, and what its signal was aborted with. */
interface Taken {
  offer: HandoffOffer;
  claimId: string;
  aborted: Promise<unknown>;
}

describe('an agent hears why its claim was lost and that its result was refused (SDK, real ledger, router and watchdog)', () => {
  const prefix = `rf${randomBytes(5).toString('hex')}`;
  const env = { ...process.env, NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error', WATCHDOG_TICK_MS: '200', WATCHDOG_RETRY_MS: '300' };
  let nats: NatsHandle;
  let ledger: RunningService | undefined;
  let router: RunningService | undefined;
  let watchdog: RunningService | undefined;
  let bob: BatonAgent;
  let carol: BatonAgent;
  let offers: OfferSubscription;
  const bobHeard: ResultRefusal[] = [];
  const carolHeard: ResultRefusal[] = [];
  /** bob's offers, by handoff id: the first offer of each is claimed, one offered again (requeued) is let go. */
  const taken = new Map<string, Taken>();
  let finishWork: () => void = () => undefined;
  const workDone = new Promise<void>((resolve) => (finishWork = resolve));

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'sdk-refusals-int', reconnect: false });
    ledger = await startLedger(env);
    router = await startRouter(env);
    watchdog = await startWatchdog({ env });
    const published = await nats.connection.request(Subjects.routerCommand(prefix, P, 'publish_definition'), encoder.encode(JSON.stringify(definition)), {
      timeout: 10_000,
    });
    expect(JSON.parse(decoder.decode(published.data))).toMatchObject({ ok: true });
    bob = await createBatonClient({ nats, prefix, project: P, agent: 'bob', onResultRefused: (refusal) => void bobHeard.push(refusal) });
    carol = await createBatonClient({ nats, prefix, project: P, agent: 'carol', onResultRefused: (refusal) => void carolHeard.push(refusal) });
    offers = await bob.handoffs({
      concurrency: 4,
      onOffer: async (offer) => {
        if (taken.has(offer.handoffId)) return;
        // A deadline's handoff is worked under a long, beaten lease (as the audit's child kept it);
        // a run step or a mesh turn under a 1 s lease nobody beats, so that it lapses.
        const long = offer.handoffId.startsWith('h-deadline');
        const claimed = await offer.claim(long ? { leaseMs: 60_000 } : { leaseMs: 1_000, autoHeartbeat: false });
        const aborted = new Promise<unknown>((resolve) => offer.signal.addEventListener('abort', () => resolve(offer.signal.reason), { once: true }));
        taken.set(offer.handoffId, { offer, claimId: claimed.claim_id!, aborted });
        await Promise.race([aborted, workDone]);
      },
    });
  }, 40_000);

  afterAll(async () => {
    finishWork();
    await offers?.stop();
    await carol?.close();
    await bob?.close();
    await watchdog?.stop();
    await router?.stop();
    await ledger?.stop();
    for (const stream of deploymentStreamNames(prefix)) await nats.jsm.streams.delete(stream).catch(() => undefined);
    await nats.close();
  }, 40_000);

  /** bob's claim of `handoffId`, once its handler took it. */
  const takenOf = (handoffId: string) => waitFor(() => taken.get(handoffId), `bob's claim of ${handoffId}`, { timeoutMs: 15_000 });
  /** What the signal of bob's claim of `handoffId` was aborted with. */
  const lostClaim = async (handoffId: string): Promise<{ taken: Taken; reason: unknown }> => {
    const claim = await takenOf(handoffId);
    const reason = await Promise.race([claim.aborted, new Promise((resolve) => setTimeout(() => resolve('still working'), 15_000))]);
    return { taken: claim, reason };
  };

  it("a claim kept past its handoff's deadline is lost with lostBy deadline_passed: the handoff ended, and nothing tells the agent to claim it again", async () => {
    const alice = new LedgerClient(nats, prefix, { as: Principals.agent(P, 'alice') });
    const created = await alice.create(P, {
      handoff_id: 'h-deadline',
      from_agent: 'alice',
      to_agent: 'bob',
      summary: 'summarise the incident before the call',
      deadline_at: new Date(Date.now() + 2_000).toISOString(),
      idempotency_key: 'create-h-deadline',
    });
    expect(created).toMatchObject({ ok: true });

    const { taken: claim, reason } = await lostClaim('h-deadline');
    // The watchdog failed it at its deadline; the ledger's notice made the SDK ask, and its refusal says how it ended.
    expect(reason).toBeInstanceOf(ClaimLostError);
    expect(reason).toMatchObject({
      code: 'claim_lost',
      lostBy: 'deadline_passed',
      handoffEnded: true,
      handoffId: 'h-deadline',
      refusal: { code: 'handoff_not_claimed', details: { status: 'failed', ended: 'deadline_passed' } },
    });
    expect((reason as Error).message).toMatch(/passed its deadline/);
    expect((reason as Error).message).not.toMatch(/claim\(\) it again/);

    // What the helpers say after it: nothing sent, and no "claim() it again" for an ended handoff.
    const failed = await claim.offer.fail('out of time').catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(NotClaimedError);
    expect(failed).toMatchObject({ code: 'not_claimed', lostBy: 'deadline_passed', handoffEnded: true });
    expect((failed as Error).message).toMatch(/the handoff has ended: there is nothing to claim again/);
    expect((failed as Error).message).not.toMatch(/claim\(\) it again/);
    // And indeed: claiming it again is refused, the refusal naming the same ending.
    const again = await claim.offer.claim().catch((error: unknown) => error);
    expect(again).toBeInstanceOf(LedgerCommandError);
    expect(again).toMatchObject({ code: 'handoff_not_pending', details: { status: 'failed', ended: 'deadline_passed' } });
  }, 30_000);

  it('a late mesh turn (its 1 s claim lapsed and was requeued) is refused by the router, and bob hears it: onResultRefused, of turn, handoff_not_claimed; carol hears nothing', async () => {
    const meshRunId = 'm-late-1';
    await startMesh(bob.meshPublisher(), { mesh_run_id: meshRunId, project: P, mesh: 'duo', input: 'my invoice is wrong', started_by: 'sam' });
    const handoffId = await waitFor(() => [...taken.keys()].find((id) => id.startsWith('mh-') && id.includes(meshRunId)), `bob's turn of ${meshRunId}`, {
      timeoutMs: 15_000,
    });
    const { taken: claim, reason } = await lostClaim(handoffId);
    // The handoff is open again (requeued, offered again): claiming again can work — said so, not "ended".
    expect(reason).toMatchObject({ code: 'claim_lost', lostBy: 'handoff_requeued', handoffEnded: false });

    // The turn bob's model produced meanwhile, published under the lapsed claim: stored, then refused.
    const receipt = await publishMeshResult(bob.meshPublisher(), {
      project: P,
      mesh_run_id: meshRunId,
      agent: 'bob',
      result_id: 'turn-late',
      text: 'Here is your corrected invoice.',
      handoff_id: handoffId,
      claim_id: claim.claimId,
    });
    expect(receipt.seq).toBeGreaterThan(0);
    const heard = await waitFor(() => bobHeard.find((r) => r.result_id === 'turn-late'), 'bob told its turn was refused');
    expect(heard).toEqual({
      project: P,
      agent: 'bob',
      of: 'turn',
      workflow_run_id: meshRunId,
      result_id: 'turn-late',
      code: 'handoff_not_claimed',
      seq: expect.any(Number),
      at: expect.any(String),
      publishedHere: true,
    });
    expect(carolHeard).toEqual([]);
  }, 30_000);

  it('a late workflow result is told the same way: of result, with the handoff and the claim it named', async () => {
    const run = 'wr-late-1';
    await bob.startRun({ workflow_run_id: run, workflow: 'ship', started_by: 'sam', input: 'ship the parser' });
    const handoffId = await waitFor(() => [...taken.keys()].find((id) => id.startsWith('ho-') && id.includes(run)), `bob's step of ${run}`, {
      timeoutMs: 15_000,
    });
    const { taken: claim, reason } = await lostClaim(handoffId);
    expect(reason).toMatchObject({ code: 'claim_lost', lostBy: 'handoff_requeued', handoffEnded: false });
    // offer.finish refuses to send under a lost claim; an agent that publishes the result itself is told by the router.
    await expect(claim.offer.finish({ body: 'done' })).rejects.toMatchObject({ code: 'not_claimed', lostBy: 'handoff_requeued', handoffEnded: false });
    await bob.publishResult({ result_id: 'res-late', run_id: 'ar-late', workflow_run_id: run, handoff_id: handoffId, claim_id: claim.claimId, body: 'done' });
    const heard = await waitFor(() => bobHeard.find((r) => r.result_id === 'res-late'), 'bob told its result was refused');
    expect(heard).toEqual({
      project: P,
      agent: 'bob',
      of: 'result',
      workflow_run_id: run,
      result_id: 'res-late',
      handoff_id: handoffId,
      claim_id: claim.claimId,
      code: 'handoff_not_claimed',
      seq: expect.any(Number),
      at: expect.any(String),
      publishedHere: true,
    });
    // Only its own refusals, each once.
    expect(bobHeard.filter((r) => r.result_id === 'res-late')).toHaveLength(1);
    expect(bobHeard.every((r) => r.agent === 'bob' && ['turn-late', 'res-late'].includes(r.result_id))).toBe(true);
    expect(carolHeard).toEqual([]);
  }, 30_000);
});
