import { heapWeight } from '@baton/eventstore';
import { randomUUID } from 'node:crypto';
import type Redis from 'ioredis';
import { toJsonValue, type JsonValue } from './canonical-json';
import { ProjectionError, RebuildAbortedError, RebuildBehindError, RebuildIncompleteError, ShadowLostError } from './errors';
import { GenerationImage, itemDocOf, type BulkCommand, type ItemDoc } from './image';
import { activeKey, generationNamespace, rebuildsKey } from './keys';
import type { ProjectionOp } from './ops';
import { BULK_CODES, bulkScript, differingMembersScript, freezeLiveScript, keyShapesScript, readHashesScript, touchRebuildScript } from './scripts';
import type { CleanupResult, RebuildResult, ReplaySource, SequencedEvent, SwapResult } from './store';

/**
 * What a rebuild folds: a projection whose ops for an event may depend on one folded JSON state,
 * kept under `stateKeyOf(event)` in its own keyspace (Baton's `FoldingProjection`; a plain
 * `ProjectionDefinition` is one with no state). `step` must be pure.
 */
export interface FoldTarget {
  readonly name: string;
  readonly version: number;
  handles(eventType: string): boolean;
  stateKeyOf(event: SequencedEvent): string | null;
  step(prior: JsonValue | null, event: SequencedEvent): { state?: JsonValue | null; ops: readonly ProjectionOp[] };
}

/** How far a rebuild is, reported after every chunk written (and at the start of each round). */
export interface RebuildProgress {
  projections: readonly string[];
  /** `replay`: the first pass over the stream; `catch_up`: the passes after a swap found the live projection ahead. */
  phase: 'replay' | 'catch_up';
  round: number;
  /** Last stream sequence written into every shadow (0 before the first chunk). */
  seq: number;
  /** Events folded so far, over every round. */
  events: number;
  /** The stream's last sequence when the rebuild started, when the caller knew it. */
  targetSeq: number | null;
  /** Events the stream held when the rebuild started, when the caller knew it. */
  totalEvents: number | null;
  startedAt: number;
  elapsedMs: number;
}

/**
 * The most events a rebuild hands over behind the live generation after its catch-up rounds:
 * what live traffic can add while one round is read and written. A larger gap is no race with
 * live traffic, and the rebuild gives up ({@link RebuildBehindError}).
 */
export const HAND_OVER_MAX_GAP = 2_048;

export interface RebuildManyOptions {
  /**
   * Catch-up rounds after the first pass while the live applier keeps the active generation ahead
   * (default 10). Then the rebuild hands over behind it (`handedOver` on its result: the live
   * applier applies the difference), or with `handOver: false` gives up with {@link RebuildBehindError}.
   */
  maxCatchUpRounds?: number;
  /**
   * Swap in behind a live generation that stayed ahead through every catch-up round, by at most
   * {@link HAND_OVER_MAX_GAP} events (default true).
   */
  handOver?: boolean;
  /** Delete the old generation in the background after the swap (default true). */
  dropPrevious?: boolean;
  /**
   * Swap in even when the active generation has applied more than the shadow: it was built from
   * an events stream that is gone (recreated, its sequences started again), so its sequence says
   * nothing of this stream. Only for that case (`ensureCurrent`'s `stream_replaced`).
   */
  replaceAhead?: boolean;
  /** Events folded in memory before they are written (default 2 048): bounds memory with the caches. */
  chunkEvents?: number;
  /**
   * Estimated heap bytes of the events' payloads a chunk may hold (`heapWeight`; default 8 MiB):
   * a chunk ends at whichever of this and `chunkEvents` comes first, so a stream of large events
   * (contexts near the request cap) is folded in chunks of megabytes, not of hundreds of them.
   */
  chunkBytes?: number;
  /** Fold states kept in memory per projection (default 4 096); the rest are read back from the shadow. */
  stateCacheSize?: number;
  /** Indexed items kept in memory per projection (default 4 096). */
  itemCacheSize?: number;
  /** Most the kept fold states, and apart from them the kept items, of one projection may weigh: estimated heap bytes (default 6 MiB each). */
  cacheBytes?: number;
  /**
   * Abort the rebuild: it stops between two events, drops its shadows and throws
   * {@link RebuildAbortedError}. Heard until the swaps begin ({@link onSwapping}); from then on the
   * rebuild finishes (a swap is atomic per projection, and stopping between two would leave some
   * projections rebuilt and others not while saying nothing was).
   */
  signal?: AbortSignal;
  /** Called once, just before the first swap: from here on the signal no longer stops the rebuild. */
  onSwapping?: () => void;
  /** Called as each projection's shadow is swapped in (its name and new generation): what is live already, should the process end before the others. */
  onSwapped?: (projection: string, generation: number) => void;
  onProgress?: (progress: RebuildProgress) => void;
  /**
   * Fold no event after this sequence — one for all, or one per projection name (a comparison
   * with live projections, each folded up to what it has applied). A rebuild swaps in a shadow
   * folded up to its bound, and the live applier applies the events after it (`notices` rebuilt up
   * to what was published: the notifier publishes the rest). A rebuild's bound rises to the live
   * generation's last sequence when that has moved past it (its applier acted on those events).
   */
  untilSeq?: number | Readonly<Record<string, number>>;
  /** Who runs it (shown by the API: `baton replay`, `notifier-1`...). */
  by?: string;
  /** For progress only: the stream's last sequence and message count now. */
  targetSeq?: number;
  totalEvents?: number;
}

