import type { EventEnvelope } from '@baton/contracts';
import { RebuildBehindError } from './errors';
import { diffSnapshots } from './snapshot';
import type { ReplaySource, SequencedEvent } from './store';
import { redisFixture, taskLog, taskProjection, type RedisFixture, type TaskPayload } from './test-support';

type TaskEvent = SequencedEvent<EventEnvelope<TaskPayload>>;

/** A replay source over an in-memory log: reads to the end of the log as of the call, yielding now and then. */
function logSource(log: TaskEvent[], beforeRead?: (call: number) => Promise<void>): ReplaySource<EventEnvelope<TaskPayload>> {
  let calls = 0;
  return (fromSeq) =>
    (async function* () {
      const call = ++calls;
      const end = log.length;
      if (beforeRead) await beforeRead(call);
      for (let i = 0; i < end; i++) {
        if (log[i].seq < fromSeq) continue;
        if (i % 25 === 0) await new Promise((resolve) => setImmediate(resolve));
        yield log[i];
      }
    })();
}

async function keyCount(fx: RedisFixture, pattern: string): Promise<number> {
  let n = 0;
  for await (const batch of fx.handle.client.scanStream({ match: pattern, count: 500 })) n += (batch as string[]).length;
  return n;
}

describe('rebuilds into a shadow generation (real Redis)', () => {
  let fx: RedisFixture;
  beforeEach(async () => {
    fx = await redisFixture();
  });
  afterEach(async () => {
    await fx.cleanup();
  });
  const def = taskProjection();

  it('a rebuild writes into a shadow generation and the swap yields a snapshot identical to the live projection', async () => {
    const log = taskLog(300);
    await fx.store.applyBatch(def, log);
    const live = await fx.store.snapshot('tasks');
    const result = await fx.store.rebuild(def, logSource(log));
    expect(result).toMatchObject({ status: 'swapped', generation: 2, previous: 1, lastSeq: 300 });
    const rebuilt = await fx.store.snapshot('tasks');
    expect(rebuilt.generation).toBe(2);
    expect(diffSnapshots(live, rebuilt)).toEqual([]);
    expect(rebuilt.keys).toEqual(live.keys);
    if (result.status !== 'swapped') throw new Error('expected a swap');
    const cleanup = await result.cleanup;
    expect(cleanup.deletedKeys).toBeGreaterThan(0);
    expect(await keyCount(fx, `${fx.prefix}:tasks:g1:*`)).toBe(0);
  });

  it('a rebuild repairs a projection whose data drifted, and records the new definition version', async () => {
    const log = taskLog(80);
    await fx.store.applyBatch(def, log);
    const good = await fx.store.snapshot('tasks');
    await fx.handle.client.hset(`${fx.prefix}:tasks:g1:task:t1`, 'title', 'corrupted');
    expect(diffSnapshots(good, await fx.store.snapshot('tasks')).map((d) => d.key)).toEqual(['task:t1']);
    const v2 = taskProjection('tasks', 2);
    expect((await fx.store.status(v2)).needsRebuild).toBe(true);
    await fx.store.rebuild(v2, logSource(log));
    expect(diffSnapshots(good, await fx.store.snapshot('tasks'))).toEqual([]);
    expect(await fx.store.status(v2)).toMatchObject({ storedVersion: 2, needsRebuild: false, lastSeq: 80 });
  });

  it('events applied live during a rebuild are present after the swap (the rebuild catches up before swapping)', async () => {
    const full = taskLog(400);
    const log = full.slice(0, 300);
    await fx.store.applyBatch(def, log);
    // While the rebuild's first replay reads up to seq 300, the live applier commits 301..350.
    const source = logSource(log, async (call) => {
      if (call !== 1) return;
      for (const event of full.slice(300, 350)) {
        log.push(event);
        await fx.store.apply(def, event);
      }
    });
    const result = await fx.store.rebuild(def, source);
    expect(result).toMatchObject({ status: 'swapped', generation: 2, lastSeq: 350 });
    // After the swap the live applier goes on against the new generation; redeliveries are skipped.
    expect((await fx.store.apply(def, full[349])).status).toBe('skipped');
    for (const event of full.slice(350)) expect((await fx.store.apply(def, event)).status).toBe('applied');
    const reference = taskProjection('reference');
    await fx.store.applyBatch(reference, full);
    expect(diffSnapshots(await fx.store.snapshot('reference'), await fx.store.snapshot('tasks'))).toEqual([]);
    expect((await fx.store.snapshot('tasks')).lastSeq).toBe(400);
  });

  it('a swap refuses a shadow that is behind the active generation, so no live event is lost', async () => {
    const log = taskLog(20);
    await fx.store.applyBatch(def, log);
    const shadow = await fx.store.allocateGeneration('tasks');
    await fx.store.applyBatch(def, log.slice(0, 15), { generation: shadow });
    expect(await fx.store.swap('tasks', 1, shadow)).toEqual({ status: 'behind', shadowSeq: 15, activeSeq: 20 });
    expect(await fx.store.activeGeneration('tasks')).toBe(1);
    await fx.store.applyBatch(def, log.slice(15), { generation: shadow });
    expect(await fx.store.swap('tasks', 1, shadow)).toEqual({ status: 'swapped', previous: 1 });
  });

  it('concurrent swap compare-and-set: of two swaps from the same generation only one wins', async () => {
    const log = taskLog(30);
    await fx.store.applyBatch(def, log);
    const a = await fx.store.allocateGeneration('tasks');
    const b = await fx.store.allocateGeneration('tasks');
    await fx.store.applyBatch(def, log, { generation: a });
    await fx.store.applyBatch(def, log, { generation: b });
    const results = await Promise.all([fx.store.swap('tasks', 1, a), fx.store.swap('tasks', 1, b)]);
    expect(results.filter((r) => r.status === 'swapped')).toHaveLength(1);
    const loser = results.find((r) => r.status === 'conflict');
    const active = await fx.store.activeGeneration('tasks');
    expect(loser).toEqual({ status: 'conflict', current: active });
    expect([a, b]).toContain(active);
  });

  it('two concurrent rebuilds: one swaps, the other reports lost and drops its shadow', async () => {
    const log = taskLog(120);
    await fx.store.applyBatch(def, log);
    const live = await fx.store.snapshot('tasks');
    const results = await Promise.all([fx.store.rebuild(def, logSource(log)), fx.store.rebuild(def, logSource(log))]);
    const won = results.filter((r) => r.status === 'swapped');
    const lost = results.filter((r) => r.status === 'lost');
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect(await fx.store.activeGeneration('tasks')).toBe(won[0].generation);
    expect(await keyCount(fx, `${fx.prefix}:tasks:g${lost[0].generation}:*`)).toBe(0);
    if (won[0].status === 'swapped') await won[0].cleanup;
    expect(diffSnapshots(live, await fx.store.snapshot('tasks'))).toEqual([]);
  });

  it('a rebuild that cannot catch up gives up with RebuildBehindError and leaves the active generation alone', async () => {
    const log = taskLog(40);
    await fx.store.applyBatch(def, log);
    const truncated = logSource(log.slice(0, 30));
    await expect(fx.store.rebuild(def, truncated, { maxCatchUpRounds: 2 })).rejects.toThrow(RebuildBehindError);
    expect(await fx.store.activeGeneration('tasks')).toBe(1);
    expect(await keyCount(fx, `${fx.prefix}:tasks:g2:*`)).toBe(0);
  });

  it('the active generation cannot be dropped', async () => {
    await fx.store.applyBatch(def, taskLog(5));
    await expect(fx.store.dropGeneration('tasks', 1)).rejects.toThrow(/active/);
  });
});
