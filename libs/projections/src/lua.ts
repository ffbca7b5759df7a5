import { createHash } from 'node:crypto';
import type Redis from 'ioredis';

/**
 * A Lua script run with EVALSHA, falling back to EVAL when the server answers NOSCRIPT (after a
 * restart, a failover or SCRIPT FLUSH). EVAL also loads the script into the cache, so the next call
 * is an EVALSHA again. Scripts run atomically; any other error is rethrown unchanged.
 */
export class LuaScript {
  readonly sha: string;

  constructor(
    readonly name: string,
    readonly source: string,
  ) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  /** A large argument may be given as a Buffer: written to the socket as it is, never measured and encoded again. */
  async run(redis: Redis, keys: readonly string[], args: readonly (string | number | Buffer)[]): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.includes('NOSCRIPT')) throw error;
      return await redis.eval(this.source, keys.length, ...keys, ...args);
    }
  }
}
