// The ledger runs in the heap it is deployed with (infra/service-node-options.json: 64 MB of old
// space). What it keeps grows with the handoffs it acts on: their folded states, in the event
// store's fold cache. That cache is bounded by bytes (BATON_FOLD_CACHE_MB, 16 MiB for the ledger)
// as well as by count (5 000), so handoffs carrying large contexts cannot fill the heap: 320
// handoffs of 128 KB each (40 MB of context, which a count of 5 000 alone would all keep) leave
// the ledger serving, its cache within the bound.
import { randomBytes } from 'node:crypto';
import { Principals } from '@baton/contracts';
import { connectNats, LedgerClient, type NatsHandle } from '@baton/eventstore';
import { MetricName, metricSample } from '@baton/platform';
import { createRedis, type RedisHandle } from '@baton/projections';
import {
  CYCLE_AGENTS,
  cleanupDeployment,
  deployedNodeArgs,
  endedServices,
  freePort,
  publishCycleDefinition,
  startService,
  stopService,
  waitReady,
  type ServiceProcess,
} from '@baton/testing';

const natsUrl = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

const HANDOFFS = 320;
const CONTEXT_BYTES = 128 * 1024;

describe('the ledger in its deployed heap, handoffs with large contexts', () => {
  const prefix = `lm${randomBytes(4).toString('hex')}`;
  const project = 'memory';
  let nats: NatsHandle;
  let redis: RedisHandle;
  let ledger: ServiceProcess;
  let router: ServiceProcess;

  beforeAll(async () => {
    nats = await connectNats({ servers: natsUrl, reconnect: false });
    redis = createRedis(redisUrl);
    const env = { BATON_PREFIX: prefix, NATS_URL: natsUrl, BATON_NATS_AUTH: 'none', REDIS_URL: redisUrl, LOG_LEVEL: 'warn', LOG_FORMAT: 'json' };
    ledger = startService('ledger', await freePort(), env, { nodeArgs: deployedNodeArgs('ledger') });
    // The router publishes the project definition the ledger reads its roster from.
    router = startService('router', await freePort(), env, { nodeArgs: deployedNodeArgs('router') });
    await Promise.all([waitReady(ledger, 60_000), waitReady(router, 60_000)]);
    await publishCycleDefinition(nats, prefix, project);
  });

  afterAll(async () => {
    await Promise.all([ledger, router].filter(Boolean).map((service) => stopService(service)));
    if (nats) {
      await cleanupDeployment(nats, redis.client, prefix);
      await nats.close();
    }
    await redis?.close();
  });

  it(`creates and claims ${HANDOFFS} handoffs of ${CONTEXT_BYTES / 1024} KB and keeps serving, its fold cache within 16 MiB`, async () => {
    expect(deployedNodeArgs('ledger')).toContain('--max-old-space-size=64');
    const client = new LedgerClient(nats, prefix, { timeoutMs: 15_000 });
    const [from, to] = [CYCLE_AGENTS[0], CYCLE_AGENTS[1]];
    const asAgent = (agent: string) => ({ as: Principals.agent(project, agent) });
    const claims: string[] = [];
    for (let i = 0; i < HANDOFFS; i++) {
      const id = `big-${i}`;
      // Distinct text per handoff, as agents' contexts are (no two share a string once decoded).
      const notes = `${id} `.padEnd(CONTEXT_BYTES, String.fromCharCode(97 + (i % 26)));
      const created = await client.create(
        project,
        { handoff_id: id, from_agent: from, to_agent: to, summary: `large context ${i}`, context: { notes }, idempotency_key: `create-${id}` },
        asAgent(from),
      );
      if (!created.ok) throw new Error(`create ${id}: ${created.error.code} ${created.error.message}\n${endedServices([ledger]).join('\n')}`);
      const claimed = await client.claim(project, { handoff_id: id, idempotency_key: `claim-${id}` }, asAgent(to));
      if (!claimed.ok) throw new Error(`claim ${id}: ${claimed.error.code} ${claimed.error.message}\n${endedServices([ledger]).join('\n')}`);
      claims.push(claimed.handoff.claim_id!);
    }
    expect(endedServices([ledger])).toEqual([]);
    // The first handoff, long evicted from the cache, is folded again from the stream: its
    // heartbeat is decided on its whole state, context included.
    const beat = await client.heartbeat(project, { handoff_id: 'big-0', claim_id: claims[0]!, idempotency_key: 'beat-big-0' }, asAgent(to));
    expect(beat.ok && beat.handoff).toMatchObject({ id: 'big-0', status: 'claimed' });
    expect(beat.ok && String((beat.handoff.context as { notes?: string }).notes).length).toBe(CONTEXT_BYTES);

    const text = await (await fetch(`http://127.0.0.1:${ledger.port}/metrics`)).text();
    const bound = 16 * 1024 * 1024;
    expect(metricSample(text, MetricName.foldCacheMaxBytes)).toBe(bound);
    const bytes = metricSample(text, MetricName.foldCacheBytes) ?? -1;
    expect(bytes).toBeGreaterThan(bound / 2);
    expect(bytes).toBeLessThanOrEqual(bound);
    // Far fewer than the 320 handoffs are kept: about 16 MiB of 128 KB states.
    const entries = metricSample(text, MetricName.foldCacheEntries) ?? -1;
    expect(entries).toBeGreaterThan(40);
    expect(entries).toBeLessThan(140);
    expect(metricSample(text, MetricName.foldCacheEvictions)).toBeGreaterThan(HANDOFFS - 140);
  }, 240_000);
});