export interface ScratchOptions extends RebuildManyOptions {
  /**
   * Called after each pass over the stream — the first one, then each catch-up pass — with the
   * scratch generations as they stand (their leases kept alive meanwhile; not to be dropped here).
   * Return new bounds for another pass, or null to finish. The next pass reads on from the lowest
   * sequence a scratch generation still needs and folds into each only the events after what it
   * has folded (`lastSeq`) up to its new bound, so no event reaches a generation twice; a
   * projection left out, or given a bound at or below its `lastSeq`, is not folded further. At most
   * `maxCatchUpRounds` catch-up passes (default 10): the call after the last one has `last` set,
   * and what it returns is not folded. A throw (or the signal) drops every scratch generation.
   */
  afterPass?: (pass: ScratchPass) => Promise<Readonly<Record<string, number>> | null>;
}

/** A scratch generation as it stands after a pass. */
export interface ScratchGeneration {
  projection: string;
  generation: number;
  /** Every event up to this sequence (and none after it) is folded into it. */
  lastSeq: number;
  /** Events folded into it, over every pass (events the projection does not handle count too). */
  events: number;
}

/** What {@link ScratchOptions.afterPass} is told after a pass. */
export interface ScratchPass {
  /** 0: the first pass (the stream up to the bounds); then 1, 2…: the catch-up passes. */
  round: number;
  /** No pass follows, whatever `afterPass` returns (`maxCatchUpRounds` were run). */
  last: boolean;
  builds: readonly ScratchGeneration[];
  /**
   * Per projection, the relative keys this pass wrote into its scratch generation (fold states,
   * the ops' keys, item documents, index keys whose entries changed): empty when it folded nothing;
   * null after the first pass (it wrote everything) and when a pass wrote more than
   * {@link MAX_RECORDED_WRITES} keys into it.
   */
  written: ReadonlyMap<string, ReadonlySet<string> | null>;
  /**
   * Copy `keys` (relative names) of `projection`'s active generation into its scratch generation,
   * in one atomic step with the sequence that generation has applied: the live side of a
   * comparison, held still while the next pass brings the fold to that same sequence (bound it to
   * `seq`). Compare the copies with `ProjectionStore.compareFrozen` (giving it `members`); they go
   * when the scratch generation is dropped. A sorted set, set or hash holding more than
   * {@link MEMBER_FREEZE_MIN} members on the live side is not copied whole: its members are read
   * from both sides first (in pages), and only those that differ then — live now against the
   * scratch generation as it stands — are copied (their score or value, or that the live side
   * lacks them), in the same atomic step; members equal then are taken as settled, as keys that
   * compared equal are. Refused, with nothing copied, past `limits` (default
   * {@link FREEZE_LIMITS}; such a key counts its members copied, not its size): one call blocks
   * Redis while it copies. Throws `ShadowLostError` when the scratch generation is not this
   * build's any more.
   */
  freeze(projection: string, keys: readonly string[], limits?: FreezeLimits): Promise<FrozenLive>;
}

/**
 * A live sorted set, set or hash holding more members than this is frozen member by member: only
 * the members that differ from the scratch generation are copied (see {@link ScratchPass.freeze}).
 */
export const MEMBER_FREEZE_MIN = 1_000;

/** The members of one key {@link ScratchPass.freeze} copied from the live side (the key itself was not copied whole). */
export interface FrozenMembers {
  type: 'zset' | 'set' | 'hash';
  /** The members (a hash's fields) that differed when both sides were read, sorted; each copied with its score or value, or absent. */
  members: readonly string[];
  /** Whether the live generation held the key at the copy's sequence. */
  existed: boolean;
}

/** How much one {@link ScratchPass.freeze} may copy (each call is one atomic Redis script). */
export interface FreezeLimits {
  keys: number;
  /** Elements over all the keys: a hash's fields, a set's or sorted set's members, a list's items; a string counts 1. */
  elements: number;
}

/**
 * One call blocks Redis while it copies. Measured on a quiet 2-core machine: one sorted set of
 * 100 000 members takes 75–150 ms, 2 000 small hashes 13–16 ms; on a loaded one several times that
 * (a black-box check saw 525 ms for one notices index set). A large sorted set, set or hash (a
 * project's whole-inbox and notice index sets keep every item, ended ones too: about ten elements
 * per run) counts only the members copied from it ({@link MEMBER_FREEZE_MIN}), so its size does
 * not bring a freeze past the bound.
 */
export const FREEZE_LIMITS: FreezeLimits = { keys: 10_000, elements: 50_000 };

/** What {@link ScratchPass.freeze} did. */
export type FrozenLive =
  /**
   * Copied: the live generation `generation` as it stood at `seq` (a key it lacked has no copy).
   * `keys`: every key given; `members`: those of them copied member by member, with the members.
   */
  | { status: 'frozen'; generation: number; seq: number; keys: readonly string[]; members: ReadonlyMap<string, FrozenMembers> }
  /** Nothing copied: more keys or elements than the limits allow (`elements` counted only within the key limit). */
  | { status: 'too_large'; keys: number; elements: number }
  /** Nothing copied: the projection has no active generation. */
  | { status: 'no_live_generation' };

