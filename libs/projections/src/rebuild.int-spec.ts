import type { EventEnvelope } from '@baton/contracts';
import { RebuildBehindError, ShadowLostError } from './errors';
import { activeKey, generationCounterKey, projectionBase } from './keys';
import { applyScript, swapScript } from './scripts';
import { diffSnapshots } from './snapshot';
import type { RebuildResult, ReplaySource, SequencedEvent } from './store';
import { HAND_OVER_MAX_GAP } from './rebuilder';
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

/** A replay source over `log` that runs `hook` on its first read, just before yielding `atSeq`. */
function pausingSource(log: TaskEvent[], atSeq: number, hook: () => Promise<void>): ReplaySource<EventEnvelope<TaskPayload>> {
  let calls = 0;
  return (fromSeq) =>
    (async function* () {
      const call = ++calls;
      for (const event of log.slice()) {
        if (event.seq < fromSeq) continue;
        if (call === 1 && event.seq === atSeq) await hook();
        yield event;
      }
    })();
}

/**
 * Redis loses this test's data, as a FLUSHALL would (the shared Redis is never flushed): every
 * key of the fixture's prefix goes in one UNLINK, which is atomic. Run only while nothing else of
 * the test writes, so the SCAN before it sees every key.
 */
async function loseData(fx: RedisFixture): Promise<void> {
  const keys: string[] = [];
  for await (const batch of fx.handle.client.scanStream({ match: `${fx.prefix}:*`, count: 500 })) keys.push(...(batch as string[]));
  if (keys.length > 0) await fx.handle.client.unlink(...keys);
}

/**
 * After a loss, generation 1 made active again, empty (as a live applier starting from the stream's
 * first event makes it; a rebuild no longer does): the counter stands at 1 again, so the next
 * rebuild is handed number 2 — the number a shadow lost with the data had.
 */
