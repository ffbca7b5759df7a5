import { randomBytes } from 'node:crypto';
import { createEventRegistry } from '@baton/contracts';
import { batonStreamNames, connectNats, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { createBatonProjector, createProjectionStore, createRedis, diffSnapshots, jetStreamReplaySource, type RedisHandle } from '@baton/projections';
import { startNotifier } from '../main';
import { startPrivateServer, type PrivateServer } from '../api/private-server.int-support';
import { captureNotifierLog, countNotices, projectionsCaughtUp, scenarioStream } from './scenario-stream.int-support';
import { projectionPrefix } from './tokens';

/*
 * A Redis that loses its data under live traffic (FLUSHDB on a private redis-server, events still
 * flowing) is found lost by the notifier and rebuilt by the rebuild path, which publishes nothing:
 * no human action notice is published again for the events applied before the loss, the notices
 * of the events after it are published once, the runbook's warn line is logged, and the
 * projections end equal to a fold of the stream. (Before: the live applier folded the whole history
 * into the empty keyspace, publishing every notice again, and the warn line never came.)
 */

const PROJECTIONS = ['inbox', 'stops', 'handoffs', 'runs', 'notices'];
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('Redis loses its data under live traffic (private redis-server, real NATS)', () => {
  const prefix = `rl${randomBytes(5).toString('hex')}`;
  const registry = createEventRegistry();
  let server: PrivateServer;
  let redis: RedisHandle;
  let nats: NatsHandle;
  let stream: ReturnType<typeof scenarioStream>;
  let service: RunningService;
  let seen: Map<string, number>;
  let log: ReturnType<typeof captureNotifierLog>;

  beforeAll(async () => {
    server = await startPrivateServer('redis-server');
    redis = createRedis(server.url);
    nats = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', reconnect: false });
    stream = scenarioStream(nats, prefix);
    seen = await countNotices(nats, prefix);
    log = captureNotifierLog();
    service = await startNotifier({
      ...process.env,
      BATON_PREFIX: prefix,
      HTTP_PORT: '0',
      LOG_LEVEL: 'info',
      REDIS_URL: server.url,
      NOTIFIER_PROJECTION_CHECK_MS: '5000',
    });
  }, 60_000);

  afterAll(async () => {
    await service?.stop().catch(() => undefined);
    log?.restore();
    await redis?.close().catch(() => undefined);
    await server?.remove();
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats?.jsm.streams.delete(name).catch(() => undefined);
    await nats?.drain().catch(() => undefined);
  }, 30_000);

  it('FLUSHDB while events flow: no notice published again for events before the loss, each later one once, the warn line logged, projections equal to a fold', async () => {
    expect(stream.noticesPerProject).toBeGreaterThan(0);
    const projects = 16;
    const flushAfter = 8;
    let published = 0;
    // Steady traffic: a project's runs (stopping for people, so with notices) every 100 ms.
    const traffic = (async () => {
      for (let n = 0; n < projects; n++) {
        await stream.publish(n);
        published = n + 1;
        await sleep(100);
      }
    })();
    while (published < flushAfter) await sleep(20);
    // Applied and published so far: the loss must not publish any of these again.
    await sleep(300);
    await redis.client.flushdb();
    await traffic;
    await projectionsCaughtUp(nats, redis, prefix, 30_000);
    // Let notices in flight arrive.
    await nats.connection.flush();
    await sleep(500);

    const repeated = [...seen].filter(([, count]) => count > 1);
    expect(repeated).toEqual([]);
    // Nothing acknowledged is lost: every notice in the stream was published, once.
    expect(seen.size).toBe(projects * stream.noticesPerProject);

    const lost = log.lines
      .map((line) => JSON.parse(line) as { level: string; msg: string; projection?: string; reason?: string; status?: string })
      .filter((line) => line.msg === 'projection lost from Redis: rebuilt from the events stream');
    expect(lost.map((line) => line.projection).sort()).toEqual([...PROJECTIONS].sort());
    expect(lost.every((line) => line.level === 'warn' && line.reason === 'no_active_generation' && line.status === 'swapped')).toBe(true);

    // The projections equal a fold of the whole stream (what `baton verify` checks).
    const live = createProjectionStore({ redis: redis.client, prefix: projectionPrefix(prefix) });
    const folded = createProjectionStore({ redis: redis.client, prefix: `${prefix}:fold` });
    await createBatonProjector({ store: folded }).rebuildAll(jetStreamReplaySource({ nats, prefix, registry }));
    for (const name of PROJECTIONS) {
      const [a, b] = await Promise.all([live.snapshot(name), folded.snapshot(name)]);
      expect({ name, differences: diffSnapshots(a, b) }).toEqual({ name, differences: [] });
      expect(a.lastSeq).toBe(b.lastSeq);
    }
  }, 90_000);
});
