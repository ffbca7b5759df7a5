// Every service runs in the heap it is deployed with (infra/service-node-options.json: 64 MB of
// old space for the ledger, 96 for the others). What they keep grows with the handoffs they act
// on — the ledger's and router's folded handoffs (the event store's fold cache), the notifier's
// projected states — and a handoff carries whatever context its agent gave it (up to the
// 256 KiB request cap). Those caches are bounded by estimated bytes as well as by count
// (BATON_FOLD_CACHE_MB; the projections' 4 MiB each), so large contexts cannot fill a heap:
// 300 handoffs of 240 KB (70 MB of context, which counts of 5 000 and 2 000 alone would all keep)
// leave every service serving, and the notifier rebuilds its projections from them in its own
// heap after Redis lost them (a rebuild's chunks and pulls are bounded by bytes too).
import { randomBytes } from 'node:crypto';
import { Principals } from '@baton/contracts';
import { connectNats, LedgerClient, type NatsHandle } from '@baton/eventstore';
import { MetricName, metricSample } from '@baton/platform';
import { createRedis, type RedisHandle } from '@baton/projections';
import {
  CYCLE_AGENTS,
  cleanupDeployment,
  deployedNodeArgs,
  removeDeploymentKeys,
  endedServices,
  freePort,
  publishCycleDefinition,
  startPlatform,
  startService,
  stopService,
  waitReady,
  type ServiceProcess,
} from '@baton/testing';
import { waitFor } from '@baton/wait';

const natsUrl = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

const HANDOFFS = 300;
// Under the 256 KiB cap on a request (Limits.maxMessageBytes) with the rest of the command.
const CONTEXT_BYTES = 240 * 1024;