async function recreateFirst(fx: RedisFixture, def: { name: string; version: number }): Promise<void> {
  await fx.store.ensureActive(def);
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
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

  it("status reads the active pointer and that generation's meta in one call: a swap and its cleanup landing between status's first reply and anything after it leave a consistent report", async () => {
    const log = taskLog(40);
    await fx.store.applyBatch(def, log);
    const client = fx.handle.client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const methods = ['get', 'hmget', 'hget', 'evalsha', 'eval'];
    const originals = Object.fromEntries(methods.map((name) => [name, client[name]!]));
    let armed = true;
    // The first command status sends gets its reply only after a rebuild swapped in a new
    // generation and its cleanup deleted the old one (its ~meta with it).
    for (const name of methods) {
      client[name] = async (...args: unknown[]) => {
        const value = await originals[name]!.apply(fx.handle.client, args);
        if (!armed) return value;
        armed = false;
        const result = await fx.store.rebuild(def, logSource(log));
        if (result.status !== 'swapped') throw new Error(`expected a swap, got ${result.status}`);
        await result.cleanup;
        return value;
      };
    }
    try {
      const status = await fx.store.status(def);
      expect(armed).toBe(false);
      expect(status).toMatchObject({ lastSeq: 40, storedVersion: 1, needsRebuild: false });
      expect([1, 2]).toContain(status.activeGeneration);
      expect(await fx.store.status(def)).toMatchObject({ activeGeneration: 2, lastSeq: 40, storedVersion: 1 });
    } finally {
      for (const name of methods) delete client[name];
    }
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
    // Behind by 5: a hand-over of at most 4 is refused too, one of 5 takes it.
    expect(await fx.store.swap('tasks', 1, shadow, undefined, false, 4)).toEqual({ status: 'behind', shadowSeq: 15, activeSeq: 20 });
    await fx.store.applyBatch(def, log.slice(15), { generation: shadow });
    expect(await fx.store.swap('tasks', 1, shadow)).toEqual({ status: 'swapped', previous: 1, shadowSeq: 20, activeSeq: 20 });
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

  it('a rebuild that cannot catch up and may not hand over gives up with RebuildBehindError and leaves the active generation alone', async () => {
    const log = taskLog(40);
    await fx.store.applyBatch(def, log);
    const truncated = logSource(log.slice(0, 30));
    await expect(fx.store.rebuild(def, truncated, { maxCatchUpRounds: 2, handOver: false })).rejects.toThrow(RebuildBehindError);
    expect(await fx.store.activeGeneration('tasks')).toBe(1);
    expect(await keyCount(fx, `${fx.prefix}:tasks:g2:*`)).toBe(0);
    // Nor does one whose shadow is further behind than live traffic could explain.
    const far = taskLog(HAND_OVER_MAX_GAP + 20);
    await fx.store.applyBatch(def, far.slice(40));
    await expect(fx.store.rebuild(def, logSource(log.slice(0, 10)), { maxCatchUpRounds: 1 })).rejects.toThrow(RebuildBehindError);
    expect(await fx.store.activeGeneration('tasks')).toBe(1);
  });

  it('live traffic that keeps the active generation ahead through every catch-up round: the rebuild hands over behind it, naming the events the live applier then applies; nothing is missed or applied twice', async () => {
    const full = taskLog(90);
    const stream = full.slice(0, 40);
    await fx.store.applyBatch(def, stream);
    // Each time the rebuild reads the stream, the live applier commits three more events first,
    // past the end that read stops at: the shadow is behind at every swap.
    let next = 40;
    const source = logSource(stream, async () => {
      const more = full.slice(next, next + 3);
      next += more.length;
      await fx.store.applyBatch(def, more);
      stream.push(...more);
    });
    const result = await fx.store.rebuild(def, source, { maxCatchUpRounds: 3 });
    if (result.status !== 'swapped') throw new Error(`expected a swap, got ${result.status}`);
    expect(result.handedOver).toEqual({ fromSeq: next - 2, toSeq: next });
    expect(await fx.store.activeGeneration('tasks')).toBe(result.generation);
    expect((await fx.store.status(def)).lastSeq).toBe(next - 3);
    // The live applier's next range applies the difference (the events it had applied to the old generation) and goes on.
    await fx.store.applyBatch(def, full.slice(result.handedOver!.fromSeq - 1));
    const reference = await redisFixture();
    try {
      await reference.store.applyBatch(def, full);
      expect(diffSnapshots(await reference.store.snapshot('tasks'), await fx.store.snapshot('tasks'))).toEqual([]);
    } finally {
      await reference.cleanup();
    }
    // Without live traffic a rebuild swaps level with the live generation: no hand-over.
    const quiet = await fx.store.rebuild(def, logSource(full));
    expect(quiet).toMatchObject({ status: 'swapped', lastSeq: 90 });
    expect(quiet).not.toHaveProperty('handedOver');
  });

  it('a rebuild whose shadow Redis loses mid-way stops with ShadowLostError, writes nothing more and swaps nothing; a rebuild after it gets the same number and is complete', async () => {
    const log = taskLog(300);
    await fx.store.applyBatch(def, log);
    const live = await fx.store.snapshot('tasks');
    // Chunks of 50: 1..100 are in the shadow, 101..150 are about to be written when the data goes.
    const first = fx.store.rebuild(
      def,
      pausingSource(log, 151, () => loseData(fx)),
    );
    const error = await first.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ShadowLostError);
    expect(error).toMatchObject({ projection: 'tasks', generation: 2 });
    // Nothing was written after the loss: no shadow re-created, no active pointer, no counter.
    expect(await keyCount(fx, `${fx.prefix}:*`)).toBe(0);

    await recreateFirst(fx, def);
    const second = await fx.store.rebuild(def, logSource(log));
    expect(second).toMatchObject({ status: 'swapped', generation: 2, previous: 1, lastSeq: 300 });
    expect(diffSnapshots(live, await fx.store.snapshot('tasks'))).toEqual([]);
  });

  it('two rebuilds given the same shadow number after Redis lost its data: the first, resuming after the second wrote part of its shadow, is refused and writes nothing; the second completes', async () => {
    const log = taskLog(300);
    await fx.store.applyBatch(def, log);
    const live = await fx.store.snapshot('tasks');
    const secondPaused = deferred();
    const firstDone = deferred();
    let second: Promise<RebuildResult> | null = null;
    const first = fx.store.rebuild(
      def,
      pausingSource(log, 151, async () => {
        await loseData(fx);
        await recreateFirst(fx, def);
        // Another rebuilder (a second notifier, `baton replay`) notices the loss and starts over;
        // it pauses once 1..50 are in its shadow.
        second = fx.store.rebuild(
          def,
          pausingSource(log, 101, async () => {
            secondPaused.resolve();
            await firstDone.promise;
          }),
        );
        await secondPaused.promise;
      }),
    );
    const error = await first.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ShadowLostError);
    expect(error).toMatchObject({ generation: 2 });
    // The same number went to the second rebuild; the first wrote nothing into it and swapped nothing.
    const base = `${fx.prefix}:tasks`;
    expect(await fx.handle.client.hget(`${base}:g2:~meta`, 'seq')).toBe('50');
    expect(await fx.store.activeGeneration('tasks')).toBe(1);
    expect((await fx.store.status(def)).lastSeq).toBe(0);
    firstDone.resolve();

    const result = await (second as unknown as Promise<RebuildResult>);
    expect(result).toMatchObject({ status: 'swapped', generation: 2, previous: 1, lastSeq: 300 });
    expect(diffSnapshots(live, await fx.store.snapshot('tasks'))).toEqual([]);
  });

  it('a rebuild whose shadow is lost between its last apply and its swap does not swap, even though the active pointer holds the number it expects again', async () => {
    const full = taskLog(200);
    const log = full.slice(0, 150);
    await fx.store.applyBatch(def, log);
    const secondPaused = deferred();
    const firstDone = deferred();
    let second: Promise<RebuildResult> | null = null;
    let calls = 0;
    // Call 1: the live applier commits 151..175 meanwhile, so the first swap is `behind`. Call 2 (the
    // catch-up, which finds nothing new in `log`): Redis loses its data, generation 1 is made the
    // (empty) active one again and a second rebuild, over the whole stream, takes number 2 again.
    const source: ReplaySource<EventEnvelope<TaskPayload>> = (fromSeq) =>
      (async function* () {
        const call = ++calls;
        if (call === 1) for (const event of full.slice(150, 175)) await fx.store.apply(def, event);
        if (call === 2) {
          await loseData(fx);
          await recreateFirst(fx, def);
          second = fx.store.rebuild(
            def,
            pausingSource(full.slice(0, 175), 101, async () => {
              secondPaused.resolve();
              await firstDone.promise;
            }),
          );
          await secondPaused.promise;
        }
        yield* log.filter((event) => event.seq >= fromSeq);
      })();
    // Without the owner check the swap would find the pointer at 1 as expected and swap in the
    // second rebuild's half-built shadow.
    await expect(fx.store.rebuild(def, source)).rejects.toThrow(ShadowLostError);
    expect(await fx.store.activeGeneration('tasks')).toBe(1);
    expect(await fx.handle.client.hget(`${fx.prefix}:tasks:g2:~meta`, 'seq')).toBe('50');
    firstDone.resolve();

    expect(await (second as unknown as Promise<RebuildResult>)).toMatchObject({ status: 'swapped', generation: 2, previous: 1, lastSeq: 175 });
    const reference = taskProjection('reference');
    await fx.store.applyBatch(reference, full.slice(0, 175));
    expect(diffSnapshots(await fx.store.snapshot('reference'), await fx.store.snapshot('tasks'))).toEqual([]);
  });

  it("a rebuild that fails for another reason after its number went to another rebuild deletes nothing of that rebuild's shadow", async () => {
    const log = taskLog(200);
    await fx.store.applyBatch(def, log);
    const live = await fx.store.snapshot('tasks');
    const secondPaused = deferred();
    const firstDone = deferred();
    let second: Promise<RebuildResult> | null = null;
    const failing = pausingSource(log, 101, async () => {
      await loseData(fx);
      await recreateFirst(fx, def);
      second = fx.store.rebuild(
        def,
        pausingSource(log, 101, async () => {
          secondPaused.resolve();
          await firstDone.promise;
        }),
      );
      await secondPaused.promise;
      throw new Error('the stream went away');
    });
    // The failed rebuild deletes its shadow only while it is still its own: here it is not.
    await expect(fx.store.rebuild(def, failing)).rejects.toThrow('the stream went away');
    expect(await fx.handle.client.hget(`${fx.prefix}:tasks:g2:~meta`, 'seq')).toBe('50');
    expect(await keyCount(fx, `${fx.prefix}:tasks:g2:*`)).toBeGreaterThan(1);
    firstDone.resolve();
    expect(await (second as unknown as Promise<RebuildResult>)).toMatchObject({ status: 'swapped', generation: 2, lastSeq: 200 });
    expect(diffSnapshots(live, await fx.store.snapshot('tasks'))).toEqual([]);
  });

  it('apply into a shadow with an owner token is refused, writing nothing, unless the meta holds that token; creation needs a meta that does not exist yet', async () => {
    const log = taskLog(20);
    await fx.store.applyBatch(def, log.slice(0, 5));
    const ns = `${fx.prefix}:tasks:g2:`;
    const gen = await fx.store.allocateGeneration('tasks');
    expect(gen).toBe(2);
    // Missing meta (never created, or lost with Redis's data): refused.
    await expect(fx.store.applyBatch(def, log.slice(0, 5), { generation: 2, owner: 'a' })).rejects.toThrow(ShadowLostError);
    expect(await keyCount(fx, `${ns}*`)).toBe(0);
    // Created by owner a (retrying the creation is fine), written by a.
    await fx.store.applyBatch(def, [], { generation: 2, owner: 'a', create: true });
    await fx.store.applyBatch(def, log.slice(0, 5), { generation: 2, owner: 'a', create: true });
    expect(await fx.handle.client.hgetall(`${ns}~meta`)).toEqual({ seq: '5', version: '1', owner: 'a' });
    const before = await fx.store.snapshot('tasks', 2);
    // Another owner can neither create it again nor write into it; nothing of its batch is written.
    await expect(fx.store.applyBatch(def, [], { generation: 2, owner: 'b', create: true })).rejects.toThrow(ShadowLostError);
    await expect(fx.store.apply(def, log[5], { generation: 2, owner: 'b' })).rejects.toMatchObject({
      name: 'ShadowLostError',
      projection: 'tasks',
      generation: 2,
    });
    await expect(fx.store.applyBatch(def, log.slice(5), { generation: 2, owner: 'b' })).rejects.toThrow(ShadowLostError);
    expect(await fx.store.snapshot('tasks', 2)).toEqual(before);
    expect(await fx.handle.client.hgetall(`${ns}~meta`)).toEqual({ seq: '5', version: '1', owner: 'a' });
    // An existing generation without an owner (a scratch one, the active one) cannot be claimed.
    await expect(fx.store.applyBatch(def, [], { generation: 1, owner: 'b', create: true })).rejects.toThrow(ShadowLostError);
    expect(await fx.handle.client.hget(`${fx.prefix}:tasks:g1:~meta`, 'owner')).toBeNull();
    // The script's own reply, and callers without a token, which write as before.
    const base = projectionBase(fx.prefix, 'tasks');
    const keys = [activeKey(base), generationCounterKey(base)];
    expect(await applyScript.run(fx.handle.client, keys, [base, '2', 1, '[]', '', 'b', ''])).toEqual(['lost', '2']);
    expect(await applyScript.run(fx.handle.client, keys, [base, '3', 1, '[]', '', 'b', ''])).toEqual(['lost', '3']);
    expect(await fx.store.applyBatch(def, log.slice(5), { generation: 2 })).toMatchObject({ generation: 2, applied: 15, lastSeq: 20 });
    expect(await fx.store.applyBatch(def, log.slice(5, 10), { generation: 2, owner: 'a' })).toMatchObject({ applied: 0, skipped: 5, lastSeq: 20 });
  });

  it('a swap with an owner token is refused unless the shadow meta holds that token', async () => {
    const log = taskLog(10);
    await fx.store.applyBatch(def, log);
    const shadow = await fx.store.allocateGeneration('tasks');
    await fx.store.applyBatch(def, [], { generation: shadow, owner: 'a', create: true });
    await fx.store.applyBatch(def, log, { generation: shadow, owner: 'a' });
    expect(await fx.store.swap('tasks', 1, shadow, 'b')).toEqual({ status: 'shadow_lost' });
    expect(await fx.store.swap('tasks', 1, shadow + 1, 'a')).toEqual({ status: 'shadow_lost' });
    const base = projectionBase(fx.prefix, 'tasks');
    expect(await swapScript.run(fx.handle.client, [activeKey(base)], [base, '1', String(shadow), 'b'])).toEqual(['lost']);
    expect(await fx.store.activeGeneration('tasks')).toBe(1);
    expect(await fx.store.swap('tasks', 1, shadow, 'a')).toEqual({ status: 'swapped', previous: 1, shadowSeq: 10, activeSeq: 10 });
    expect(await fx.store.activeGeneration('tasks')).toBe(shadow);
  });

  it('a generation swapped out whose deletion never ran (the rebuilding process died right after the swap) is deleted by the next collection of abandoned work', async () => {
    const log = taskLog(30);
    await fx.store.applyBatch(def, log);
    const oldKeys = await keyCount(fx, `${fx.prefix}:tasks:g1:*`);
    expect(oldKeys).toBeGreaterThan(1);
    // A rebuild's swap, and then nothing: its process is gone before it deletes generation 1.
    const shadow = await fx.store.allocateGeneration('tasks');
    await fx.store.applyBatch(def, [], { generation: shadow, owner: 'a', create: true });
    await fx.store.applyBatch(def, log, { generation: shadow, owner: 'a' });
    expect(await fx.store.swap('tasks', 1, shadow, 'a')).toEqual({ status: 'swapped', previous: 1, shadowSeq: 30, activeSeq: 30 });
    expect(await keyCount(fx, `${fx.prefix}:tasks:g1:*`)).toBe(oldKeys);
    // What the notifier's periodic check (and every rebuild's start) runs.
    await fx.store.collectAbandoned('tasks');
    expect(await keyCount(fx, `${fx.prefix}:tasks:g1:*`)).toBe(0);
    expect(await fx.store.activeGeneration('tasks')).toBe(shadow);
    expect(await keyCount(fx, `${fx.prefix}:tasks:g${shadow}:*`)).toBeGreaterThan(1);
  });

  it('the active generation cannot be dropped', async () => {
    await fx.store.applyBatch(def, taskLog(5));
    await expect(fx.store.dropGeneration('tasks', 1)).rejects.toThrow(/active/);
  });

  it('dropping a generation as its owner deletes it; as anyone else (its number reused after a loss) deletes nothing', async () => {
    const log = taskLog(40);
    await fx.store.applyBatch(def, log);
    await fx.store.applyBatch(def, [], { generation: 7, owner: 'scratch-a', create: true });
    await fx.store.applyBatch(def, log, { generation: 7, owner: 'scratch-a' });
    const before = await keyCount(fx, `${fx.prefix}:tasks:g7:*`);
    expect(before).toBeGreaterThan(1);
    expect(await fx.store.dropGeneration('tasks', 7, 'scratch-b')).toEqual({ generation: 7, deletedKeys: 0 });
    expect(await keyCount(fx, `${fx.prefix}:tasks:g7:*`)).toBe(before);
    expect((await fx.store.dropGeneration('tasks', 7, 'scratch-a')).deletedKeys).toBe(before);
    expect(await keyCount(fx, `${fx.prefix}:tasks:g7:*`)).toBe(0);
  });
});