/** Most keys a catch-up pass names per scratch generation (about 100 bytes each); past them it says "too many" (null). */
export const MAX_RECORDED_WRITES = 100_000;

/** A generation folded from the stream and never made active (verify, dry runs). Drop it when done. */
export interface ScratchBuild extends ScratchGeneration {
  /** Delete it (only while it is still this build's). */
  drop(): Promise<CleanupResult>;
}

/** A running rebuild as the progress hash records it (see `ProjectionStore.rebuilds`). */
export interface RebuildInfo {
  projection: string;
  generation: number;
  kind: 'rebuild' | 'scratch';
  by: string;
  startedAt: string;
  updatedAt: string;
  /** Epoch ms until which the rebuild counts as alive; refreshed every few seconds while it runs. */
  leaseUntil: number;
  phase: RebuildProgress['phase'];
  seq: number;
  events: number;
  targetSeq: number | null;
  totalEvents: number | null;
  /** Events per second since it started. */
  rate: number;
  /** The lease ran out: the process that ran it died; the next rebuild deletes its shadow. */
  stale: boolean;
}

/** What the rebuild needs of the store (implemented by the Redis projection store). */
export interface RebuildBackend {
  readonly redis: Redis;
  base(projection: string): string;
  /** The active generation, or null when the projection has none (never built, or Redis lost it). */
  activeGeneration(projection: string): Promise<number | null>;
  allocateGeneration(projection: string): Promise<number>;
  /** Create a shadow's meta with its owner token (fails with ShadowLostError if it exists with another). */
  createShadow(def: { name: string; version: number }, generation: number, owner: string): Promise<void>;
  /** `handOverGap`: swap in even when the active generation is ahead, by at most that many events (the live applier applies them). */
  swap(projection: string, expected: number | null, next: number, owner: string, replaceAhead?: boolean, handOverGap?: number): Promise<SwapResult>;
  dropShadow(projection: string, generation: number, owner: string): Promise<CleanupResult>;
  dropGeneration(projection: string, generation: number): Promise<CleanupResult>;
}

/** How long a rebuild's lease holds without news, and how often it is refreshed. */
export const REBUILD_LEASE_MS = 30_000;
const HEARTBEAT_MS = 5_000;
/** Most commands and bytes in one bulk script call (each call is atomic; calls of a chunk are pipelined). */
const MAX_CALL_COMMANDS = 4_000;
const MAX_CALL_BYTES = 1 << 20;
/** Commands wait this long for a reply on the rebuild's own connection (a chunk is a few MB). */
const REBUILD_COMMAND_TIMEOUT_MS = 30_000;

interface Shadow {
  target: FoldTarget;
  image: GenerationImage;
  generation: number;
  owner: string;
  ns: string;
  registry: string;
  previous: number | null;
  state: 'building' | 'done' | 'failed';
  result?: RebuildResult;
  error?: unknown;
  /** The chunk being written: resolves when written (rejects when refused). */
  flushing: Promise<void>;
  /** Resolves once every command of the chunk being written was sent (later reads queue behind them). */
  sent: Promise<void>;
  info: RebuildInfo;
  /** Fold no event after this sequence (`untilSeq`; +∞ without one). */
  bound: number;
  /** Every event up to this sequence was folded into the shadow: a later pass never folds one again. */
  foldedThrough: number;
  /** Events folded into it (its own count: shadows of one read may have different bounds). */
  events: number;
  /** The keys the current catch-up pass wrote (null: not recorded, or too many). */
  written: Set<string> | null;
  /** False when deleting it failed (its progress entry then stays, for `collectAbandoned`). */
  dropped?: boolean;
}

/**
 * Rebuild `targets` from one read of `source` (see `ProjectionStore.rebuildMany`), or, with
 * `scratch`, build them into generations that are never swapped in.
 */
