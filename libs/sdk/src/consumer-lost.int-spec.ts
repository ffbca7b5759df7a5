import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Principals } from '@baton/contracts';
import { batonStreamNames, connectNats, LedgerClient, PullEndedError, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// Test only: boots the real ledger service in-process (it opens the offers durable again).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../../apps/ledger/src/ledger';
import { createBatonClient, OfferPullError, type BatonAgent, type HandoffOffer, type HandoffsOptions } from './index';
import { storeDefinition } from './definition.int-support';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as int/servers is
import { removeDeploymentStreams } from '../../eventstore/src/int/cleanup';

/*
 * `handoffs({ onConsumerLost })`: an agent hears, typed, that its offers durable was deleted — once
 * per deletion, an OfferPullError (`offer_pull_failed`, reason `consumer_lost`) — while the SDK has
 * the ledger open the durable again and offers flow on. Without the hook the SDK warns with that
 * error's message (before, only the event store's runner warned, in its own words, and an agent
 * had no way to hear it). Against the shared NATS with a prefix of its own and the real ledger in
 * process.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const P = 'shop';

describe('a lost offers durable is told to onConsumerLost, once per loss (real ledger in-process, real NATS)', () => {
  const prefix = `cl${randomBytes(5).toString('hex')}`;
  let nats: NatsHandle;
  let ledger: RunningService | null = null;
  let delegator: LedgerClient;
  const agents: BatonAgent[] = [];
  let created = 0;

  const create = async (to: string): Promise<string> => {
    const id = `h-${++created}`;
    const reply = await delegator.create(P, { handoff_id: id, from_agent: 'alice', to_agent: to, summary: `work ${id}`, idempotency_key: `create-${id}` });
    expect(reply).toMatchObject({ ok: true });
    return id;
  };
  /** A subscription of `agent` that acknowledges each offer and notes its handoff. */
  const subscribe = async (agent: string, options: Pick<HandoffsOptions, 'onConsumerLost'> = {}) => {
    const client = await createBatonClient({ nats, prefix, project: P, agent, edge: false });
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
      ...options,
    });
    return { offered, errors, subscription };
  };
  const durableOf = (agent: string) =>
    waitFor(async () => {
      for await (const info of nats.jsm.consumers.list(batonStreamNames(prefix).inbox))
        if (info.config.filter_subject === `${prefix}.in.${P}.offer.${agent}`) return info.name;
      return undefined;
    }, `${agent}’s offers durable`);
  /** Delete `agent`'s durable and wait until an offer made afterwards is handled (the ledger opened it again). */
  const loseAndRecover = async (agent: string, offered: string[]): Promise<string> => {
    const durable = await durableOf(agent);
    await nats.jsm.consumers.delete(batonStreamNames(prefix).inbox, durable);
    const after = await create(agent);
    await waitFor(() => offered.includes(after), 'an offer after the durable was opened again', { timeoutMs: 15_000 });
    return durable;
  };

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'sdk-consumer-lost-int' });
    ledger = await startLedger({ ...process.env, BATON_PREFIX: prefix, BATON_INSTANCE: 'sdk-consumer-lost', HTTP_PORT: '0', LOG_LEVEL: 'error' });
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

  it('the durable deleted: the hook is called once with the typed error (consumer_lost), offers flow on; a second deletion is told again', async () => {
    const lost: unknown[] = [];
    const { offered, errors, subscription } = await subscribe('bob', { onConsumerLost: (error) => void lost.push(error) });
    try {
      const first = await create('bob');
      await waitFor(() => offered.includes(first), 'the first offer handled');
      const durable = await loseAndRecover('bob', offered);
      // Past the runner's next pulls: nothing more is told of the same loss.
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      expect(lost).toHaveLength(1);
      const error = lost[0];
      expect(error).toBeInstanceOf(OfferPullError);
      expect(error).toMatchObject({ name: 'OfferPullError', code: 'offer_pull_failed', reason: 'consumer_lost', durable });
      // The deletion ended the open pull: the server's 409 is the cause, and onError got the same error.
      expect(error).toMatchObject({ natsCode: '409' });
      expect((error as OfferPullError).cause).toBeInstanceOf(PullEndedError);
      expect(errors).toContain(error);

      await loseAndRecover('bob', offered);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(lost).toHaveLength(2);
      expect(lost[1]).toMatchObject({ code: 'offer_pull_failed', reason: 'consumer_lost', durable });
    } finally {
      await subscription.stop({ timeoutMs: 5_000 });
    }
  }, 60_000);

  it('without a hook the SDK warns once, with the typed error’s message (not the event store runner’s own warning)', async () => {
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    const { offered, subscription } = await subscribe('carol');
    try {
      const first = await create('carol');
      await waitFor(() => offered.includes(first), 'the first offer handled');
      const durable = await loseAndRecover('carol', offered);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const said = warn.mock.calls.map((args) => args.map(String).join(' '));
      expect(said).toEqual([expect.stringMatching(new RegExp(`^\\[baton sdk\\] pulling offers from ${durable} failed \\(consumer_lost, 409\\)`))]);
    } finally {
      warn.mockRestore();
      await subscription.stop({ timeoutMs: 5_000 });
    }
  }, 40_000);

  it('a hook that throws (or rejects) is reported with console.error and breaks nothing: offers flow on', async () => {
    const failing = jest.spyOn(console, 'error').mockImplementation(() => undefined);
    let calls = 0;
    const { offered, subscription } = await subscribe('alice', {
      onConsumerLost: () => {
        calls++;
        throw new Error('listener broke');
      },
    });
    try {
      const first = await create('alice');
      await waitFor(() => offered.includes(first), 'the first offer handled');
      await loseAndRecover('alice', offered);
      expect(calls).toBe(1);
      expect(failing.mock.calls.map((args) => args.map(String).join(' '))).toContain('[baton sdk] onConsumerLost threw: listener broke');
    } finally {
      failing.mockRestore();
      await subscription.stop({ timeoutMs: 5_000 });
    }
  }, 40_000);
});
