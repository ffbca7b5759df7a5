import type { JsonValue } from '../canonical-json';
import { ProjectionError, RebuildIncompleteError } from '../errors';
import type { FoldTarget, RebuildInfo } from '../rebuilder';
import type { ApplyResult, ProjectionStatus, ProjectionStore, RebuildOptions, RebuildResult, ReplaySource, SequencedEvent } from '../store';
import { PROJECTION_CACHE_BYTES } from './cache-bounds';
import { applyLive, FoldSession, type AnyFoldingProjection } from './fold';
import { RangeFold, type EventRange, type RangeApplyResult, type RangeHooks } from './range';
import { handoffsProjection } from './handoffs';
import { inboxProjection } from './inbox';
import { noticesProjection } from './notices';
import { runsProjection } from './runs';
import { stopsProjection } from './stops';

/** Baton's projections, in the order the notifier applies them: inbox, stops, handoffs, runs, notices. */
export function batonProjections(): AnyFoldingProjection[] {
  return [inboxProjection(), stopsProjection(), handoffsProjection(), runsProjection(), noticesProjection()];
}

export interface ApplyHooks {
  /** Runs just before the event is applied to `projection` (e.g. publish a notice before `notices` records it). */
  beforeApply?: (projection: string, event: SequencedEvent) => Promise<void>;
}

export interface BatonProjectorOptions {
  store: ProjectionStore;
  /** Default: {@link batonProjections}. */
  projections?: AnyFoldingProjection[];
  /** Folded states kept in memory per projection by the live applier (default 10 000). */
  cacheSize?: number;
  /**
   * Folded states kept per projection by `applyRange` (default 2 000). Misses cost little: a
   * range loads every state it lacks in the same script call that reads the last applied seq.
   */
  rangeCacheSize?: number;
  /**
   * Most the states each of those caches keeps per projection may weigh, estimated heap bytes
   * (default {@link PROJECTION_CACHE_BYTES}, 4 MiB); least recently used out first.
   */
  cacheBytes?: number;
}

/** Why a projection was rebuilt at start. */
export type RebuildReason = 'no_active_generation' | 'version_changed' | 'stream_replaced';

/** Options of {@link BatonProjector.ensureCurrent}: a rebuild's, and bounds for lost projections. */
export interface EnsureCurrentOptions extends RebuildOptions {
  /**
   * Per projection name, the last sequence to fold when it is rebuilt because it has no active
   * generation (`no_active_generation`: Redis lost it) or was built by another version of its
   * definition (`version_changed`: never below what that generation has applied); the live applier
   * applies the events after it. Called with those projections' names once the rebuild holds the
   * projector (no `applyRange` runs meanwhile, so nothing the live applier does after the call can
   * be missed by it). The notifier bounds `notices` at what it had published, so that the events no
   * notifier applied — stored while Redis was lost, or while no notifier ran before an upgrade —
   * get their notices from the live applier, and the others none again.
   */
  lostUntil?: (projections: readonly string[]) => Promise<Readonly<Record<string, number>>>;
}

export interface EnsureCurrentResult {
  projection: string;
  reason: RebuildReason;
  result: RebuildResult;
}

/**
 * Applies events to Baton's projections and rebuilds them. One instance per process that applies
 * live events (the notifier); the CLI uses it for rebuilds.
 */