export async function runRebuild(
  backend: RebuildBackend,
  targets: readonly FoldTarget[],
  source: ReplaySource,
  options: ScratchOptions,
  scratch: boolean,
): Promise<{ results: Record<string, RebuildResult>; scratch: ScratchBuild[] }> {
  if (new Set(targets.map((t) => t.name)).size !== targets.length) throw new ProjectionError('rebuild: each projection may be named once');
  const chunkEvents = Math.max(1, options.chunkEvents ?? 2_048);
  const chunkBytes = Math.max(1, options.chunkBytes ?? 8 * 1024 * 1024);
  const maxRounds = options.maxCatchUpRounds ?? 10;
  const startedAt = Date.now();
  const signal = options.signal;
  /** Set just before the first swap: from then on the rebuild finishes whatever the signal says. */
  let swapping = false;
  const checkAborted = () => {
    if (!swapping && signal?.aborted) throw new RebuildAbortedError(targets.map((t) => t.name));
  };
  checkAborted();
  // The rebuild's own connection: its multi-megabyte chunks never queue in front of the caller's
  // commands (the notifier's API keeps answering), and wait longer for their replies. Without
  // auto-pipelining: the client would copy a turn's calls (up to a megabyte each) into one more
  // buffer before writing them; written call by call, the socket gets each as it was encoded
  // (about 2.5 % less CPU in the rebuilding process, four alternated pairs of the debug replay).
  const redis = backend.redis.duplicate({
    commandTimeout: Math.max(REBUILD_COMMAND_TIMEOUT_MS, backend.redis.options.commandTimeout ?? 0),
    lazyConnect: true,
    enableAutoPipelining: false,
  });
  redis.on('error', () => undefined);
  const shadows: Shadow[] = [];
  let heartbeat: NodeJS.Timeout | null = null;
  let events = 0;
  let lastSeq = 0;
  let round = 0;
  const progress = (): RebuildProgress => ({
    projections: targets.map((t) => t.name),
    phase: round === 0 ? 'replay' : 'catch_up',
    round,
    seq: lastSeq,
    events,
    targetSeq: options.targetSeq ?? null,
    totalEvents: options.totalEvents ?? null,
    startedAt,
    elapsedMs: Date.now() - startedAt,
  });
  const infoValue = (shadow: Shadow): string => {
    const now = Date.now();
    const elapsed = Math.max(1, now - startedAt);
    Object.assign(shadow.info, {
      updatedAt: new Date(now).toISOString(),
      leaseUntil: now + REBUILD_LEASE_MS,
      phase: round === 0 ? 'replay' : 'catch_up',
      seq: lastSeq,
      events,
      rate: Math.round((events * 1000) / elapsed),
    } satisfies Partial<RebuildInfo>);
    const { stale: _stale, projection: _projection, ...stored } = shadow.info;
    return JSON.stringify({ ...stored, owner: shadow.owner });
  };
  const fail = (shadow: Shadow, error: unknown) => {
    if (shadow.state !== 'building') return;
    shadow.state = 'failed';
    shadow.error = error;
  };
  const building = () => shadows.filter((s) => s.state === 'building');
  const until = options.untilSeq;
  const boundOf = (name: string): number => (typeof until === 'number' ? until : (until?.[name] ?? Number.POSITIVE_INFINITY));
  /** The highest bound of the shadows the current pass folds into: it reads no further. */
  let maxBound = Number.POSITIVE_INFINITY;
  const generationOf = (shadow: Shadow): ScratchGeneration => ({
    projection: shadow.target.name,
    generation: shadow.generation,
    lastSeq: shadow.foldedThrough,
    events: shadow.events,
  });

  try {
    for (const target of targets) {
      // No empty active generation is created for a projection that has none: until the swap it
      // has none, so a live applier finds it lost and waits for this rebuild instead of folding
      // the history into an empty generation (and publishing what that fold would publish).
      const previous = scratch ? null : await backend.activeGeneration(target.name);
      const generation = await backend.allocateGeneration(target.name);
      // The counter restarts when Redis loses its data, so the number alone does not identify this
      // rebuild's shadow: the token does, and every write into it and the swap check it atomically.
      const owner = randomUUID();
      const base = backend.base(target.name);
      const shadow: Shadow = {
        target,
        image: new GenerationImage(target.name, {
          ...(options.stateCacheSize !== undefined ? { stateCacheSize: options.stateCacheSize } : {}),
          ...(options.itemCacheSize !== undefined ? { itemCacheSize: options.itemCacheSize } : {}),
          ...(options.cacheBytes !== undefined ? { cacheBytes: options.cacheBytes } : {}),
        }),
        generation,
        owner,
        ns: generationNamespace(base, generation),
        registry: rebuildsKey(base),
        previous,
        state: 'building',
        flushing: Promise.resolve(),
        sent: Promise.resolve(),
        info: {
          projection: target.name,
          generation,
          kind: scratch ? 'scratch' : 'rebuild',
          by: options.by ?? 'unknown',
          startedAt: new Date(startedAt).toISOString(),
          updatedAt: new Date(startedAt).toISOString(),
          leaseUntil: startedAt + REBUILD_LEASE_MS,
          phase: 'replay',
          seq: 0,
          events: 0,
          targetSeq: options.targetSeq ?? null,
          totalEvents: options.totalEvents ?? null,
          rate: 0,
          stale: false,
        },
        bound: boundOf(target.name),
        foldedThrough: 0,
        events: 0,
        written: null,
      };
      shadows.push(shadow);
      await backend.createShadow(target, generation, owner);
      await touchRebuildScript.run(redis, [], [shadow.ns, owner, shadow.registry, String(generation), infoValue(shadow)]);
    }
    // The lease says the rebuild is alive while a chunk takes long (or a scratch build is compared).
    heartbeat = setInterval(() => {
      for (const shadow of shadows) {
        if (shadow.state === 'failed') continue;
        void touchRebuildScript.run(redis, [], [shadow.ns, shadow.owner, shadow.registry, String(shadow.generation), infoValue(shadow)]).catch(() => undefined);
      }
    }, HEARTBEAT_MS);
    heartbeat.unref();
    // The bulk script must be cached: its calls are pipelined and may not fall back to EVAL out of order.
    await redis.script('LOAD', bulkScript.source);

    for (round = 0; ; round++) {
      checkAborted();
      options.onProgress?.(progress());
      // From the first event a shadow still needs (a scratch pass may leave some shadows where they are).
      const folding = building().filter((shadow) => shadow.bound > shadow.foldedThrough);
      if (folding.length > 0) {
        const from = Math.min(...folding.map((shadow) => shadow.foldedThrough)) + 1;
        maxBound = Math.max(...folding.map((shadow) => shadow.bound));
        await pass(source(from), from);
      }
      if (scratch) {
        // A shadow that failed fails the whole build (below): nothing more to fold or compare.
        if (!options.afterPass || shadows.some((shadow) => shadow.state === 'failed')) break;
        const last = round >= maxRounds;
        const next = await options.afterPass({
          round,
          last,
          builds: shadows.map(generationOf),
          written: new Map(shadows.map((shadow) => [shadow.target.name, round === 0 ? null : shadow.written])),
          freeze: (projection, keys, limits) => {
            const shadow = shadows.find((s) => s.target.name === projection);
            if (!shadow) return Promise.reject(new ProjectionError(`no scratch generation of ${projection} to freeze into`));
            // On the rebuild's own connection: one call copies up to the limits, longer than a caller's command timeout may allow on a busy Redis.
            return freezeLive(redis, backend, shadow, keys, limits);
          },
        });
        if (next === null || last) break;
        for (const shadow of shadows) {
          shadow.bound = next[shadow.target.name] ?? shadow.foldedThrough;
          shadow.written = new Set();
          shadow.image.recordWrites(shadow.written);
        }
        continue;
      }
      if (!swapping) {
        // The last moment an abort is heard: a signal that came while the last chunk was written
        // stops the rebuild here, before anything is swapped in.
        checkAborted();
        swapping = true;
        options.onSwapping?.();
      }
      for (const shadow of building()) {
        let swap: SwapResult;
        // The last round hands over behind a live generation that never stopped moving ahead, by
        // no more than a chunk's worth of events (what live traffic adds during one round).
        const handOverGap = round >= maxRounds && options.handOver !== false ? HAND_OVER_MAX_GAP : 0;
        try {
          swap = await backend.swap(shadow.target.name, shadow.previous, shadow.generation, shadow.owner, options.replaceAhead === true, handOverGap);
        } catch (error) {
          fail(shadow, error);
          continue;
        }
        if (swap.status === 'shadow_lost') fail(shadow, new ShadowLostError(shadow.target.name, shadow.generation));
        else if (swap.status === 'swapped') {
          shadow.state = 'done';
          options.onSwapped?.(shadow.target.name, shadow.generation);
          const previous = swap.previous;
          const cleanup: Promise<CleanupResult> =
            options.dropPrevious === false || previous === null
              ? Promise.resolve({ generation: previous ?? 0, deletedKeys: 0 })
              : backend.dropGeneration(shadow.target.name, previous).catch((error: Error) => ({ generation: previous, deletedKeys: 0, error }));
          shadow.result = {
            status: 'swapped',
            generation: shadow.generation,
            previous,
            lastSeq: shadow.foldedThrough,
            cleanup,
            ...(swap.shadowSeq < swap.activeSeq && options.replaceAhead !== true ? { handedOver: { fromSeq: swap.shadowSeq + 1, toSeq: swap.activeSeq } } : {}),
          };
        } else if (swap.status === 'conflict') {
          shadow.state = 'done';
          shadow.result = { status: 'lost', generation: shadow.generation, winner: swap.current };
          shadow.dropped = await dropOrLeave(backend, shadow);
        } else if (round >= maxRounds) {
          fail(shadow, new RebuildBehindError(shadow.target.name, swap.shadowSeq, swap.activeSeq));
        } else if (Number.isFinite(shadow.bound) && swap.activeSeq > shadow.bound) {
          // A bounded shadow (folded no further than what the live side had acted on — `notices`, up
          // to the notices published) behind a live generation that has moved on: the live applier
          // has applied, and acted on, those events since, so the next round folds up to them too.
          shadow.bound = swap.activeSeq;
        }
        // 'behind': the live applier has committed past the shadow; the next round reads on from lastSeq.
      }
      if (building().length === 0) break;
    }
  } catch (error) {
    for (const shadow of shadows) fail(shadow, error);
  } finally {
    if (heartbeat) clearInterval(heartbeat);
  }

  // Shadows that failed are deleted while they are still this rebuild's (a lost one is not ours
  // any more); their progress entries go, and so do those of finished rebuilds — but not the entry
  // of a shadow whose deletion failed (Redis timed out): its lease runs out and the next rebuild or
  // the notifier's sweep deletes it (`collectAbandoned`); without the entry nothing would.
  await Promise.all(
    shadows.map(async (shadow) => {
      await shadow.flushing.catch(() => undefined);
      if (shadow.state === 'failed' && !(shadow.error instanceof ShadowLostError)) shadow.dropped = await dropOrLeave(backend, shadow);
      if ((!scratch || shadow.state === 'failed') && shadow.dropped !== false)
        await redis.hdel(shadow.registry, String(shadow.generation)).catch(() => undefined);
    }),
  );
  const failed = shadows.find((s) => s.state === 'failed');
  const results: Record<string, RebuildResult> = {};
  for (const shadow of shadows) if (shadow.result) results[shadow.target.name] = shadow.result;
  if (failed) {
    redis.disconnect();
    // Every other rebuild settled first (swapped, or dropped); scratch generations that were built
    // are dropped too when another failed.
    if (scratch)
      await Promise.all(
        shadows
          .filter((s) => s.state !== 'failed')
          .map(async (s) => {
            if (await dropOrLeave(backend, s)) await backend.redis.hdel(s.registry, String(s.generation)).catch(() => undefined);
          }),
      );
    // Some were swapped in (or another rebuild's were) before the others failed: say which.
    if (!scratch && Object.keys(results).length > 0) {
      throw new RebuildIncompleteError(results, Object.fromEntries(shadows.filter((s) => s.state === 'failed').map((s) => [s.target.name, s.error])));
    }
    throw failed.error;
  }
  const builds: ScratchBuild[] = scratch
    ? shadows.map((shadow) => {
        // A scratch build's lease is kept alive until it is dropped (a comparison may take a while).
        const keepAlive = setInterval(() => {
          void touchRebuildScript
            .run(backend.redis, [], [shadow.ns, shadow.owner, shadow.registry, String(shadow.generation), infoValue(shadow)])
            .catch(() => undefined);
        }, HEARTBEAT_MS);
        keepAlive.unref();
        let dropped: Promise<CleanupResult> | null = null;
        return {
          ...generationOf(shadow),
          drop: () =>
            (dropped ??= (async () => {
              clearInterval(keepAlive);
              const result = await backend.dropShadow(shadow.target.name, shadow.generation, shadow.owner);
              await backend.redis.hdel(shadow.registry, String(shadow.generation)).catch(() => undefined);
              return result;
            })()),
        };
      })
    : [];
  await redis.quit().catch(() => redis.disconnect());
  return { results, scratch: builds };

  /**
   * Read `iterable` (from sequence `from`) to its end, or to the first event past every bound,
   * folding and writing it chunk by chunk into every building shadow.
   */
  async function pass(iterable: AsyncIterable<SequencedEvent>, from: number): Promise<void> {
    let chunk: SequencedEvent[] = [];
    let bytes = 0;
    let previous = from - 1;
    for await (const event of iterable) {
      checkAborted();
      if (event.seq > maxBound) break;
      if (!Number.isSafeInteger(event.seq) || event.seq <= previous)
        throw new ProjectionError(`a rebuild needs strictly increasing stream sequences: #${event.seq} after #${previous}`);
      previous = event.seq;
      if (chunk.length >= chunkEvents || bytes >= chunkBytes) {
        await fold(chunk);
        chunk = [];
        bytes = 0;
        if (building().length === 0) return;
      }
      chunk.push(event);
      bytes += heapWeight(event.payload);
    }
    if (chunk.length > 0) await fold(chunk);
    await Promise.all(building().map((s) => s.flushing.catch((error: unknown) => fail(s, error))));
    options.onProgress?.(progress());
  }

  /** Fold one chunk into every building shadow, then start writing it (the next chunk is read meanwhile). */
  async function fold(chunk: readonly SequencedEvent[]): Promise<void> {
    const seq = (chunk[chunk.length - 1] as SequencedEvent).seq;
    const live = building();
    // Load the fold states the chunk needs and memory no longer holds: from the shadow, after the
    // previous chunk's writes (same connection, so the read queues behind them).
    await Promise.all(
      live.map(async (shadow) => {
        const keys = new Set<string>();
        for (const event of chunk) {
          if (event.seq <= shadow.foldedThrough || event.seq > shadow.bound || !shadow.target.handles(event.type)) continue;
          const key = shadow.target.stateKeyOf(event);
          if (key !== null) keys.add(key);
        }
        // After the previous chunk was handed to Redis (and drained from the image).
        await shadow.sent;
        const missing = shadow.image.missing(keys);
        if (missing.length === 0) return;
        const values = await redis.mget(...missing.map((key) => shadow.ns + key));
        missing.forEach((key, i) => shadow.image.pin(key, values[i] ?? null));
      }),
    );
    for (const shadow of live) {
      try {
        foldInto(shadow, chunk);
      } catch (error) {
        fail(shadow, error);
        shadow.image.clear();
        continue;
      }
      shadow.image.unpin();
    }
    checkAborted();
    // One chunk written at a time per shadow: the previous one must be in before the next goes.
    for (const shadow of live) {
      if (shadow.state !== 'building') continue;
      try {
        await shadow.flushing;
      } catch (error) {
        fail(shadow, error);
        continue;
      }
      let markSent!: () => void;
      shadow.sent = new Promise<void>((resolve) => (markSent = resolve));
      shadow.flushing = write(shadow, shadow.foldedThrough, markSent);
      // An unobserved rejection is observed at the next chunk (or the end of the pass).
      shadow.flushing.catch(() => undefined);
    }
    // Counted with the sequence they reach (the progress the API shows pairs the two).
    events += chunk.length;
    lastSeq = Math.max(lastSeq, seq);
    options.onProgress?.(progress());
  }

  function foldInto(shadow: Shadow, chunk: readonly SequencedEvent[]): void {
    const { target, image, bound } = shadow;
    const after = shadow.foldedThrough;
    for (const event of chunk) {
      // Folded by an earlier pass, or past this shadow's bound: not this shadow's to fold now.
      if (event.seq <= after || event.seq > bound) continue;
      shadow.events++;
      if (!target.handles(event.type)) continue;
      const key = target.stateKeyOf(event);
      const prior = key === null ? null : image.state(key);
      const step = target.step(prior, event);
      image.apply(step.ops, { projection: target.name, seq: event.seq });
      if (key !== null && step.state !== undefined) image.setState(key, step.state === null ? null : toJsonValue(step.state));
    }
    // The chunk holds every event from the pass's start to its last: the shadow has them all up to
    // there (or its bound), whether it handles them or not.
    shadow.foldedThrough = Math.max(after, Math.min((chunk[chunk.length - 1] as SequencedEvent).seq, bound));
  }

  /** Write what the image holds for the chunk that folded it through `seq`, in pipelined owner-checked calls. */
  async function write(shadow: Shadow, seq: number, markSent: () => void): Promise<void> {
    try {
      const toLoad = shadow.image.itemsToLoad();
      const loaded = new Map<string, ItemDoc | null>();
      // One script call per 1 000 items (not one command each: a chunk may touch thousands).
      for (let i = 0; i < toLoad.length; i += 1_000) {
        const keys = toLoad.slice(i, i + 1_000);
        const replies = (await readHashesScript.run(redis, [], [shadow.ns, ...keys])) as string[][];
        keys.forEach((key, j) => loaded.set(key, itemDocOf(replies[j] ?? [])));
      }
      const calls = encodeCalls(shadow.image.drain(loaded));
      if (shadow.written !== null && shadow.written.size > MAX_RECORDED_WRITES) {
        // Too many to name: the caller is told so (null) and looks at everything instead.
        shadow.written = null;
        shadow.image.recordWrites(null);
      }
      const header = (last: boolean) =>
        last
          ? [shadow.ns, shadow.owner, String(seq), String(shadow.target.version), shadow.registry, String(shadow.generation), infoValue(shadow)]
          : [shadow.ns, shadow.owner, '', '', '', '', ''];
      const replies = calls.map((payload, i) => redis.evalsha(bulkScript.sha, 0, ...header(i === calls.length - 1), payload) as Promise<[string, number?]>);
      markSent();
      for (const reply of await Promise.all(replies)) {
        if (reply[0] === 'lost') throw new ShadowLostError(shadow.target.name, shadow.generation);
      }
    } finally {
      markSent();
    }
  }
}

