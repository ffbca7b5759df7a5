import { heapWeight, LruCache } from '@baton/eventstore';
import { REBUILD_CACHE_BYTES } from './baton/cache-bounds';
import { canonicalJson, sortedKeys, type JsonValue } from './canonical-json';
import { ProjectionError, ProjectionOpError } from './errors';
import { ITEMS_PREFIX } from './keys';
import { INDEXED_FIELDS, opError, type ProjectionOp } from './ops';
import { WrittenKeys } from './written-keys';

/*
 * A rebuild folds the stream in memory and writes final values, instead of running the apply
 * script once per event. `GenerationImage` is that fold for one projection's shadow generation:
 * it takes the ops of every event of a chunk, in stream order, and keeps only what they leave
 * behind — per key the final string, the fields set and deleted on a hash, the members added and
 * removed on a sorted set or a set, whether the key was deleted first; per indexed item the ops
 * in order, resolved against the item as Redis holds it when the chunk is flushed. A flush turns
 * that into a list of plain Redis commands (see `bulkScript`), which leave Redis exactly as the
 * apply script would have left it after the same events — item indexes included (the sort keys
 * are computed here as the script computes them).
 *
 * Memory is bounded by the chunk (the overlay holds what one chunk changed) plus two LRU caches:
 * fold states and item documents as last written. Whatever they no longer hold is read back
 * from the shadow generation (which only this rebuild writes) before it is needed — unless this
 * rebuild never wrote it: two fixed-size filters of the keys written ({@link WrittenKeys}) tell
 * a key that is certainly absent from the shadow, and it is taken as absent without a read (a
 * stream whose chunks keep naming new aggregates would otherwise read each one back, and wait
 * behind the previous chunk's writes to do so).
 */

/** One Redis command for the bulk script: name code, relative key, arguments. */
export type BulkCommand = [code: BulkCode, key: string, args: string[]];
/** DEL, SET, HSET, HDEL, ZADD, ZREM, SADD, SREM. */
export type BulkCode = 'D' | 'S' | 'H' | 'HD' | 'Z' | 'ZR' | 'SA' | 'SR';

type Entry =
  | { t: 'string'; value: string; json: JsonValue | undefined; fold?: true }
  | { t: 'none'; fold?: true }
  | { t: 'hash'; reset: boolean; set: Map<string, string>; del: Set<string> }
  | { t: 'zset'; reset: boolean; add: Map<string, string>; rem: Set<string> }
  | { t: 'set'; reset: boolean; add: Set<string>; rem: Set<string> };

/** An indexed item as Redis holds it: field → canonical JSON of its value. */
export type ItemDoc = Map<string, string>;

type ItemOp = { o: 'put'; fields: ItemDoc } | { o: 'patch'; set: [string, string][]; unset: string[]; when?: [string, string] } | { o: 'rem' };

interface ItemEntry {
  store: string;
  id: string;
  ops: ItemOp[];
}

/** What one event's ops did to the image, for the error a projection bug gets. */
interface OpContext {
  projection: string;
  seq: number;
}

export interface GenerationImageOptions {
  /** Fold states kept in memory (default 4 096); the rest is read back from the shadow. */
  stateCacheSize?: number;
  /** Item documents kept in memory (default 4 096). */
  itemCacheSize?: number;
  /** Most the kept fold states, and apart from them the kept item documents, may weigh: estimated heap bytes each (default {@link REBUILD_CACHE_BYTES}). */
  cacheBytes?: number;
}

/** Estimated heap bytes of an item document: the map and its field names and values. */
function docWeight(doc: ItemDoc | null): number {
  if (doc === null) return 0;
  let total = 64;
  for (const [field, value] of doc) total += 64 + field.length + value.length;
  return total;
}

const COLLECTION: Record<string, 'hash' | 'zset' | 'set'> = { hset: 'hash', hdel: 'hash', zadd: 'zset', zrem: 'zset', sadd: 'set', srem: 'set' };

