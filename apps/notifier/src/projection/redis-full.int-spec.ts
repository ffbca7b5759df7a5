import { createEventRegistry } from '@baton/contracts';
import { batonStreamNames } from '@baton/eventstore';
import { metricSample } from '@baton/platform';
import { batonProjections, createBatonProjector, createProjectionStore, diffSnapshots, jetStreamReplaySource, RedisFullError } from '@baton/projections';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startRedisServer, type PrivateServer } from '../../../../libs/eventstore/src/int/servers';
import { authFixture, type AuthFixture } from '../auth/auth.int-support';
import { HealthReadySchema, ProjectionsResponseSchema } from '../api/schemas';
import { captureNotifierLog, countNotices, projectionsCaughtUp, scenarioStream } from './scenario-stream.int-support';
import { PROJECTION_DURABLE, projectionPrefix } from './tokens';

/*
 * Redis full: a deployment's Redis runs with `maxmemory` and `maxmemory-policy noeviction`, so once
 * it is full every write is refused (`OOM command not allowed when used memory > 'maxmemory'`) while
 * reads still answer. The notifier runs in process against the real NATS and a private redis-server
 * started with a small maxmemory.
 *
 * 1. Events are stored until Redis is full, then more. While it is full: no event is acknowledged
 *    that the projections did not apply (none skipped, none dead-lettered), the condition is said
 *    once at warn (not per event, per batch or per retry), counted in `baton_redis_full` and
 *    `baton_redis_full_refused_total`, shown on `/health/ready` (`details.redis`, still 200) and in
 *    `GET /v1/projections` (behind, `behind_reason: redis_full`); the operator API keeps reading what
 *    is there, and a write it cannot make (a web sign-in's session) is 503 `redis_full`. Once
 *    maxmemory is raised (CONFIG SET) the applier catches up by itself: said once at info, every
 *    notice published, the live event stream sends the changes it held back, and the projections
 *    equal a fold of the stream.
 * 2. Redis with a little room left: small writes fit, a large event's does not (Redis counts the
 *    command's own bytes). The events before it are applied; the large one waits — a full Redis is
 *    not its failure, so BATON_MAX_DELIVER refusals never make the applier skip it (a no-op write
 *    at its sequence, which may fit, then a `projection_failed` letter): nothing lost — and
 *    readiness says Redis is full although small writes still go through; once room is made it is
 *    applied.
 */

const PROJECTIONS = ['inbox', 'stops', 'handoffs', 'runs', 'notices'];
const MAXMEMORY = 3 * 1024 * 1024;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

type LogLine = { level: string; msg: string; [field: string]: unknown };

/** What the specs read of a notifier started by `authFixture` on a private Redis. */
function probes(fixture: AuthFixture) {
  const get = async (path: string, init: { token?: string } = {}) => {
    const response = await fetch(`${fixture.base}${path}`, {
      headers: init.token ? { authorization: `Bearer ${init.token}` } : {},
      signal: AbortSignal.timeout(10_000),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, text, json: () => JSON.parse(text) as Record<string, unknown> };
  };
  const store = () => createProjectionStore({ redis: fixture.redis.client, prefix: projectionPrefix(fixture.prefix) });
  return {
    get,
    /** Redis's used_memory and maxmemory. */
    memory: async () => {
      const info = await fixture.redis.client.info('memory');
      const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1] ?? NaN);
      return { used: field('used_memory'), max: field('maxmemory') };
    },
    streamLast: async () => (await fixture.nats.jsm.streams.info(batonStreamNames(fixture.prefix).events)).state.last_seq,
    /** Each projection's last applied sequence, by name. */
    applied: async () => {
      const live = store();
      const statuses = await Promise.all(batonProjections().map((projection) => live.status(projection)));
      return Object.fromEntries(statuses.map((status) => [status.projection, status.lastSeq])) as Record<string, number>;
    },
    /** The projection consumer's ack floor: every event at or below it was acknowledged. */
    ackFloor: async () => (await fixture.nats.jsm.consumers.info(batonStreamNames(fixture.prefix).events, PROJECTION_DURABLE)).ack_floor.stream_seq,
    /** Dead letters of the prefix (a skipped projection event is one). */
    letters: async () => (await fixture.nats.jsm.streams.info(batonStreamNames(fixture.prefix).dlq).catch(() => null))?.state.messages ?? 0,
    /** The projections equal a fold of the whole stream (what `baton verify` checks), folded into `<prefix>:fold`. */
    expectEqualToFold: async () => {
      const folded = createProjectionStore({ redis: fixture.redis.client, prefix: `${fixture.prefix}:fold` });
      await createBatonProjector({ store: folded }).rebuildAll(
        jetStreamReplaySource({ nats: fixture.nats, prefix: fixture.prefix, registry: createEventRegistry() }),
      );
      const live = store();
      for (const name of PROJECTIONS) {
        const [a, b] = await Promise.all([live.snapshot(name), folded.snapshot(name)]);
        expect({ name, differences: diffSnapshots(a, b) }).toEqual({ name, differences: [] });
        expect(a.lastSeq).toBe(b.lastSeq);
      }
    },
  };
}