describe('the services in their deployed heaps, handoffs with large contexts', () => {
  const prefix = `lc${randomBytes(4).toString('hex')}`;
  const project = 'memory';
  let nats: NatsHandle;
  let redis: RedisHandle;
  let services: ServiceProcess[] = [];
  const platformEnv = {
    BATON_PREFIX: prefix,
    NATS_URL: natsUrl,
    BATON_NATS_AUTH: 'none',
    REDIS_URL: redisUrl,
    LOG_LEVEL: 'warn',
    LOG_FORMAT: 'json',
    // Claims outlive the whole file: the last test counts the claimed handoffs a fresh watchdog
    // tracks, and on a slow machine the default 60 s leases ran out before it (248 of 300 in a CI).
    LEDGER_LEASE_MS: '600000',
  };
  const service = (name: string) => services.find((s) => s.name === name) as ServiceProcess;

  beforeAll(async () => {
    nats = await connectNats({ servers: natsUrl, reconnect: false });
    redis = createRedis(redisUrl);
    services = await startPlatform(platformEnv);
    await publishCycleDefinition(nats, prefix, project);
  }, 120_000);

  afterAll(async () => {
    await Promise.all(services.map((s) => stopService(s)));
    if (nats) {
      await cleanupDeployment(nats, redis.client, prefix);
      await nats.close();
    }
    await redis?.close();
  });

  it(`${HANDOFFS} handoffs of ${CONTEXT_BYTES / 1024} KB are created, claimed and projected; every service keeps serving, its caches within their bounds`, async () => {
    expect(deployedNodeArgs('ledger')).toContain('--max-old-space-size=64');
    const client = new LedgerClient(nats, prefix, { timeoutMs: 15_000 });
    const [from, to] = [CYCLE_AGENTS[0], CYCLE_AGENTS[1]];
    const asAgent = (agent: string) => ({ as: Principals.agent(project, agent) });
    const claims: string[] = [];
    const failure = (what: string, error: { code: string; message: string }) =>
      new Error(`${what}: ${error.code} ${error.message}\n${endedServices(services).join('\n')}`);
    for (let i = 0; i < HANDOFFS; i++) {
      const id = `big-${i}`;
      // Distinct text per handoff, as agents' contexts are (no two share a string once decoded).
      const notes = `${id} `.padEnd(CONTEXT_BYTES, String.fromCharCode(97 + (i % 26)));
      const created = await client.create(
        project,
        { handoff_id: id, from_agent: from, to_agent: to, summary: `large context ${i}`, context: { notes }, idempotency_key: `create-${id}` },
        asAgent(from),
      );
      if (!created.ok) throw failure(`create ${id}`, created.error);
      const claimed = await client.claim(project, { handoff_id: id, idempotency_key: `claim-${id}` }, asAgent(to));
      if (!claimed.ok) throw failure(`claim ${id}`, claimed.error);
      claims.push(claimed.handoff.claim_id!);
    }
    // The notifier has projected every claim: its open-handoffs gauge counts them (without reading them).
    const notifier = service('notifier');
    await waitFor(
      async () => {
        const response = await fetch(`http://127.0.0.1:${notifier.port}/metrics`);
        return metricSample(await response.text(), MetricName.openHandoffs, { status: 'claimed' }) === HANDOFFS;
      },
      'the notifier projecting every claim',
      { timeoutMs: 60_000 },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${endedServices(services).join('\n')}`);
    });
    expect(endedServices(services)).toEqual([]);

    // The first handoff, long evicted from the ledger's cache, is folded again from the stream:
    // its heartbeat is decided on its whole state, context included.
    const beat = await client.heartbeat(project, { handoff_id: 'big-0', claim_id: claims[0]!, idempotency_key: 'beat-big-0' }, asAgent(to));
    expect(beat.ok && beat.handoff).toMatchObject({ id: 'big-0', status: 'claimed' });
    expect(beat.ok && String((beat.handoff.context as { notes?: string }).notes).length).toBe(CONTEXT_BYTES);

    const text = await (await fetch(`http://127.0.0.1:${service('ledger').port}/metrics`)).text();
    const bound = 16 * 1024 * 1024;
    expect(metricSample(text, MetricName.foldCacheMaxBytes)).toBe(bound);
    const bytes = metricSample(text, MetricName.foldCacheBytes) ?? -1;
    expect(bytes).toBeGreaterThan(bound / 2);
    expect(bytes).toBeLessThanOrEqual(bound);
    // About 16 MiB of 240 KB states: some seventy of the 300 handoffs are kept.
    const entries = metricSample(text, MetricName.foldCacheEntries) ?? -1;
    expect(entries).toBeGreaterThan(30);
    expect(entries).toBeLessThan(80);
    expect(metricSample(text, MetricName.foldCacheEvictions)).toBeGreaterThan(HANDOFFS - 80);
  }, 240_000);

  it('the notifier rebuilds its projections from those events in its own heap after Redis lost them', async () => {
    const notifier = service('notifier');
    const claimed = async () =>
      metricSample(await (await fetch(`http://127.0.0.1:${notifier.port}/metrics`)).text(), MetricName.openHandoffs, { status: 'claimed' });
    expect(await claimed()).toBe(HANDOFFS);
    // Every key of this deployment gone, as after a flush: the notifier notices and rebuilds.
    await removeDeploymentKeys(redis.client, prefix);
    await waitFor(async () => (await claimed()) === 0, 'the projections gone', { timeoutMs: 15_000 }).catch(() => undefined);
    await waitFor(async () => (await claimed()) === HANDOFFS, 'the rebuilt projections counting every claim', { timeoutMs: 90_000 }).catch((error: Error) => {
      throw new Error(`${error.message}\n${endedServices(services).join('\n')}`);
    });
    expect(endedServices(services)).toEqual([]);
  }, 150_000);

  it('a watchdog started afresh follows those events to the end and tracks every claimed handoff', async () => {
    await stopService(service('watchdog'));
    const watchdog = startService('watchdog', await freePort(), platformEnv, { instance: 'watchdog-2', nodeArgs: deployedNodeArgs('watchdog') });
    services = [...services.filter((s) => s.name !== 'watchdog'), watchdog];
    await waitReady(watchdog, 60_000);
    const status = async () => (await (await fetch(`http://127.0.0.1:${watchdog.port}/watchdog/status`)).json()) as { caught_up: boolean; tracked: number };
    await waitFor(async () => (await status()).caught_up, 'the new watchdog catching up', { timeoutMs: 60_000 }).catch((error: Error) => {
      throw new Error(`${error.message}\n${watchdog.output.join('').slice(-3000)}\n${endedServices(services).join('\n')}`);
    });
    expect(await status()).toMatchObject({ caught_up: true, tracked: HANDOFFS });
    expect(endedServices(services)).toEqual([]);
  }, 120_000);
});