/** The in-memory fold of one projection's shadow generation (see the module comment). */
export class GenerationImage {
  private overlay = new Map<string, Entry>();
  private items = new Map<string, ItemEntry>();
  /** Fold states as last written, parsed. */
  private readonly states: LruCache<string, JsonValue | null>;
  /** States the current chunk needs, held until it is folded (never evicted mid-chunk). */
  private pinned = new Map<string, JsonValue | null>();
  /** Item documents as last written (null: absent). */
  private readonly docs: LruCache<string, ItemDoc | null>;
  /** The documents of the chunk's items as Redis holds them before the flush (set by {@link itemsToLoad}). */
  private bases = new Map<string, ItemDoc | null>();
  /** Keys (fold states and every op's key) and item documents this image ever wrote to the shadow (a superset, never forgotten). */
  private readonly writtenStates = new WrittenKeys();
  private readonly writtenDocs = new WrittenKeys();
  private readsSkipped = 0;
  /** Where {@link drain} names every key it writes, while someone asks ({@link recordWrites}). */
  private recording: Set<string> | null = null;

  constructor(
    readonly projection: string,
    options: GenerationImageOptions = {},
  ) {
    const bytes = options.cacheBytes ?? REBUILD_CACHE_BYTES;
    this.states = new LruCache<string, JsonValue | null>(Math.max(1, options.stateCacheSize ?? 4_096), { max: bytes, of: heapWeight });
    this.docs = new LruCache(Math.max(1, options.itemCacheSize ?? 4_096), { max: bytes, of: docWeight });
  }

  /**
   * The keys among `keys` whose value this image cannot give from memory; the rest are pinned for
   * the chunk. The caller reads the missing ones from the shadow and hands them to {@link pin}.
   */
  missing(keys: Iterable<string>): string[] {
    const out: string[] = [];
    for (const key of keys) {
      if (this.pinned.has(key) || this.overlay.has(key)) continue;
      const cached = this.states.get(key);
      if (cached !== undefined) this.pinned.set(key, cached);
      else if (!this.writtenStates.mightHave(key)) {
        // Never written by this rebuild, so not in its shadow.
        this.pinned.set(key, null);
        this.readsSkipped++;
      } else out.push(key);
    }
    return out;
  }

  /** Keys taken as absent without a read, because this image never wrote them. */
  get skippedReads(): number {
    return this.readsSkipped;
  }

  /**
   * From now on, add to `keys` the relative name of every key a {@link drain} writes — fold states,
   * the ops' keys, item documents and the index keys whose entries change — or stop (null). A
   * scratch build's catch-up pass records them so that a comparison can be limited to them.
   */
  recordWrites(keys: Set<string> | null): void {
    this.recording = keys;
  }

  /** A state read from the shadow (its raw string, null when absent). */
  pin(key: string, raw: string | null): void {
    this.pinned.set(key, raw === null ? null : (JSON.parse(raw) as JsonValue));
  }

  /** The chunk is folded: pinned states go back to being cache entries. */
  unpin(): void {
    this.pinned = new Map();
  }

  /** The current value of a fold state (a JSON string key), from the chunk's ops or what was pinned. */
  state(key: string): JsonValue | null {
    const entry = this.overlay.get(key);
    if (entry !== undefined) {
      if (entry.t === 'none') return null;
      if (entry.t === 'string') return entry.json !== undefined ? entry.json : (JSON.parse(entry.value) as JsonValue);
      throw new ProjectionError(`projection ${this.projection}: fold state ${key} holds a ${entry.t}, not a JSON string`);
    }
    const pinned = this.pinned.get(key);
    if (pinned !== undefined) return pinned;
    throw new ProjectionError(`projection ${this.projection}: fold state ${key} was not loaded before it was needed`);
  }