/**
 * The commands as bulk script payloads (`bulkScript`'s binary framing), split into calls of bounded
 * size (at least one call). Measured on a rebuild of 43 000 events (1.5 KB of payload each): the
 * JSON payload this replaced — `JSON.stringify` of the commands, whose values are JSON texts to
 * escape, then its UTF-8 encoding — took 9 µs per event, the framing 2.
 */
function encodeCalls(commands: readonly BulkCommand[]): Buffer[] {
  const calls: Buffer[] = [];
  let from = 0;
  let estimate = 0;
  for (let i = 0; i < commands.length; i++) {
    const [, key, args] = commands[i] as BulkCommand;
    let size = key.length + 16;
    for (const arg of args) size += arg.length + 3;
    if (i > from && (i - from >= MAX_CALL_COMMANDS || estimate + size > MAX_CALL_BYTES)) {
      calls.push(bulkPayload(commands, from, i));
      from = i;
      estimate = 0;
    }
    estimate += size;
  }
  calls.push(bulkPayload(commands, from, commands.length));
  return calls;
}

/** Commands `from` (included) to `to` (excluded) in `bulkScript`'s framing. */
function bulkPayload(commands: readonly BulkCommand[], from: number, to: number): Buffer {
  let size = 0;
  for (let i = from; i < to; i++) {
    const [, key, args] = commands[i] as BulkCommand;
    size += 9 + Buffer.byteLength(key);
    for (const arg of args) size += 4 + Buffer.byteLength(arg);
  }
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (let i = from; i < to; i++) {
    const [code, key, args] = commands[i] as BulkCommand;
    at = out.writeUInt8(BULK_CODES[code], at);
    at = out.writeUInt32BE(args.length + 1, at);
    at = writeFramed(out, key, at);
    for (const arg of args) at = writeFramed(out, arg, at);
  }
  return out;
}

