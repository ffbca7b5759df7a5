import type { EventEnvelope } from '@baton/contracts';
import { createRedis, type RedisHandle } from './redis';
import { generationNamespace, projectionBase } from './keys';
import { createProjectionStore, type ReplaySource, type SequencedEvent } from './store';
import { redisFixture, taskLog, taskProjection, type RedisFixture, type TaskPayload } from './test-support';

/*
 * The count of a retired generation's deleted keys (`baton replay`: "swapped out generation 5 (N
 * keys deleted)"; SRE audit finding 15: 13 342 reported for a generation of 23 067, all deleted).
 * A generation retired by a swap may be deleted by two processes at once — the rebuild's cleanup
 * and another process's `collectAbandoned` (the notifier's sweep, another replay), which finds it
 * in the retired set — and each UNLINK counts only the keys it removed itself. The count is the
 * generation's: shared by its deleters, each key counted once, whoever removed it.
 */

const KEYS = 30_000;

function source(log: SequencedEvent<EventEnvelope<TaskPayload>>[]): ReplaySource<EventEnvelope<TaskPayload>> {
  return () =>
    (async function* () {
      yield* log;
    })();
}

describe("a retired generation's deleted keys are counted exactly (real Redis)", () => {
  let fx: RedisFixture;
  let other: RedisHandle;
  beforeEach(async () => {
    fx = await redisFixture();
    other = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  });
  afterEach(async () => {
    await other.close();
    await fx.cleanup();
  });

  /** Generation 1 retired by a swap to 2 (not deleted yet), holding `KEYS` more keys than its projection wrote: how many it holds. */
  async function retiredGeneration(): Promise<number> {
    const def = taskProjection();
    const log = taskLog(60);
    await fx.store.applyBatch(def, log);
    const result = await fx.store.rebuild(def, source(log), { dropPrevious: false });
    expect(result).toMatchObject({ status: 'swapped', generation: 2, previous: 1 });
    const ns = generationNamespace(projectionBase(fx.prefix, 'tasks'), 1);
    for (let i = 0; i < KEYS; i += 1_000) {
      const pipeline = fx.handle.client.pipeline();
      for (let k = i; k < i + 1_000; k++) pipeline.set(`${ns}extra:${k}`, 'x');
      await pipeline.exec();
    }
    let held = 0;
    for await (const batch of fx.handle.client.scanStream({ match: `${ns}*`, count: 5_000 })) held += new Set(batch as string[]).size;
    return held;
  }

  it('two deleters at once (a cleanup and another process sweeping the retired set): each reports every key the generation held, and none is left', async () => {
    const held = await retiredGeneration();
    expect(held).toBeGreaterThan(KEYS);
    const elsewhere = createProjectionStore({ redis: other.client, prefix: fx.prefix });
    const [cleanup, swept] = await Promise.all([fx.store.dropGeneration('tasks', 1), elsewhere.dropGeneration('tasks', 1)]);
    expect(cleanup).toEqual({ generation: 1, deletedKeys: held });
    expect(swept).toEqual({ generation: 1, deletedKeys: held });
    const left = await fx.store.countKeys('tasks', [1]);
    expect(left).toEqual([0]);
  }, 60_000);

  it('a deletion that finds the generation already deleted (by a sweep just before) still reports the keys it held', async () => {
    const held = await retiredGeneration();
    const elsewhere = createProjectionStore({ redis: other.client, prefix: fx.prefix });
    expect(await elsewhere.collectAbandoned('tasks')).toBe(1);
    expect(await fx.store.dropGeneration('tasks', 1)).toEqual({ generation: 1, deletedKeys: held });
  }, 60_000);
});
