import { diffSnapshots } from '../snapshot';
import { createProjectionStore, type ProjectionStore, type SequencedEvent } from '../store';
import { redisFixture, type RedisFixture } from '../test-support';
import { createBatonProjector, type BatonProjector } from './projector';
import { ProjectionGapError, ProjectionLostError } from './range';
import { scenarioLog } from './scenario';

const PROJECTIONS = ['inbox', 'stops', 'handoffs', 'runs', 'notices'];

const log: SequencedEvent[] = scenarioLog();

/** What a notifier instance does with the messages it was delivered: a range from where the projections stand. */
async function applyDelivered(fx: RedisFixture, projector: BatonProjector, lastDelivered: number): Promise<void> {
  const lowest = Math.min(...(await projector.status()).map((status) => status.lastSeq));
  if (lowest >= lastDelivered) return;
  await projector.applyRange({ fromSeq: lowest + 1, toSeq: lastDelivered, events: log.filter((e) => e.seq > lowest && e.seq <= lastDelivered) });
}

describe('range apply: several appliers at once (real Redis)', () => {
  let fx: RedisFixture;
  let reference: RedisFixture;

  beforeEach(async () => {
    fx = await redisFixture();
    reference = await redisFixture();
    const one = createBatonProjector({ store: reference.store });
    for (const event of log) await one.apply(event);
  });
  afterEach(async () => {
    await fx.cleanup();
    await reference.cleanup();
  });

  const expectSameAsReference = async () => {
    for (const name of PROJECTIONS) {
      const [got, want] = await Promise.all([fx.store.snapshot(name), reference.store.snapshot(name)]);
      expect({ name, lastSeq: got.lastSeq, differences: diffSnapshots(got, want) }).toEqual({ name, lastSeq: log.length, differences: [] });
    }
  };

  it('two appliers sharing the deliveries (interleaved, concurrent, overtaking each other) never skip an event: the projections equal applying every event one by one', async () => {
    const a = createBatonProjector({ store: fx.store });
    const b = createBatonProjector({ store: fx.store });
    // Deliveries split in small alternating chunks; the later chunk often commits first.
    const work: Promise<void>[] = [];
    for (let end = 3, turn = 0; end <= log.length + 2; end += 3, turn++) {
      const upTo = Math.min(end, log.length);
      work.push(applyDelivered(fx, turn % 2 === 0 ? a : b, upTo));
      if (turn % 3 === 2) await Promise.all(work.splice(0));
    }
    await Promise.all(work);
    await expectSameAsReference();
  });

  it('an applier whose cached folds went stale (another applier committed since) re-folds from what is stored', async () => {
    const a = createBatonProjector({ store: fx.store });
    const b = createBatonProjector({ store: fx.store });
    const third = Math.floor(log.length / 3);
    await applyDelivered(fx, b, third);
    await applyDelivered(fx, a, 2 * third); // b's caches are now behind
    await applyDelivered(fx, b, log.length);
    await expectSameAsReference();
  });

  it('rebuildAll rebuilds every projection at once (shadow generations, swapped in) into the same state as applying the events one by one', async () => {
    const projector = createBatonProjector({ store: fx.store });
    await applyDelivered(fx, projector, 5); // a live projection part of the way
    const source = (fromSeq: number) =>
      (async function* () {
        for (const event of log) if (event.seq >= fromSeq) yield event;
      })();
    const results = await projector.rebuildAll(source);
    expect(Object.values(results).map((r) => r.status)).toEqual(PROJECTIONS.map(() => 'swapped'));
    await expectSameAsReference();
  });

  it('caches bounded to one byte (each keeps only the state just used) still apply ranges and single events into the same state: evicted states are loaded again', async () => {
    const projector = createBatonProjector({ store: fx.store, cacheBytes: 1 });
    const half = Math.floor(log.length / 2);
    for (let from = 1; from <= half; from += 4) {
      const to = Math.min(from + 3, half);
      await projector.applyRange({ fromSeq: from, toSeq: to, events: log.filter((e) => e.seq >= from && e.seq <= to) });
    }
    for (const event of log.filter((e) => e.seq > half)) await projector.apply(event);
    await expectSameAsReference();
  });

  it('the whole log as ranges of up to 50 events (a fold state set again later in the same call is not written): the same state as one by one', async () => {
    const projector = createBatonProjector({ store: fx.store });
    await projector.applyRange({ fromSeq: 1, toSeq: log.length, events: log });
    await expectSameAsReference();
  });

  it('a group of events past the byte bound is sent in several atomic calls, each with every value it sets: the same state', async () => {
    const small = createProjectionStore({ redis: fx.handle.client, prefix: fx.prefix, batchEvents: 50, batchBytes: 2_000 });
    const projector = createBatonProjector({ store: small });
    await projector.applyRange({ fromSeq: 1, toSeq: log.length, events: log });
    await expectSameAsReference();
  });

  it('an applier that stands where its last commit left every projection reads nothing for states it has cached: the commit alone checks', async () => {
    let loads = 0;
    const counted = new Proxy(fx.store, {
      get(target, key) {
        if (key === 'load')
          return (...args: Parameters<ProjectionStore['load']>) => {
            loads++;
            return target.load(...args);
          };
        const value = target[key as keyof ProjectionStore];
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const projector = createBatonProjector({ store: counted });
    const half = Math.floor(log.length / 2);
    await projector.applyRange({ fromSeq: 1, toSeq: half, events: log.slice(0, half) });
    expect(loads).toBeGreaterThanOrEqual(PROJECTIONS.length);
    loads = 0;
    // One more event: the projections that do not handle it need no state, so they do not read.
    await projector.applyRange({ fromSeq: half + 1, toSeq: half + 1, events: log.slice(half, half + 1) });
    expect(loads).toBeLessThan(PROJECTIONS.length);
    await projector.applyRange({ fromSeq: half + 2, toSeq: log.length, events: log.slice(half + 1) });
    await expectSameAsReference();
  });

  it('an applier whose last commit another applier has gone past re-applies its range from what is stored: the compare-and-set refuses the trusted commit', async () => {
    const a = createBatonProjector({ store: fx.store });
    const b = createBatonProjector({ store: fx.store });
    const third = Math.floor(log.length / 3);
    await a.applyRange({ fromSeq: 1, toSeq: third, events: log.slice(0, third) });
    await b.applyRange({ fromSeq: third + 1, toSeq: 2 * third, events: log.slice(third, 2 * third) });
    // a still believes the projections stand at `third`: its range from there is a redelivery of b's and more.
    await a.applyRange({ fromSeq: third + 1, toSeq: log.length, events: log.slice(third) });
    await expectSameAsReference();
  });

  it('a range that would leave a hole after the last applied seq is refused and writes nothing', async () => {
    const projector = createBatonProjector({ store: fx.store });
    await projector.applyRange({ fromSeq: 1, toSeq: 4, events: log.slice(0, 4) });
    const before = await fx.store.snapshot('handoffs');
    await expect(projector.applyRange({ fromSeq: 7, toSeq: 9, events: log.slice(6, 9) })).rejects.toBeInstanceOf(ProjectionGapError);
    expect(diffSnapshots(before, await fx.store.snapshot('handoffs'))).toEqual([]);
    expect((await fx.store.snapshot('handoffs')).lastSeq).toBe(4);
  });

  it('projections Redis lost (no active generation) under a range past the first event: refused with ProjectionLostError, nothing written; ensureCurrent rebuilds them with no active generation before the swap, `notices` up to its lostUntil bound, and the next range gives `notices` only the events after it', async () => {
    const projector = createBatonProjector({ store: fx.store });
    const half = Math.floor(log.length / 2);
    await applyDelivered(fx, projector, half);
    // What a FLUSHALL does to this keyspace (one UNLINK is atomic).
    const keys: string[] = [];
    for await (const batch of fx.handle.client.scanStream({ match: `${fx.prefix}:*`, count: 500 })) keys.push(...(batch as string[]));
    await fx.handle.client.unlink(...keys);

    const next = { fromSeq: half + 1, toSeq: half + 3, events: log.slice(half, half + 3) };
    await expect(projector.applyRange(next)).rejects.toBeInstanceOf(ProjectionLostError);
    const left: string[] = [];
    for await (const batch of fx.handle.client.scanStream({ match: `${fx.prefix}:*`, count: 500 })) left.push(...(batch as string[]));
    expect(left).toEqual([]);

    const bound = half - 2;
    const activeDuringRebuild: Array<number | null> = [];
    const source = (fromSeq: number) =>
      (async function* () {
        activeDuringRebuild.push(await fx.store.activeGeneration('notices'), await fx.store.activeGeneration('runs'));
        for (const event of log) if (event.seq >= fromSeq) yield event;
      })();
    const asked: string[][] = [];
    const rebuilt = await projector.ensureCurrent(source, {
      lostUntil: async (names) => {
        asked.push([...names]);
        return { notices: bound };
      },
    });
    expect(asked).toEqual([PROJECTIONS]);
    expect(activeDuringRebuild.every((generation) => generation === null)).toBe(true);
    expect(rebuilt.map((r) => [r.projection, r.reason, r.result.status])).toEqual(PROJECTIONS.map((name) => [name, 'no_active_generation', 'swapped']));
    const lastSeqs = Object.fromEntries(rebuilt.map((r) => [r.projection, r.result.status === 'swapped' ? r.result.lastSeq : -1]));
    expect(lastSeqs).toEqual({ inbox: log.length, stops: log.length, handoffs: log.length, runs: log.length, notices: bound });

    // The live applier goes on from `notices`: only it applies the events after its bound.
    const given: Record<string, number[]> = {};
    await projector.applyRange(
      { fromSeq: bound + 1, toSeq: log.length, events: log.slice(bound) },
      { beforeCommit: async (name, events) => void (given[name] = events.map((e) => e.seq)) },
    );
    expect(given).toEqual({ notices: log.slice(bound).map((e) => e.seq) });
    await expectSameAsReference();
  });
});
