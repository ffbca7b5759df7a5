import { randomBytes } from 'node:crypto';
import { batonStreamNames, connectNats, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { createRedis, type RedisHandle } from '@baton/projections';
import { startNotifier } from '../main';
import { captureNotifierLog, countNotices, projectionsCaughtUp, scenarioStream } from './scenario-stream.int-support';

/*
 * Two notifier instances share the projection consumer (the documented way to scale it,
 * infra/scale): each human action notice is published once. They split the deliveries and each
 * applies a range from where the projections stand, reading the other's sequences from the stream,
 * so their ranges overlap; a range's notices are published before its commit, so before the apply
 * lock both instances published the overlap's notices — and a loser re-folding, again (an SRE
 * audit counted 167 messages for 100 notices).
 */

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('two notifier instances on one projection consumer (real NATS and Redis)', () => {
  const prefix = `tn${randomBytes(5).toString('hex')}`;
  const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
  let redis: RedisHandle;
  let nats: NatsHandle;
  let stream: ReturnType<typeof scenarioStream>;
  const services: RunningService[] = [];
  let seen: Map<string, number>;
  let log: ReturnType<typeof captureNotifierLog>;

  beforeAll(async () => {
    redis = createRedis(redisUrl);
    nats = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', reconnect: false });
    stream = scenarioStream(nats, prefix);
    seen = await countNotices(nats, prefix);
    // The two services' log lines are not this test's subject.
    log = captureNotifierLog();
    for (let i = 0; i < 2; i++)
      services.push(
        await startNotifier({
          ...process.env,
          BATON_PREFIX: prefix,
          BATON_INSTANCE: `notifier-${i}`,
          HTTP_PORT: '0',
          REDIS_URL: redisUrl,
          NOTIFIER_PROJECTION_CHECK_MS: '0',
        }),
      );
  }, 60_000);

  afterAll(async () => {
    for (const service of services) await service.stop().catch(() => undefined);
    log?.restore();
    for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 1000 })) {
      const keys = batch as string[];
      if (keys.length > 0) await redis.client.unlink(...keys);
    }
    await redis?.close().catch(() => undefined);
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats?.jsm.streams.delete(name).catch(() => undefined);
    await nats?.drain().catch(() => undefined);
  }, 30_000);

  it('publishes each notice once while both apply overlapping ranges', async () => {
    expect(stream.noticesPerProject).toBeGreaterThan(0);
    const projects = 40;
    // Bursts of projects at once, so both instances hold deliveries of the same stretch of the stream.
    for (let n = 0; n < projects; n += 8) await Promise.all(Array.from({ length: 8 }, (_, i) => stream.publish(n + i)));
    await projectionsCaughtUp(nats, redis, prefix, 60_000);
    await nats.connection.flush();
    await sleep(500);
    expect([...seen].filter(([, count]) => count > 1)).toEqual([]);
    // Nothing acknowledged is lost: every notice in the stream was published.
    expect(seen.size).toBe(projects * stream.noticesPerProject);
  }, 120_000);
});
