import { heapWeight, LruCache } from '@baton/eventstore';
import { PROJECTION_CACHE_BYTES } from './cache-bounds';
import type { JsonValue } from '../canonical-json';
import { ProjectionError } from '../errors';
import { Op } from '../ops';
import type { PreparedEvent, ProjectionStore, SequencedEvent } from '../store';
import { toJson, type AnyFoldingProjection, type FoldingProjection } from './fold';

/**
 * A contiguous stretch of the events stream: every sequence from `fromSeq` to `toSeq`. `events`
 * holds the decodable events among them in increasing seq order; a sequence without an event (a
 * message that does not decode and was dead-lettered, or no message at all) is applied as a no-op,
 * so the projections' last applied seq still moves past it.
 */
export interface EventRange {
  fromSeq: number;
  toSeq: number;
  events: readonly SequencedEvent[];
}

export interface RangeHooks {
  /**
   * Runs once a projection knows which events of the range it has not applied yet, just before it
   * commits them (e.g. publish the human action notices the `notices` projection is about to
   * record). Runs again if the commit has to be retried.
   */
  beforeCommit?: (projection: string, events: readonly SequencedEvent[]) => Promise<void>;
  /**
   * Projections whose `beforeCommit` acts outside Redis (publishes notices): their events to commit
   * are taken from where the projection stands in Redis, read for this range, never from this
   * applier's cache of its own last commit — another applier may have committed since, and its
   * events must not be acted on twice. The others keep the cache (their commit's compare-and-set
   * catches a stale one, and nothing outside Redis happened).
   */
  verified?: readonly string[];
}

export interface RangeApplyResult {
  projection: string;
  /** `applied`: this call committed the events; `current`: the projection had them already. */
  status: 'applied' | 'current';
  lastSeq: number;
  /** Events of the range this call committed (0 when `current`). */
  events: number;
  /** Commits refused because another applier (or a rebuild swap) moved the projection first. */
  retries: number;
}

/** The projection has not applied the stream up to just before the range: applying it would leave a hole. */
export class ProjectionGapError extends ProjectionError {
  constructor(
    readonly projection: string,
    readonly lastSeq: number,
    readonly fromSeq: number,
  ) {
    super(`projection ${projection} has applied up to #${lastSeq}; a range from #${fromSeq} would leave a hole`);
    this.name = 'ProjectionGapError';
  }
}

/**
 * The projection has no active generation while the range starts past the stream's first event:
 * the events before the range were applied (their messages delivered and acknowledged) into a
 * generation Redis no longer holds (a flush, a restart without persistence, a failover to an empty
 * replica). Applying the range from an empty keyspace would rebuild it event by event as if the
 * deployment were new, repeating every side effect of the applier (the notifier's notices) for the
 * whole history: nothing is written; the projection is the rebuild's to restore.
 */
export class ProjectionLostError extends ProjectionError {
  constructor(
    readonly projection: string,
    readonly fromSeq: number,
  ) {
    super(`projection ${projection} has no active generation (Redis lost it); a range from #${fromSeq} waits for its rebuild`);
    this.name = 'ProjectionLostError';
  }
}

/** Most commits one range tries before giving up while other appliers keep moving the projection. */
const MAX_ATTEMPTS = 8;

/**
 * Applies contiguous ranges of the events stream to one folding projection, many events per
 * script call, correct with any number of appliers at once:
 *
 * - the folded states the range builds on and the projection's last applied seq are read in ONE
 *   atomic call, the events after that seq are folded in memory, and the ops are committed with
 *   that seq as the expectation (compare-and-set, `ProjectionStore.applyIfAt`). If another applier
 *   committed in between, nothing is written and the range is folded again from what is stored;
 * - a range must start at most one past the projection's last applied seq
 *   ({@link ProjectionGapError} otherwise), so a commit never leaves a hole that the seq guard
 *   would later skip: the last applied seq always means "everything up to here";
 * - a range past the stream's first event never creates the active generation
 *   ({@link ProjectionLostError}): a projection that has none there was lost, not new;
 * - folded states are cached between ranges and trusted only while the projection still stands
 *   exactly where this applier's last commit left it.
 */
export class RangeFold {
  private readonly states: LruCache<string, JsonValue | null>;
  private validAt: { generation: number; lastSeq: number } | null = null;

  constructor(
    private readonly store: ProjectionStore,
    readonly projection: AnyFoldingProjection,
    cacheSize = 10_000,
    cacheBytes: number = PROJECTION_CACHE_BYTES,
  ) {
    this.states = new LruCache<string, JsonValue | null>(cacheSize, { max: cacheBytes, of: heapWeight });
  }