  /** Record the next fold state of `key` (null deletes it), as the fold's own `json.set` / `del` op. */
  setState(key: string, value: JsonValue | null): void {
    // Into the state cache when the chunk is drained (once per key, weighed by its text then);
    // until then the overlay answers for it.
    this.overlay.set(key, value === null ? { t: 'none', fold: true } : { t: 'string', value: '', json: value, fold: true });
  }

  /**
   * Fold one event's ops, in order. An invalid op, or one whose key holds another Redis type (as
   * far as the chunk knows), throws {@link ProjectionOpError}: the rebuild stops, as the apply
   * script would refuse the event.
   */
  apply(ops: readonly ProjectionOp[], context: OpContext): void {
    // Validate every op first: an event's ops are all or nothing.
    for (let i = 0; i < ops.length; i++) {
      const error = opError(ops[i]);
      if (error !== null) {
        throw new ProjectionOpError(`projection ${context.projection} produced an invalid op #${i} for seq ${context.seq}: ${error}`, {
          projection: context.projection,
          seq: context.seq,
          opIndex: i,
          reason: error,
        });
      }
      const op = ops[i] as ProjectionOp;
      const collection = COLLECTION[op.op];
      if (collection !== undefined && 'key' in op) {
        const entry = this.overlay.get(op.key);
        const type = entry === undefined ? undefined : entry.t === 'none' ? undefined : entry.t;
        // Types an earlier op of the same event leaves are checked as the script checks them: by
        // applying the ops; a mismatch inside one event is rare enough to be caught below.
        if (type !== undefined && type !== collection) {
          throw new ProjectionOpError(`projection ${context.projection}: op #${i} (${op.op}) of seq ${context.seq} targets "${op.key}" which holds a ${type}`, {
            projection: context.projection,
            seq: context.seq,
            opIndex: i,
            key: op.key,
            reason: `wrong type ${type}`,
          });
        }
      }
    }
    for (let i = 0; i < ops.length; i++) this.applyOne(ops[i] as ProjectionOp, i, context);
  }

  private applyOne(op: ProjectionOp, index: number, context: OpContext): void {
    switch (op.op) {
      case 'json.set':
        this.overlay.set(op.key, { t: 'string', value: '', json: op.value });
        return;
      case 'set':
        this.overlay.set(op.key, { t: 'string', value: op.value, json: undefined });
        return;
      case 'del':
        this.overlay.set(op.key, { t: 'none' });
        return;
      case 'hset': {
        const entry = this.collection(op.key, 'hash', index, context);
        for (const [field, value] of Object.entries(op.fields)) {
          entry.set.set(field, String(value));
          entry.del.delete(field);
        }
        return;
      }
      case 'hdel': {
        const entry = this.collection(op.key, 'hash', index, context);
        for (const field of op.fields) {
          entry.set.delete(field);
          if (!entry.reset) entry.del.add(field);
        }
        return;
      }
      case 'zadd': {
        const entry = this.collection(op.key, 'zset', index, context);
        entry.add.set(op.member, String(op.score === 0 ? 0 : op.score));
        entry.rem.delete(op.member);
        return;
      }
      case 'zrem': {
        const entry = this.collection(op.key, 'zset', index, context);
        for (const member of op.members) {
          entry.add.delete(member);
          if (!entry.reset) entry.rem.add(member);
        }
        return;
      }
      case 'sadd': {
        const entry = this.collection(op.key, 'set', index, context);
        for (const member of op.members) {
          entry.add.add(member);
          entry.rem.delete(member);
        }
        return;
      }
      case 'srem': {
        const entry = this.collection(op.key, 'set', index, context);
        for (const member of op.members) {
          entry.add.delete(member);
          if (!entry.reset) entry.rem.add(member);
        }
        return;
      }
      case 'item.upsert':
        this.item(op.store, op.item.id).ops.push({ o: 'put', fields: new Map(itemFields(op.item)) });
        return;
      case 'item.patch':
        this.item(op.store, op.id).ops.push({
          o: 'patch',
          set: itemFields(op.set),
          unset: op.unset ?? [],
          ...(op.when ? { when: [op.when.field, canonicalJson(op.when.is)] as [string, string] } : {}),
        });
        return;
      case 'item.remove':
        this.item(op.store, op.id).ops.push({ o: 'rem' });
        return;
    }
  }

