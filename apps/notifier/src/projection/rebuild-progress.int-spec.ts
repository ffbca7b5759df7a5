import { randomBytes } from 'node:crypto';
import { connectNats, type NatsHandle } from '@baton/eventstore';
import type { ServiceRuntime } from '@baton/platform';
import {
  createBatonProjector,
  createProjectionStore,
  createRedis,
  foldScenario,
  scenarioLog,
  type BatonProjector,
  type RebuildResult,
  type RedisHandle,
  type ReplaySource,
  type SequencedEvent,
} from '@baton/projections';
import { waitFor } from '@baton/wait';
import { HealthReadySchema } from '../api/schemas';
import { ProjectionStatus, type ProjectionsReadiness, type ReadinessRebuild } from './projection-status';
import { projectionPrefix } from './tokens';

/*
 * Two notifiers rebuilding the same projections at once (both started on a Redis that lost its
 * data, say), each writing its rebuild's progress entry in Redis, and a third one rebuilding
 * nothing. Readiness reported whichever rebuild it found first: a notifier showed the other's
 * figure, then its own, lower one — the percent ran backwards. Each one now reports one rebuild,
 * named (generation, instance, whether it runs it): its own, else the oldest another runs; the
 * figure of a rebuild only grows.
 */

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';

/** A replay source that hands out the log's events up to the sequence `to` allows, waiting at the next. */
function gatedSource(log: readonly SequencedEvent[]): { source: ReplaySource; to(seq: number): void } {
  let allowed = 0;
  let wake: Array<() => void> = [];
  return {
    source: (fromSeq) =>
      (async function* () {
        for (const event of log) {
          if (event.seq < fromSeq) continue;
          while (event.seq > allowed) await new Promise<void>((resolve) => wake.push(resolve));
          yield event;
        }
      })(),
    to(seq) {
      allowed = seq;
      const woken = wake;
      wake = [];
      for (const resolve of woken) resolve();
    },
  };
}

