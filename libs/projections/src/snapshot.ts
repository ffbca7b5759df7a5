import type Redis from 'ioredis';
import { absentKeysScript, compareKeysScript, compareSliceScript, keyShapesScript } from './scripts';
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
  /**
   * Set when the key was compared member by member (a large sorted set, set or hash whose differing
   * members `verify` froze, see `ScratchPass.freeze`): how many of its members differ. `a` and `b`
   * then hold only those members — the first {@link MAX_SHOWN_MEMBERS} — as each side has them (a
   * member one side lacks is missing from that side's value; a side that lacks the key has none),
   * not the whole key.
   */
  differing_members?: number;
}

/** Most members of one key compared member by member that a difference shows (`differing_members` counts them all). */
export const MAX_SHOWN_MEMBERS = 100;

/** The members of one key to compare one by one (`ScratchPass.freeze` copied only those). */
export interface MemberSet {
  type: 'zset' | 'set' | 'hash';
  members: readonly string[];
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

/** What {@link compareNamespaces} (or {@link compareKeySet}) found. */
export interface NamespaceComparison {
  /** Keys (engine keys excluded) in each namespace ({@link compareKeySet}: of the keys it was given). */
  keysA: number;
  keysB: number;
  /** How many keys differ (present on one side only, or with different values). */
  differing: number;
  /** The first `maxDifferences` of them, sorted by key. */
  differences: SnapshotDifference[];
  /**
   * Every differing key, when the comparison was asked to collect them (`collectKeys`): sorted, or
   * null when there were more than `collectKeys` (too many to name; a later check compares all).
   */
  differingKeys?: string[] | null;
}

export interface CompareNamespacesOptions {
  /** Differences returned with both values (default 1 000); `differing` counts them all. */
  maxDifferences?: number;
  /** SCAN COUNT (default 10 000). */
  batch?: number;
  /** Collect the name of every differing key, up to this many, in `differingKeys`. */
  collectKeys?: number;
}

/** Elements one comparison call may visit (a script call stays short under a 1 s command timeout). */
const COMPARE_BUDGET = 5_000;
/** Keys up to this size are compared whole inside one script call; larger ones slice by slice. */
const SMALL_KEY = 1_000;
/** Strings up to this many bytes count as one element; longer ones as one per KiB. */
const STRING_UNIT = 1_024;
/** Keys whose shapes one call reads. */
const GROUP = 500;
/** Members one read of a key compared member by member asks for. */
const MEMBER_PAGE = 1_000;

/**
 * Compare two namespaces key by key without holding either in memory and without any long script
 * call. SCAN `a` in steps; for every group of (at most 500) keys, read each side's type and size
 * (`keyShapesScript`, O(1) per key): another type or size is a difference at once. Keys of equal
 * shape are compared inside Redis — small ones whole, several per call, each call visiting at most
 * a few thousand elements (`compareKeysScript`: canonical forms, hash fields and set members in
 * any order); large sorted sets and lists slice by slice (`compareSliceScript`); large hashes and
 * sets field by field through HSCAN / SSCAN against the other side. Only differing keys' values
 * come to the client (for the report). Then SCAN `b` for keys `a` lacks (`absentKeysScript`).
 * Values compare as {@link diffSnapshots} compares them. Memory is one group plus the differences
 * kept (`maxDifferences`, default 1 000; and the names `collectKeys` asks for); `differing`
 * counts them all.
 */
export async function compareNamespaces(redis: Redis, a: string, b: string, options: CompareNamespacesOptions = {}): Promise<NamespaceComparison> {
  const batchSize = options.batch ?? 10_000;
  const comparer = keyComparer(redis, a, b, options);
  const relativeKeys = async function* (ns: string): AsyncGenerator<string[]> {
    for await (const batch of redis.scanStream({ match: `${ns}*`, count: batchSize })) {
      const keys = [...new Set(batch as string[])].map((key) => key.slice(ns.length)).filter(isProjectionKey);
      for (let i = 0; i < keys.length; i += GROUP) yield keys.slice(i, i + GROUP);
    }
  };
  // SCAN may (rarely, while Redis rehashes) return a key twice; remembering every key would cost
  // memory in proportion to the projection, so a repeated difference is only dropped at the end.
  for await (const keys of relativeKeys(a)) {
    const { differ, presentA } = await comparer.group(keys);
    comparer.out.keysA += presentA;
    await comparer.report(differ);
  }
  for await (const keys of relativeKeys(b)) {
    comparer.out.keysB += keys.length;
    await comparer.report((await absentKeysScript.run(redis, [], [a, ...keys])) as string[]);
  }
  return comparer.finish();
}

/**
 * Compare only `keys` (relative names; engine keys are skipped) between the namespaces `a` and
 * `b`, each key exactly as {@link compareNamespaces} compares it (a key absent on both sides is
 * equal). For a second look at what may have changed since a full comparison: the keys that
 * differed then and the keys written since. `keysA` / `keysB` count the given keys each side holds.
 */
export async function compareKeySet(
  redis: Redis,
  a: string,
  b: string,
  keys: Iterable<string>,
  options: Omit<CompareNamespacesOptions, 'batch'> & {
    /**
     * Keys (among `keys`) to compare only on these members, one by one: a member differs when one
     * side lacks it, or holds it with another score or value. `existed` says whether side `a`
     * holds the key (a copy of some members may hold none of them); without it the key is looked at.
     */
    members?: ReadonlyMap<string, MemberSet & { existed?: boolean }>;
  } = {},
): Promise<NamespaceComparison> {
  const comparer = keyComparer(redis, a, b, options);
  const members = options.members ?? new Map<string, MemberSet & { existed?: boolean }>();
  const all = [...new Set(keys)].filter((key) => isProjectionKey(key) && !members.has(key)).sort();
  for (let i = 0; i < all.length; i += GROUP) {
    const { differ, presentA, presentB } = await comparer.group(all.slice(i, i + GROUP));
    comparer.out.keysA += presentA;
    comparer.out.keysB += presentB;
    await comparer.report(differ);
  }
  for (const key of [...members.keys()].sort()) {
    const set = members.get(key)!;
    const presentA = set.existed ?? (await redis.exists(a + key)) === 1;
    const presentB = (await redis.exists(b + key)) === 1;
    if (presentA) comparer.out.keysA++;
    if (presentB) comparer.out.keysB++;
    const found = await compareMembers(redis, a + key, b + key, set);
    // A side that lacks the key has no value, as in every other difference.
    if (found !== null)
      comparer.reportShown({ key, ...(presentA ? { a: found.a } : {}), ...(presentB ? { b: found.b } : {}), differing_members: found.differing_members });
  }
  return comparer.finish();
}

/**
 * Compare `set.members` of the key `a` with the same members of the key `b` (both of `set.type`,
 * or absent), a page at a time: null when every one is the same on both sides, else how many
 * differ and the first {@link MAX_SHOWN_MEMBERS} of them as each side holds them.
 */
async function compareMembers(
  redis: Redis,
  a: string,
  b: string,
  set: MemberSet,
): Promise<Required<Pick<SnapshotDifference, 'a' | 'b' | 'differing_members'>> | null> {
  let differing = 0;
  const zset: Record<'a' | 'b', [string, number][]> = { a: [], b: [] };
  const plain: Record<'a' | 'b', string[]> = { a: [], b: [] };
  const hash: Record<'a' | 'b', Record<string, string>> = { a: {}, b: {} };
  for (let i = 0; i < set.members.length; i += MEMBER_PAGE) {
    const page = set.members.slice(i, i + MEMBER_PAGE);
    const [left, right] = await Promise.all(
      [a, b].map(async (key): Promise<Array<string | null>> => {
        if (set.type === 'zset') return (await redis.call('ZMSCORE', key, ...page)) as Array<string | null>;
        if (set.type === 'hash') return redis.hmget(key, ...page);
        return ((await redis.call('SMISMEMBER', key, ...page)) as number[]).map((present) => (Number(present) === 1 ? '' : null));
      }),
    );
    page.forEach((member, k) => {
      const [l, r] = [left![k] ?? null, right![k] ?? null];
      const same = set.type === 'zset' ? (l === null ? r === null : r !== null && Number(l) === Number(r)) : l === r;
      if (same) return;
      differing++;
      if (differing > MAX_SHOWN_MEMBERS) return;
      for (const [side, value] of [
        ['a', l],
        ['b', r],
      ] as const) {
        if (value === null) continue;
        if (set.type === 'zset') zset[side].push([member, Number(value)]);
        else if (set.type === 'hash') hash[side][member] = value;
        else plain[side].push(member);
      }
    });
  }
  if (differing === 0) return null;
  const value = (side: 'a' | 'b'): SnapshotValue => {
    if (set.type === 'zset') return { type: 'zset', value: zset[side].sort(([m1, s1], [m2, s2]) => s1 - s2 || (m1 < m2 ? -1 : m1 > m2 ? 1 : 0)) };
    if (set.type === 'hash') return { type: 'hash', value: Object.fromEntries(Object.entries(hash[side]).sort(([f1], [f2]) => (f1 < f2 ? -1 : 1))) };
    return { type: 'set', value: plain[side].sort() };
  };
  return { a: value('a'), b: value('b'), differing_members: differing };
}

/** Keys a projection writes (not the engine's meta or the query script's scratch keys). */
function isProjectionKey(relative: string): boolean {
  return relative !== META_KEY && !relative.startsWith(TMP_PREFIX);
}

/**
 * The key-by-key comparison both {@link compareNamespaces} and {@link compareKeySet} run: `group`
 * finds which of (at most {@link GROUP}) keys differ, `report` counts them and reads the values of
 * the first `maxDifferences`, `finish` returns what was found.
 */
function keyComparer(redis: Redis, a: string, b: string, options: Omit<CompareNamespacesOptions, 'batch'>) {
  const max = options.maxDifferences ?? 1_000;
  const out: NamespaceComparison = { keysA: 0, keysB: 0, differing: 0, differences: [] };
  const collect = options.collectKeys;
  let collected: Set<string> | null = collect === undefined ? null : new Set();
  let overflowed = false;

  const report = async (keys: readonly string[]) => {
    out.differing += keys.length;
    if (collected !== null) {
      for (const key of keys) collected.add(key);
      if (collected.size > (collect as number)) {
        collected = null;
        overflowed = true;
      }
    }
    const shown = keys.slice(0, Math.max(0, max - out.differences.length));
    if (shown.length === 0) return;
    const [left, right] = await Promise.all([
      readValues(
        redis,
        shown.map((k) => a + k),
      ),
      readValues(
        redis,
        shown.map((k) => b + k),
      ),
    ]);
    shown.forEach((key, i) => {
      const l = left[i];
      const r = right[i];
      out.differences.push({ key, ...(l ? { a: l } : {}), ...(r ? { b: r } : {}) });
    });
  };

  /** Count and keep a difference already read (a key compared member by member). */
  const reportShown = (difference: SnapshotDifference) => {
    out.differing++;
    if (collected !== null) {
      collected.add(difference.key);
      if (collected.size > (collect as number)) {
        collected = null;
        overflowed = true;
      }
    }
    if (out.differences.length < max) out.differences.push(difference);
  };

  /** Whether a large key holds the same on both sides (its type and size already match). */
  const sameLarge = async (key: string, type: string, size: number): Promise<boolean> => {
    if (type === 'zset' || type === 'list') {
      const step = type === 'zset' ? COMPARE_BUDGET / 2 : COMPARE_BUDGET;
      for (let start = 0; start < size; start += step) {
        const equal = await compareSliceScript.run(redis, [], [a + key, b + key, type, start, start + step - 1]);
        if (Number(equal) !== 1) return false;
      }
      return true;
    }
    if (type === 'hash') {
      let cursor = '0';
      do {
        const [next, flat] = await redis.hscan(a + key, cursor, 'COUNT', 1_000);
        cursor = next;
        const fields = flat.filter((_, i) => i % 2 === 0);
        if (fields.length === 0) continue;
        const values = await redis.hmget(b + key, ...fields);
        if (values.some((value, i) => value !== flat[i * 2 + 1])) return false;
      } while (cursor !== '0');
      return true;
    }
    if (type === 'set') {
      let cursor = '0';
      do {
        const [next, members] = await redis.sscan(a + key, cursor, 'COUNT', 1_000);
        cursor = next;
        if (members.length === 0) continue;
        const present = (await redis.call('SMISMEMBER', b + key, ...members)) as number[];
        if (present.some((p) => Number(p) !== 1)) return false;
      } while (cursor !== '0');
      return true;
    }
    // A long string: one comparison of two values.
    return (await redis.get(a + key)) === (await redis.get(b + key));
  };

  /** Of `keys` (relative), those that differ, and how many exist on each side. */
  const group = async (keys: readonly string[]): Promise<{ differ: string[]; presentA: number; presentB: number }> => {
    const shapes = (await keyShapesScript.run(redis, [], [a, b, ...keys])) as Array<string | number>;
    const differ: string[] = [];
    const small: Array<[key: string, cost: number]> = [];
    const large: Array<[key: string, type: string, size: number]> = [];
    let presentA = 0;
    let presentB = 0;
    keys.forEach((key, i) => {
      const [typeA, sizeA, typeB, sizeB] = [shapes[i * 4], Number(shapes[i * 4 + 1]), shapes[i * 4 + 2], Number(shapes[i * 4 + 3])];
      if (typeA !== 'none') presentA++;
      if (typeB !== 'none') presentB++;
      if (typeA === 'none' && typeB === 'none') return;
      if (typeA !== typeB || sizeA !== sizeB) differ.push(key);
      else if (typeA === 'string' ? sizeA <= SMALL_KEY * STRING_UNIT : sizeA <= SMALL_KEY)
        small.push([key, typeA === 'string' ? 1 + Math.floor(sizeA / STRING_UNIT) : 1 + sizeA]);
      else large.push([key, String(typeA), sizeA]);
    });
    for (let i = 0; i < small.length; ) {
      const batch: string[] = [];
      for (let cost = 0; i < small.length && (batch.length === 0 || cost + (small[i] as [string, number])[1] <= COMPARE_BUDGET); i++) {
        const [key, keyCost] = small[i] as [string, number];
        batch.push(key);
        cost += keyCost;
      }
      differ.push(...((await compareKeysScript.run(redis, [], [a, b, ...batch])) as string[]));
    }
    for (const [key, type, size] of large) if (!(await sameLarge(key, type, size))) differ.push(key);
    return { differ, presentA, presentB };
  };

  const finish = (): NamespaceComparison => {
    const unique = new Map(out.differences.map((d) => [d.key, d]));
    out.differing -= out.differences.length - unique.size;
    out.differences = [...unique.values()].sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
    if (collect !== undefined) {
      out.differingKeys = overflowed || collected === null ? null : [...collected].sort();
      // Named one by one, repeats of a key SCAN returned twice are gone: the exact count.
      if (collected !== null && !overflowed) out.differing = collected.size;
    }
    return out;
  };

  return { out, report, reportShown, group, finish };
}

async function execPipeline(redis: Redis, commands: [string, ...string[]][]): Promise<unknown[]> {
  const results = (await redis.pipeline(commands).exec()) ?? [];
  return results.map(([error, value]) => {
    if (error) throw error;
    return value;
  });
}