  private collection<T extends 'hash' | 'zset' | 'set'>(key: string, type: T, index: number, context: OpContext): Extract<Entry, { t: T }> {
    const entry = this.overlay.get(key);
    if (entry !== undefined && entry.t === type) return entry as Extract<Entry, { t: T }>;
    if (entry !== undefined && entry.t !== 'none') {
      throw new ProjectionOpError(`projection ${context.projection}: op #${index} of seq ${context.seq} targets "${key}" which holds a ${entry.t}`, {
        projection: context.projection,
        seq: context.seq,
        opIndex: index,
        key,
        reason: `wrong type ${entry.t}`,
      });
    }
    // A key deleted earlier in the chunk starts over (reset: DEL it first when flushing).
    const reset = entry !== undefined;
    const created: Entry =
      type === 'hash'
        ? { t: 'hash', reset, set: new Map(), del: new Set() }
        : type === 'zset'
          ? { t: 'zset', reset, add: new Map(), rem: new Set() }
          : { t: 'set', reset, add: new Set(), rem: new Set() };
    this.overlay.set(key, created);
    return created as Extract<Entry, { t: T }>;
  }

  private item(store: string, id: string): ItemEntry {
    const key = itemDocKey(store, id);
    let entry = this.items.get(key);
    if (!entry) {
      entry = { store, id, ops: [] };
      this.items.set(key, entry);
    }
    return entry;
  }

  /** Whether the chunk changed anything. */
  get dirty(): boolean {
    return this.overlay.size > 0 || this.items.size > 0;
  }

  /**
   * Relative keys of the item documents a flush needs and this image does not hold; the ones it
   * holds are set aside for the flush (writing one item may evict another from the cache).
   */
  itemsToLoad(): string[] {
    const out: string[] = [];
    this.bases = new Map();
    for (const key of this.items.keys()) {
      const cached = this.docs.get(key);
      if (cached !== undefined) this.bases.set(key, cached);
      else if (!this.writtenDocs.mightHave(key)) {
        this.bases.set(key, null);
        this.readsSkipped++;
      } else out.push(key);
    }
    return out;
  }

