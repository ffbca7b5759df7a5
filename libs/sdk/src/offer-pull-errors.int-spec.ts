import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Principals } from '@baton/contracts';
import { batonStreamNames, connectNats, LedgerClient, PullEndedError, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// Test only: boots the real ledger service in-process (it opens the offers durable and relays the agent edge).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../../apps/ledger/src/ledger';
import { createBatonClient, OfferPullError, type BatonAgent, type HandoffOffer } from './index';
import { storeDefinition } from './definition.int-support';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as int/servers is
import { removeDeploymentStreams } from '../../eventstore/src/int/cleanup';

/*
 * Every failure of the offers' pull loop reaches `onError` as an OfferPullError (`offer_pull_failed`)
 * with a specific reason and its cause kept — the server ending a pull (503: nothing relays the
 * edge; 409: the durable deleted under it) included, which the event store's consumer runner
 * raises itself (`pulling <durable> on <stream>: 503 …`) and which once reached `onError` as a bare
 * `EventStoreError` (`store_error`). Against the shared NATS with a prefix of its own and the real
 * ledger in process.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const P = 'shop';

describe('offer pull failures reach onError as OfferPullError (real ledger in-process, real NATS)', () => {
  const prefix = `pe${randomBytes(5).toString('hex')}`;
  let nats: NatsHandle;
  let ledger: RunningService | null = null;
  let delegator: LedgerClient;
  const agents: BatonAgent[] = [];

  const boot = async () => {
    ledger = await startLedger({ ...process.env, BATON_PREFIX: prefix, BATON_INSTANCE: 'sdk-pull-errors', HTTP_PORT: '0', LOG_LEVEL: 'error' });
  };
  const create = async (id: string, to: string) => {
    const reply = await delegator.create(P, { handoff_id: id, from_agent: 'alice', to_agent: to, summary: `work ${id}`, idempotency_key: `create-${id}` });
    expect(reply).toMatchObject({ ok: true });
  };
  /** A subscription of `agent` that acknowledges each offer and notes its handoff, and every error its onError hears. */
  const subscribe = async (agent: string, options: { edge: boolean }) => {
    const client = await createBatonClient({ nats, prefix, project: P, agent, edge: options.edge });
    agents.push(client);
    const offered: string[] = [];
    const errors: unknown[] = [];
    const subscription = await client.handoffs({
      // Claimed (settled), then noted: an offer its handler leaves unsettled is delivered again (rule 5a).
      onOffer: async (offer: HandoffOffer) => {
        await offer.tryClaim({ autoHeartbeat: false });
        offered.push(offer.handoffId);
      },
      onError: (error) => void errors.push(error),
    });
    return { offered, errors, subscription };
  };

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'sdk-pull-errors-int' });
    await boot();
    await storeDefinition(nats, prefix, { project: P, agents: [{ name: 'alice' }, { name: 'bob' }, { name: 'carol' }], workflows: [] });
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

  it('the offers durable deleted under the pull: consumer_lost (409, the server’s status as the cause), the ledger opens it again and offers flow on', async () => {
    const { offered, errors, subscription } = await subscribe('bob', { edge: false });
    try {
      await create('h-before', 'bob');
      await waitFor(() => offered.includes('h-before'), 'the first offer handled');
      const inbox = batonStreamNames(prefix).inbox;
      const durable = await waitFor(async () => {
        for await (const info of nats.jsm.consumers.list(inbox)) if (info.config.filter_subject === `${prefix}.in.${P}.offer.bob`) return info.name;
        return undefined;
      }, 'bob’s offers durable');
      await nats.jsm.consumers.delete(inbox, durable);
      await waitFor(() => errors.length > 0, 'the pull failure told');
      await create('h-after', 'bob');
      await waitFor(() => offered.includes('h-after'), 'an offer after the durable was opened again', { timeoutMs: 15_000 });

      expect(errors.filter((error) => !(error instanceof OfferPullError))).toEqual([]);
      const lost = errors[0] as OfferPullError;
      expect(lost).toMatchObject({ code: 'offer_pull_failed', reason: 'consumer_lost', natsCode: '409', durable });
      expect(lost.cause).toBeInstanceOf(PullEndedError);
      expect(lost.cause).toMatchObject({ code: 'store_error', durable, stream: inbox, status: { code: 409 } });
    } finally {
      await subscription.stop({ timeoutMs: 5_000 });
    }
  }, 40_000);

  it('through the edge while no ledger relays it: the pull the server ends (503) is unavailable like the lookups after it — never a bare store_error', async () => {
    const { offered, errors, subscription } = await subscribe('carol', { edge: true });
    try {
      await create('h-edge', 'carol');
      await waitFor(() => offered.includes('h-edge'), 'an offer pulled through the edge');
      await ledger!.stop();
      ledger = null;
      await waitFor(() => errors.length >= 3, 'three pull failures', { timeoutMs: 20_000 });
      expect(errors.filter((error) => !(error instanceof OfferPullError))).toEqual([]);
      const failures = errors as OfferPullError[];
      expect(failures.map((error) => [error.code, error.reason, error.natsCode])).toEqual(failures.map(() => ['offer_pull_failed', 'unavailable', '503']));
      // The first is the open pull's own end (the event store's runner raised it), its cause kept.
      expect(failures[0]!.cause).toBeInstanceOf(PullEndedError);
      expect(failures[0]!.cause).toMatchObject({ code: 'store_error', status: { code: 503 } });
    } finally {
      if (ledger === null) await boot();
      await subscription.stop({ timeoutMs: 5_000 });
    }
  }, 60_000);
});
