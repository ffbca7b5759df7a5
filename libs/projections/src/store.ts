import type Redis from 'ioredis';
import type { EventEnvelope } from '@baton/contracts';
import { ProjectionError, ProjectionOpError, ProjectionVersionError, ShadowLostError } from './errors';
import { createItemStore, type ItemStore } from './items';
import {
  activeKey,
  assertName,
  assertPrefix,
  droppedCountKey,
  generationCounterKey,
  generationNamespace,
  META_KEY,
  projectionBase,
  rebuildsKey,
  retiredKey,
  TMP_PREFIX,
  FROZEN_PREFIX,
} from './keys';
import { encodeOps, type IndexedItem, type ProjectionOp, type WireOp } from './ops';
import { createReader, type ProjectionReader } from './reader';
import { applyScript, dropRetiredScript, dropShadowScript, loadScript, readScript, swapScript } from './scripts';
import {
  parseRebuildInfos,
  runRebuild,
  type FoldTarget,
  type FrozenMembers,
  type RebuildBackend,
  type RebuildInfo,
  type RebuildManyOptions,
  type ScratchBuild,
  type ScratchOptions,
} from './rebuilder';
import { compareKeySet, compareNamespaces, dumpNamespace, type NamespaceComparison, type ProjectionSnapshot } from './snapshot';

/**
 * An event as projections see it: the envelope plus its stream sequence, and the W3C trace id of
 * the stored message's `traceparent` header when it has one (not part of the envelope; the live
 * applier and the replay source both read it from the stored message, so rebuilds agree).
 */
export type SequencedEvent<E extends EventEnvelope = EventEnvelope> = E & { seq: number; traceId?: string };

/**
 * A projection, defined as code. `apply` must be a pure function of the event (no reads, no clock):
 * that is what makes a rebuild equal to the live projection. Events whose type `handles` rejects
 * still advance the projection's last applied sequence. Bump `version` whenever `apply` changes
 * what it writes; `status().needsRebuild` then reports the active generation as stale.
 */
export interface ProjectionDefinition<E extends EventEnvelope = EventEnvelope> {
  readonly name: string;
  readonly version: number;
  handles(eventType: string): boolean;
  apply(event: SequencedEvent<E>): readonly ProjectionOp[];
}

/**
 * Where an apply writes: the active generation (resolved inside the script) or a given one.
 * A rebuild's shadow also names its `owner` token: the script then refuses the whole batch with
 * {@link ShadowLostError} unless the generation's meta holds that token. `create` (with an owner)
 * writes the token into the meta, which must not exist yet (or hold the same token: a retry).
 * Without an owner a generation target is written as is (scratch generations, tests).
 */
export type ApplyTarget = 'active' | { generation: number; owner?: string; create?: boolean };

export interface ApplyResult {
  status: 'applied' | 'skipped';
  generation: number;
  lastSeq: number;
}

export interface BatchApplyResult {
  generation: number;
  applied: number;
  skipped: number;
  lastSeq: number;
}

/** What {@link ProjectionStore.load} read, atomically: the active generation, its last applied seq, the values. */
export interface LoadedStates {
  generation: number | null;
  lastSeq: number;
  /** The string value of each requested key (null when absent), in request order. */
  values: Array<string | null>;
}

/** The ops of one event, already computed (a sequence with no ops still counts as applied). */
export interface PreparedEvent {
  seq: number;
  ops: readonly ProjectionOp[];
}

export type ConditionalApplyResult =
  | { status: 'applied'; generation: number; lastSeq: number; applied: number }
  /** The last applied seq was not the expected one: nothing (or only a prefix of chunks) was written. */
  | { status: 'moved'; generation: number; lastSeq: number };

/** `HSETNX meta stream <identity>` when the meta hash exists (KEYS[1] = the meta, ARGV[1] = the identity). */
const ADOPT_STREAM_SCRIPT = `if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HSETNX', KEYS[1], 'stream', ARGV[1]) end return 0`;

/**
 * KEYS: active pointer. ARGV: base, the identity recorded (`from`), the new one (`to`), the last
 * sequence the stream holds. See {@link ProjectionStore.restampStream}.
 */
const RESTAMP_STREAM_SCRIPT = `
local gen = redis.call('GET', KEYS[1])
if not gen then return { 'no_generation' } end
local meta = ARGV[1] .. ':g' .. gen .. ':~meta'
local found = redis.call('HMGET', meta, 'stream', 'seq')
if found[1] ~= ARGV[2] then return { 'other_stream', found[1] or '' } end
if tonumber(found[2] or '0') > tonumber(ARGV[4]) then return { 'ahead', found[2] } end
redis.call('HSET', meta, 'stream', ARGV[3])
return { 'adopted', gen }
`;

/** What {@link ProjectionStore.restampStream} did with a projection's active generation. */
export type RestampOutcome =
  | { outcome: 'adopted'; generation: number }
  | { outcome: 'no_generation' }
  /** It recorded another identity than `from` (or none yet: `stream` null) and was left alone. */
  | { outcome: 'other_stream'; stream: string | null }
  /** It applied more than the stream holds (events the restored stream lacks): left alone, to be rebuilt. */
  | { outcome: 'ahead'; lastSeq: number };

export interface ProjectionStatus {
  projection: string;
  activeGeneration: number | null;
  lastSeq: number;
  /** The definition version that created the active generation. */
  storedVersion: number | null;
  /** True when the active generation was built by another version of the definition. */
  needsRebuild: boolean;
  /** The identity of the events stream the active generation was built from (`adoptStream`), null until recorded. */
  stream: string | null;
}

export type SwapResult =
  /** `shadowSeq` / `activeSeq`: the new and the previous generation's last applied seq at the swap. */
  | { status: 'swapped'; previous: number | null; shadowSeq: number; activeSeq: number }
  | { status: 'conflict'; current: number | null }
  | { status: 'behind'; shadowSeq: number; activeSeq: number }
  /** An owner token was given and the new generation's meta does not hold it: nothing changed. */
  | { status: 'shadow_lost' };