  /**
   * The commands that write what the chunk changed, given the item documents {@link itemsToLoad}
   * named (as Redis holds them now). The chunk is then forgotten (its values stay in the caches).
   */
  drain(loaded: ReadonlyMap<string, ItemDoc | null>): BulkCommand[] {
    const commands: BulkCommand[] = [];
    const recording = this.recording;
    for (const [key, entry] of this.overlay) {
      // Every key the shadow is told about (a fold state, or any op's key) may be read back later.
      this.writtenStates.add(key);
      recording?.add(key);
      switch (entry.t) {
        case 'none':
          commands.push(['D', key, []]);
          if (entry.fold) this.states.set(key, null, 0);
          break;
        case 'string': {
          const text = entry.json !== undefined ? canonicalJson(entry.json) : entry.value;
          commands.push(['S', key, [text]]);
          // Weighed by its text (no walk per event): a parsed JSON state takes from about its
          // text's length (long strings) to twice it (small objects) in heapWeight's terms.
          if (entry.fold) this.states.set(key, entry.json ?? null, 64 + Math.ceil(1.5 * text.length));
          break;
        }
        case 'hash': {
          if (entry.reset) commands.push(['D', key, []]);
          if (entry.del.size > 0) pushSplit(commands, 'HD', key, [...entry.del]);
          if (entry.set.size > 0) pushSplit(commands, 'H', key, flatten(entry.set));
          break;
        }
        case 'zset': {
          if (entry.reset) commands.push(['D', key, []]);
          if (entry.rem.size > 0) pushSplit(commands, 'ZR', key, [...entry.rem]);
          if (entry.add.size > 0) pushSplit(commands, 'Z', key, flattenScores(entry.add));
          break;
        }
        case 'set': {
          if (entry.reset) commands.push(['D', key, []]);
          if (entry.rem.size > 0) pushSplit(commands, 'SR', key, [...entry.rem]);
          if (entry.add.size > 0) pushSplit(commands, 'SA', key, [...entry.add]);
          break;
        }
      }
    }
    // Item documents and their index entries; index changes are grouped per index key.
    const indexRem = new Map<string, string[]>();
    const indexAdd = new Map<string, string[]>();
    const note = (into: Map<string, string[]>, key: string, member: string) => {
      const list = into.get(key);
      if (list) list.push(member);
      else into.set(key, [member]);
    };
    for (const [docKey, entry] of this.items) {
      const base = this.bases.has(docKey) ? this.bases.get(docKey) : loaded.get(docKey);
      if (base === undefined) throw new ProjectionError(`projection ${this.projection}: item ${docKey} was not loaded before the flush`);
      let doc: ItemDoc | null = base;
      for (const op of entry.ops) doc = applyItemOp(doc, op);
      this.docs.set(docKey, doc);
      this.writtenDocs.add(docKey);
      recording?.add(docKey);
      if (doc === null) {
        if (base !== null) commands.push(['D', docKey, []]);
      } else if (base === null) {
        pushSplit(commands, 'H', docKey, flatten(doc));
      } else {
        const removed = [...base.keys()].filter((field) => !doc!.has(field));
        const changed: string[] = [];
        for (const [field, value] of doc) if (base.get(field) !== value) changed.push(field, value);
        if (removed.length > 0) pushSplit(commands, 'HD', docKey, removed);
        if (changed.length > 0) pushSplit(commands, 'H', docKey, changed);
      }
      const before = base === null ? [] : indexEntries(entry.store, entry.id, base);
      const after = doc === null ? [] : indexEntries(entry.store, entry.id, doc);
      const kept = new Set(after.map(([k, m]) => `${k}\u0000${m}`));
      const had = new Set(before.map(([k, m]) => `${k}\u0000${m}`));
      for (const [k, m] of before) if (!kept.has(`${k}\u0000${m}`)) note(indexRem, k, m);
      for (const [k, m] of after) if (!had.has(`${k}\u0000${m}`)) note(indexAdd, k, m);
    }
    if (recording) for (const key of [...indexRem.keys(), ...indexAdd.keys()]) recording.add(key);
    for (const [key, members] of indexRem) pushSplit(commands, 'ZR', key, members);
    for (const [key, members] of indexAdd)
      pushSplit(
        commands,
        'Z',
        key,
        members.flatMap((m) => ['0', m]),
      );
    this.overlay = new Map();
    this.items = new Map();
    this.bases = new Map();
    return commands;
  }

  /** Forget everything (the shadow was dropped). */
  clear(): void {
    this.overlay = new Map();
    this.items = new Map();
    this.bases = new Map();
    this.pinned = new Map();
    this.states.clear();
    this.docs.clear();
  }
}

/** The relative key of an item's document (a hash of field → JSON). */
export function itemDocKey(store: string, id: string): string {
  return `${ITEMS_PREFIX}${store}:doc:${id}`;
}

/** An item's document read with HGETALL (empty: absent). */
export function itemDocOf(flat: Record<string, string> | string[] | null): ItemDoc | null {
  if (flat === null) return null;
  const doc: ItemDoc = new Map();
  if (Array.isArray(flat)) for (let i = 0; i + 1 < flat.length; i += 2) doc.set(flat[i] as string, flat[i + 1] as string);
  else for (const field of Object.keys(flat)) doc.set(field, flat[field] as string);
  return doc.size === 0 ? null : doc;
}

