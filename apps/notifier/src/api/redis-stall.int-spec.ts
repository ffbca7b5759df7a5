import { RedisUnavailableError } from '@baton/projections';
import { authFixture } from '../auth/auth.int-support';
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
  let server: PrivateServer;
  let token: string;
  let paused = false;

  beforeAll(async () => {
    server = await startPrivateServer('redis-server');
  }, 60_000);
  // No token key: what this spec tests is a stalled Redis, not token signing.
  const fixture = authFixture({ prefix: 'rs', dir: 'redis-stall', tokenKey: false, env: () => ({ REDIS_URL: server.url, REDIS_COMMAND_TIMEOUT_MS: '500' }) });
  fixture.beforeStop(() => {
    if (paused) server.resume();
  });
  afterAll(async () => {
    await server?.remove();
  }, 30_000);
  beforeAll(async () => {
    token = (await fixture.admin.create({ name: 'olga', role: 'operator', projects: ['demo'], now: new Date().toISOString() })).token;
  });

  const inbox = async () => {
    const started = Date.now();
    const response = await fetch(`${fixture.base}/v1/inbox?project=demo`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(10_000),
    });
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

    await server.pause();
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
    const page = await fetch(`${fixture.base}/inbox`, {
      headers: { cookie: 'baton_session=' + 'a'.repeat(43) },
      redirect: 'manual',
      signal: AbortSignal.timeout(10_000),
    });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(page.status).toBe(503);
    // Readiness says which dependency failed, in the shape OpenAPI gives it.
    const notReady = await fetch(`${fixture.base}/health/ready`, { signal: AbortSignal.timeout(10_000) });
    expect(notReady.status).toBe(503);
    const notReadyBody: unknown = await notReady.json();
    expect(HealthReadySchema.safeParse(notReadyBody).error).toBeUndefined();
    expect(notReadyBody).toMatchObject({ status: 'not_ready', checks: { nats: true, redis: false } });

    server.resume();
    paused = false;
    const deadline = Date.now() + 10_000;
    let last = await inbox();
    while (last.status !== 200 && Date.now() < deadline) {
      await sleep(200);
      last = await inbox();
    }
    expect(last.status).toBe(200);
    const ready = await fetch(`${fixture.base}/health/ready`);
    expect(ready.status).toBe(200);
    expect(HealthReadySchema.safeParse(await ready.json()).error).toBeUndefined();
  }, 60_000);
});
