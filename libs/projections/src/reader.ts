import type Redis from 'ioredis';
import { activeKey } from './keys';
import { readScript } from './scripts';

/**
 * Reads of single keys of a projection's active generation (keys named as the ops name them).
 * Each read resolves the active generation in the same Lua call, so it never reads a generation
 * that a concurrent swap has just retired. Before the first apply every read returns empty.
 */
export interface ProjectionReader {
  getString(key: string): Promise<string | null>;
  /** A document stored with `json.set`, parsed; null when absent. */
  getJson<T>(key: string): Promise<T | null>;
  /** All fields of a hash; null when the hash does not exist. */
  getHash(key: string): Promise<Record<string, string> | null>;
  hget(key: string, field: string): Promise<string | null>;
  /** Members of a sorted set by rank, ascending (or descending with `reverse`). */
  zrange(key: string, start: number, stop: number, reverse?: boolean): Promise<string[]>;
  /**
   * Members of a sorted set scored between `min` and `max` (numbers, or `-inf` / `+inf`),
   * ascending; with `latest`, the `latest` highest-scored of them (still ascending).
   */
  zrangeByScore(key: string, min: number | '-inf', max: number | '+inf', latest?: number): Promise<string[]>;
  /** Members of a sorted set (all scores equal) between two lex bounds (`[a` inclusive, `(a` exclusive, `-` / `+`). */
  zrangeByLex(key: string, min: string, max: string): Promise<string[]>;
  zscore(key: string, member: string): Promise<number | null>;
  zcard(key: string): Promise<number>;
  smembers(key: string): Promise<string[]>;
  sismember(key: string, member: string): Promise<boolean>;
  exists(key: string): Promise<boolean>;
}

export function createReader(redis: Redis, base: string): ProjectionReader {
  const pointer = activeKey(base);
  const read = async (command: string, key: string, ...args: (string | number)[]): Promise<unknown> => {
    const reply = (await readScript.run(redis, [pointer], [base, command, key, ...args])) as [string, unknown?];
    return reply[1] ?? null;
  };
  const stringOrNull = (value: unknown) => (typeof value === 'string' ? value : null);
  return {
    getString: async (key) => stringOrNull(await read('GET', key)),
    async getJson<T>(key: string) {
      const raw = stringOrNull(await read('GET', key));
      return raw === null ? null : (JSON.parse(raw) as T);
    },
    async getHash(key) {
      const flat = ((await read('HGETALL', key)) as string[] | null) ?? [];
      if (flat.length === 0) return null;
      const out: Record<string, string> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]] = flat[i + 1];
      return out;
    },
    hget: async (key, field) => stringOrNull(await read('HGET', key, field)),
    zrange: async (key, start, stop, reverse = false) => ((await read(reverse ? 'ZREVRANGE' : 'ZRANGE', key, start, stop)) as string[] | null) ?? [],
    async zrangeByScore(key, min, max, latest) {
      if (latest === undefined) return ((await read('ZRANGEBYSCORE', key, min, max)) as string[] | null) ?? [];
      const newestFirst = ((await read('ZREVRANGEBYSCORE', key, max, min, 'LIMIT', 0, latest)) as string[] | null) ?? [];
      return newestFirst.reverse();
    },
    zrangeByLex: async (key, min, max) => ((await read('ZRANGEBYLEX', key, min, max)) as string[] | null) ?? [],
    async zscore(key, member) {
      const raw = stringOrNull(await read('ZSCORE', key, member));
      return raw === null ? null : Number(raw);
    },
    zcard: async (key) => Number((await read('ZCARD', key)) ?? 0),
    smembers: async (key) => [...(((await read('SMEMBERS', key)) as string[] | null) ?? [])].sort(),
    sismember: async (key, member) => Number(await read('SISMEMBER', key, member)) === 1,
    exists: async (key) => Number(await read('EXISTS', key)) === 1,
  };
}