/** `text` as its UTF-8 length (4 bytes, big-endian) and bytes, at `at`; returns where the next string goes. */
function writeFramed(out: Buffer, text: string, at: number): number {
  const length = out.write(text, at + 4);
  out.writeUInt32BE(length, at);
  return at + 4 + length;
}

/** Parse the progress hash of one projection (`generation → JSON`). */
export function parseRebuildInfos(projection: string, hash: Record<string, string>, now = Date.now()): Array<RebuildInfo & { owner: string }> {
  const out: Array<RebuildInfo & { owner: string }> = [];
  for (const [field, raw] of Object.entries(hash)) {
    try {
      const value = JSON.parse(raw) as Omit<RebuildInfo, 'projection' | 'stale'> & { owner: string };
      if (typeof value.owner !== 'string' || !Number.isSafeInteger(Number(field))) continue;
      out.push({ ...value, projection, generation: Number(field), stale: !(value.leaseUntil > now) });
    } catch {
      // not ours to interpret
    }
  }
  return out.sort((a, b) => a.generation - b.generation);
}

/** {@link ScratchPass.freeze} for one scratch shadow. */
async function freezeLive(
  redis: Redis,
  backend: RebuildBackend,
  shadow: Shadow,
  keys: readonly string[],
  limits: FreezeLimits = FREEZE_LIMITS,
): Promise<FrozenLive> {
  const projection = shadow.target.name;
  if (keys.length > limits.keys) return { status: 'too_large', keys: keys.length, elements: 0 };
  const base = backend.base(projection);
  // The members are found in one live generation; a rebuild swapping another one in between the
  // reads and the copy makes them meaningless there: found again in it (rare), then given up.
  for (let attempt = 0; attempt < 3; attempt++) {
    const active = await redis.get(activeKey(base));
    const found = active ? await membersToFreeze(redis, generationNamespace(base, Number(active)), shadow.ns, keys, limits.elements) : new Map();
    if (!(found instanceof Map)) return { status: 'too_large', keys: keys.length, elements: found.elements };
    const whole = keys.filter((key) => !found.has(key));
    const args: string[] = [base, String(shadow.generation), shadow.owner, String(limits.elements), active ?? '', String(whole.length), ...whole];
    for (const [key, { type, members }] of found) args.push(key, type, String(members.length), ...members);
    const reply = (await freezeLiveScript.run(redis, [activeKey(base)], args)) as [string, ...(string | number)[]];
    switch (reply[0]) {
      case 'frozen': {
        const existed = reply.slice(4);
        const members = new Map<string, FrozenMembers>([...found].map(([key, frozen], i) => [key, { ...frozen, existed: Number(existed[i]) === 1 }]));
        return { status: 'frozen', generation: Number(reply[1]), seq: Number(reply[2]), keys, members };
      }
      case 'moved':
        continue;
      case 'large':
        return { status: 'too_large', keys: keys.length, elements: Number(reply[1]) };
      case 'none':
        return { status: 'no_live_generation' };
      case 'lost':
        throw new ShadowLostError(projection, shadow.generation);
      default:
        throw new ProjectionError(`unexpected freeze reply ${JSON.stringify(reply)}`);
    }
  }
  return { status: 'too_large', keys: keys.length, elements: 0 };
}

