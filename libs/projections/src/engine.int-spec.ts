import { Op } from './ops';
import { LuaScript } from './lua';
import { ProjectionOpError, RedisUnavailableError } from './errors';
import { createRedis } from './redis';
import { diffSnapshots } from './snapshot';
import { createProjectionStore } from './store';
import { redisFixture, taskEvent, taskLog, taskProjection, type RedisFixture } from './test-support';

describe('projection engine (real Redis)', () => {
  let fx: RedisFixture;
  beforeEach(async () => {
    fx = await redisFixture();
  });
  afterEach(async () => {
    await fx.cleanup();
  });
  const def = taskProjection();
  const opened = (seq: number, id = 't1') =>
    taskEvent(seq, 'task.opened', id, { title: `task ${id}`, agent: 'coder', why: 'needs_input', urgency: 3, at: 1_700_000_000_000 + seq });

  it('applying the same event twice gives the same Redis state (redelivery is skipped)', async () => {
    const first = await fx.store.apply(def, opened(1));
    const once = await fx.store.snapshot('tasks');
    const second = await fx.store.apply(def, opened(1));
    const twice = await fx.store.snapshot('tasks');
    expect(first.status).toBe('applied');
    expect(second.status).toBe('skipped');
    expect(diffSnapshots(once, twice)).toEqual([]);
    expect(twice).toEqual(once);
    expect(Object.keys(once.keys)).toEqual(expect.arrayContaining(['task:t1', 'task:t1:doc', 'tasks:by-time', 'project:alpha:tasks', 'task:t1:last']));
  });

  it('the whole log applied twice (a replay over a live projection) changes nothing', async () => {
    const log = taskLog(120);
    await fx.store.applyBatch(def, log);
    const once = await fx.store.snapshot('tasks');
    const again = await fx.store.applyBatch(def, log);
    expect(again.applied).toBe(0);
    expect(again.skipped).toBe(120);
    expect(diffSnapshots(once, await fx.store.snapshot('tasks'))).toEqual([]);
  });

  it('an out-of-order older seq is skipped: seq <= last applied writes nothing', async () => {
    await fx.store.apply(def, opened(5, 'late'));
    const before = await fx.store.snapshot('tasks');
    const older = await fx.store.apply(def, opened(4, 'early'));
    expect(older).toEqual({ status: 'skipped', generation: 1, lastSeq: 5 });
    const after = await fx.store.snapshot('tasks');
    expect(diffSnapshots(before, after)).toEqual([]);
    expect(after.keys['task:early']).toBeUndefined();
    expect(after.lastSeq).toBe(5);
  });

  it('events the projection does not handle still advance the last applied seq', async () => {
    await fx.store.apply(def, opened(1));
    const ignored = await fx.store.apply(def, taskEvent(2, 'run.started', 'r1', {}));
    expect(ignored.status).toBe('applied');
    expect((await fx.store.status(def)).lastSeq).toBe(2);
  });

  it('all ops of an event are atomic: a wrong-type op fails before the first write and nothing is half-applied', async () => {
    await fx.store.apply(def, opened(1));
    const before = await fx.store.snapshot('tasks');
    await expect(fx.store.apply(def, taskEvent(2, 'task.broken', 't1', {}))).rejects.toThrow(ProjectionOpError);
    const after = await fx.store.snapshot('tasks');
    expect(diffSnapshots(before, after)).toEqual([]);
    expect(after.keys['broken:t1']).toBeUndefined();
    expect(after.lastSeq).toBe(1);
    // The failed event was not recorded as applied: a fixed retry of seq 2 still applies.
    expect((await fx.store.apply(def, taskEvent(2, 'task.tagged', 't1', { tag: 'x' }))).status).toBe('applied');
  });

  it('a wrong-type op in the middle of a batch leaves the whole batch unwritten', async () => {
    const events = [opened(1, 'a'), opened(2, 'b'), taskEvent(3, 'task.broken', 'a', {}), opened(4, 'c')];
    await expect(fx.store.applyBatch(def, events)).rejects.toMatchObject({ name: 'ProjectionOpError', detail: { seq: 3, opIndex: 2 } });
    const snap = await fx.store.snapshot('tasks');
    expect(snap.keys).toEqual({});
    expect(snap.lastSeq).toBe(0);
  });

  it('the type check follows earlier ops of the same event: del then zadd on a former hash is allowed', async () => {
    await fx.store.apply(def, opened(1));
    const custom = {
      ...def,
      apply: () => [
        { op: 'del' as const, key: 'task:t1' },
        { op: 'zadd' as const, key: 'task:t1', score: 2, member: 'm' },
      ],
    };
    await fx.store.apply(custom, taskEvent(2, 'task.custom', 't1', {}));
    expect((await fx.store.snapshot('tasks')).keys['task:t1']).toEqual({ type: 'zset', value: [['m', 2]] });
  });

  it('a malformed op (reserved key, non-finite score) is refused before Redis is called', async () => {
    const reserved = { ...def, apply: () => [{ op: 'set' as const, key: '~meta', value: 'x' }] };
    await expect(fx.store.apply(reserved, opened(1))).rejects.toThrow(/reserved/);
    const nan = { ...def, apply: () => [{ op: 'zadd' as const, key: 'z', score: Number.NaN, member: 'm' }] };
    await expect(fx.store.apply(nan, opened(1))).rejects.toThrow(ProjectionOpError);
    expect(await fx.store.activeGeneration('tasks')).toBeNull();
  });

  it('batch apply gives the same state as applying events one by one', async () => {
    const log = taskLog(150);
    await fx.store.applyBatch(def, log);
    const other = taskProjection('tasks-single');
    for (const event of log) await fx.store.apply(other, event);
    expect(diffSnapshots(await fx.store.snapshot('tasks'), await fx.store.snapshot('tasks-single'))).toEqual([]);
  });

  it('applyBatch refuses events whose seq does not increase, before writing', async () => {
    await expect(fx.store.applyBatch(def, [opened(2, 'a'), opened(2, 'b')])).rejects.toThrow(/strictly increasing/);
    expect(await fx.store.activeGeneration('tasks')).toBeNull();
  });

  it('status reports the version that built the active generation and whether a rebuild is needed', async () => {
    await fx.store.apply(def, opened(1));
    expect(await fx.store.status(def)).toEqual({ projection: 'tasks', activeGeneration: 1, lastSeq: 1, storedVersion: 1, needsRebuild: false, stream: null });
    expect((await fx.store.status({ name: 'tasks', version: 2 })).needsRebuild).toBe(true);
  });

  it('the reader resolves the active generation and strips nothing the ops named', async () => {
    const reader = fx.store.reader('tasks');
    expect(await reader.getHash('task:t1')).toBeNull();
    await fx.store.apply(def, opened(1));
    await fx.store.apply(def, taskEvent(2, 'task.tagged', 't1', { tag: 'red' }));
    expect(await reader.getHash('task:t1')).toEqual({ title: 'task t1', project: 'alpha', status: 'open' });
    expect(await reader.getJson('task:t1:doc')).toEqual({ agent: 'coder', id: 't1', opened_seq: 1, title: 'task t1' });
    expect(await reader.getString('task:t1:last')).toBe('ev-1');
    expect(await reader.hget('task:t1', 'status')).toBe('open');
    expect(await reader.zrange('tasks:by-time', 0, -1)).toEqual(['t1']);
    expect(await reader.zscore('tasks:by-time', 't1')).toBe(1_700_000_000_001);
    expect(await reader.zcard('tasks:by-time')).toBe(1);
    expect(await reader.smembers('task:t1:tags')).toEqual(['red']);
    expect(await reader.sismember('task:t1:tags', 'blue')).toBe(false);
    expect(await reader.exists('task:t1')).toBe(true);
  });

  it('applyIfAt sends a value set again later in the same call once (the last), never checking or sending the one it replaces', async () => {
    const cas = { name: 'cas', version: 1 };
    await fx.store.ensureActive(cas);
    const result = await fx.store.applyIfAt(
      cas,
      [
        { seq: 1, ops: [Op.jsonSet('state', { n: Number.NaN }), Op.zadd('log', 1, 'one')] },
        { seq: 2, ops: [Op.jsonSet('state', { n: 2 })] },
      ],
      0,
    );
    expect(result).toMatchObject({ status: 'applied', lastSeq: 2 });
    const reader = fx.store.reader('cas');
    expect(await reader.getJson('state')).toEqual({ n: 2 });
    expect(await reader.zrange('log', 0, -1)).toEqual(['one']);
    // The same value left as the last write is refused, and nothing of the call is written.
    await expect(fx.store.applyIfAt(cas, [{ seq: 3, ops: [Op.zadd('log', 3, 'three'), Op.jsonSet('state', { n: Number.NaN })] }], 2)).rejects.toBeInstanceOf(
      ProjectionOpError,
    );
    expect(await reader.zrange('log', 0, -1)).toEqual(['one']);
  });

  it('applyIfAt past the byte bound sends the group in several atomic calls: every value is written, in order, the same end state', async () => {
    const small = createProjectionStore({ redis: fx.handle.client, prefix: fx.prefix, batchEvents: 10, batchBytes: 200 });
    const bound = { name: 'bound', version: 1 };
    await small.ensureActive(bound);
    const big = 'x'.repeat(120);
    const result = await small.applyIfAt(
      bound,
      [
        // Event 1's value of `a` is set again by event 3: dropped if the group went in one call;
        // it does not fit one, so event 1 is encoded again with it, and event 2 is sent as encoded.
        { seq: 1, ops: [Op.set('a', big), Op.zadd('log', 1, 'one')] },
        { seq: 2, ops: [Op.set('b', big)] },
        { seq: 3, ops: [Op.set('a', 'last'), Op.zadd('log', 3, 'three')] },
      ],
      0,
    );
    expect(result).toMatchObject({ status: 'applied', lastSeq: 3, applied: 3 });
    const reader = small.reader('bound');
    expect(await reader.getString('a')).toBe('last');
    expect(await reader.getString('b')).toBe(big);
    expect(await reader.zrange('log', 0, -1)).toEqual(['one', 'three']);
  });

  it('applyIfAt keeps a write another op on the same key follows: the type check still refuses the call', async () => {
    const cas = { name: 'cas', version: 1 };
    await fx.store.ensureActive(cas);
    const events = [
      { seq: 1, ops: [Op.set('k', 'text')] },
      { seq: 2, ops: [Op.zadd('k', 1, 'm')] },
      { seq: 3, ops: [Op.set('k', 'again')] },
    ];
    await expect(fx.store.applyIfAt(cas, events, 0)).rejects.toBeInstanceOf(ProjectionOpError);
    expect(await fx.store.reader('cas').exists('k')).toBe(false);
  });

  it('the reader reads a sorted set by score: all between two bounds, or the latest n of them, ascending either way', async () => {
    const reader = fx.store.reader('tasks');
    expect(await reader.zrangeByScore('tasks:by-time', '-inf', '+inf')).toEqual([]);
    for (const [seq, id] of [
      [1, 't1'],
      [2, 't2'],
      [3, 't3'],
      [4, 't4'],
    ] as const)
      await fx.store.apply(def, opened(seq, id));
    const at = (seq: number) => 1_700_000_000_000 + seq;
    expect(await reader.zrangeByScore('tasks:by-time', '-inf', '+inf')).toEqual(['t1', 't2', 't3', 't4']);
    expect(await reader.zrangeByScore('tasks:by-time', at(2), at(3))).toEqual(['t2', 't3']);
    // The latest two up to t3: what a run view asks for (its routes up to the state it read).
    expect(await reader.zrangeByScore('tasks:by-time', '-inf', at(3), 2)).toEqual(['t2', 't3']);
    expect(await reader.zrangeByScore('tasks:by-time', '-inf', at(3), 10)).toEqual(['t1', 't2', 't3']);
    expect(await reader.zrangeByScore('no-such-set', '-inf', '+inf', 5)).toEqual([]);
  });

  it('scripts run with EVALSHA and fall back to EVAL when the server answers NOSCRIPT', async () => {
    const script = new LuaScript('probe', `return 'probe ${fx.prefix}' .. ARGV[1]`);
    expect(await fx.handle.client.script('EXISTS', script.sha)).toEqual([0]);
    expect(await script.run(fx.handle.client, [], ['!'])).toBe(`probe ${fx.prefix}!`);
    expect(await fx.handle.client.script('EXISTS', script.sha)).toEqual([1]);
    expect(await script.run(fx.handle.client, [], ['?'])).toBe(`probe ${fx.prefix}?`);
  });

  it('createRedis connects lazily and ping() is a readiness check that fails clearly when Redis is unreachable', async () => {
    const lazy = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
    expect(lazy.client.status).toBe('wait');
    await lazy.ping();
    expect(lazy.client.status).toBe('ready');
    await lazy.close();
    const dead = createRedis('redis://127.0.0.1:1', { maxRetriesPerRequest: 0, retryStrategy: () => null, disconnectTimeout: 10 });
    await expect(dead.ping(1000)).rejects.toThrow(RedisUnavailableError);
    await dead.close();
  });
});