/**
 * Reads a stream from `fromSeq` (inclusive) up to its end as of the call, in sequence order, then
 * completes. A rebuild calls it once from 1 and again from its last sequence + 1 to catch up.
 */
export type ReplaySource<E extends EventEnvelope = EventEnvelope> = (fromSeq: number) => AsyncIterable<SequencedEvent<E>>;

export interface CleanupResult {
  generation: number;
  deletedKeys: number;
  error?: Error;
}

export type RebuildResult =
  | {
      status: 'swapped';
      generation: number;
      previous: number | null;
      lastSeq: number;
      cleanup: Promise<CleanupResult>;
      /**
       * Live traffic kept the previous generation ahead through the catch-up rounds, so the rebuild
       * handed over behind it: the events `fromSeq..toSeq`, which the previous generation had
       * applied, are the live applier's to apply to the new one (its next range finds the gap and
       * reads it from the stream; the Baton projector applies it at once after its swaps).
       */
      handedOver?: { fromSeq: number; toSeq: number };
    }
  | { status: 'lost'; generation: number; winner: number | null };

/** Options of a rebuild: catch-up rounds, chunk size and caches, an abort signal, progress (see {@link RebuildManyOptions}). */
export type RebuildOptions = RebuildManyOptions;

export interface ProjectionStoreOptions {
  redis: Redis;
  /** Key prefix of every projection, e.g. `baton:proj` (letters, digits, _ . - separated by ':'). */
  prefix: string;
  /** Most events per apply script call when applying a batch (default 200). */
  batchEvents?: number;
  /** Most encoded bytes per apply script call (default 512 KiB). */
  batchBytes?: number;
  /** Events a rebuild folds in memory before writing them, unless a rebuild says otherwise (default 2 048). */
  rebuildChunkEvents?: number;
}

