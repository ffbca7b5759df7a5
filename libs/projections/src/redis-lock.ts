import { randomBytes } from 'node:crypto';
import type Redis from 'ioredis';

/** Deletes the lock only while it is still this holder's (a lock that outlived its time may be another's now). */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
/** Extends the lock only while it is still this holder's. */
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`;

export interface RedisLockOptions {
  /** How long the lock holds without renewal, ms: a holder that dies frees it after this. */
  ttlMs: number;
  /** How often a waiter asks again, ms (a random part is added so that waiters spread out). */
  pollMs?: number;
  /** Stops waiting (the promise rejects with the signal's reason). */
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
    const token = `${this.holder}:${this.runs++}`;
    const { ttlMs, pollMs = 10, signal } = this.options;
    while ((await this.redis.set(this.key, token, 'PX', ttlMs, 'NX')) !== 'OK') {
      signal?.throwIfAborted();
      await new Promise((resolve) => setTimeout(resolve, pollMs + Math.floor(Math.random() * pollMs)));
      signal?.throwIfAborted();
    }
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
