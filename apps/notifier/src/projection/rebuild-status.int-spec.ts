import { createEventRegistry } from '@baton/contracts';
import { createBatonProjector, createProjectionStore, jetStreamReplaySource, type FoldTarget, type RebuildResult, type ReplaySource } from '@baton/projections';
import { holdRun, startFixture, startRun, stopRun, type NotifierFixture } from '../web/console-fixture.int-support';
import { projectionPrefix } from './tokens';
import { HealthReadySchema, ProjectionsResponseSchema } from '../api/schemas';

/*
 * Issue 12: while a projection is rebuilt (here by another process, as `baton replay` would), the
 * operators keep reading the previous generation, whole, and the API says a rebuild runs and how
 * far it is: `GET /v1/projections` and the details of `/health/ready`. After the swap it says so.
 */
let fx: NotifierFixture;

beforeAll(async () => {
  fx = await startFixture();
  for (let i = 0; i < 6; i++) {
    await startRun(fx.events, 'alpha', `wr-${i}`);
    if (i % 2 === 0) await holdRun(fx.events, 'alpha', `wr-${i}`, `needs a decision ${i}`);
    else await stopRun(fx.events, 'alpha', `wr-${i}`, { packet_id: `stop-${i}`, why: 'policy', tried: [], pending: null, detail: `stop ${i}` } as never);
  }
  await fx.caughtUp();
}, 60_000);

afterAll(async () => {
  await fx?.close();
});