/** The projection engine: atomic idempotent apply, generations and rebuilds, reads and snapshots. */
export interface ProjectionStore {
  readonly prefix: string;
  /**
   * Apply one event: runs `def.apply`, then executes all its ops and records `event.seq` as the last
   * applied sequence in one Lua script. If `event.seq` is not above the stored last sequence, nothing
   * is written and the result is `skipped`, so redeliveries and replays are idempotent. An invalid op
   * throws {@link ProjectionOpError} and writes nothing. Redis errors propagate; retrying is safe.
   */
  apply<E extends EventEnvelope>(def: ProjectionDefinition<E>, event: SequencedEvent<E>, target?: ApplyTarget): Promise<ApplyResult>;
  /**
   * Apply events in sequence order (strictly increasing `seq`, else throws before writing).
   * One script call per chunk of `batchEvents` events: each chunk is atomic (all or nothing) with a
   * per-event seq guard, chunks commit in order, so a crash leaves a prefix applied and a retry
   * resumes after it. Chosen over a pipeline of single applies because one call validates and
   * guards the whole chunk together and costs one round trip and one script run.
   */
  applyBatch<E extends EventEnvelope>(
    def: ProjectionDefinition<E>,
    events: Iterable<SequencedEvent<E>> | AsyncIterable<SequencedEvent<E>>,
    target?: ApplyTarget,
  ): Promise<BatchApplyResult>;
  /**
   * Apply precomputed ops for events in increasing seq order to the active generation, only if its
   * last applied seq is still `expectedLastSeq` (compare-and-set; `moved` otherwise, with the seq it
   * found). Chunks of `batchEvents` events each carry the previous chunk's last seq as their
   * expectation, so a competing applier can at most leave a committed prefix. Each chunk is atomic
   * and all-or-nothing (an invalid op throws {@link ProjectionOpError} and writes nothing).
   */
  applyIfAt(def: Pick<ProjectionDefinition, 'name' | 'version'>, events: readonly PreparedEvent[], expectedLastSeq: number): Promise<ConditionalApplyResult>;
  /** Read the active generation, its last applied seq and the string values of `keys`, in one atomic call. */
  load(projection: string, keys: readonly string[]): Promise<LoadedStates>;
  /** Active generation, last applied seq and version of a projection. */
  status(def: Pick<ProjectionDefinition, 'name' | 'version'>): Promise<ProjectionStatus>;
  /**
   * Record `stream` (an events stream's identity) as the one `generation` of `projection` was
   * built from, unless one is recorded already or the generation's meta is gone. True when recorded.
   */
  adoptStream(projection: string, generation: number, stream: string): Promise<boolean>;
  /**
   * The same events stream reads with a new identity (`to`; a restore from a backup can give it a
   * new creation time): the active generation that recorded `from` and has applied no more than
   * `throughSeq` (the stream's last sequence: it was built from what the stream holds) records `to`
   * instead, atomically, so it is not rebuilt as if built from another stream. Anything else is left
   * as it is and said ({@link RestampOutcome}).
   */
  restampStream(projection: string, change: { from: string; to: string; throughSeq: number }): Promise<RestampOutcome>;
  /** The active generation, or null before the first apply. */
  activeGeneration(projection: string): Promise<number | null>;
  /** Create the active generation (empty) if the projection has none; returns it. Idempotent. */
  ensureActive(def: Pick<ProjectionDefinition, 'name' | 'version'>): Promise<number>;
  /** Reserve a fresh, unused generation number for a shadow build. */
  allocateGeneration(projection: string): Promise<number>;
  /**
   * Make `next` the active generation if the active one is still `expected` (compare-and-set) and
   * `next` has applied at least as far as the active one — or, with `handOverGap`, is behind it by
   * at most that many events, which the live applier then applies to it (a hand-over under live
   * traffic). Of two concurrent swaps from the same `expected`, exactly one returns `swapped`. With
   * `owner`, also only if `next` is still the shadow that owner created (`shadow_lost` otherwise).
   * Does not delete anything.
   */
  swap(projection: string, expected: number | null, next: number, owner?: string, replaceAhead?: boolean, handOverGap?: number): Promise<SwapResult>;
  /**
   * Rebuild a projection from `source` into a fresh shadow generation while the live applier keeps
   * writing the active one, then swap it in: {@link rebuildMany} with this one projection.
   */
  rebuild<E extends EventEnvelope>(def: ProjectionDefinition<E>, source: ReplaySource<E>, options?: RebuildOptions): Promise<RebuildResult>;
  /**
   * Rebuild several projections from ONE read of `source`, each into a fresh shadow generation
   * while the live applier keeps writing the active ones, then swap each in atomically.
   *
   * The events are folded in memory, chunk by chunk (`chunkEvents`, default 2 048): each chunk's
   * final values — per key the last string, the members added and removed, per indexed item its
   * document and index entries — are written with pipelined owner-checked bulk commands (no
   * per-event script), then the chunk is forgotten; fold states and items are kept in bounded
   * caches and read back from the shadow when evicted. Memory is bounded by the chunk and the
   * caches, whatever the stream's length.
   *
   * Hand-over: the swap (compare-and-set on the active pointer) succeeds once the shadow has
   * applied at least the active generation's last seq; when it is behind, the rebuild reads on
   * from its own last seq + 1 and tries again (up to `maxCatchUpRounds`). Under steady live traffic
   * the live generation moves ahead during every round, so the last round hands over behind it by
   * at most `HAND_OVER_MAX_GAP` events (`handedOver` on the result; more: `RebuildBehindError`):
   * the live applier's next range finds the new generation's last seq before its own first event
   * and applies the difference from the stream. Either way, after the swap the live applier's seq
   * guard and compare-and-set pick up exactly after what the generation holds: nothing is missed or
   * applied twice. A rebuild that loses the compare-and-set to a
   * concurrent one drops its shadow and returns `lost`. The old generation is deleted in the
   * background (SCAN + UNLINK).
   *
   * The shadow is owned: created with a random token that every bulk write and the swap check
   * atomically. If Redis loses its data mid-rebuild (a flush, a failover; the generation counter
   * restarts, so another rebuild may be handed the same number), the next write or the swap is
   * refused and that projection's rebuild fails with {@link ShadowLostError} having written nothing
   * more and swapped nothing. `signal` stops the rebuild between two events: shadows are dropped,
   * nothing is swapped, `RebuildAbortedError`. While it runs, its progress is in the
   * projection's rebuilds hash ({@link rebuilds}); shadows whose rebuild died (lease run out) are
   * deleted before a new rebuild starts. Each projection settles on its own; if any failed, the
   * first error is thrown once all have settled.
   */
  rebuildMany(targets: readonly FoldTarget[], source: ReplaySource, options?: RebuildOptions): Promise<Record<string, RebuildResult>>;
  /**
   * Fold `source` (up to `untilSeq`) into fresh owned generations that are never made active, the
   * same way {@link rebuildMany} does, for a comparison with the live projections (`baton verify`,
   * dry runs). Drop each build when done.
   */
  buildScratch(targets: readonly FoldTarget[], source: ReplaySource, options?: ScratchOptions): Promise<ScratchBuild[]>;
  /**
   * Compare two generations of a projection key by key, holding neither in memory (SCAN in
   * batches); `a` is usually the active one (null: none, so every key of `b` differs), `b` a
   * scratch build. At most `maxDifferences` (default
   * 1 000) differences are returned; `differing` counts them all. With `collectKeys`, the names of
   * all the differing keys too (`differingKeys`; null when there are more than that many).
   */
  compare(projection: string, a: number | null, b: number, options?: KeyComparisonOptions): Promise<NamespaceComparison>;
  /**
   * Compare only `keys` (relative names) of two generations of a projection, each key as
   * {@link compare} compares it: a second look, after a full comparison, at the keys that can have
   * changed since (`baton verify` under live traffic: the keys that differed, and the keys a
   * catch-up pass wrote). `keysA` / `keysB` count the given keys each side holds.
   */
  compareKeys(projection: string, a: number | null, b: number, keys: Iterable<string>, options?: KeyComparisonOptions): Promise<NamespaceComparison>;
  /**
   * Compare `keys` of the copies `ScratchPass.freeze` took of the live generation (side `a`) with
   * the scratch generation `scratch` they were copied into (side `b`), each key as {@link compare}
   * compares it: a comparison at one sequence, whatever the live projection applies meanwhile.
   * The keys in `options.members` (the freeze's `members`: large ones it copied member by member)
   * are compared on those members only, one by one; a difference then says how many differ
   * (`differing_members`) and holds only those members.
   */
  compareFrozen(
    projection: string,
    scratch: number,
    keys: Iterable<string>,
    options?: KeyComparisonOptions & { members?: ReadonlyMap<string, FrozenMembers> },
  ): Promise<NamespaceComparison>;
  /**
   * How many keys (engine keys excluded) each of `generations` of a projection holds (0 for one
   * that does not exist): one SCAN of the projection's generations, reading names only.
   */
  countKeys(projection: string, generations: readonly number[]): Promise<number[]>;
  /** The rebuilds running on a projection (and dead ones not cleaned up yet: `stale`), with their progress. */
  rebuilds(projection: string): Promise<RebuildInfo[]>;
  /** Delete the shadows of rebuilds whose lease ran out (their process died); returns how many. */
  collectAbandoned(projection: string): Promise<number>;
  /**
   * Delete every key of one generation (SCAN + UNLINK in batches). Refuses the active generation.
   * With `owner` (the token the generation was created with), only while it is still that owner's:
   * a generation number reused after Redis lost its data is left alone.
   */
  dropGeneration(projection: string, generation: number, owner?: string): Promise<CleanupResult>;
  /** Key/value reads of the active generation, each resolving the generation atomically. */
  reader(projection: string): ProjectionReader;
  /** Queries over one indexed item store of the projection's active generation. */
  items<T extends IndexedItem = IndexedItem>(projection: string, store: string): ItemStore<T>;
  /**
   * A canonical dump of the active generation (or of `generation`). Retries if a swap happens while
   * it reads the active generation, so the dump never mixes two generations.
   */
  snapshot(projection: string, generation?: number): Promise<ProjectionSnapshot>;
  /** Delete every key of a projection: all generations, the pointer and the counter. For resets and tests. */
  destroy(projection: string): Promise<number>;
}

