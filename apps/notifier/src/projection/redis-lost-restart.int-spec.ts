import { randomBytes } from 'node:crypto';
import { batonStreamNames, connectNats, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { PROJECTION_DURABLE, batonProjections, createRedis, type RedisHandle } from '@baton/projections';
import { startNotifier } from '../main';
import { startPrivateServer, type PrivateServer } from '../api/private-server.int-support';
import { captureNotifierLog, countNotices, projectionsCaughtUp, scenarioStream } from './scenario-stream.int-support';

/*
 * Redis loses its data while no notifier runs, events are stored meanwhile, and a notifier starts on
 * the empty Redis: it rebuilds `notices` only to the projection consumer's ack floor (what the
 * notifiers had published), so the notices of the events stored while it was down are published —
 * each once — and none of the history's again. Before, a notifier starting on an empty Redis
 * rebuilt `notices` to the stream's end (it could not tell a loss from a new Redis) and those
 * notices were never sent.
 */

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('a notifier starting on a Redis that lost its data while it was down (private redis-server, real NATS)', () => {
  const prefix = `rr${randomBytes(5).toString('hex')}`;
  let server: PrivateServer;
  let redis: RedisHandle;
  let nats: NatsHandle;
  let stream: ReturnType<typeof scenarioStream>;
  let service: RunningService | null = null;
  let seen: Map<string, number>;
  let log: ReturnType<typeof captureNotifierLog>;

  const start = () =>
    startNotifier({
      ...process.env,
      BATON_PREFIX: prefix,
      HTTP_PORT: '0',
      LOG_LEVEL: 'info',
      REDIS_URL: server.url,
      NOTIFIER_PROJECTION_CHECK_MS: '0',
    });

  beforeAll(async () => {
    server = await startPrivateServer('redis-server');
    redis = createRedis(server.url);
    nats = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', reconnect: false });
    stream = scenarioStream(nats, prefix);
    seen = await countNotices(nats, prefix);
    log = captureNotifierLog();
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

  it('publishes the notices of the events stored while it was down, each once, and none of those it had published', async () => {
    expect(stream.noticesPerProject).toBeGreaterThan(0);
    service = await start();
    for (let n = 0; n < 3; n++) await stream.publish(n);
    await projectionsCaughtUp(nats, redis, prefix, 30_000);
    await nats.connection.flush();
    await sleep(300);
    expect(seen.size).toBe(3 * stream.noticesPerProject);
    const floorBefore = (await nats.jsm.streams.info(batonStreamNames(prefix).events)).state.last_seq;
    // Every applied event acknowledged (the acks follow the commits): the loss window under test is
    // the notifier's absence, not acks in flight at its stop.
    for (let tries = 0; (await nats.jsm.consumers.info(batonStreamNames(prefix).events, PROJECTION_DURABLE)).ack_floor.stream_seq < floorBefore; tries++) {
      if (tries > 100) throw new Error('the projection consumer never acknowledged the stream');
      await sleep(100);
    }

    await service.stop();
    service = null;
    // Stored while no notifier runs; then Redis loses everything.
    for (let n = 3; n < 6; n++) await stream.publish(n);
    await redis.client.flushdb();

    log.lines.length = 0;
    service = await start();
    await projectionsCaughtUp(nats, redis, prefix, 30_000);
    await nats.connection.flush();
    await sleep(500);

    expect([...seen].filter(([, count]) => count > 1)).toEqual([]);
    // Nothing acknowledged is lost: every notice in the stream was published, once.
    expect(seen.size).toBe(6 * stream.noticesPerProject);

    const rebuilt = log.lines
      .map((line) => JSON.parse(line) as { msg: string; projection?: string; last_seq?: number; notices_from_seq?: number })
      .filter((line) => line.msg === 'projection rebuilt at start');
    expect(rebuilt.map((line) => line.projection).sort()).toEqual(
      batonProjections()
        .map((p) => p.name)
        .sort(),
    );
    const notices = rebuilt.find((line) => line.projection === 'notices');
    expect(notices).toEqual(expect.objectContaining({ last_seq: floorBefore, notices_from_seq: floorBefore + 1 }));
  }, 90_000);
});
