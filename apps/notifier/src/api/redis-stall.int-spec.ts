import { randomBytes } from 'node:crypto';
import { batonStreamNames, connectNats, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { createRedis, RedisUnavailableError, type RedisHandle } from '@baton/projections';
import { TokenStore } from '../auth/token-store';
import { startNotifier } from '../main';
import { HealthReadySchema } from './schemas';
import { startPrivateServer, type PrivateServer } from './private-server.int-support';

/*
 * Issue 14: with Redis stalled (SIGSTOP), the operator API answers 503 `projections_unavailable`
 * within about two seconds instead of hanging, and recovers by itself once Redis answers again
 * (SIGCONT), without a restart. The notifier runs in process against the real NATS and a private
 * redis-server on a free loopback port, which the test pauses; the shared Redis is never touched.
 */

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('a stalled Redis: the API fails fast with 503 projections_unavailable and recovers by itself (private redis-server, real NATS)', () => {
  const prefix = `rs${randomBytes(5).toString('hex')}`;
  let server: PrivateServer;
  let redisUrl: string;
  let redis: RedisHandle;
  let nats: NatsHandle;
  let service: RunningService;
  let base: string;
  let token: string;
  let paused = false;

  beforeAll(async () => {
    server = await startPrivateServer('redis-server');
    redisUrl = server.url;
    redis = createRedis(redisUrl);
    nats = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', reconnect: false });
    service = await startNotifier({
      ...process.env,
      BATON_PREFIX: prefix,
      HTTP_PORT: '0',
      LOG_LEVEL: 'error',
      REDIS_URL: redisUrl,
      REDIS_COMMAND_TIMEOUT_MS: '500',
    });
    base = (await service.app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
    token = (await new TokenStore(redis.client, prefix).create({ name: 'olga', role: 'operator', projects: ['demo'], now: new Date().toISOString() })).token;
  }, 60_000);

  afterAll(async () => {
    if (paused) server.child.kill('SIGCONT');
    await service?.stop().catch(() => undefined);
    await redis?.close().catch(() => undefined);
    await server?.remove();
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats?.jsm.streams.delete(name).catch(() => undefined);
    await nats?.drain().catch(() => undefined);
  }, 30_000);

  const inbox = async () => {
    const started = Date.now();
    const response = await fetch(`${base}/v1/inbox?project=demo`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(10_000) });
    return {
      status: response.status,
      ms: Date.now() - started,
      retryAfter: response.headers.get('retry-after'),
      body: (await response.json()) as { error?: { code: string } },
    };
  };

  it('RedisUnavailableError.of recognises a command timeout, a closed connection and a refused one, and nothing else', () => {
    expect(RedisUnavailableError.of(new Error('Command timed out'))).toBeInstanceOf(RedisUnavailableError);
    expect(RedisUnavailableError.of(new Error('Connection is closed.'))).toBeInstanceOf(RedisUnavailableError);
    expect(RedisUnavailableError.of(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }))).toBeInstanceOf(
      RedisUnavailableError,
    );
    expect(RedisUnavailableError.of(new Error('wrapped', { cause: new Error('Command timed out') }))).toBeInstanceOf(RedisUnavailableError);
    expect(RedisUnavailableError.of(new Error('WRONGTYPE Operation against a key holding the wrong kind of value'))).toBeNull();
    expect(RedisUnavailableError.of('Command timed out')).toBeNull();
  });

  it('SIGSTOP: an API call answers 503 projections_unavailable within 2 s; SIGCONT: it answers 200 again without a restart', async () => {
    expect((await inbox()).status).toBe(200);

    server.child.kill('SIGSTOP');
    paused = true;
    const stalled = await inbox();
    expect(stalled).toMatchObject({ status: 503, retryAfter: '1', body: { error: { code: 'projections_unavailable' } } });
    expect(stalled.ms).toBeLessThan(2000);
    // A second call (the client's queue now holds timed-out commands) fails as fast.
    const again = await inbox();
    expect(again.status).toBe(503);
    expect(again.ms).toBeLessThan(2000);
    // A web page fails as fast too, as a page.
    const started = Date.now();
    const page = await fetch(`${base}/inbox`, {
      headers: { cookie: 'baton_session=' + 'a'.repeat(43) },
      redirect: 'manual',
      signal: AbortSignal.timeout(10_000),
    });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(page.status).toBe(503);
    // Readiness says which dependency failed, in the shape OpenAPI gives it.
    const notReady = await fetch(`${base}/health/ready`, { signal: AbortSignal.timeout(10_000) });
    expect(notReady.status).toBe(503);
    const notReadyBody: unknown = await notReady.json();
    expect(HealthReadySchema.safeParse(notReadyBody).error).toBeUndefined();
    expect(notReadyBody).toMatchObject({ status: 'not_ready', checks: { nats: true, redis: false } });

    server.child.kill('SIGCONT');
    paused = false;
    const deadline = Date.now() + 10_000;
    let last = await inbox();
    while (last.status !== 200 && Date.now() < deadline) {
      await sleep(200);
      last = await inbox();
    }
    expect(last.status).toBe(200);
    const ready = await fetch(`${base}/health/ready`);
    expect(ready.status).toBe(200);
    expect(HealthReadySchema.safeParse(await ready.json()).error).toBeUndefined();
  }, 60_000);
});