export interface BatonProjector {
  readonly projections: readonly AnyFoldingProjection[];
  /**
   * Apply one event to every projection, in order, each in one atomic script with its seq guard:
   * replays and redeliveries are skipped per projection. Calls are serialised. A Redis error
   * propagates (retrying the same event is safe); states cached for it are evicted.
   */
  apply(event: SequencedEvent, hooks?: ApplyHooks): Promise<Record<string, ApplyResult>>;
  /** The engine's status of every projection. */
  status(): Promise<ProjectionStatus[]>;
  /**
   * The projections whose active generation a newer release built (its stored definition version is
   * above this code's): this process of an older release must neither apply to them nor rebuild
   * them — it stands back until it is upgraded, or the projections are rebuilt to its version.
   * `statuses`: the projections' statuses (`status()`'s, in its order) when the caller has them.
   */
  newerReleases(statuses?: readonly ProjectionStatus[]): Promise<NewerRelease[]>;
  /** The rebuilds running on any of the projections (by this process or another), with their progress. */
  rebuilds(): Promise<RebuildInfo[]>;
  /** Delete the shadows of rebuilds whose process died (lease run out); returns how many. */
  collectAbandoned(): Promise<number>;
  /**
   * Rebuild (from `source`, into a shadow generation swapped in atomically) every projection that
   * has no active generation or whose stored version is not the code's. Returns what it rebuilt.
   * Throws on the first failed rebuild, e.g. `ShadowLostError` when Redis lost its data mid-rebuild;
   * calling it again rebuilds what is still missing.
   */
  ensureCurrent(source: ReplaySource, options?: EnsureCurrentOptions, stream?: () => Promise<EventsStreamMark | null>): Promise<EnsureCurrentResult[]>;
  /**
   * The projections built from an events stream that is gone (recreated: another stream under the
   * same name, its sequences started again), which a rebuild must replace (`replaceAhead`). Each
   * one's status is read, then the stream (`stream`, read after them, so live progress meanwhile
   * cannot look like a new stream); a projection is named when the stream identity it recorded is
   * not this stream's, or when it has applied more than this stream holds. A projection that has
   * recorded no identity yet and is not ahead records this stream's (`adoptStream`): from then on a
   * recreated stream is told apart even once its sequences have passed the old ones.
   */
  builtFromAnotherStream(stream: () => Promise<EventsStreamMark | null>): Promise<string[]>;
  /** Rebuild one projection from `source` (see `ProjectionStore.rebuild`), then forget its cached states. */
  rebuild(name: string, source: ReplaySource, options?: RebuildOptions): Promise<RebuildResult>;
  /**
   * Apply a contiguous range of the stream to every projection at once (see {@link RangeFold}):
   * a few script calls per projection for the whole range instead of one per event, each commit
   * a compare-and-set on the projection's last applied seq, so several appliers (notifier
   * instances) may run at once without ever skipping an event. Throws `ProjectionGapError` when
   * a projection has not applied everything before `range.fromSeq`. Calls are serialised with
   * `apply` and `rebuild`.
   */
  applyRange(range: EventRange, hooks?: RangeHooks): Promise<Record<string, RangeApplyResult>>;
  /**
   * Rebuild every projection (each as {@link rebuild} does: shadow generation, catch-up, atomic
   * swap), all at once over ONE read of `source` (`ProjectionStore.rebuildMany`: folded in memory
   * chunk by chunk, written with bulk commands). Serialised with `apply`, `applyRange` and
   * `rebuild`. If any fails, throws the first error once all have settled.
   */
  rebuildAll(source: ReplaySource, options?: RebuildOptions): Promise<Record<string, RebuildResult>>;
  /** {@link rebuildAll} for the projections named (one read of `source` for all of them). */
  rebuildSome(names: readonly string[], source: ReplaySource, options?: RebuildOptions): Promise<Record<string, RebuildResult>>;
}

/**
 * The events stream as {@link BatonProjector.builtFromAnotherStream} tells one from another: an
 * identity a recreated stream does not share (the server's creation time of the stream) and its last
 * sequence.
 */
export interface EventsStreamMark {
  identity: string;
  lastSeq: number;
}

/** A projection built by a newer release than this code ({@link BatonProjector.newerReleases}). */
export interface NewerRelease {
  projection: string;
  /** This code's definition version. */
  version: number;
  /** The version of the definition that built the active generation. */
  storedVersion: number;
}

/**
 * `status`'s projection as a {@link NewerRelease} when a newer release of its definition built the
 * active generation (stored version above `projection.version`), else null. Versions only grow from
 * one release to the next, so a higher stored version is a later release's: ensureCurrent never
 * rebuilds it back (two releases side by side would otherwise rebuild it to and fro at every check)
 * and the apply script refuses this code's ops on it (`ProjectionVersionError`). Pure.
 */
export function newerRelease(status: ProjectionStatus, projection: Pick<AnyFoldingProjection, 'name' | 'version'>): NewerRelease | null {
  if (status.activeGeneration === null || status.storedVersion === null || status.storedVersion <= projection.version) return null;
  return { projection: projection.name, version: projection.version, storedVersion: status.storedVersion };
}

