import { randomBytes } from 'node:crypto';
import { createEventRegistry } from '@baton/contracts';
import { connectNats, JetStreamEventStore, type NatsHandle } from '@baton/eventstore';
import { createRedis, type RedisHandle } from '@baton/projections';
import type { RunningService } from '@baton/platform';
import { createBatonClient, type BatonAgent, type OfferSubscription } from '@baton/sdk';
import { waitFor } from '@baton/wait';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startRouter } from '../../apps/router/src/router.app';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startLedger } from '../../apps/ledger/src/ledger';
import { stopInProcess, twoStepDefinition } from './support';

/*
 * A result id need be unique only within its run (README): two runs of one project whose agents use
 * the same result ids, within a second of each other, both run to the end. The SDK's message ids
 * name the run (no duplicate-window collision), and the handoff the router derives from a result
 * names the run too (no second run meeting the first run's handoff at the ledger).
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const PROJECT = 'reuse';

describe('result ids reused across runs of one project (router + ledger in process, real NATS)', () => {
  const prefix = `ri${randomBytes(5).toString('hex')}`;
  const services: RunningService[] = [];
  const clients: BatonAgent[] = [];
  const subscriptions: OfferSubscription[] = [];
  let nats: NatsHandle;
  let redis: RedisHandle;
  let store: JetStreamEventStore;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    redis = createRedis(REDIS_URL);
    const env = { ...process.env, NATS_URL, REDIS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' };
    services.push(await startLedger(env), await startRouter(env));
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    const reply = await nats.connection.request(
      `${prefix}.cmd.router.${PROJECT}.publish_definition`,
      new TextEncoder().encode(JSON.stringify(twoStepDefinition(PROJECT))),
      { timeout: 10_000 },
    );
    expect(JSON.parse(new TextDecoder().decode(reply.data))).toMatchObject({ ok: true });
  }, 60_000);

  afterAll(async () => {
    for (const subscription of subscriptions) await subscription.stop();
    for (const client of clients) await client.close();
    await stopInProcess(services, nats, redis, prefix);
  }, 30_000);

  it('two runs whose agents both answer with result ids r-1 and r-2 each reach their own end, through handoffs of their own', async () => {
    const runs = [`wr-${randomBytes(3).toString('hex')}`, `wr-${randomBytes(3).toString('hex')}`];
    // Each agent answers every offer with the same result id, whatever the run: r-1 (triage) and r-2 (the architect, terminal).
    for (const [agent, resultId] of [
      ['issue', 'r-1'],
      ['architect', 'r-2'],
    ] as const) {
      const client = await createBatonClient({ nats, prefix, project: PROJECT, agent });
      clients.push(client);
      subscriptions.push(
        await client.handoffs({
          concurrency: 2,
          onOffer: async (offer) => {
            if ((await offer.tryClaim()) === null) return;
            await offer.finish({ result_id: resultId, run_id: `ar-${offer.handoffId}`, decision: { dispatch: { status: 'advance' } } });
          },
        }),
      );
    }
    const starter = clients[0]!;
    await Promise.all(runs.map((run) => starter.startRun({ workflow_run_id: run, workflow: 'feature', started_by: 'sam', input: 'x' })));

    const ended = await Promise.all(
      runs.map((run) =>
        waitFor(
          async () => {
            const { events } = await store.read({ project: PROJECT, kind: 'run', id: run });
            return events.some((e) => e.type === 'run.completed') ? events : undefined;
          },
          `run ${run} to complete`,
          { timeoutMs: 20_000 },
        ),
      ),
    );
    for (const [i, events] of ended.entries()) {
      const results = events.filter((e) => e.type === 'run.result_recorded').map((e) => (e.payload as { result_id: string }).result_id);
      expect(results).toEqual(['r-1', 'r-2']);
      const routed = events.filter((e) => e.type === 'run.routed').map((e) => (e.payload as { handoff_id: string }).handoff_id);
      expect(routed).toEqual([`ho-s-${runs[i]}`, `ho-r-${runs[i]}:r-1`]);
    }
    // The architect's handoffs are two, one per run, each closed by its own run's result.
    for (const run of runs) {
      const handoff = await store.read({ project: PROJECT, kind: 'handoff', id: `ho-r-${run}:r-1` });
      const types = handoff.events.map((e) => e.type);
      expect(types[0]).toBe('handoff.created');
      expect(types).toContain('handoff.completed_by_result');
      expect(handoff.events[0]!.payload).toMatchObject({ workflow_run_id: run });
    }
  }, 40_000);
});
