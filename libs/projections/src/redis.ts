import Redis, { type RedisOptions } from 'ioredis';
import { RedisUnavailableError } from './errors';

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
/**
 * How long any one command may wait for its reply (`REDIS_COMMAND_TIMEOUT_MS`) before it fails with
 * "Command timed out" ({@link RedisUnavailableError.of} recognises it): a stalled Redis makes
 * callers fail fast instead of hanging. Commands queued while disconnected count too.
 */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 1000;

/** A Redis client with a readiness check and an orderly close. */
export interface RedisHandle {
  readonly client: Redis;
  /**
   * Readiness check: sends PING (connecting first if the client is lazy) and resolves when PONG
   * arrives; rejects with {@link RedisUnavailableError} after `timeoutMs` (default 2000) or on error.
   * Safe to call repeatedly; it never leaves a command queued forever.
   */
  ping(timeoutMs?: number): Promise<void>;
  /** QUIT after pending replies arrive; falls back to disconnect. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * Create an ioredis 6 client for `url` (default `REDIS_URL` or redis://127.0.0.1:6379) that connects
 * lazily, on its first command or `ping()`. Every command fails after `commandTimeout` ms without a
 * reply (default {@link DEFAULT_REDIS_COMMAND_TIMEOUT_MS}; a stalled server makes callers fail fast,
 * and once it answers again the client carries on by itself). Commands issued while disconnected
 * are queued and retried up to `maxRetriesPerRequest` (default 3) reconnections, then fail; the
 * client keeps reconnecting with ioredis's backoff. Commands of one event-loop turn are sent together
 * (`enableAutoPipelining`). `opts` override any of these defaults.
 */
export function createRedis(url: string = process.env['REDIS_URL'] ?? DEFAULT_REDIS_URL, opts: RedisOptions = {}): RedisHandle {
  const client = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 3,
    connectTimeout: 5000,
    commandTimeout: DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
    // Commands issued in one event-loop turn go out in one socket write (the notifier issues a
    // range's five projection scripts at once: five writes before, one now). Replies and errors
    // stay per command.
    enableAutoPipelining: true,
    ...opts,
  });
  // Connection errors surface through the commands that fail; an unhandled 'error' event would crash.
  client.on('error', () => undefined);
  let closed = false;
  return {
    client,
    async ping(timeoutMs = 2000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new RedisUnavailableError(`redis did not answer PING within ${timeoutMs} ms`)), timeoutMs);
      });
      try {
        const reply = await Promise.race([client.ping(), timeout]);
        if (reply !== 'PONG') throw new RedisUnavailableError(`unexpected PING reply ${String(reply)}`);
      } catch (error) {
        if (error instanceof RedisUnavailableError) throw error;
        throw new RedisUnavailableError(`redis is not reachable: ${(error as Error).message}`, { cause: error });
      } finally {
        clearTimeout(timer);
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      if (client.status === 'wait' || client.status === 'end') {
        client.disconnect();
        return;
      }
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}