describe('readiness with two notifiers rebuilding at once (real Redis)', () => {
  const prefix = `rp${randomBytes(5).toString('hex')}`;
  let redis: RedisHandle;
  let nats: NatsHandle;
  let projector: BatonProjector;
  /** Each rebuilding notifier's own projector (a projector runs one rebuild at a time). */
  let projectors: Record<'a' | 'b', BatonProjector>;
  const status: Record<'a' | 'b' | 'c', ProjectionStatus> = {} as never;

  beforeAll(async () => {
    redis = createRedis(REDIS_URL);
    // Stream info is asked of NATS (no such stream here: `behind` is null); the figures come from Redis.
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    const store = createProjectionStore({ redis: redis.client, prefix: projectionPrefix(prefix) });
    projector = createBatonProjector({ store });
    projectors = { a: createBatonProjector({ store }), b: createBatonProjector({ store }) };
    for (const name of ['a', 'b', 'c'] as const) {
      const runtime = { instance: `notifier-${name}`, config: { BATON_PREFIX: prefix }, nats } as unknown as ServiceRuntime;
      status[name] = new ProjectionStatus(runtime, projector);
    }
  });

  afterAll(async () => {
    for await (const batch of redis.client.scanStream({ match: `${projectionPrefix(prefix)}:*`, count: 500 })) {
      const keys = batch as string[];
      if (keys.length > 0) await redis.client.unlink(...keys);
    }
    await redis.close();
    await nats.close();
  });

  it('each reports one rebuild, named, its own first; no figure runs backwards; one not rebuilding reports the other`s as such', async () => {
    // Three projects' scenarios, one after the other: enough events for figures to move in steps.
    const log = ['p1', 'p2', 'p3'].flatMap((project) => scenarioLog(foldScenario(), project)).map((event, i) => ({ ...event, seq: i + 1 }));
    const total = log.length;
    const whole: ReplaySource = (fromSeq) =>
      (async function* () {
        for (const event of log) if (event.seq >= fromSeq) yield event;
      })();
    await projector.rebuildAll(whole);
    const names = projector.projections.map((p) => p.name);

    /** Every readiness answer, per reader, to check afterwards that no rebuild's figure went down. */
    const seen: Record<'a' | 'b' | 'c', ProjectionsReadiness[]> = { a: [], b: [], c: [] };
    const read = async (reader: 'a' | 'b' | 'c') => {
      const readiness = await status[reader].readiness();
      // What `/health/ready` carries is what the OpenAPI document says.
      expect(HealthReadySchema.safeParse({ status: 'ready', checks: {}, details: { projections: readiness } }).error).toBeUndefined();
      seen[reader].push(readiness);
      return readiness;
    };
    const inbox = (readiness: ProjectionsReadiness): ReadinessRebuild | null => readiness.projections['inbox']?.rebuilding ?? null;

    const gates = { a: gatedSource(log), b: gatedSource(log) };
    const rebuild = (by: 'a' | 'b'): Promise<Record<string, RebuildResult>> =>
      projectors[by].rebuildAll(gates[by].source, { by: `notifier-${by}`, chunkEvents: 2, targetSeq: total, totalEvents: total });
    const rebuildsBy = async (by: string) => (await projector.rebuilds()).filter((r) => r.by === by);

    // A starts first (the lower generation of each projection), then B.
    const runA = rebuild('a');
    const generationsA = Object.fromEntries(
      (await waitFor(async () => ((await rebuildsBy('notifier-a')).length === names.length ? rebuildsBy('notifier-a') : undefined), 'rebuild A`s entries')).map(
        (r) => [r.projection, r.generation],
      ),
    );
    const runB = rebuild('b');
    const generationsB = Object.fromEntries(
      (await waitFor(async () => ((await rebuildsBy('notifier-b')).length === names.length ? rebuildsBy('notifier-b') : undefined), 'rebuild B`s entries')).map(
        (r) => [r.projection, r.generation],
      ),
    );
    for (const name of names) expect(generationsB[name]).toBeGreaterThan(generationsA[name] as number);

    // A three quarters through the stream, B a quarter.
    gates.a.to(Math.floor(total * 0.75));
    gates.b.to(Math.floor(total * 0.25));
    await waitFor(async () => ((inbox(await read('a'))?.percent ?? 0) >= 60 ? true : undefined), 'A at 60 %');
    await waitFor(async () => ((inbox(await read('b'))?.percent ?? 0) >= 15 ? true : undefined), 'B at 15 %');
    const [a, b, c] = [await read('a'), await read('b'), await read('c')];
    for (const name of names) {
      // Each rebuilding notifier reports its own rebuild, not the other's.
      expect(a.projections[name]?.rebuilding).toMatchObject({ generation: generationsA[name], by: 'notifier-a', this_instance: true });
      expect(b.projections[name]?.rebuilding).toMatchObject({ generation: generationsB[name], by: 'notifier-b', this_instance: true });
      // One rebuilding nothing reports the oldest, as another instance's.
      expect(c.projections[name]?.rebuilding).toMatchObject({ generation: generationsA[name], by: 'notifier-a', this_instance: false });
    }
    expect(inbox(b)?.percent).toBeLessThan(40);

    // B moves on; A finishes and swaps its generations in.
    gates.b.to(Math.floor(total * 0.5));
    await waitFor(async () => ((inbox(await read('b'))?.percent ?? 0) >= 40 ? true : undefined), 'B at 40 %');
    await read('a');
    await read('c');
    gates.a.to(total);
    for (const result of Object.values(await runA)) expect(result.status).toBe('swapped');
    const [aAfter, cAfter] = [await read('a'), await read('c')];
    for (const name of names) {
      // A rebuilds nothing now: it reports B's rebuild, as B's.
      expect(aAfter.projections[name]?.rebuilding).toMatchObject({ generation: generationsB[name], by: 'notifier-b', this_instance: false });
      expect(cAfter.projections[name]?.rebuilding).toMatchObject({ generation: generationsB[name], by: 'notifier-b', this_instance: false });
    }
    await read('b');

    // B ends: A's generations were swapped in meanwhile, so it lost (its shadows dropped).
    gates.b.to(total);
    for (const result of Object.values(await runB)) expect(result.status).toBe('lost');
    for (const reader of ['a', 'b', 'c'] as const) {
      const done = await read(reader);
      expect(done.rebuilding).toBe(false);
      for (const name of names) expect(done.projections[name]?.rebuilding).toBeNull();
    }

    // No reader ever saw a rebuild's figure go down, nor its reported figure go down while it
    // named the same rebuild.
    const backwards: string[] = [];
    for (const reader of ['a', 'b', 'c'] as const) {
      const last = new Map<string, number>();
      for (const readiness of seen[reader]) {
        for (const [name, projection] of Object.entries(readiness.projections)) {
          const running = projection.rebuilding;
          if (running === null || running.percent === null) continue;
          const key = `${name} generation ${running.generation}`;
          const before = last.get(key);
          if (before !== undefined && running.percent < before) backwards.push(`${reader}: ${key} ${before} % then ${running.percent} %`);
          last.set(key, running.percent);
        }
      }
      expect(last.size).toBeGreaterThan(0);
    }
    expect(backwards).toEqual([]);
  }, 60_000);
});
