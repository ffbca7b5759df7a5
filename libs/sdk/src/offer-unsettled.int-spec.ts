import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { createEventRegistry, Principals } from '@baton/contracts';
import { EventStoreError, JetStreamEventStore, LedgerClient, batonStreamNames, connectNats, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// Test only: boots the real ledger service in-process, so the SDK is proven against the real protocol.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../../apps/ledger/src/ledger';
import {
  createBatonClient,
  InvalidInputError,
  OfferTerminatedError,
  OfferUnsettledError,
  startMesh,
  type BatonAgent,
  type HandoffOffer,
  type HandoffsOptions,
} from './index';
import { storeDefinition } from './definition.int-support';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as int/servers is
import { removeDeploymentStreams } from '../../eventstore/src/int/cleanup';

/*
 * docs/handoffs.md rule 5a from the SDK's side, for a handler that does not throw: an `onOffer`
 * that returns without claiming (nor giving the offer up) used to be acknowledged, leaving its
 * handoff pending, offered to nobody, its run waiting and no person told. Now such a return is a
 * failed delivery (told once per offer, `offer_unsettled`), given up to the ledger after
 * `maxDeliver`; `offer.giveUp(reason)` declines an offer at once. Also: the numeric options of
 * `handoffs()` are checked before anything is sent, and a closed client's calls fail
 * `connection_closed`. Against the shared NATS with a prefix of its own and the real ledger in process.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const P = 'shop';

describe('an offer its handler leaves unsettled is never acknowledged into silence (real ledger in-process, real NATS)', () => {
  const prefix = `tu${randomBytes(5).toString('hex')}`;
  let nats: NatsHandle;
  let ledger: RunningService;
  let store: JetStreamEventStore;
  let delegator: LedgerClient;
  const agents: BatonAgent[] = [];

  const eventsOf = async (id: string) => (await store.read({ project: P, kind: 'handoff', id })).events;
  const create = (id: string, to: string, maxRetries: number) =>
    delegator.create(P, { handoff_id: id, from_agent: 'alice', to_agent: to, summary: `work ${id}`, max_retries: maxRetries, idempotency_key: `create-${id}` });
  const ended = (id: string) =>
    waitFor(
      async () => {
        const record = await delegator.get(P, id);
        return record?.status === 'failed' ? record : undefined;
      },
      `${id} escalated`,
      { timeoutMs: 15_000 },
    );

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'sdk-unsettled-int', reconnect: false });
    ledger = await startLedger({ ...process.env, BATON_PREFIX: prefix, BATON_INSTANCE: 'sdk-unsettled', HTTP_PORT: '0', LOG_LEVEL: 'error' });
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    const names = ['alice', 'bob', 'carol', 'dave', 'erin', 'lena'];
    await storeDefinition(nats, prefix, { project: P, lead: 'lena', agents: names.map((name) => ({ name })), workflows: [] });
    delegator = new LedgerClient(nats, prefix, { as: Principals.agent(P, 'alice') });
  });

  afterAll(async () => {
    await Promise.all(agents.map((agent) => agent.close({ timeoutMs: 0 }).catch(() => undefined)));
    await ledger?.stop();
    try {
      await removeDeploymentStreams(nats, prefix);
    } finally {
      await nats.close();
    }
  });

  async function subscribe(name: string, onOffer: HandoffsOptions['onOffer']) {
    const agent = await createBatonClient({ nats, prefix, project: P, agent: name });
    agents.push(agent);
    const errors: unknown[] = [];
    const subscription = await agent.handoffs({ onOffer, maxDeliver: 2, backoffMs: [50], onError: (error) => void errors.push(error) });
    return { agent, errors, subscription };
  }

  it('MED-1: a handler that returns without claiming is a failed delivery, told once per offer (offer_unsettled); past maxDeliver the offer is given up to the ledger, which offers it again and, at its retry cap, escalates it to the lead — not left pending for nobody', async () => {
    const deliveries: number[] = [];
    const { errors, subscription } = await subscribe('bob', (offer) => {
      if (offer.handoffId !== 'h-ignored') return;
      deliveries.push(offer.deliveryCount); // "not now": returns without a claim
    });
    try {
      expect(await create('h-ignored', 'bob', 1)).toMatchObject({ ok: true });
      const failed = await ended('h-ignored');
      expect(failed).toMatchObject({
        status: 'failed',
        retry: { max_retries: 1, retry_count: 1 },
        terminal_reason: 'retry cap 1 reached (offer_given_up); escalated to lena',
        offer_given_up: { by: 'bob', deliveries: 2, reason: 'onOffer returned without claiming or giving up the offer, 2 times' },
      });
      expect((await eventsOf('h-ignored')).map((e) => ({ type: e.type, actor: e.actor }))).toEqual([
        { type: 'handoff.created', actor: 'alice' },
        { type: 'handoff.offer_given_up', actor: 'bob' },
        { type: 'handoff.escalated', actor: 'bob' },
      ]);
      // Two rounds of maxDeliver deliveries: the first offer, then the one the give-up caused.
      expect(deliveries).toEqual([1, 2, 1, 2]);
      const terminated = await waitFor(() => {
        const list = errors.filter((e): e is OfferTerminatedError => e instanceof OfferTerminatedError);
        return list.length === 2 ? list : undefined;
      }, 'both terminations reported');
      expect(terminated.map((e) => ({ code: e.code, handoffId: e.handoffId, cause: (e.cause as Error).name }))).toEqual([
        { code: 'offer_terminated', handoffId: 'h-ignored', cause: 'OfferUnsettledError' },
        { code: 'offer_terminated', handoffId: 'h-ignored', cause: 'OfferUnsettledError' },
      ]);
      // Warned once per offer message (its first delivery), not once per delivery.
      const warned = errors.filter((e): e is OfferUnsettledError => e instanceof OfferUnsettledError);
      expect(warned.map((e) => ({ code: e.code, handoffId: e.handoffId, deliveryCount: e.deliveryCount }))).toEqual([
        { code: 'offer_unsettled', handoffId: 'h-ignored', deliveryCount: 1 },
        { code: 'offer_unsettled', handoffId: 'h-ignored', deliveryCount: 1 },
      ]);
      expect(new Set(warned.map((e) => e.seq)).size).toBe(2);
      expect(warned[0]!.message).toMatch(/onOffer returned without claiming handoff h-ignored .*offer\.giveUp\(reason\)/);
    } finally {
      await subscription.stop();
    }
  }, 30_000);

  it('offer.giveUp(reason) declines an offer at once: the ledger records the reason and offers it again, then escalates at the cap; no warning, no termination', async () => {
    const deliveries: number[] = [];
    const answers: unknown[] = [];
    const { errors, subscription } = await subscribe('carol', async (offer: HandoffOffer) => {
      if (offer.handoffId !== 'h-declined') return;
      deliveries.push(offer.deliveryCount);
      answers.push(await offer.giveUp('not my language: Rust only'));
    });
    try {
      expect(await create('h-declined', 'carol', 1)).toMatchObject({ ok: true });
      const failed = await ended('h-declined');
      expect(failed).toMatchObject({
        status: 'failed',
        terminal_reason: 'retry cap 1 reached (offer_given_up); escalated to lena',
        offer_given_up: { by: 'carol', deliveries: 1, reason: 'not my language: Rust only' },
      });
      expect(deliveries).toEqual([1, 1]);
      expect(answers).toEqual([
        expect.objectContaining({ status: 'pending', retry: { max_retries: 1, retry_count: 1 } }),
        expect.objectContaining({ status: 'failed' }),
      ]);
      expect((await eventsOf('h-declined')).map((e) => e.type)).toEqual(['handoff.created', 'handoff.offer_given_up', 'handoff.escalated']);
      // Settled: acknowledged, never delivered again, nothing told.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(deliveries).toEqual([1, 1]);
      expect(errors).toEqual([]);
    } finally {
      await subscription.stop();
    }
  }, 30_000);

  it('a handoff that is not this agent’s to take (tryClaim resolves null) settles its offer: acknowledged once, no warning; a blank give-up reason is refused before it is sent', async () => {
    // Dave claims it through the ledger before his subscription reads the offer.
    const daveLedger = new LedgerClient(nats, prefix, { as: Principals.agent(P, 'dave') });
    expect(await create('h-taken', 'dave', 1)).toMatchObject({ ok: true });
    expect(await daveLedger.claim(P, { handoff_id: 'h-taken', idempotency_key: 'claim-h-taken-elsewhere' })).toMatchObject({ ok: true });
    const seen: Array<{ delivery: number; claimed: unknown; blank: unknown }> = [];
    const { errors, subscription } = await subscribe('dave', async (offer) => {
      if (offer.handoffId !== 'h-taken') return;
      const blank = await offer.giveUp('   ').catch((error: unknown) => error);
      seen.push({ delivery: offer.deliveryCount, claimed: await offer.tryClaim(), blank });
    });
    try {
      await waitFor(() => seen.length > 0 || undefined, 'the offer handled');
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ delivery: 1, claimed: null });
      expect(seen[0]!.blank).toBeInstanceOf(InvalidInputError);
      expect(seen[0]!.blank).toMatchObject({ code: 'schema_violation' });
      expect(errors).toEqual([]);
      expect((await eventsOf('h-taken')).map((e) => e.type)).toEqual(['handoff.created', 'handoff.claimed']);
    } finally {
      await subscription.stop();
    }
  }, 30_000);

  it('LOW-4: handoffs() refuses a numeric option out of its range with InvalidInputError (schema_violation, the option named), before anything is sent', async () => {
    const agent = await createBatonClient({ nats, prefix, project: P, agent: 'erin' });
    agents.push(agent);
    const onOffer = () => undefined;
    const cases: Array<[Partial<HandoffsOptions>, string]> = [
      [{ concurrency: 0 }, 'concurrency'],
      [{ concurrency: 1.5 }, 'concurrency'],
      [{ maxDeliver: 0 }, 'maxDeliver'],
      [{ maxDeliver: Number.NaN }, 'maxDeliver'],
      [{ ackWaitMs: 10 }, 'ackWaitMs'],
      [{ backoffMs: [] }, 'backoffMs'],
      [{ backoffMs: [100, -1] }, 'backoffMs.1'],
    ];
    for (const [options, path] of cases) {
      const refused = await agent.handoffs({ onOffer, ...options }).then(
        (subscription) => subscription.stop().then(() => null),
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(InvalidInputError);
      expect(refused).toMatchObject({ code: 'schema_violation' });
      expect((refused as InvalidInputError).rejection.issues.map((issue) => issue.path)).toEqual([path]);
    }
    // Nothing was sent: the ledger never opened erin's durable.
    const durables: string[] = [];
    for await (const info of nats.jsm.consumers.list(batonStreamNames(prefix).inbox)) durables.push(info.config.filter_subject ?? '');
    expect(durables).not.toContain(`${prefix}.in.${P}.offer.erin`);
  }, 30_000);

  it('LOW-6: after agent.close() every publish and handoffs() fail at once with connection_closed (never store_error) — its own connection and a shared one alike', async () => {
    const own = await createBatonClient({ natsUrl: NATS_URL, prefix, project: P, agent: 'erin' });
    const shared = await createBatonClient({ nats, prefix, project: P, agent: 'erin' });
    for (const agent of [own, shared]) {
      await agent.close();
      const calls: Array<Promise<unknown>> = [
        agent.publishResult({ result_id: 'r-1', run_id: 'r-1', workflow_run_id: 'wr-1', handoff_id: 'ho-s-wr-1', claim_id: 'c-1', body: 'done' }),
        agent.startRun({ workflow_run_id: 'wr-closed', workflow: 'ship', started_by: 'sam' }),
        agent.sendMessage({ workflow_run_id: 'wr-closed', message_id: 'm-1', text: 'hello' }),
        startMesh(agent.meshPublisher(), { project: P, mesh_run_id: 'mr-closed', mesh: 'support', input: 'hi', started_by: 'sam' }),
        agent.handoffs({ onOffer: () => undefined }),
      ];
      for (const call of calls) {
        const error = await call.then(
          () => null,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(EventStoreError);
        expect(error).toMatchObject({ code: 'connection_closed' });
        expect((error as Error).message).toMatch(/this client is closed/);
      }
    }
    // The shared handle lives on for its owner.
    expect(nats.connection.isClosed()).toBe(false);
  }, 30_000);
});