/** The apply script's item semantics (`iput`, `ipatch`, `irem`) on a document. */
function applyItemOp(doc: ItemDoc | null, op: ItemOp): ItemDoc | null {
  switch (op.o) {
    case 'put':
      return new Map(op.fields);
    case 'rem':
      return null;
    case 'patch': {
      if (doc === null) return null;
      if (op.when !== undefined && doc.get(op.when[0]) !== op.when[1]) return doc;
      const next = new Map(doc);
      for (const [field, value] of op.set) next.set(field, value);
      for (const field of op.unset) next.delete(field);
      return next.size === 0 ? null : next;
    }
  }
}

/** Most arguments one command carries (Lua's `unpack` stops near 8 000); longer lists are split. */
const MAX_COMMAND_ARGS = 1000;

function pushSplit(commands: BulkCommand[], code: BulkCode, key: string, args: string[]): void {
  // Pairs (HSET field value, ZADD score member) must not be split apart: keep the step even.
  const step = code === 'H' || code === 'Z' ? MAX_COMMAND_ARGS : MAX_COMMAND_ARGS - 1;
  if (args.length <= step) {
    commands.push([code, key, args]);
    return;
  }
  for (let i = 0; i < args.length; i += step) commands.push([code, key, args.slice(i, i + step)]);
}

function flatten(map: ReadonlyMap<string, string>): string[] {
  const out: string[] = [];
  for (const [field, value] of map) out.push(field, value);
  return out;
}

function flattenScores(map: ReadonlyMap<string, string>): string[] {
  const out: string[] = [];
  for (const [member, score] of map) out.push(score, member);
  return out;
}

/** An item (or an item patch) as hash fields: member name → canonical JSON of its value; `undefined` members dropped. */
function itemFields(item: Record<string, unknown>): [string, string][] {
  const out: [string, string][] = [];
  for (const name of sortedKeys(item)) {
    const value = item[name];
    if (value !== undefined) out.push([name, canonicalJson(value)]);
  }
  return out;
}

/**
 * The sort-set entries of an item (relative index key, member), exactly as the apply script's
 * `itemEntries` computes them: `all:newest` / `all:urgent`, and per indexed field holding a
 * string, `idx:<order>:<field>:<value>`; members are `hexdesc(at):id` and
 * `hexdesc(urgency)hexdesc(at):id`.
 */
export function indexEntries(store: string, id: string, doc: ItemDoc): Array<[string, string]> {
  const at = Number(JSON.parse(doc.get('at') ?? 'null'));
  const urgency = Number(JSON.parse(doc.get('urgency') ?? 'null'));
  const byNewest = `${hexdesc(at)}:${id}`;
  const byUrgent = `${hexdesc(urgency)}${hexdesc(at)}:${id}`;
  const p = `${ITEMS_PREFIX}${store}:`;
  const out: Array<[string, string]> = [
    [`${p}all:newest`, byNewest],
    [`${p}all:urgent`, byUrgent],
  ];
  for (const field of INDEXED_FIELDS) {
    const raw = doc.get(field);
    if (raw === undefined) continue;
    const value: unknown = JSON.parse(raw);
    if (typeof value === 'string') {
      out.push([`${p}idx:newest:${field}:${value}`, byNewest]);
      out.push([`${p}idx:urgent:${field}:${value}`, byUrgent]);
    }
  }
  return out;
}

const scratch = new DataView(new ArrayBuffer(8));
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/**
 * 16 hex digits whose byte order is descending numeric order (the apply script's `hexdesc`):
 * the IEEE-754 big-endian bytes, sign-adjusted so they sort as numbers, then inverted.
 */
export function hexdesc(x: number): string {
  scratch.setFloat64(0, x === 0 ? 0 : x, false);
  const negative = scratch.getUint8(0) >= 128;
  let out = '';
  for (let i = 0; i < 8; i++) {
    let c = scratch.getUint8(i);
    if (negative) c = 255 - c;
    else if (i === 0) c = c + 128;
    out += HEX[255 - c];
  }
  return out;
}