  /** Forget every cached state (another path wrote the projection). */
  invalidate(): void {
    this.states.clear();
    this.validAt = null;
  }

  /** Apply `range` (see the class comment). Redis errors propagate; retrying the same range is safe. */
  async apply(range: EventRange, hooks?: RangeHooks): Promise<RangeApplyResult> {
    const fp = this.projection as FoldingProjection<JsonValue>;
    const def = { name: fp.name, version: fp.version };
    const keys = [
      ...new Set(
        range.events
          .filter((e) => fp.handles(e.type))
          .map((e) => fp.stateKeyOf(e))
          .filter((k): k is string => k !== null),
      ),
    ];
    let retries = 0;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const cachedValid = this.validAt !== null;
      const first = keys.filter((key) => !cachedValid || this.states.get(key) === undefined);
      // Every state the range needs is cached and this applier's last commit ends just before
      // the range (one notifier, or the other's commits interleaving rarely): nothing to read. The
      // commit's compare-and-set still checks the projection stands there; if another applier
      // moved it, the commit writes nothing and the next attempt reads.
      const trusted =
        attempt === 0 && first.length === 0 && this.validAt !== null && this.validAt.lastSeq === range.fromSeq - 1 && !hooks?.verified?.includes(fp.name);
      const loaded = trusted && this.validAt !== null ? { ...this.validAt, values: [] } : await this.store.load(fp.name, first);
      if (loaded.generation === null && range.fromSeq > 1) throw new ProjectionLostError(fp.name, range.fromSeq);
      if (loaded.lastSeq >= range.toSeq) return { projection: fp.name, status: 'current', lastSeq: loaded.lastSeq, events: 0, retries };
      if (loaded.lastSeq < range.fromSeq - 1) throw new ProjectionGapError(fp.name, loaded.lastSeq, range.fromSeq);
      const priors = new Map<string, JsonValue | null>();
      first.forEach((key, i) => priors.set(key, parse(loaded.values[i] ?? null)));
      if (!this.validAt || this.validAt.generation !== loaded.generation || this.validAt.lastSeq !== loaded.lastSeq) {
        // Someone else wrote since this applier's last commit: nothing cached can be trusted.
        this.states.clear();
        const rest = keys.filter((key) => !priors.has(key));
        if (rest.length > 0) {
          const again = await this.store.load(fp.name, rest);
          if (again.generation !== loaded.generation || again.lastSeq !== loaded.lastSeq) {
            retries++;
            continue;
          }
          rest.forEach((key, i) => priors.set(key, parse(again.values[i] ?? null)));
        }
      }
      const stateOf = (key: string): JsonValue | null => {
        if (priors.has(key)) return priors.get(key) ?? null;
        return this.states.get(key) ?? null;
      };
      const working = new Map<string, JsonValue | null>();
      const pending = range.events.filter((event) => event.seq > loaded.lastSeq);
      const prepared: PreparedEvent[] = [];
      for (const event of pending) {
        if (!fp.handles(event.type)) {
          prepared.push({ seq: event.seq, ops: [] });
          continue;
        }
        const key = fp.stateKeyOf(event);
        const prior = key === null ? null : working.has(key) ? (working.get(key) ?? null) : stateOf(key);
        const step = fp.step(prior, event);
        const ops = [...step.ops];
        if (key !== null && step.state !== undefined) {
          const next = step.state === null ? null : toJson(step.state);
          ops.push(next === null ? Op.del(key) : Op.jsonSet(key, next));
          working.set(key, next);
        }
        prepared.push({ seq: event.seq, ops });
      }
      // Sequences after the last event (no-ops) still count as applied.
      if ((prepared.at(-1)?.seq ?? loaded.lastSeq) < range.toSeq) prepared.push({ seq: range.toSeq, ops: [] });
      await hooks?.beforeCommit?.(fp.name, pending);
      const result = await this.store.applyIfAt(def, prepared, loaded.lastSeq);
      if (result.status === 'applied') {
        for (const [key, value] of priors) this.states.set(key, value);
        for (const [key, value] of working) this.states.set(key, value);
        this.validAt = { generation: result.generation, lastSeq: result.lastSeq };
        return { projection: fp.name, status: 'applied', lastSeq: result.lastSeq, events: pending.length, retries };
      }
      retries++;
      this.invalidate();
    }
    throw new ProjectionError(
      `projection ${fp.name}: other appliers kept moving it; gave up on #${range.fromSeq}..#${range.toSeq} after ${MAX_ATTEMPTS} attempts`,
    );
  }
}

function parse(raw: string | null): JsonValue | null {
  return raw === null ? null : (JSON.parse(raw) as JsonValue);
}