async function get(path: string, token?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${fx.base}${path}`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

interface Report {
  stream: { last_seq: number };
  rebuilding: boolean;
  projections: Array<{
    name: string;
    active_generation: number;
    last_seq: number;
    behind_by: number;
    rebuilding: boolean;
    rebuilds: Array<Record<string, unknown>>;
  }>;
}

it('GET /v1/projections and /health/ready show a running rebuild with its progress while the inbox keeps serving the previous generation whole; after the swap, none', async () => {
  const token = await fx.token('sre', 'viewer', '*');
  expect((await get('/v1/projections')).status).toBe(401);
  const idle = (await get('/v1/projections', token)).body as unknown as Report;
  expect(idle.rebuilding).toBe(false);
  expect(idle.projections.map((p) => p.name)).toEqual(['inbox', 'stops', 'handoffs', 'runs', 'notices']);
  for (const p of idle.projections) expect(p).toMatchObject({ last_seq: idle.stream.last_seq, behind_by: 0, rebuilding: false, rebuilds: [] });
  const inboxBefore = (await get('/v1/inbox?limit=50', token)).body;
  expect((inboxBefore['items'] as unknown[]).length).toBe(6);

  // A rebuild of every projection in this process, paused half-way through the stream.
  const store = createProjectionStore({ redis: fx.redis.client, prefix: projectionPrefix(fx.prefix) });
  const projector = createBatonProjector({ store });
  const source = jetStreamReplaySource({ nats: fx.nats, prefix: fx.prefix, registry: createEventRegistry() });
  let pause!: () => void;
  const paused = new Promise<void>((resolve) => (pause = resolve));
  let resume!: () => void;
  const resumed = new Promise<void>((resolve) => (resume = resolve));
  const half = Math.floor(idle.stream.last_seq / 2);
  const pausing: ReplaySource = (fromSeq) =>
    (async function* () {
      for await (const event of source(fromSeq)) {
        if (event.seq === half + 1) {
          pause();
          await resumed;
        }
        yield event;
      }
    })();
  const rebuild: Promise<Record<string, RebuildResult>> = store.rebuildMany(projector.projections as unknown as FoldTarget[], pausing, {
    by: 'baton replay',
    chunkEvents: 2,
    targetSeq: idle.stream.last_seq,
    totalEvents: idle.stream.last_seq,
  });
  await paused;
  // The chunk before the pause is written (it is in flight until the next event is asked for).
  await new Promise((resolve) => setTimeout(resolve, 200));

  const running = (await get('/v1/projections', token)).body as unknown as Report;
  // A token scoped to one project sees what the projections are doing, not the counters of the stream every tenant shares.
  const scoped = (await get('/v1/projections', await fx.token('tenant', 'operator', ['alpha']))).body;
  expect(scoped).toMatchObject({ counters: 'hidden', rebuilding: true, redis: { full: false, since: null, refused: 0 } });
  // Both shapes are what the OpenAPI document says the route answers.
  for (const report of [running, scoped]) expect(ProjectionsResponseSchema.safeParse(report).error).toBeUndefined();
  expect(scoped['stream']).toBeUndefined();
  for (const p of scoped['projections'] as Array<Record<string, unknown>>) {
    expect(Object.keys(p).sort()).toEqual([
      'active_generation',
      'behind',
      'behind_reason',
      'name',
      'needs_rebuild',
      'rebuilding',
      'rebuilds',
      'stored_version',
      'version',
    ]);
    // Redis is not full: nothing holds it back but the replay.
    expect(p['behind_reason']).toBeNull();
    expect(p['behind']).toBe(false); // the live generation is current: the rebuild writes a shadow
    const [rebuild] = p['rebuilds'] as Array<Record<string, unknown>>;
    expect(rebuild).toMatchObject({ kind: 'rebuild', by: 'baton replay', phase: 'replay', stale: false });
    for (const counter of ['seq', 'target_seq', 'events', 'total_events', 'rate']) expect(rebuild).not.toHaveProperty(counter);
  }
  expect(running.rebuilding).toBe(true);
  for (const p of running.projections) {
    expect(p.rebuilding).toBe(true);
    expect(p.active_generation).toBe(idle.projections.find((q) => q.name === p.name)?.active_generation);
    expect(p.rebuilds).toHaveLength(1);
    expect(p.rebuilds[0]).toMatchObject({ kind: 'rebuild', by: 'baton replay', phase: 'replay', total_events: idle.stream.last_seq, stale: false });
    expect(p.rebuilds[0]?.['events'] as number).toBeGreaterThan(0);
    expect(p.rebuilds[0]?.['percent'] as number).toBeGreaterThan(0);
    expect(p.rebuilds[0]?.['percent'] as number).toBeLessThan(100);
  }
  const ready = await get('/health/ready');
  expect(ready.status).toBe(200);
  expect(HealthReadySchema.safeParse(ready.body).error).toBeUndefined();
  const details = (
    ready.body['details'] as { projections: { rebuilding: boolean; projections: Record<string, { rebuilding: { percent: number; by: string } | null }> } }
  ).projections;
  expect(details.rebuilding).toBe(true);
  expect(details.projections['inbox']?.rebuilding).toMatchObject({ by: 'baton replay' });
  // Readiness answers without a token: what the projections do, never the counters of the stream every project shares.
  expect(details.projections['inbox']).toEqual({
    behind: false,
    rebuilding: {
      generation: running.projections.find((p) => p.name === 'inbox')?.rebuilds[0]?.['generation'],
      by: 'baton replay',
      this_instance: false,
      percent: expect.any(Number),
      eta_seconds: expect.anything(),
    },
  });
  expect(JSON.stringify(ready.body)).not.toMatch(/last_seq|behind_by|total_events|"rate"/);
  // Operators read the previous generation, whole.
  expect((await get('/v1/inbox?limit=50', token)).body).toEqual(inboxBefore);

  resume();
  const results = await rebuild;
  for (const result of Object.values(results)) expect(result.status).toBe('swapped');
  const after = (await get('/v1/projections', token)).body as unknown as Report;
  expect(after.rebuilding).toBe(false);
  for (const p of after.projections) expect(p).toMatchObject({ rebuilding: false, rebuilds: [], behind_by: 0 });
  expect(((await get('/health/ready')).body['details'] as { projections: { rebuilding: boolean } }).projections.rebuilding).toBe(false);
  expect((await get('/v1/inbox?limit=50', token)).body).toEqual(inboxBefore);
});