/**
 * How long {@link ProjectionStore.compare}, `compareKeys`, `compareFrozen` and `countKeys` wait for
 * each reply (at least the client's own command timeout): they run on a connection of their own,
 * opened for the call, so that a Redis slowed for a moment (a busy machine, another client's long
 * script such as a verify's freeze) does not fail a comparison that a short timeout (the CLI's
 * `REDIS_COMMAND_TIMEOUT_MS`, 1 s) suits for everything else.
 */
export const COMPARE_COMMAND_TIMEOUT_MS = 30_000;

/** How {@link ProjectionStore.compare} and {@link ProjectionStore.compareKeys} report. */
export interface KeyComparisonOptions {
  /** Differences returned with both values (default 1 000); `differing` counts them all. */
  maxDifferences?: number;
  /** Name every differing key, up to this many, in `differingKeys` (null when there are more). */
  collectKeys?: number;
}

/** Build a {@link ProjectionStore} on an ioredis client. The client's lifetime stays the caller's. */
export function createProjectionStore(options: ProjectionStoreOptions): ProjectionStore {
  assertPrefix(options.prefix);
  return new RedisProjectionStore(
    options.redis,
    options.prefix,
    options.batchEvents ?? 200,
    options.batchBytes ?? 512 * 1024,
    options.rebuildChunkEvents ?? 2_048,
  );
}

type ScriptReply = [string, ...(string | number)[]];

/**
 * Buckets one SCAN call looks at. A SCAN with MATCH walks the whole keyspace, not one
 * projection's: large steps keep a walk over millions of keys to a few hundred round trips.
 */
const SCAN_COUNT = 10_000;

class RedisProjectionStore implements ProjectionStore {
  constructor(
    private readonly redis: Redis,
    readonly prefix: string,
    private readonly batchEvents: number,
    private readonly batchBytes: number,
    private readonly rebuildChunkEvents: number,
  ) {}

  private base(projection: string): string {
    assertName('projection', projection);
    return projectionBase(this.prefix, projection);
  }

  async apply<E extends EventEnvelope>(def: ProjectionDefinition<E>, event: SequencedEvent<E>, target: ApplyTarget = 'active'): Promise<ApplyResult> {
    const result = await this.runChunk(def, [eventText(event.seq, this.encodeEvent(def, event))], target);
    return { status: result.applied === 1 ? 'applied' : 'skipped', generation: result.generation, lastSeq: result.lastSeq };
  }

  async applyBatch<E extends EventEnvelope>(
    def: ProjectionDefinition<E>,
    events: Iterable<SequencedEvent<E>> | AsyncIterable<SequencedEvent<E>>,
    target: ApplyTarget = 'active',
  ): Promise<BatchApplyResult> {
    const total: BatchApplyResult = { generation: 0, applied: 0, skipped: 0, lastSeq: 0 };
    const chunk = new ChunkBuffer(this.batchEvents, this.batchBytes);
    let previousSeq = 0;
    const flush = async () => {
      if (chunk.empty) return;
      const result = await this.runChunk(def, chunk.take().texts, target);
      total.generation = result.generation;
      total.applied += result.applied;
      total.skipped += result.skipped;
      total.lastSeq = result.lastSeq;
    };
    for await (const event of events) {
      if (event.seq <= previousSeq) {
        throw new ProjectionError(`applyBatch needs strictly increasing seq: ${event.seq} after ${previousSeq}`);
      }
      previousSeq = event.seq;
      const text = eventText(event.seq, this.encodeEvent(def, event));
      if (chunk.full(text)) await flush();
      chunk.add(event.seq, text);
    }
    await flush();
    // Creating a shadow creates it even without events to apply.
    if (total.generation === 0 && typeof target === 'object' && target.create) {
      total.generation = (await this.runChunk(def, [], target)).generation;
    }
    if (total.generation === 0) {
      const status = await this.status(def);
      total.generation = typeof target === 'object' ? target.generation : (status.activeGeneration ?? 0);
      total.lastSeq = status.lastSeq;
    }
    return total;
  }

  private encodeEvent<E extends EventEnvelope>(def: ProjectionDefinition<E>, event: SequencedEvent<E>): WireOp[] {
    if (!Number.isSafeInteger(event.seq) || event.seq < 1) {
      throw new ProjectionOpError(`event ${event.id} has no valid stream sequence`, { projection: def.name, reason: 'invalid seq' });
    }
    if (!def.handles(event.type)) return [];
    const encoded = encodeOps(def.apply(event));
    if ('error' in encoded) {
      throw new ProjectionOpError(`projection ${def.name} produced an invalid op #${encoded.opIndex} for ${event.type} (seq ${event.seq}): ${encoded.error}`, {
        projection: def.name,
        seq: event.seq,
        opIndex: encoded.opIndex,
        reason: encoded.error,
      });
    }
    return encoded.wire;
  }

  /** Apply one chunk: the {@link eventText}s of its events, in order. */
  private async runChunk(def: Pick<ProjectionDefinition, 'name' | 'version'>, chunk: readonly string[], target: ApplyTarget): Promise<BatchApplyResult> {
    const base = this.base(def.name);
    const args: (string | number | Buffer)[] = [base, 'active', def.version, chunkPayload(chunk)];
    if (target !== 'active') {
      args[1] = String(positiveInt(target.generation, 'generation'));
      if (target.owner !== undefined || target.create) {
        if (!target.owner) throw new ProjectionError('an owner token must be a non-empty string, and creating a shadow needs one');
        args.push('', target.owner, target.create ? '1' : '');
      }
    }
    const reply = (await applyScript.run(this.redis, [activeKey(base), generationCounterKey(base)], args)) as ScriptReply;
    if (reply[0] === 'lost') throw new ShadowLostError(def.name, Number(reply[1]));
    if (reply[0] === 'version') throw new ProjectionVersionError(def.name, def.version, Number(reply[2]));
    if (reply[0] === 'invalid') throw wrongTypeError(def.name, reply);
    const [, generation, applied, skipped, lastSeq] = reply;
    return { generation: Number(generation), applied: Number(applied), skipped: Number(skipped), lastSeq: Number(lastSeq) };
  }

