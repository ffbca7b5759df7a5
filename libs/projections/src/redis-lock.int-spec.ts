import { randomBytes } from 'node:crypto';
import { RedisLock } from './redis-lock';
import { createRedis, type RedisHandle } from './redis';

/*
 * The one Redis lease (SET NX PX, renewed, released by compare-and-delete): `run` waits for the
 * key, `tryRun` takes it or says at once that another holds it. Real Redis, a random key prefix.
 */

const prefix = `rl${randomBytes(5).toString('hex')}`;
let redis: RedisHandle;

beforeAll(() => {
  redis = createRedis();
});

afterAll(async () => {
  for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 500 })) {
    const keys = batch as string[];
    if (keys.length > 0) await redis.client.unlink(...keys);
  }
  await redis.close();
});

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('RedisLock (real Redis)', () => {
  it("tryRun: a free key runs the work holding it and releases it; a held key answers acquired false at once, runs nothing and leaves the holder's key", async () => {
    const key = `${prefix}:free-then-held`;
    const lock = new RedisLock(redis.client, key, { ttlMs: 10_000 });
    const held = await lock.tryRun(async () => {
      const during = await redis.client.get(key);
      // Held meanwhile: a second attempt (another instance, or this one again) is refused.
      expect(await new RedisLock(redis.client, key, { ttlMs: 10_000 }).tryRun(async () => 'ran')).toEqual({ acquired: false });
      expect(await lock.tryRun(async () => 'ran')).toEqual({ acquired: false });
      return during;
    });
    expect(held).toEqual({ acquired: true, value: expect.any(String) });
    expect(await redis.client.exists(key)).toBe(0);

    await redis.client.set(key, 'another-holder', 'PX', 10_000);
    let ran = false;
    expect(await lock.tryRun(async () => (ran = true))).toEqual({ acquired: false });
    expect(ran).toBe(false);
    expect(await redis.client.get(key)).toBe('another-holder');
  });

  it('tryRun: work that throws passes its error through, the key released; a lease that ran out and was taken by another during the work is not deleted by the release', async () => {
    const key = `${prefix}:throws-and-lapses`;
    const lock = new RedisLock(redis.client, key, { ttlMs: 10_000 });
    await expect(lock.tryRun(() => Promise.reject(new Error('work failed')))).rejects.toThrow('work failed');
    expect(await redis.client.exists(key)).toBe(0);

    const outcome = await lock.tryRun(async () => {
      // The lease runs out (expires in Redis) and another takes the key.
      await redis.client.pexpire(key, 1);
      while ((await redis.client.exists(key)) === 1) await sleep(2);
      expect(await redis.client.set(key, 'another-holder', 'PX', 10_000, 'NX')).toBe('OK');
      return 'done';
    });
    expect(outcome).toEqual({ acquired: true, value: 'done' });
    expect(await redis.client.get(key)).toBe('another-holder');
  });

  it('tryRun renews the lease while the work runs (a work longer than ttlMs keeps the key); run waits for it and then holds the key itself', async () => {
    const key = `${prefix}:renewed`;
    const ttlMs = 1_000;
    let waiterRan = false;
    const outcome = await new RedisLock(redis.client, key, { ttlMs }).tryRun(async () => {
      const waiter = new RedisLock(redis.client, key, { ttlMs, pollMs: 20 }).run(async () => {
        waiterRan = true;
        return redis.client.exists(key);
      });
      await sleep(ttlMs * 2.5);
      // Two and a half leases later the key is still this work's: nobody else ran.
      expect(waiterRan).toBe(false);
      expect(await redis.client.pttl(key)).toBeGreaterThan(0);
      return { waiter };
    });
    if (!outcome.acquired) throw new Error('the free key was not acquired');
    // Released: the waiter holds the key now.
    expect(await outcome.value.waiter).toBe(1);
    expect(waiterRan).toBe(true);
    expect(await redis.client.exists(key)).toBe(0);
  });

  it('run rejects with the signal’s reason when it is aborted while waiting, and leaves the holder’s key', async () => {
    const key = `${prefix}:aborted`;
    await redis.client.set(key, 'another-holder', 'PX', 10_000);
    const stop = new AbortController();
    const waiting = new RedisLock(redis.client, key, { ttlMs: 10_000, pollMs: 10, signal: stop.signal }).run(async () => 'ran');
    stop.abort(new Error('shutting down'));
    await expect(waiting).rejects.toThrow('shutting down');
    expect(await redis.client.get(key)).toBe('another-holder');
  });
});
