import { randomBytes } from 'node:crypto';
import { createEventRegistry } from '@baton/contracts';
import { batonStreamNames, connectNats, JetStreamEventStore, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { BatonSdkError, createBatonClient, HandbackResultError, type BatonAgent, type HandoffOffer, type OfferSubscription } from '@baton/sdk';
import { waitFor } from '@baton/wait';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the ledger runs in this process (no build needed)
import { startLedger } from '../../apps/ledger/src/ledger';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the project's definition, stored as the router stores it
import { publishDefinition } from '../../apps/ledger/src/int/support';

/*
 * A completion handback through the SDK: the delegator's agent is offered the review of work it
 * handed out; `finish()` refuses it before anything is sent (a run result would be refused by the
 * router and count toward the agent's circuit), and `decide()` accepts or sends it back for rework.
 * The ledger runs in this process against real NATS; the agents are SDK clients.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const PROJECT = 'hbsdk';

describe('a completion handback decided through the SDK (ledger in process, real NATS)', () => {
  const prefix = `hs${randomBytes(5).toString('hex')}`;
  const services: RunningService[] = [];
  const agents: BatonAgent[] = [];
  const subscriptions: OfferSubscription[] = [];
  let nats: NatsHandle;
  let store: JetStreamEventStore;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    services.push(await startLedger({ ...process.env, NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' }));
    // The delegator reviews its handback only as an agent of the project (docs/handoffs.md rule 7).
    await publishDefinition(nats, prefix, {
      project: PROJECT,
      agents: [
        { name: 'alice', role: 'Lead' },
        { name: 'bob', role: 'Builder' },
      ],
      workflows: [],
    });
  }, 60_000);

  afterAll(async () => {
    for (const subscription of subscriptions) await subscription.stop().catch(() => undefined);
    for (const agent of agents) await agent.close().catch(() => undefined);
    for (const service of services.reverse()) await service.stop().catch(() => undefined);
    for (const name of Object.values(batonStreamNames(prefix))) await nats.jsm.streams.delete(name).catch(() => undefined);
    await nats.drain();
  }, 30_000);

  it('finish() on the handback throws HandbackResultError (nothing sent, the claim kept); decide("rework") sends the work back, decide("accept") ends it', async () => {
    const alice = await createBatonClient({ nats, prefix, project: PROJECT, agent: 'alice' });
    const bob = await createBatonClient({ nats, prefix, project: PROJECT, agent: 'bob' });
    agents.push(alice, bob);
    // Bob does the work each time it is offered, and returns it.
    let returns = 0;
    subscriptions.push(
      await bob.handoffs({
        onOffer: async (offer) => {
          if (!(await offer.tryClaim({ autoHeartbeat: false }))) return;
          returns++;
          await offer.return({ summary: `parser, take ${returns}`, outcome: 'completed', evidence: { tests_run: [`parser.spec.ts: ${returns}`] } });
        },
        onError: () => undefined,
      }),
    );
    // Alice reviews: the first review is tried as a result, then sent back; the second is accepted.
    const reviews: Array<{ kind: string | undefined; refused?: unknown; claimKept?: boolean; decided: string }> = [];
    subscriptions.push(
      await alice.handoffs({
        onOffer: async (offer: HandoffOffer) => {
          const handoff = await offer.tryClaim({ autoHeartbeat: false });
          if (!handoff) return;
          if (reviews.length === 0) {
            const refused = await offer.finish({ body: 'looks fine' }).catch((error: unknown) => error);
            const claimKept = offer.claimId !== null;
            const decided = await offer.decide('rework', 'cover the error paths');
            reviews.push({ kind: handoff.kind, refused, claimKept, decided: decided.status });
          } else {
            const decided = await offer.decide('accept');
            reviews.push({ kind: handoff.kind, decided: decided.status });
          }
        },
        onError: () => undefined,
      }),
    );
    const created = await alice.ledger.create(PROJECT, {
      handoff_id: 'h-parse',
      from_agent: 'alice',
      to_agent: 'bob',
      summary: 'write the parser',
      idempotency_key: 'c-parse',
    });
    expect(created.ok).toBe(true);

    await waitFor(async () => (reviews.length === 2 ? true : undefined), 'two reviews', { timeoutMs: 20_000 });
    const [first, second] = reviews;
    expect(first!.kind).toBe('completion_handback');
    expect(first!.refused).toBeInstanceOf(HandbackResultError);
    expect(first!.refused).toBeInstanceOf(BatonSdkError);
    expect(first!.refused).toMatchObject({ code: 'completion_handback' });
    expect(first!.claimKept).toBe(true);
    expect(second!.kind).toBe('completion_handback');
    // The work went back once and was accepted the second time; no result was ever published.
    const types = (await store.read({ project: PROJECT, kind: 'handoff', id: 'h-parse' })).events.map((e) => e.type);
    expect(types.filter((t) => t === 'handoff.returned')).toHaveLength(2);
    expect(types.at(-1)).toBe('handoff.completed');
    const inbox = await nats.jsm.streams.info(batonStreamNames(prefix).inbox, { subjects_filter: `${prefix}.in.${PROJECT}.result.>` });
    expect(inbox.state.subjects ?? {}).toEqual({});
  }, 60_000);
});