/** Build a {@link BatonProjector} over a projection store. */
export function createBatonProjector(options: BatonProjectorOptions): BatonProjector {
  const { store } = options;
  const projections = options.projections ?? batonProjections();
  const sessions = new Map<string, FoldSession>();
  const ranges = new Map<string, RangeFold>();
  for (const projection of projections) {
    const reader = store.reader(projection.name);
    const loader = (key: string) => reader.getJson<JsonValue>(key);
    const bytes = options.cacheBytes ?? PROJECTION_CACHE_BYTES;
    sessions.set(projection.name, new FoldSession(projection, 'live', loader, options.cacheSize ?? 10_000, bytes));
    ranges.set(projection.name, new RangeFold(store, projection, options.rangeCacheSize ?? 2_000, bytes));
  }
  const builtFromAnotherStream = async (current: () => Promise<EventsStreamMark | null>): Promise<string[]> => {
    const statuses = await Promise.all(projections.map(async (projection) => ({ name: projection.name, status: await store.status(projection) })));
    // Read after the statuses: a projection cannot have applied more than the stream held then,
    // unless it was built from another stream.
    const stream = await current();
    if (stream === null) return [];
    const replaced: string[] = [];
    for (const { name, status } of statuses) {
      if (status.activeGeneration === null) continue;
      // A newer release's generation is that release's to judge (this code stands back from it).
      const projection = projections.find((p) => p.name === name);
      if (projection && newerRelease(status, projection) !== null) continue;
      if ((status.stream !== null && status.stream !== stream.identity) || status.lastSeq > stream.lastSeq) replaced.push(name);
      else if (status.stream === null) await store.adoptStream(name, status.activeGeneration, stream.identity);
    }
    return replaced;
  };
  let queue: Promise<unknown> = Promise.resolve();
  const serial = <T>(task: () => Promise<T>): Promise<T> => {
    const run = queue.then(task, task);
    queue = run.catch(() => undefined);
    return run;
  };
  const find = (name: string) => {
    const projection = projections.find((p) => p.name === name);
    if (!projection) throw new ProjectionError(`unknown projection ${name}; known: ${projections.map((p) => p.name).join(', ')}`);
    return projection;
  };
  const forget = (names: Iterable<string>) => {
    for (const name of names) {
      sessions.get(name)?.clear();
      ranges.get(name)?.invalidate();
    }
  };
  /**
   * Rebuild `list` together over one read of `source` (each projection settles on its own; the
   * first failure, e.g. ShadowLostError when Redis lost its data, is thrown once all have
   * settled), then forget the states cached for them.
   */
  const rebuildList = async (
    list: readonly AnyFoldingProjection[],
    source: ReplaySource,
    rebuildOptions?: RebuildOptions,
  ): Promise<Record<string, RebuildResult>> => {
    let results: Record<string, RebuildResult>;
    try {
      results = await store.rebuildMany(list as unknown as FoldTarget[], source, rebuildOptions);
    } catch (error) {
      forget(list.map((p) => p.name));
      // The ones swapped in before the others failed are live: close their hand-over gaps too.
      if (error instanceof RebuildIncompleteError) await applyHandedOver(list, source, error.settled);
      throw error;
    }
    forget(list.map((p) => p.name));
    await applyHandedOver(list, source, results);
    return results;
  };
  /**
   * A projection handed over behind its live generation (live traffic kept it ahead through the
   * catch-up rounds) gets the events in between at once, from one read of the stream, through the
   * live path's seq-guarded range apply — what a notifier's next range would apply, and never twice
   * (no notices: the previous generation's applier sent them).
   */
  const applyHandedOver = async (list: readonly AnyFoldingProjection[], source: ReplaySource, results: Record<string, RebuildResult>) => {
    const gaps = list.flatMap((p) => {
      const result = results[p.name];
      return result?.status === 'swapped' && result.handedOver ? [{ name: p.name, ...result.handedOver }] : [];
    });
    if (gaps.length === 0) return;
    const toSeq = Math.max(...gaps.map((g) => g.toSeq));
    const events: SequencedEvent[] = [];
    for await (const event of source(Math.min(...gaps.map((g) => g.fromSeq)))) {
      if (event.seq > toSeq) break;
      events.push(event);
    }
    await Promise.all(
      gaps.map((gap) =>
        (ranges.get(gap.name) as RangeFold).apply({
          fromSeq: gap.fromSeq,
          toSeq: gap.toSeq,
          events: events.filter((e) => e.seq >= gap.fromSeq && e.seq <= gap.toSeq),
        }),
      ),
    );
  };
  return {
    projections,
    apply(event, hooks) {
      return serial(async () => {
        for (const range of ranges.values()) range.invalidate();
        const results: Record<string, ApplyResult> = {};
        for (const projection of projections) {
          if (hooks?.beforeApply) await hooks.beforeApply(projection.name, event);
          results[projection.name] = await applyLive(store, sessions.get(projection.name) as FoldSession, event);
        }
        return results;
      });
    },
    status() {
      return Promise.all(projections.map((p) => store.status(p)));
    },
    async newerReleases(statuses) {
      const read = statuses ?? (await Promise.all(projections.map((p) => store.status(p))));
      return projections.flatMap((p, i) => {
        const found = read[i] === undefined ? null : newerRelease(read[i], p);
        return found === null ? [] : [found];
      });
    },
    async rebuilds() {
      return (await Promise.all(projections.map((p) => store.rebuilds(p.name)))).flat();
    },
    async collectAbandoned() {
      let dropped = 0;
      for (const p of projections) dropped += await store.collectAbandoned(p.name);
      return dropped;
    },
    builtFromAnotherStream,
    async ensureCurrent(source, rebuildOptions, stream) {
      const stale: Array<{ projection: AnyFoldingProjection; reason: RebuildReason; lastSeq: number }> = [];
      const replacedNames = new Set(stream ? await builtFromAnotherStream(stream) : []);
      for (const projection of projections) {
        const status = await store.status(projection);
        // Built by a newer release: never rebuilt back to this older definition (see `newerRelease`).
        if (newerRelease(status, projection) !== null) continue;
        const reason: RebuildReason | null =
          status.activeGeneration === null
            ? 'no_active_generation'
            : status.storedVersion !== projection.version
              ? 'version_changed'
              : replacedNames.has(projection.name)
                ? 'stream_replaced'
                : null;
        if (reason !== null) stale.push({ projection, reason, lastSeq: status.lastSeq });
      }
      if (stale.length === 0) return [];
      const replaced = stale.some(({ reason }) => reason === 'stream_replaced');
      const { lostUntil, ...options } = rebuildOptions ?? {};
      // Bounded: what Redis lost, and what another version built (from what it had applied on).
      const bounded = stale.filter(({ reason }) => reason === 'no_active_generation' || reason === 'version_changed');
      const lost = bounded.map(({ projection }) => projection.name);
      // Rebuild the stale ones together over one read of the stream.
      const results = await serial(async () => {
        const bounds = lostUntil && lost.length > 0 ? await lostUntil(lost) : {};
        const untilSeq = Object.fromEntries(
          bounded.flatMap(({ projection, lastSeq }) => {
            const bound = bounds[projection.name];
            return bound === undefined ? [] : [[projection.name, Math.max(bound, lastSeq)]];
          }),
        );
        return rebuildList(
          stale.map(({ projection }) => projection),
          source,
          {
            ...options,
            ...(replaced ? { replaceAhead: true } : {}),
            ...(Object.keys(untilSeq).length > 0 ? { untilSeq } : {}),
          },
        );
      });
      return stale.map(({ projection, reason }) => ({ projection: projection.name, reason, result: results[projection.name] as RebuildResult }));
    },
    async rebuild(name, source, rebuildOptions) {
      const projection = find(name);
      return (await serial(() => rebuildList([projection], source, rebuildOptions)))[name] as RebuildResult;
    },
    rebuildAll(source, rebuildOptions) {
      // Every projection at once over one read of the stream (read, decoded and validated once).
      return serial(() => rebuildList(projections, source, rebuildOptions));
    },
    rebuildSome(names, source, rebuildOptions) {
      const list = names.map(find);
      return serial(() => rebuildList(list, source, rebuildOptions));
    },
    applyRange(range, hooks) {
      if (!Number.isSafeInteger(range.fromSeq) || range.fromSeq < 1 || range.toSeq < range.fromSeq) {
        return Promise.reject(new ProjectionError(`invalid range #${range.fromSeq}..#${range.toSeq}`));
      }
      let previous = range.fromSeq - 1;
      for (const event of range.events) {
        if (event.seq <= previous || event.seq > range.toSeq) {
          return Promise.reject(new ProjectionError(`range #${range.fromSeq}..#${range.toSeq}: event #${event.seq} is out of order or outside it`));
        }
        previous = event.seq;
      }
      return serial(async () => {
        for (const session of sessions.values()) session.clear();
        // Projections write disjoint keyspaces: commit them concurrently (one round trip each, pipelined).
        const results = await Promise.all(projections.map((projection) => (ranges.get(projection.name) as RangeFold).apply(range, hooks)));
        return Object.fromEntries(results.map((result) => [result.projection, result]));
      });
    },
  };
}