  async applyIfAt(
    def: Pick<ProjectionDefinition, 'name' | 'version'>,
    events: readonly PreparedEvent[],
    expectedLastSeq: number,
  ): Promise<ConditionalApplyResult> {
    const base = this.base(def.name);
    let expected = expectedLastSeq;
    let generation = 0;
    let applied = 0;
    let previousSeq = 0;
    for (const event of events) {
      if (!Number.isSafeInteger(event.seq) || event.seq <= Math.max(previousSeq, expectedLastSeq)) {
        throw new ProjectionError(`applyIfAt needs strictly increasing seqs above ${expectedLastSeq}: ${event.seq} after ${previousSeq}`);
      }
      previousSeq = event.seq;
    }
    const commit = async (texts: string[], last: number): Promise<ConditionalApplyResult | null> => {
      const reply = (await applyScript.run(
        this.redis,
        [activeKey(base), generationCounterKey(base)],
        [base, 'active', def.version, chunkPayload(texts), String(expected)],
      )) as ScriptReply;
      if (reply[0] === 'invalid') throw wrongTypeError(def.name, reply);
      if (reply[0] === 'version') throw new ProjectionVersionError(def.name, def.version, Number(reply[2]));
      if (reply[0] === 'moved') return { status: 'moved', generation: Number(reply[1]), lastSeq: Number(reply[2]) };
      generation = Number(reply[1]);
      applied += Number(reply[2]);
      expected = last;
      return null;
    };
    // Up to `batchEvents` events at a time. Such a group usually goes in one atomic call, and then a
    // value it sets that a later event of the group sets again (a fold state, written on nearly every
    // event of its aggregate) is never read by anyone: it is neither serialised nor sent. A group
    // past the byte bound is sent in several calls, each atomic, with every value (the events that
    // lost a value are encoded again; the others' text is reused).
    for (let start = 0; start < events.length; start += this.batchEvents) {
      const group = events.slice(start, start + this.batchEvents);
      const last = (group[group.length - 1] as PreparedEvent).seq;
      const skipped = supersededWrites(group);
      // Which events lost an op to a later write: only theirs must be encoded again, in full, should the group not fit one call.
      const trimmed = group.map((event, e) => skipped.size > 0 && event.ops.some((_, o) => skipped.has(opAt(e, o))));
      const texts = group.map((event, e) => eventText(event.seq, this.encodePrepared(def, event, trimmed[e] ? (o) => skipped.has(opAt(e, o)) : null)));
      let moved: ConditionalApplyResult | null;
      if (texts.reduce((sum, text) => sum + text.length, 0) <= this.batchBytes) {
        moved = await commit(texts, last);
      } else {
        moved = null;
        const chunk = new ChunkBuffer(this.batchEvents, this.batchBytes);
        for (const [e, event] of group.entries()) {
          const text = trimmed[e] ? eventText(event.seq, this.encodePrepared(def, event, null)) : (texts[e] as string);
          if (chunk.full(text)) {
            const taken = chunk.take();
            moved = await commit(taken.texts, taken.last);
            if (moved) break;
          }
          chunk.add(event.seq, text);
        }
        if (!moved && !chunk.empty) {
          const taken = chunk.take();
          moved = await commit(taken.texts, taken.last);
        }
      }
      if (moved) return moved;
    }
    return { status: 'applied', generation, lastSeq: expected, applied };
  }

  /** One prepared event's ops, checked and encoded for the apply script, without those `skip` names (by index). */
  private encodePrepared(def: Pick<ProjectionDefinition, 'name'>, event: PreparedEvent, skip: ((opIndex: number) => boolean) | null): WireOp[] {
    const kept = skip === null ? null : event.ops.flatMap((_, o) => (skip(o) ? [] : [o]));
    const encoded = encodeOps(kept === null ? event.ops : kept.map((o) => event.ops[o]));
    if ('error' in encoded) {
      const opIndex = kept === null ? encoded.opIndex : (kept[encoded.opIndex] as number);
      throw new ProjectionOpError(`projection ${def.name} produced an invalid op #${opIndex} for seq ${event.seq}: ${encoded.error}`, {
        projection: def.name,
        seq: event.seq,
        opIndex,
        reason: encoded.error,
      });
    }
    return encoded.wire;
  }

  async load(projection: string, keys: readonly string[]): Promise<LoadedStates> {
    const base = this.base(projection);
    const reply = (await loadScript.run(this.redis, [activeKey(base)], [base, ...keys])) as Array<string | null>;
    const generation = reply[0] ? Number(reply[0]) : null;
    return { generation, lastSeq: Number(reply[1] ?? 0), values: keys.map((_, i) => reply[i + 2] ?? null) };
  }

  async activeGeneration(projection: string): Promise<number | null> {
    const raw = await this.redis.get(activeKey(this.base(projection)));
    return raw === null ? null : Number(raw);
  }

  async status(def: Pick<ProjectionDefinition, 'name' | 'version'>): Promise<ProjectionStatus> {
    const base = this.base(def.name);
    // The pointer and its generation's ~meta in one atomic read: read apart, a swap in between
    // (which retires the old generation) reported the projection empty and the whole stream behind.
    const [active, meta] = (await readScript.run(this.redis, [activeKey(base)], [base, 'HMGET', '~meta', 'seq', 'version', 'stream'])) as [
      string,
      (string | null)[] | false | null,
    ];
    if (active === '') return { projection: def.name, activeGeneration: null, lastSeq: 0, storedVersion: null, needsRebuild: false, stream: null };
    const generation = Number(active);
    const [seq, version, stream] = Array.isArray(meta) ? meta : [];
    const storedVersion = version === null ? null : Number(version);
    return {
      projection: def.name,
      activeGeneration: generation,
      lastSeq: Number(seq ?? 0),
      storedVersion,
      needsRebuild: storedVersion !== null && storedVersion !== def.version,
      stream: stream ?? null,
    };
  }

