import { randomBytes } from 'node:crypto';
import type Redis from 'ioredis';

/** Deletes the lock only while it is still this holder's (a lock that outlived its time may be another's now). */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
/** Extends the lock only while it is still this holder's. */
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`;

/** What {@link RedisLock.tryRun} did: ran `work` holding the key (its value), or found the key held by another. */
export type RedisLockAttempt<T> = { acquired: true; value: T } | { acquired: false };

export interface RedisLockOptions {
  /** How long the lock holds without renewal, ms: a holder that dies frees it after this. */
  ttlMs: number;
  /** How often a waiter (`run`) asks again, ms (a random part is added so that waiters spread out). */
  pollMs?: number;
  /** Stops waiting in `run` (the promise rejects with the signal's reason). */
  signal?: AbortSignal;
}

/**
 * A mutual exclusion between processes that share one Redis: `run(work)` waits until it holds the
 * key (SET NX PX), runs `work`, and releases the key (compare-and-delete). While `work` runs the key
 * is renewed every third of `ttlMs`, so a long `work` keeps it; a holder that dies frees it after
 * `ttlMs`. It is a lease, not a guarantee: a holder that stalls longer than `ttlMs` between renewals
 * (a paused process, Redis unreachable) loses it, and another may run meanwhile — use it where two
 * runs at once cost duplicated work or messages, never correctness. A Redis error while waiting
 * rejects `run`; a renewal's or the release's error is left alone (the key expires after `ttlMs`).
 * `tryRun(work)` is the same lease without the wait: where another holds the key it answers
 * `{ acquired: false }` at once and `work` does not run.
 */
export class RedisLock {
  private readonly holder = randomBytes(8).toString('hex');
  private runs = 0;

  constructor(
    private readonly redis: Redis,
    readonly key: string,
    private readonly options: RedisLockOptions,
  ) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    const token = this.nextToken();
    const { pollMs = 10, signal } = this.options;
    while (!(await this.acquire(token))) {
      signal?.throwIfAborted();
      await new Promise((resolve) => setTimeout(resolve, pollMs + Math.floor(Math.random() * pollMs)));
      signal?.throwIfAborted();
    }
    return this.hold(token, work);
  }

  /**
   * One attempt, no waiting: where the key is free, hold it while `work` runs (renewed, then
   * released by compare-and-delete, as `run` does) and answer `{ acquired: true, value }`; where
   * another holds it, answer `{ acquired: false }` at once without running `work`. A Redis error
   * on the attempt rejects; `work`'s own rejection passes through (after the release).
   */
  async tryRun<T>(work: () => Promise<T>): Promise<RedisLockAttempt<T>> {
    const token = this.nextToken();
    if (!(await this.acquire(token))) return { acquired: false };
    return { acquired: true, value: await this.hold(token, work) };
  }

  private nextToken(): string {
    return `${this.holder}:${this.runs++}`;
  }

  private async acquire(token: string): Promise<boolean> {
    return (await this.redis.set(this.key, token, 'PX', this.options.ttlMs, 'NX')) === 'OK';
  }

  /** Run `work` holding the key as `token`: renewed meanwhile, released after (only while still `token`'s). */
  private async hold<T>(token: string, work: () => Promise<T>): Promise<T> {
    const { ttlMs } = this.options;
    const renewal = setInterval(
      () => void this.redis.eval(RENEW, 1, this.key, token, String(ttlMs)).catch(() => undefined),
      Math.max(1, Math.floor(ttlMs / 3)),
    );
    renewal.unref();
    try {
      return await work();
    } finally {
      clearInterval(renewal);
      await this.redis.eval(RELEASE, 1, this.key, token).catch(() => undefined);
    }
  }
}
