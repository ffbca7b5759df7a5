import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { createEventRegistry, Principals, type HandoffRecord } from '@baton/contracts';
import { JetStreamEventStore, LedgerClient, connectNats, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// Test only: boots the real ledger service in-process, so the SDK is proven against the real protocol.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../../apps/ledger/src/ledger';
import { createBatonClient, OfferTerminatedError, type BatonAgent, type OfferSubscription } from './index';
import { storeDefinition } from './definition.int-support';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as int/servers is
import { removeDeploymentStreams } from '../../eventstore/src/int/cleanup';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const P = 'shop';

describe('an offer the SDK gives up on before claiming it is told to the ledger (real ledger in-process, real NATS)', () => {
  const prefix = `ts${randomBytes(5).toString('hex')}`;
  let nats: NatsHandle;
  let ledger: RunningService;
  let store: JetStreamEventStore;
  let delegator: LedgerClient;
  const agents: BatonAgent[] = [];

  const eventsOf = async (id: string) => (await store.read({ project: P, kind: 'handoff', id })).events;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'sdk-give-up-int', reconnect: false });
    ledger = await startLedger({ ...process.env, BATON_PREFIX: prefix, BATON_INSTANCE: 'sdk-give-up', HTTP_PORT: '0', LOG_LEVEL: 'error' });
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    const definition = { project: P, lead: 'lena', agents: [{ name: 'alice' }, { name: 'bob' }, { name: 'dave' }, { name: 'lena' }], workflows: [] };
    await storeDefinition(nats, prefix, definition);
    delegator = new LedgerClient(nats, prefix, { as: Principals.agent(P, 'alice') });
  });

  afterAll(async () => {
    await Promise.all(agents.map((agent) => agent.close()));
    await ledger?.stop();
    try {
      await removeDeploymentStreams(nats, prefix);
    } finally {
      await nats.close();
    }
  });

  async function agentNamed(name: string): Promise<BatonAgent> {
    const agent = await createBatonClient({ nats, prefix, project: P, agent: name });
    agents.push(agent);
    return agent;
  }

  it('a handler that keeps failing before any claim: each terminated offer is given up to the ledger, the handoff is offered again, and at its retry cap it is escalated to the lead — not left pending for nobody', async () => {
    const bob = await agentNamed('bob');
    const deliveries: number[] = [];
    const errors: unknown[] = [];
    const subscription: OfferSubscription = await bob.handoffs({
      onOffer: (offer) => {
        if (offer.handoffId !== 'h-broken') return;
        deliveries.push(offer.deliveryCount);
        throw new Error('model endpoint down');
      },
      maxDeliver: 2,
      backoffMs: [50],
      onError: (error) => void errors.push(error),
    });
    try {
      await delegator.create(P, {
        handoff_id: 'h-broken',
        from_agent: 'alice',
        to_agent: 'bob',
        summary: 'summarise the logs',
        max_retries: 1,
        idempotency_key: 'create-h-broken',
      });
      const failed = await waitFor(
        async () => {
          const record = await delegator.get(P, 'h-broken');
          return record?.status === 'failed' ? record : undefined;
        },
        'h-broken escalated after its offers were given up',
        { timeoutMs: 15_000 },
      );
      expect(failed).toMatchObject({
        status: 'failed',
        retry: { max_retries: 1, retry_count: 1 },
        terminal_reason: 'retry cap 1 reached (offer_given_up); escalated to lena',
        offer_given_up: { by: 'bob', deliveries: 2, reason: 'onOffer failed 2 times: model endpoint down' },
      });
      const types = (await eventsOf('h-broken')).map((e) => ({ type: e.type, actor: e.actor }));
      expect(types).toEqual([
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
      expect(terminated.map((e) => ({ code: e.code, handoffId: e.handoffId, deliveries: e.deliveries, giveUp: e.giveUp }))).toEqual([
        {
          code: 'offer_terminated',
          handoffId: 'h-broken',
          deliveries: 2,
          giveUp: { recorded: true, handoff: expect.objectContaining({ status: 'pending', retry: { max_retries: 1, retry_count: 1 } }) },
        },
        { code: 'offer_terminated', handoffId: 'h-broken', deliveries: 2, giveUp: { recorded: true, handoff: expect.objectContaining({ status: 'failed' }) } },
      ]);
      expect(terminated[0]!.message).toContain('handoff h-broken is offered again (retry 1 of 1)');
      // The lead now holds the question: the escalation's consult, offered to lena.
      const consultId = failed.escalation_outcome && 'consult_handoff_id' in failed.escalation_outcome ? failed.escalation_outcome.consult_handoff_id : '';
      expect(await waitFor(() => delegator.get(P, consultId), 'the consult')).toMatchObject({
        kind: 'consult',
        to_agent: 'lena',
        reply_to_handoff_id: 'h-broken',
      });
    } finally {
      await subscription.stop();
    }
  }, 30_000);

  it('a claimed handoff`s path is unchanged: an offer whose handler claimed and then kept failing is terminated without a give-up; the claim stands for its lease to decide', async () => {
    const dave = await agentNamed('dave');
    const errors: unknown[] = [];
    const subscription = await dave.handoffs({
      onOffer: async (offer) => {
        if (offer.handoffId !== 'h-claimed-then-broken') return;
        await offer.claim({ leaseMs: 60_000, autoHeartbeat: false });
        throw new Error('crashed mid-work');
      },
      maxDeliver: 2,
      backoffMs: [50],
      onError: (error) => void errors.push(error),
    });
    try {
      await delegator.create(P, {
        handoff_id: 'h-claimed-then-broken',
        from_agent: 'alice',
        to_agent: 'dave',
        summary: 'rotate the keys',
        idempotency_key: 'create-h-claimed-then-broken',
      });
      const terminated = await waitFor(() => errors.find((e): e is OfferTerminatedError => e instanceof OfferTerminatedError), 'the claimed offer terminated', {
        timeoutMs: 10_000,
      });
      expect(terminated).toMatchObject({ code: 'offer_terminated', handoffId: 'h-claimed-then-broken', deliveries: 2, giveUp: undefined });
      const record = (await delegator.get(P, 'h-claimed-then-broken')) as HandoffRecord;
      expect(record).toMatchObject({ status: 'claimed', claimed_by: 'dave', retry: { retry_count: 0 } });
      expect(record.offer_given_up).toBeUndefined();
      expect((await eventsOf('h-claimed-then-broken')).map((e) => e.type)).toEqual(['handoff.created', 'handoff.claimed']);
    } finally {
      await subscription.stop();
    }
  }, 30_000);
});