  async adoptStream(projection: string, generation: number, stream: string): Promise<boolean> {
    const meta = `${generationNamespace(this.base(projection), generation)}~meta`;
    // Only on a generation that still has its meta (Redis may have lost it), and only once: the
    // first identity recorded is the stream the generation was built from.
    const set = await this.redis.eval(ADOPT_STREAM_SCRIPT, 1, meta, stream);
    return set === 1;
  }

  async restampStream(projection: string, change: { from: string; to: string; throughSeq: number }): Promise<RestampOutcome> {
    if (!change.from || !change.to) throw new ProjectionError('a stream identity must be a non-empty string');
    const base = this.base(projection);
    const reply = (await this.redis.eval(RESTAMP_STREAM_SCRIPT, 1, activeKey(base), base, change.from, change.to, String(change.throughSeq))) as string[];
    switch (reply[0]) {
      case 'adopted':
        return { outcome: 'adopted', generation: Number(reply[1]) };
      case 'no_generation':
        return { outcome: 'no_generation' };
      case 'ahead':
        return { outcome: 'ahead', lastSeq: Number(reply[1]) };
      default:
        return { outcome: 'other_stream', stream: reply[1] ? reply[1] : null };
    }
  }

  async ensureActive(def: Pick<ProjectionDefinition, 'name' | 'version'>): Promise<number> {
    return (await this.runChunk(def, [], 'active')).generation;
  }

  async allocateGeneration(projection: string): Promise<number> {
    return this.redis.incr(generationCounterKey(this.base(projection)));
  }

  async swap(projection: string, expected: number | null, next: number, owner?: string, replaceAhead = false, handOverGap = 0): Promise<SwapResult> {
    const base = this.base(projection);
    if (owner !== undefined && !owner) throw new ProjectionError('an owner token must not be empty');
    const args = [
      base,
      expected === null ? '' : String(expected),
      String(positiveInt(next, 'generation')),
      owner ?? '',
      replaceAhead ? '1' : '',
      handOverGap > 0 ? String(positiveInt(handOverGap, 'hand-over gap')) : '',
    ];
    const reply = (await swapScript.run(this.redis, [activeKey(base)], args)) as string[];
    const genOrNull = (raw: string | undefined) => (raw ? Number(raw) : null);
    switch (reply[0]) {
      case 'lost':
        return { status: 'shadow_lost' };
      case 'swapped':
        return { status: 'swapped', previous: genOrNull(reply[1]), shadowSeq: Number(reply[2] ?? 0), activeSeq: Number(reply[3] ?? 0) };
      case 'conflict':
        return { status: 'conflict', current: genOrNull(reply[1]) };
      case 'behind':
        return { status: 'behind', shadowSeq: Number(reply[1]), activeSeq: Number(reply[2]) };
      default:
        throw new ProjectionError(`unexpected swap reply ${JSON.stringify(reply)}`);
    }
  }

  async rebuild<E extends EventEnvelope>(def: ProjectionDefinition<E>, source: ReplaySource<E>, options: RebuildOptions = {}): Promise<RebuildResult> {
    const target: FoldTarget = {
      name: def.name,
      version: def.version,
      handles: (type) => def.handles(type),
      stateKeyOf: () => null,
      step: (_prior, event) => ({ ops: def.apply(event as SequencedEvent<E>) }),
    };
    const results = await this.rebuildMany([target], source as ReplaySource, options);
    return results[def.name] as RebuildResult;
  }

  async rebuildMany(targets: readonly FoldTarget[], source: ReplaySource, options: RebuildOptions = {}): Promise<Record<string, RebuildResult>> {
    for (const target of targets) await this.collectAbandoned(target.name).catch(() => 0);
    return (await runRebuild(this.backend(), targets, source, { chunkEvents: this.rebuildChunkEvents, ...options }, false)).results;
  }

  async buildScratch(targets: readonly FoldTarget[], source: ReplaySource, options: ScratchOptions = {}): Promise<ScratchBuild[]> {
    for (const target of targets) await this.collectAbandoned(target.name).catch(() => 0);
    return (await runRebuild(this.backend(), targets, source, { chunkEvents: this.rebuildChunkEvents, ...options }, true)).scratch;
  }

  compare(projection: string, a: number | null, b: number, options: KeyComparisonOptions = {}): Promise<NamespaceComparison> {
    const [left, right] = this.comparedNamespaces(projection, a, b);
    return this.patiently((redis) => compareNamespaces(redis, left, right, options));
  }

  compareKeys(projection: string, a: number | null, b: number, keys: Iterable<string>, options: KeyComparisonOptions = {}): Promise<NamespaceComparison> {
    const [left, right] = this.comparedNamespaces(projection, a, b);
    return this.patiently((redis) => compareKeySet(redis, left, right, keys, options));
  }

  compareFrozen(
    projection: string,
    scratch: number,
    keys: Iterable<string>,
    options: KeyComparisonOptions & { members?: ReadonlyMap<string, FrozenMembers> } = {},
  ): Promise<NamespaceComparison> {
    const ns = generationNamespace(this.base(projection), positiveInt(scratch, 'generation'));
    return this.patiently((redis) => compareKeySet(redis, `${ns}${FROZEN_PREFIX}`, ns, keys, options));
  }

  /**
   * Run `work` on a connection of its own, opened for it and closed after, whose commands wait
   * {@link COMPARE_COMMAND_TIMEOUT_MS} (or the client's own timeout, if longer) for their replies.
   */
  private async patiently<T>(work: (redis: Redis) => Promise<T>): Promise<T> {
    const redis = this.redis.duplicate({
      commandTimeout: Math.max(COMPARE_COMMAND_TIMEOUT_MS, this.redis.options.commandTimeout ?? 0),
      lazyConnect: true,
    });
    redis.on('error', () => undefined);
    try {
      return await work(redis);
    } finally {
      await redis.quit().catch(() => redis.disconnect());
    }
  }

