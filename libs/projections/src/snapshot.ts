import type Redis from 'ioredis';
import { canonicalJson } from './canonical-json';
import { META_KEY, TMP_PREFIX } from './keys';

/** The value of one Redis key in a snapshot, tagged with its Redis type. */
export type SnapshotValue =
  | { type: 'string'; value: string }
  | { type: 'hash'; value: Record<string, string> }
  | { type: 'set'; value: string[] }
  | { type: 'zset'; value: [member: string, score: number][] }
  | { type: 'list'; value: string[] };

/**
 * A canonical dump of one generation of a projection: every key (named without the
 * `<prefix>:<projection>:g<gen>:` part, in sorted order) with its value (hash fields sorted, set
 * members sorted, sorted sets in Redis order: score then member). The engine's `~meta` and scratch
 * keys are excluded; `lastSeq` and `version` report the meta separately. Two projections built from
 * the same events have equal `keys`, whatever generation they live in.
 */
export interface ProjectionSnapshot {
  projection: string;
  generation: number | null;
  lastSeq: number;
  version: number | null;
  keys: Record<string, SnapshotValue>;
}

/** One key whose value differs between two snapshots; `a` or `b` is absent when the key is. */
export interface SnapshotDifference {
  key: string;
  a?: SnapshotValue;
  b?: SnapshotValue;
}

/**
 * The keys whose values differ between two snapshots, sorted by key; empty when the projections
 * hold the same data. Generation, `lastSeq` and `version` are not compared.
 */
export function diffSnapshots(a: ProjectionSnapshot, b: ProjectionSnapshot): SnapshotDifference[] {
  const names = [...new Set([...Object.keys(a.keys), ...Object.keys(b.keys)])].sort();
  const out: SnapshotDifference[] = [];
  for (const key of names) {
    const left = a.keys[key];
    const right = b.keys[key];
    if (left && right && canonicalJson(left) === canonicalJson(right)) continue;
    out.push({ key, ...(left ? { a: left } : {}), ...(right ? { b: right } : {}) });
  }
  return out;
}

/** Read every key of the namespace `ns` (SCAN, then one pipeline of TYPE and one of reads). */
export async function dumpNamespace(redis: Redis, ns: string): Promise<Record<string, SnapshotValue>> {
  const found = new Set<string>();
  for await (const batch of redis.scanStream({ match: `${ns}*`, count: 1000 })) {
    for (const key of batch as string[]) {
      const relative = key.slice(ns.length);
      if (relative !== META_KEY && !relative.startsWith(TMP_PREFIX)) found.add(key);
    }
  }
  const keys = [...found].sort();
  if (keys.length === 0) return {};
  const types = await execPipeline(redis, keys.map((key) => ['type', key]));
  const reads = keys.map((key, i): [string, ...string[]] => {
    switch (types[i]) {
      case 'string':
        return ['get', key];
      case 'hash':
        return ['hgetall', key];
      case 'set':
        return ['smembers', key];
      case 'zset':
        return ['zrange', key, '0', '-1', 'WITHSCORES'];
      case 'list':
        return ['lrange', key, '0', '-1'];
      default:
        return ['exists', key];
    }
  });
  const values = await execPipeline(redis, reads);
  const out: Record<string, SnapshotValue> = {};
  keys.forEach((key, i) => {
    const relative = key.slice(ns.length);
    const value = values[i];
    switch (types[i]) {
      case 'string':
        if (typeof value === 'string') out[relative] = { type: 'string', value };
        return;
      case 'hash': {
        const hash = value as Record<string, string>;
        const sorted: Record<string, string> = {};
        for (const field of Object.keys(hash).sort()) sorted[field] = hash[field];
        if (Object.keys(sorted).length > 0) out[relative] = { type: 'hash', value: sorted };
        return;
      }
      case 'set':
        if ((value as string[]).length > 0) out[relative] = { type: 'set', value: [...(value as string[])].sort() };
        return;
      case 'zset': {
        const flat = value as string[];
        const pairs: [string, number][] = [];
        for (let j = 0; j + 1 < flat.length; j += 2) pairs.push([flat[j], Number(flat[j + 1])]);
        if (pairs.length > 0) out[relative] = { type: 'zset', value: pairs };
        return;
      }
      case 'list':
        if ((value as string[]).length > 0) out[relative] = { type: 'list', value: value as string[] };
        return;
      default:
        return; // deleted between SCAN and read
    }
  });
  return out;
}

async function execPipeline(redis: Redis, commands: [string, ...string[]][]): Promise<unknown[]> {
  const results = (await redis.pipeline(commands).exec()) ?? [];
  return results.map(([error, value]) => {
    if (error) throw error;
    return value;
  });
}
