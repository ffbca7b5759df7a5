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
  for await (const batch of redis.scanStream({ match: `${ns}*`, count: 10_000 })) {
    for (const key of batch as string[]) {
      const relative = key.slice(ns.length);
      if (relative !== META_KEY && !relative.startsWith(TMP_PREFIX)) found.add(key);
    }
  }
  const keys = [...found].sort();
  if (keys.length === 0) return {};
  const values = await readValues(redis, keys);
  const out: Record<string, SnapshotValue> = {};
  keys.forEach((key, i) => {
    const value = values[i];
    if (value !== undefined) out[key.slice(ns.length)] = value;
  });
  return out;
}

/**
 * The canonical value of each key (as a snapshot holds it; undefined when the key does not exist
 * or is empty): one pipeline of TYPE, one of reads.
 */
export async function readValues(redis: Redis, keys: readonly string[]): Promise<Array<SnapshotValue | undefined>> {
  if (keys.length === 0) return [];
  const types = await execPipeline(
    redis,
    keys.map((key) => ['type', key]),
  );
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
  return keys.map((_, i) => {
    const value = values[i];
    switch (types[i]) {
      case 'string':
        return typeof value === 'string' ? { type: 'string', value } : undefined;
      case 'hash': {
        const hash = value as Record<string, string>;
        const sorted: Record<string, string> = {};
        for (const field of Object.keys(hash).sort()) sorted[field] = hash[field] as string;
        return Object.keys(sorted).length > 0 ? { type: 'hash', value: sorted } : undefined;
      }
      case 'set':
        return (value as string[]).length > 0 ? { type: 'set', value: [...(value as string[])].sort() } : undefined;
      case 'zset': {
        const flat = value as string[];
        const pairs: [string, number][] = [];
        for (let j = 0; j + 1 < flat.length; j += 2) pairs.push([flat[j] as string, Number(flat[j + 1])]);
        return pairs.length > 0 ? { type: 'zset', value: pairs } : undefined;
      }
      case 'list':
        return (value as string[]).length > 0 ? { type: 'list', value: value as string[] } : undefined;
      default:
        return undefined; // deleted between SCAN and read
    }
  });
}

/** What {@link compareNamespaces} found. */
export interface NamespaceComparison {
  /** Keys (engine keys excluded) in each namespace. */
  keysA: number;
  keysB: number;
  /** How many keys differ (present on one side only, or with different values). */
  differing: number;
  /** The first `maxDifferences` of them, sorted by key. */
  differences: SnapshotDifference[];
}

/**
 * Compare two namespaces key by key without holding either in memory: SCAN `a` in batches and
 * read each batch's keys on both sides (two pipelines), then SCAN `b` for keys `a` lacks. The
 * values are compared canonically, as {@link diffSnapshots} does. Memory is one batch plus the
 * differences kept (`maxDifferences`, default 1 000).
 */
export async function compareNamespaces(
  redis: Redis,
  a: string,
  b: string,
  options: { maxDifferences?: number; /** SCAN COUNT (default 10 000). */ batch?: number } = {},
): Promise<NamespaceComparison> {
  const max = options.maxDifferences ?? 1_000;
  const batchSize = options.batch ?? 10_000;
  const out: NamespaceComparison = { keysA: 0, keysB: 0, differing: 0, differences: [] };
  const note = (difference: SnapshotDifference) => {
    out.differing++;
    if (out.differences.length < max) out.differences.push(difference);
  };
  // Keys in groups of at most 1 000 (a SCAN step may bring many more): what one group reads is in memory at once.
  const relativeKeys = async function* (ns: string): AsyncGenerator<string[]> {
    for await (const batch of redis.scanStream({ match: `${ns}*`, count: batchSize })) {
      const keys = [...new Set(batch as string[])].map((key) => key.slice(ns.length)).filter((key) => key !== META_KEY && !key.startsWith(TMP_PREFIX));
      for (let i = 0; i < keys.length; i += 1_000) yield keys.slice(i, i + 1_000);
    }
  };
  // SCAN may (rarely, while Redis rehashes) return a key twice; remembering every key would cost
  // memory in proportion to the projection, so a repeated difference is only dropped at the end.
  for await (const keys of relativeKeys(a)) {
    const [left, right] = await Promise.all([
      readValues(
        redis,
        keys.map((k) => a + k),
      ),
      readValues(
        redis,
        keys.map((k) => b + k),
      ),
    ]);
    keys.forEach((key, i) => {
      const l = left[i];
      const r = right[i];
      if (l !== undefined) out.keysA++;
      if (l === undefined && r === undefined) return;
      if (l !== undefined && r !== undefined && canonicalJson(l) === canonicalJson(r)) return;
      note({ key, ...(l ? { a: l } : {}), ...(r ? { b: r } : {}) });
    });
  }
  for await (const keys of relativeKeys(b)) {
    const exists = await execPipeline(
      redis,
      keys.map((k) => ['exists', a + k]),
    );
    const onlyB = keys.filter((_, i) => Number(exists[i]) === 0);
    const values = await readValues(
      redis,
      onlyB.map((k) => b + k),
    );
    onlyB.forEach((key, i) => {
      const r = values[i];
      if (r !== undefined) note({ key, b: r });
    });
    out.keysB += keys.length;
  }
  const unique = new Map(out.differences.map((d) => [d.key, d]));
  out.differing -= out.differences.length - unique.size;
  out.differences = [...unique.values()].sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
  return out;
}

async function execPipeline(redis: Redis, commands: [string, ...string[]][]): Promise<unknown[]> {
  const results = (await redis.pipeline(commands).exec()) ?? [];
  return results.map(([error, value]) => {
    if (error) throw error;
    return value;
  });
}