  /** The namespaces of two generations to compare; no active generation (null) is generation 0, which is never handed out (empty). */
  private comparedNamespaces(projection: string, a: number | null, b: number): [string, string] {
    const base = this.base(projection);
    return [generationNamespace(base, a === null ? 0 : positiveInt(a, 'generation')), generationNamespace(base, positiveInt(b, 'generation'))];
  }

  countKeys(projection: string, generations: readonly number[]): Promise<number[]> {
    return this.patiently((redis) => this.countKeysOn(redis, projection, generations));
  }

  private async countKeysOn(redis: Redis, projection: string, generations: readonly number[]): Promise<number[]> {
    const base = this.base(projection);
    const counts = new Map(generations.map((generation) => [generationNamespace(base, positiveInt(generation, 'generation')), 0]));
    for await (const batch of redis.scanStream({ match: `${base}:g*`, count: SCAN_COUNT })) {
      for (const key of new Set(batch as string[])) {
        // The namespace is everything up to the ':' after `g<gen>` (a relative key may hold ':' too).
        const end = key.indexOf(':', base.length + 2);
        if (end < 0) continue;
        const ns = key.slice(0, end + 1);
        const count = counts.get(ns);
        const relative = key.slice(end + 1);
        if (count !== undefined && relative !== META_KEY && !relative.startsWith(TMP_PREFIX)) counts.set(ns, count + 1);
      }
    }
    return generations.map((generation) => counts.get(generationNamespace(base, generation)) ?? 0);
  }

  async rebuilds(projection: string): Promise<RebuildInfo[]> {
    const hash = await this.redis.hgetall(rebuildsKey(this.base(projection)));
    return parseRebuildInfos(projection, hash).map(({ owner: _owner, ...info }) => info);
  }

  async collectAbandoned(projection: string): Promise<number> {
    const key = rebuildsKey(this.base(projection));
    let dropped = 0;
    for (const info of parseRebuildInfos(projection, await this.redis.hgetall(key))) {
      if (!info.stale) continue;
      await this.dropShadow(projection, info.generation, info.owner);
      await this.redis.hdel(key, String(info.generation));
      dropped++;
    }
    // Generations a swap retired whose deletion never ran (the process died right after its swap).
    // One whose deletion is running now is deleted twice over, which is harmless.
    const retired = retiredKey(this.base(projection));
    const active = await this.activeGeneration(projection);
    for (const member of await this.redis.smembers(retired)) {
      const generation = Number(member);
      if (!Number.isSafeInteger(generation) || generation <= 0 || generation === active) {
        await this.redis.srem(retired, member);
        continue;
      }
      await this.dropGeneration(projection, generation);
      dropped++;
    }
    return dropped;
  }

  private backend(): RebuildBackend {
    return {
      redis: this.redis,
      base: (projection) => this.base(projection),
      activeGeneration: (projection) => this.activeGeneration(projection),
      allocateGeneration: (projection) => this.allocateGeneration(projection),
      createShadow: async (def, generation, owner) => void (await this.runChunk(def, [], { generation, owner, create: true })),
      swap: (projection, expected, next, owner, replaceAhead, handOverGap) => this.swap(projection, expected, next, owner, replaceAhead, handOverGap),
      dropShadow: (projection, generation, owner) => this.dropShadow(projection, generation, owner),
      dropGeneration: (projection, generation) => this.dropGeneration(projection, generation),
    };
  }

  /**
   * Delete a rebuild's shadow generation (SCAN + UNLINK in batches, the meta last), each batch only
   * while the shadow is still `owner`'s and not active; stops, deleting nothing more, once it is not.
   */
  private async dropShadow(projection: string, generation: number, owner: string): Promise<CleanupResult> {
    const base = this.base(projection);
    const ns = generationNamespace(base, positiveInt(generation, 'generation'));
    const drop = async (keys: string[], last: boolean): Promise<number | null> => {
      const reply = (await dropShadowScript.run(this.redis, [activeKey(base)], [base, String(generation), owner, last ? '1' : '', ...keys])) as ScriptReply;
      return reply[0] === 'ok' ? Number(reply[1]) : null;
    };
    let deletedKeys = 0;
    for await (const batch of this.redis.scanStream({ match: `${ns}*`, count: SCAN_COUNT })) {
      const keys = batch as string[];
      // At most 1 000 keys per script call (Lua's unpack has a limit).
      for (let i = 0; i < keys.length; i += 1_000) {
        const deleted = await drop(keys.slice(i, i + 1_000), false);
        if (deleted === null) return { generation, deletedKeys };
        deletedKeys += deleted;
      }
    }
    deletedKeys += (await drop([], true)) ?? 0;
    return { generation, deletedKeys };
  }

  async dropGeneration(projection: string, generation: number, owner?: string): Promise<CleanupResult> {
    if (owner !== undefined) {
      if (!owner) throw new ProjectionError('an owner token must not be empty');
      return this.dropShadow(projection, generation, owner);
    }
    const base = this.base(projection);
    if ((await this.activeGeneration(projection)) === generation) {
      throw new ProjectionError(`generation ${generation} of ${projection} is active and cannot be dropped`);
    }
    const deletedKeys = await this.unlinkRetired(base, positiveInt(generation, 'generation'));
    await this.redis.srem(retiredKey(base), String(generation));
    return { generation, deletedKeys };
  }

  /**
   * Delete every key of retired generation `generation` (SCAN + UNLINK in batches) and say how many
   * it held: the count all its deleters share ({@link dropRetiredScript}), so a cleanup running
   * alongside (another process's `collectAbandoned` of the same retired generation) does not make
   * either call report only the keys it happened to remove itself. Once this call's scan is done,
   * every key the generation held when it began is gone, and counted once, by whichever call removed it.
   */
  private async unlinkRetired(base: string, generation: number): Promise<number> {
    const counter = droppedCountKey(base, generation);
    const drop = async (keys: string[]) => Number(await dropRetiredScript.run(this.redis, [counter], [DROPPED_COUNT_TTL_MS, ...keys]));
    for await (const batch of this.redis.scanStream({ match: `${generationNamespace(base, generation)}*`, count: SCAN_COUNT })) {
      const keys = batch as string[];
      // At most 1 000 keys per script call (Lua's unpack has a limit).
      for (let i = 0; i < keys.length; i += 1_000) await drop(keys.slice(i, i + 1_000));
    }
    // What every deleter removed up to now: this call's batches and those of any running alongside.
    return drop([]);
  }