describe('Redis full (maxmemory, noeviction) under live traffic (private redis-server, real NATS)', () => {
  let server: PrivateServer;
  let log: ReturnType<typeof captureNotifierLog> | undefined;
  let seen: Map<string, number>;
  beforeAll(async () => {
    server = await startRedisServer({ args: ['--maxmemory', String(MAXMEMORY), '--maxmemory-policy', 'noeviction'] });
  }, 60_000);
  const fixture = authFixture({
    prefix: 'rf',
    dir: 'redis-full',
    tokenKey: false,
    // BATON_MAX_DELIVER 2: an applier that counted a full Redis as the event's failure would try to skip it at the second.
    env: () => ({ REDIS_URL: server.url, LOG_LEVEL: 'info', BATON_MAX_DELIVER: '2', NOTIFIER_PROJECTION_CHECK_MS: '2000' }),
    beforeStart: async (fx) => {
      log = captureNotifierLog();
      seen = await countNotices(fx.nats, fx.prefix);
    },
  });
  afterAll(async () => {
    log?.restore();
    await server?.remove();
  }, 30_000);
  const lines = () => (log?.lines ?? []).map((line) => JSON.parse(line) as LogLine);

  it('RedisFullError.of recognises what Redis answers when maxmemory refuses a write (a command, a script, a discarded transaction), and nothing else', () => {
    const oom = "OOM command not allowed when used memory > 'maxmemory'.";
    expect(RedisFullError.of(new Error(oom))).toBeInstanceOf(RedisFullError);
    expect(RedisFullError.of(new Error(`${oom} script: 3922077457713c6fa11bedcefaeaf3d8905643c3, on @user_script:1.`))).toBeInstanceOf(RedisFullError);
    expect(RedisFullError.of(new Error('wrapped', { cause: new Error(oom) }))).toBeInstanceOf(RedisFullError);
    expect(
      RedisFullError.of(Object.assign(new Error('EXECABORT Transaction discarded because of previous errors.'), { previousErrors: [new Error(oom)] })),
    ).toBeInstanceOf(RedisFullError);
    expect(RedisFullError.of(new Error('Command timed out'))).toBeNull();
    expect(RedisFullError.of(new Error('WRONGTYPE Operation against a key holding the wrong kind of value'))).toBeNull();
    expect(RedisFullError.of(oom)).toBeNull();
  });

  it('full: nothing acknowledged unapplied, said once, counted, on readiness and /v1/projections, reads answer; raised: caught up by itself, equal to a fold', async () => {
    const { get, memory, streamLast, applied, ackFloor, letters, expectEqualToFold } = probes(fixture);
    const stream = scenarioStream(fixture.nats, fixture.prefix);
    const admin = (await fixture.admin.create({ name: 'ada', role: 'admin', projects: ['*'], now: new Date().toISOString() })).token;

    // The live event stream, open before Redis fills: what it sends once the held-back events are applied.
    const frames: string[] = [];
    const sse = new AbortController();
    const live = await fetch(`${fixture.base}/v1/events/stream`, { headers: { authorization: `Bearer ${admin}` }, signal: sse.signal });
    expect(live.status).toBe(200);
    const reading = (async () => {
      const decoder = new TextDecoder();
      try {
        for await (const chunk of live.body as unknown as AsyncIterable<Uint8Array>) frames.push(...decoder.decode(chunk).split('\n\n'));
      } catch {
        // aborted at the end
      }
    })();

    // Lines from here on: the write that crosses maxmemory may already be refused (and said) while
    // the loop below still waits for its apply.
    const fullFrom = lines().length;
    // Store one project's runs at a time, each applied, until Redis refuses a write (maxmemory reached).
    let projects = 0;
    for (;;) {
      expect(projects).toBeLessThan(300);
      await stream.publish(projects++);
      const last = await streamLast();
      while ((await memory()).used <= MAXMEMORY && Object.values(await applied()).some((seq) => seq < last)) await sleep(50);
      if ((await memory()).used > MAXMEMORY) break;
    }
    // More traffic while Redis is full: these events must wait, not be acknowledged or skipped.
    const more = 4;
    for (let i = 0; i < more; i++) await stream.publish(projects++);
    const target = await streamLast();
    // A few rounds of the applier's retries (its waits are 2 s; BATON_MAX_DELIVER is 2).
    await sleep(7_000);
    expect((await memory()).used).toBeGreaterThan(MAXMEMORY);

    // Nothing the projections did not apply is acknowledged; nothing skipped or dead-lettered.
    const during = Object.values(await applied());
    expect(Math.min(...during)).toBeLessThan(target);
    expect(await ackFloor()).toBeLessThanOrEqual(Math.min(...during));
    expect(await letters()).toBe(0);

    // Said once at warn, with Redis's words: not per event, per batch or per retry.
    const loud = lines()
      .slice(fullFrom)
      .filter((line) => line.level === 'warn' || line.level === 'error');
    const [first, ...summaries] = loud;
    expect(first).toEqual(
      expect.objectContaining({
        level: 'warn',
        msg: 'redis full: projection writes refused; the projections wait until Redis has room (docs/sre.md, What fills Redis)',
        limit: 'maxmemory',
        error: expect.stringContaining('OOM command not allowed'),
      }),
    );
    // A full phase that outlasts a minute (a loaded machine: seen in CI) adds the summary, at most one
    // a minute, and nothing else.
    for (const line of summaries) expect(line).toMatchObject({ level: 'warn', msg: 'redis still full: projection writes refused', limit: 'maxmemory' });
    const times = loud.map((line) => Date.parse(String(line['time'])));
    for (let i = 1; i < times.length; i++) expect((times[i] as number) - (times[i - 1] as number)).toBeGreaterThanOrEqual(59_000);

    // Readiness: still 200 (reads answer; no restart frees memory), and says why.
    const ready = await get('/health/ready');
    expect(ready.status).toBe(200);
    expect(HealthReadySchema.safeParse(ready.json()).error).toBeUndefined();
    expect(ready.json()['details']).toMatchObject({ redis: { full: true, since: expect.any(String), refused: expect.any(Number) } });
    expect((ready.json()['details'] as { redis: { refused: number } }).redis.refused).toBeGreaterThan(0);

    // GET /v1/projections: behind, because Redis is full.
    const report = await get('/v1/projections', { token: admin });
    expect(report.status).toBe(200);
    expect(ProjectionsResponseSchema.safeParse(report.json()).error).toBeUndefined();
    expect(report.json()['redis']).toMatchObject({ full: true });
    const views = report.json()['projections'] as Array<{ name: string; behind_by: number; behind_reason: string | null }>;
    expect(views.some((view) => view.behind_by > 0)).toBe(true);
    for (const view of views) expect(view.behind_reason).toBe(view.behind_by > 0 ? 'redis_full' : null);

    // Reads keep answering from what is there.
    const inbox = await get('/v1/inbox?project=p0', { token: admin });
    expect(inbox.status).toBe(200);
    expect((inbox.json()['items'] as unknown[]).length).toBeGreaterThan(0);
    expect((await get('/v1/stops?project=p0', { token: admin })).status).toBe(200);
    expect((await get('/v1/projects/p0/runs/wr-a', { token: admin })).status).toBe(200);

    // Metrics: the gauge and the refused count.
    const metrics = (await get('/metrics')).text;
    expect(metricSample(metrics, 'baton_redis_full')).toBe(1);
    expect(metricSample(metrics, 'baton_redis_full_refused_total')).toBeGreaterThan(0);

    // A request whose write Redis refuses (a web sign-in opens a session): 503 redis_full, not 500.
    const page = await fetch(`${fixture.base}/login`);
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())?.[1] ?? '';
    const signIn = await fetch(`${fixture.base}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: page.headers.get('set-cookie')?.split(';')[0] ?? '' },
      body: new URLSearchParams({ _csrf: csrf, token: admin, next: '/inbox' }).toString(),
      redirect: 'manual',
    });
    expect(signIn.status).toBe(503);
    expect(signIn.headers.get('retry-after')).toBe('30');
    expect(((await signIn.json()) as { error: { code: string } }).error.code).toBe('redis_full');

    // Room made: the applier catches up by itself.
    await fixture.redis.client.config('SET', 'maxmemory', String(64 * 1024 * 1024));
    await projectionsCaughtUp(fixture.nats, fixture.redis, fixture.prefix, 60_000);
    await fixture.nats.connection.flush();
    await sleep(500);

    expect(lines().filter((line) => line.msg.startsWith('redis full no longer'))).toEqual([
      expect.objectContaining({ level: 'info', limit: 'maxmemory', refused: expect.any(Number), full_ms: expect.any(Number) }),
    ]);
    expect(await letters()).toBe(0);
    // Every notice published: none lost while Redis was full.
    expect(seen.size).toBe(projects * stream.noticesPerProject);
    // The live stream sent the changes of the projects stored while Redis was full.
    for (let n = projects - more; n < projects; n++)
      expect(frames.some((frame) => frame.includes('event: inbox') && frame.includes(`"project":"p${n}"`))).toBe(true);
    sse.abort();
    await reading;

    const readyAfter = await get('/health/ready');
    expect(readyAfter.json()['details']).toMatchObject({ redis: { full: false, since: null, refused: 0 } });
    expect(metricSample((await get('/metrics')).text, 'baton_redis_full')).toBe(0);
    const reportAfter = await get('/v1/projections', { token: admin });
    for (const view of reportAfter.json()['projections'] as Array<{ behind_by: number; behind_reason: string | null }>)
      expect(view).toMatchObject({ behind_by: 0, behind_reason: null });

    await expectEqualToFold();
  }, 180_000);
});

describe('Redis with room for small writes only: a large event waits, never skipped (private redis-server, real NATS)', () => {
  let server: PrivateServer;
  let log: ReturnType<typeof captureNotifierLog> | undefined;
  beforeAll(async () => {
    server = await startRedisServer({ args: ['--maxmemory-policy', 'noeviction'] });
  }, 60_000);
  const fixture = authFixture({
    prefix: 'rfl',
    dir: 'redis-full-large',
    tokenKey: false,
    env: () => ({ REDIS_URL: server.url, LOG_LEVEL: 'info', BATON_MAX_DELIVER: '2' }),
    beforeStart: () => {
      log = captureNotifierLog();
    },
  });
  afterAll(async () => {
    log?.restore();
    await server?.remove();
  }, 30_000);

  it('a handoff whose write is larger than the room left waits (never skipped or dead-lettered), the events before it are applied, readiness says full, and it is applied once room is made', async () => {
    const { get, memory, streamLast, applied, ackFloor, letters, expectEqualToFold } = probes(fixture);
    const stream = scenarioStream(fixture.nats, fixture.prefix);
    await stream.publish(0);
    await projectionsCaughtUp(fixture.nats, fixture.redis, fixture.prefix, 30_000);
    const before = await streamLast();

    // Room for small writes (256 KiB), not for a handoff carrying a 600 KB context.
    await fixture.redis.client.config('SET', 'maxmemory', String((await memory()).used + 256 * 1024));
    const blob = 'x'.repeat(600_000);
    await stream.publish(1, (type, payload) => (type === 'handoff.created' ? { ...payload, context: { blob } } : payload));
    const target = await streamLast();
    // Long enough for BATON_MAX_DELIVER (2) failures and the skip that used to follow them.
    await sleep(7_000);

    const during = await applied();
    expect(during['handoffs']).toBeGreaterThan(before);
    expect(during['handoffs']).toBeLessThan(target);
    expect(await ackFloor()).toBeLessThanOrEqual(Math.min(...Object.values(during)));
    expect(await letters()).toBe(0);
    expect((await get('/health/ready')).json()['details']).toMatchObject({ redis: { full: true } });
    expect(
      (log?.lines ?? []).map((line) => JSON.parse(line) as LogLine).filter((line) => line.level === 'warn' && line.msg.startsWith('redis full')),
    ).toHaveLength(1);

    await fixture.redis.client.config('SET', 'maxmemory', '0');
    await projectionsCaughtUp(fixture.nats, fixture.redis, fixture.prefix, 60_000);
    expect(await letters()).toBe(0);
    expect((await get('/health/ready')).json()['details']).toMatchObject({ redis: { full: false } });
    await expectEqualToFold();
  }, 120_000);
});