/** Keys whose shapes one call reads, and members one read of a key's members asks for. */
const SHAPES_GROUP = 500;
const MEMBER_PAGE = 1_000;

/**
 * Of `keys`, those to freeze member by member — a sorted set, set or hash holding more than
 * {@link MEMBER_FREEZE_MIN} members in the live namespace `live`, of the same type (or absent) in
 * `scratch` — each with the members that differ between the two now: every member of one side
 * looked up in the other, a page at a time (never one large reply). `{ elements }` once the
 * members found pass `budget` (nothing more read).
 */
async function membersToFreeze(
  redis: Redis,
  live: string,
  scratch: string,
  keys: readonly string[],
  budget: number,
): Promise<Map<string, Omit<FrozenMembers, 'existed'>> | { elements: number }> {
  const out = new Map<string, Omit<FrozenMembers, 'existed'>>();
  let elements = 0;
  for (let i = 0; i < keys.length; i += SHAPES_GROUP) {
    const group = keys.slice(i, i + SHAPES_GROUP);
    const shapes = (await keyShapesScript.run(redis, [], [live, scratch, ...group])) as Array<string | number>;
    for (const [j, key] of group.entries()) {
      const [typeA, sizeA, typeB] = [String(shapes[j * 4]), Number(shapes[j * 4 + 1]), String(shapes[j * 4 + 2])];
      if ((typeA !== 'zset' && typeA !== 'set' && typeA !== 'hash') || sizeA <= MEMBER_FREEZE_MIN || (typeB !== typeA && typeB !== 'none')) continue;
      const differing = new Set<string>();
      await differingMembers(redis, typeA, live + key, scratch + key, differing);
      await differingMembers(redis, typeA, scratch + key, live + key, differing);
      elements += differing.size;
      if (elements > budget) return { elements };
      out.set(key, { type: typeA, members: [...differing].sort() });
    }
  }
  return out;
}

/**
 * Add to `into` every member of `from` that `to` lacks or holds with another score or value: a
 * page of {@link MEMBER_PAGE} members per script call, only the differing ones coming back.
 */
async function differingMembers(redis: Redis, type: FrozenMembers['type'], from: string, to: string, into: Set<string>): Promise<void> {
  let cursor = '0';
  do {
    const [next, ...members] = (await differingMembersScript.run(redis, [], [type, from, to, cursor, MEMBER_PAGE])) as string[];
    cursor = next as string;
    for (const member of members) into.add(member);
  } while (cursor !== '0');
}

/** Delete a shadow this rebuild gives up; false when that failed (Redis did not answer), so that its progress entry is kept. */
async function dropOrLeave(backend: RebuildBackend, shadow: Shadow): Promise<boolean> {
  try {
    await backend.dropShadow(shadow.target.name, shadow.generation, shadow.owner);
    return true;
  } catch {
    return false;
  }
}
