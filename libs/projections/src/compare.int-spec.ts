import { setTimeout as sleep } from 'node:timers/promises';
import { waitFor } from '@baton/wait';
// Test only: the private servers every project's specs share (not part of @baton/eventstore's API).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startRedisServer } from '../../eventstore/src/int/servers';
import { createRedis } from './redis';
import { compareKeySet, compareNamespaces } from './snapshot';
import { createProjectionStore } from './store';
import { redisFixture, type RedisFixture } from './test-support';

/*
 * The generation comparison `baton verify` runs: inside Redis, every script call bounded (small
 * keys several at a time, large sorted sets and lists slice by slice, large hashes and sets through
 * HSCAN / SSCAN), so it holds neither side in memory and no call outlasts a 1 s command timeout.
 */
describe('comparing two generations key by key (real Redis)', () => {
  let fx: RedisFixture;
  beforeEach(async () => {
    fx = await redisFixture();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  it('finds exactly the keys that differ — by value, type, size, presence — small and large, whatever the order of hash fields and set members', async () => {
    const a = `${fx.prefix}:p:g1:`;
    const b = `${fx.prefix}:p:g2:`;
    const r = fx.handle.client;
    const both = async (write: (ns: string, side: 'a' | 'b') => Promise<unknown>) => {
      await write(a, 'a');
      await write(b, 'b');
    };
    const members = (n: number) => Array.from({ length: n }, (_, i) => [String(i % 7), `m${i}`]).flat();
    const fields = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, `v${i}`]));
    const reversed = (o: Record<string, string>) => Object.fromEntries(Object.entries(o).reverse());
    const many = (n: number) => Array.from({ length: n }, (_, i) => `s${i}`);
    // Equal.
    await both((ns) => r.set(`${ns}str`, '{"a":1}'));
    await both((ns, side) => r.hset(`${ns}hash`, side === 'a' ? { x: '1', y: '2' } : { y: '2', x: '1' }));
    await both((ns) => r.zadd(`${ns}zbig`, ...members(12_000)));
    await both((ns, side) => r.hset(`${ns}hbig`, side === 'a' ? fields(3_000) : reversed(fields(3_000))));
    await both((ns, side) => r.sadd(`${ns}sbig`, ...(side === 'a' ? many(4_000) : many(4_000).reverse())));
    await both((ns) => r.set(`${ns}long`, 'x'.repeat(3 * 1024 * 1024)));
    await both((ns) => r.rpush(`${ns}list`, ...many(2_500)));
    // Different.
    await both((ns, side) => r.set(`${ns}str2`, side === 'a' ? 'one' : 'two'));
    await both((ns, side) => (side === 'a' ? r.set(`${ns}typed`, 'x') : r.sadd(`${ns}typed`, 'x')));
    await both((ns, side) => r.zadd(`${ns}zdiff`, ...members(12_000), side === 'a' ? '1' : '2', 'm11999'));
    await both((ns, side) => r.hset(`${ns}hdiff`, { ...fields(3_000), f1234: side === 'a' ? 'same?' : 'no' }));
    await both((ns, side) => r.sadd(`${ns}sdiff`, ...many(3_999), side === 'a' ? 'last-a' : 'last-b'));
    await both((ns, side) => r.set(`${ns}ldiff`, `${'y'.repeat(2 * 1024 * 1024)}${side}`));
    await both((ns, side) => r.rpush(`${ns}lorder`, ...(side === 'a' ? many(2_500) : many(2_500).reverse())));
    await both((ns, side) => r.zadd(`${ns}zsize`, ...members(side === 'a' ? 10 : 11)));
    await r.set(`${a}only-a`, '1');
    await r.set(`${b}only-b`, '1');
    await r.hset(`${a}~meta`, 'seq', '1');
    // Every call must fit a short command timeout.
    const tight = fx.handle.client.duplicate({ commandTimeout: 1_000 });
    try {
      const result = await compareNamespaces(tight, a, b, { batch: 7 });
      expect(result.differences.map((d) => d.key)).toEqual(['hdiff', 'ldiff', 'lorder', 'only-a', 'only-b', 'sdiff', 'str2', 'typed', 'zdiff', 'zsize']);
      expect(result.differing).toBe(10);
      expect(result).toMatchObject({ keysA: 16, keysB: 16 });
      expect(result.differences.find((d) => d.key === 'only-b')).toMatchObject({ b: { type: 'string', value: '1' } });
      expect(result.differences.find((d) => d.key === 'only-b')?.a).toBeUndefined();
      const capped = await compareNamespaces(tight, a, b, { maxDifferences: 3 });
      expect(capped.differing).toBe(10);
      expect(capped.differences).toHaveLength(3);
    } finally {
      tight.disconnect();
    }
  }, 60_000);

  it('compares only the keys it is given, each as the whole comparison does (small and large, absent on either side), and names every differing key when asked', async () => {
    const a = `${fx.prefix}:p:g1:`;
    const b = `${fx.prefix}:p:g2:`;
    const r = fx.handle.client;
    const members = (n: number) => Array.from({ length: n }, (_, i) => [String(i % 7), `m${i}`]).flat();
    for (const [ns, side] of [
      [a, 'a'],
      [b, 'b'],
    ] as const) {
      await r.set(`${ns}same`, 'x');
      await r.set(`${ns}str`, side);
      await r.hset(`${ns}hash`, side === 'a' ? { x: '1', y: '2' } : { y: '2', x: '1' });
      await r.zadd(`${ns}zbig`, ...members(12_000), side === 'a' ? '1' : '2', 'm11999');
      await r.zadd(`${ns}zsame`, ...members(6_000));
      // Not given: never looked at, however it differs.
      await r.set(`${ns}elsewhere`, side);
      await r.hset(`${ns}~meta`, 'seq', side === 'a' ? '1' : '2');
    }
    await r.set(`${a}only-a`, '1');
    await r.sadd(`${b}only-b`, 'm');
    const keys = ['same', 'str', 'hash', 'zbig', 'zsame', 'only-a', 'only-b', 'nowhere', 'str', '~meta'];
    const tight = fx.handle.client.duplicate({ commandTimeout: 1_000 });
    try {
      const result = await compareKeySet(tight, a, b, keys, { collectKeys: 10 });
      expect(result).toMatchObject({ keysA: 6, keysB: 6, differing: 4, differingKeys: ['only-a', 'only-b', 'str', 'zbig'] });
      expect(result.differences.map((d) => [d.key, d.a?.type ?? null, d.b?.type ?? null])).toEqual([
        ['only-a', 'string', null],
        ['only-b', null, 'set'],
        ['str', 'string', 'string'],
        ['zbig', 'zset', 'zset'],
      ]);
      // More differing keys than it may name: it counts them and says it could not name them all.
      expect(await compareKeySet(tight, a, b, keys, { collectKeys: 3, maxDifferences: 1 })).toMatchObject({ differing: 4, differingKeys: null });
      expect((await compareKeySet(tight, a, b, [])).differing).toBe(0);
      // The whole comparison names the same keys, and the one that was not given.
      expect((await compareNamespaces(tight, a, b, { collectKeys: 100 })).differingKeys).toEqual(['elsewhere', 'only-a', 'only-b', 'str', 'zbig']);
    } finally {
      tight.disconnect();
    }
  }, 60_000);

  it('compares the keys given with members on those members only, a page at a time: how many differ, the first 100 of them as each side holds them, no value for a side that lacks the key', async () => {
    const a = `${fx.prefix}:p:g1:`;
    const b = `${fx.prefix}:p:g2:`;
    const r = fx.handle.client;
    const names = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `m${String(from + i).padStart(5, '0')}`);
    // 2 500 members named, 1 200 of them differing (scores), past one page of 1 000; a member not named differs too and is not looked at.
    await r.zadd(`${a}z`, ...names(2_500).flatMap((m, i) => [String(i), m]), '5', 'unnamed');
    await r.zadd(`${b}z`, ...names(2_500).flatMap((m, i) => [String(i < 1_200 ? i + 0.5 : i), m]));
    await r.hset(`${a}h`, { f1: 'same', f2: 'live' });
    await r.hset(`${b}h`, { f1: 'same', f2: 'rebuilt', f3: 'only rebuilt' });
    await r.sadd(`${b}s`, 'x', 'y');
    const members = new Map([
      ['z', { type: 'zset' as const, members: names(2_500) }],
      ['h', { type: 'hash' as const, members: ['f1', 'f2', 'f3', 'f4'] }],
      ['s', { type: 'set' as const, members: ['x', 'w'], existed: false }],
    ]);
    const tight = fx.handle.client.duplicate({ commandTimeout: 1_000 });
    try {
      const result = await compareKeySet(tight, a, b, ['z', 'h', 's'], { collectKeys: 10, members });
      expect(result).toMatchObject({ differing: 3, differingKeys: ['h', 's', 'z'], keysA: 2, keysB: 3 });
      const [h, s, z] = result.differences;
      expect(h).toEqual({
        key: 'h',
        a: { type: 'hash', value: { f2: 'live' } },
        b: { type: 'hash', value: { f2: 'rebuilt', f3: 'only rebuilt' } },
        differing_members: 2,
      });
      expect(s).toEqual({ key: 's', b: { type: 'set', value: ['x'] }, differing_members: 1 });
      expect(z).toMatchObject({ key: 'z', differing_members: 1_200 });
      expect(z!.a).toEqual({ type: 'zset', value: names(100).map((m, i) => [m, i]) });
      expect(z!.b).toEqual({ type: 'zset', value: names(100).map((m, i) => [m, i + 0.5]) });
      // The same members equal on both sides: no difference, whatever else the keys hold.
      const equal = await compareKeySet(tight, a, b, ['z'], { members: new Map([['z', { type: 'zset' as const, members: names(1_300, 1_200) }]]) });
      expect(equal).toMatchObject({ differing: 0, differences: [] });
    } finally {
      tight.disconnect();
    }
  }, 60_000);

  it("the store's comparisons wait for a Redis slowed for a moment past the client's own command timeout (their own connection, a longer timeout), where a command of the client times out", async () => {
    // A redis-server of this test's own (DEBUG SLEEP blocks every client of a server: never the shared one).
    const server = await startRedisServer({ args: ['--enable-debug-command', 'yes'] });
    const url = server.url;
    // The CLI's client: a short command timeout (REDIS_COMMAND_TIMEOUT_MS is 1 s; shorter here).
    const client = createRedis(url, { commandTimeout: 200, maxRetriesPerRequest: 1 });
    const blocker = createRedis(url, { commandTimeout: 10_000 });
    try {
      await waitFor(async () => (await client.client.ping().catch(() => null)) === 'PONG', 'redis-server started');
      const r = client.client;
      const store = createProjectionStore({ redis: r, prefix: 'slow' });
      for (const [gen, value] of [
        [1, 'live'],
        [2, 'rebuilt'],
      ] as const) {
        await r.set(`slow:p:g${gen}:same`, 'x');
        await r.set(`slow:p:g${gen}:str`, value);
      }
      await r.set('slow:p:g2:~tmp:frozen:str', 'live');
      /** `work` started while Redis sleeps for 1 s (5 times the client's timeout). */
      const whileAsleep = async <T>(work: () => Promise<T>): Promise<T> => {
        const asleep = blocker.client.call('DEBUG', 'SLEEP', '1');
        await sleep(50);
        try {
          return await work();
        } finally {
          await asleep;
        }
      };
      // The client's own commands time out meanwhile: Redis is that slow.
      await expect(whileAsleep(() => r.get('slow:p:g1:str'))).rejects.toThrow('Command timed out');
      await expect(whileAsleep(() => store.compare('p', 1, 2, { collectKeys: 10 }))).resolves.toMatchObject({ differing: 1, differingKeys: ['str'] });
      await expect(whileAsleep(() => store.compareKeys('p', 1, 2, ['same', 'str']))).resolves.toMatchObject({ differing: 1 });
      await expect(whileAsleep(() => store.compareFrozen('p', 2, ['str']))).resolves.toMatchObject({ differing: 1 });
      await expect(whileAsleep(() => store.countKeys('p', [1, 2]))).resolves.toEqual([2, 2]);
    } finally {
      await client.close();
      await blocker.close();
      await server.remove();
    }
  }, 60_000);
});