  private async unlinkMatching(pattern: string): Promise<number> {
    let deleted = 0;
    for await (const batch of this.redis.scanStream({ match: pattern, count: SCAN_COUNT })) {
      const keys = batch as string[];
      for (let i = 0; i < keys.length; i += 1_000) deleted += await this.redis.unlink(...keys.slice(i, i + 1_000));
    }
    return deleted;
  }

  reader(projection: string): ProjectionReader {
    return createReader(this.redis, this.base(projection));
  }

  items<T extends IndexedItem = IndexedItem>(projection: string, store: string): ItemStore<T> {
    assertName('store', store);
    return createItemStore<T>(this.redis, this.base(projection), store);
  }

  async snapshot(projection: string, generation?: number): Promise<ProjectionSnapshot> {
    const base = this.base(projection);
    for (let attempt = 0; attempt < 5; attempt++) {
      const gen = generation ?? (await this.activeGeneration(projection));
      if (gen === null) return { projection, generation: null, lastSeq: 0, version: null, keys: {} };
      const ns = generationNamespace(base, gen);
      const [seq, version] = await this.redis.hmget(`${ns}~meta`, 'seq', 'version');
      const keys = await dumpNamespace(this.redis, ns);
      if (generation === undefined && (await this.activeGeneration(projection)) !== gen) continue;
      return { projection, generation: gen, lastSeq: Number(seq ?? 0), version: version === null ? null : Number(version), keys };
    }
    throw new ProjectionError(`the active generation of ${projection} kept changing while taking a snapshot`);
  }

  async destroy(projection: string): Promise<number> {
    const base = this.base(projection);
    const generations = await this.unlinkMatching(`${base}:g*`);
    return generations + (await this.redis.unlink(activeKey(base), generationCounterKey(base), rebuildsKey(base)));
  }
}

/** How long a retired generation's count of deleted keys is kept after its last deleter's batch (ms). */
const DROPPED_COUNT_TTL_MS = 60 * 60 * 1000;

function positiveInt(value: number, what: string): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new ProjectionError(`${what} must be a positive integer, got ${value}`);
  return value;
}

/**
 * One event of an apply-script chunk as JSON, `["<seq>", [ops…]]`: serialised once, when the
 * chunk measures it (serialising the whole chunk again would walk every op's value twice, and a
 * run's state is ~36 KB).
 */
function eventText(seq: number, wire: readonly WireOp[]): string {
  return JSON.stringify([String(seq), wire]);
}

/**
 * The apply script's payload for a chunk of {@link eventText}s: one JSON array, as bytes (a string
 * argument is measured with `Buffer.byteLength` and encoded again by the socket write; a Buffer is
 * encoded once).
 */
function chunkPayload(texts: readonly string[]): Buffer {
  return Buffer.from(`[${texts.join(',')}]`);
}

/**
 * The value writes (`json.set`, `set`) among `events` that a later write of the same key among them
 * replaces (`json.set`, `set` or `del`) with no other op on that key in between: applied in one
 * atomic call, they change nothing anyone can read. An op of another kind on the key in between
 * keeps the write (its type check would see the value's type).
 */
export function supersededWrites(events: readonly PreparedEvent[]): Set<string> {
  const skipped = new Set<string>();
  const lastWrite = new Map<string, string>();
  events.forEach((event, e) => {
    event.ops.forEach((op, o) => {
      const key = (op as { key?: unknown }).key;
      if (typeof key !== 'string') return;
      if (op.op === 'json.set' || op.op === 'set' || op.op === 'del') {
        const earlier = lastWrite.get(key);
        if (earlier !== undefined) skipped.add(earlier);
        if (op.op === 'del') lastWrite.delete(key);
        else lastWrite.set(key, opAt(e, o));
      } else {
        lastWrite.delete(key);
      }
    });
  });
  return skipped;
}

/** How {@link supersededWrites} names an op: the index of its event among the events given, and its own index. */
export function opAt(eventIndex: number, opIndex: number): string {
  return `${eventIndex}:${opIndex}`;
}

/** The events of one apply-script call being gathered: their texts, bounded in count and bytes. */
class ChunkBuffer {
  private texts: string[] = [];
  private bytes = 0;
  private last = 0;

  constructor(
    private readonly maxEvents: number,
    private readonly maxBytes: number,
  ) {}

  get empty(): boolean {
    return this.texts.length === 0;
  }

  /** True when `text` would take the chunk past its bounds: send what it holds first. */
  full(text: string): boolean {
    return this.texts.length > 0 && (this.texts.length >= this.maxEvents || this.bytes + text.length > this.maxBytes);
  }

  add(seq: number, text: string): void {
    this.texts.push(text);
    this.bytes += text.length;
    this.last = seq;
  }

  /** What the chunk holds (its texts and last event's seq), leaving it empty. */
  take(): { texts: string[]; last: number } {
    const taken = { texts: this.texts, last: this.last };
    this.texts = [];
    this.bytes = 0;
    return taken;
  }
}

/** The apply script refused a batch: an op targets a key holding another Redis type. */
function wrongTypeError(projection: string, reply: ScriptReply): ProjectionOpError {
  const [, seq, opIndex, key, type, op] = reply;
  return new ProjectionOpError(
    `projection ${projection}: op #${opIndex} (${op}) of seq ${seq} targets "${key}" which holds a ${type}; nothing of the batch was written`,
    { projection, seq: Number(seq), opIndex: Number(opIndex), key: String(key), reason: `wrong type ${type}` },
  );
}
