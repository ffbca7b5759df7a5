import type { EventEnvelope } from '@baton/contracts';
import { heapWeight, LruCache } from '@baton/eventstore';
import { PROJECTION_CACHE_BYTES } from './cache-bounds';
import { toJsonValue, type JsonValue } from '../canonical-json';
import { ProjectionError } from '../errors';
import { Op, type ProjectionOp } from '../ops';
import type { ApplyResult, ProjectionDefinition, ProjectionStore, SequencedEvent } from '../store';

/** What one event does to a folding projection: the next folded state (undefined = unchanged) and the ops. */
export interface FoldStep<S> {
  /** The next folded state of the event's fold key; `null` deletes it, `undefined` leaves it as it was. */
  state?: S | null;
  ops: ProjectionOp[];
}

/**
 * A projection that needs the state of the aggregate an event belongs to (a handoff's record is a
 * fold of all its events). The folded state lives in the projection's own keyspace, under
 * `stateKeyOf(event)`, and is written in the same atomic apply as the event's other ops, so it is
 * always exactly the fold of the events the projection has applied. `step` must be a pure
 * function of (prior state, event): that is what makes a rebuild equal to the live projection.
 */
export interface FoldingProjection<S extends JsonValue = JsonValue> {
  readonly name: string;
  /** Bump when `step` changes what it writes; the notifier then rebuilds the projection at start. */
  readonly version: number;
  handles(eventType: string): boolean;
  /** The key (relative to the projection) holding the folded state this event needs, or null if it needs none. */
  stateKeyOf(event: SequencedEvent): string | null;
  step(prior: S | null, event: SequencedEvent): FoldStep<S>;
}

/** Any Baton projection (the handoff/run views, the inbox, stop packets). */
export type AnyFoldingProjection = FoldingProjection<never> | FoldingProjection<JsonValue>;

type Loader = (key: string) => Promise<JsonValue | null>;

/**
 * Runs a {@link FoldingProjection} through the engine. The engine's `apply` is synchronous and
 * reads nothing, so the prior state of the event's fold key is looked up before the apply (from an
 * in-memory cache, or the active generation on a miss) and handed to `step` through a closure.
 *
 * - live mode: `prime(event)` loads the prior state; after `store.apply` the caller reports the
 *   outcome with `settle`: an applied event commits the new state to the cache, a skipped one (the
 *   active generation already had it: a redelivery, or a rebuild swapped in meanwhile) evicts the
 *   key so the next event reloads it from Redis.
 * - rebuild mode: a rebuild replays the whole stream from seq 1 into an empty shadow generation,
 *   so a key never seen before has no state; states are kept in memory for the pass.
 */
export class FoldSession {
  private readonly states: LruCache<string, JsonValue | null> | Map<string, JsonValue | null>;
  private staged: { key: string; state: JsonValue | null } | null = null;
  readonly definition: ProjectionDefinition;

  constructor(
    readonly projection: AnyFoldingProjection,
    private readonly mode: 'live' | 'rebuild',
    private readonly loader: Loader | null,
    cacheSize = 10_000,
    cacheBytes: number = PROJECTION_CACHE_BYTES,
  ) {
    this.states =
      mode === 'live' ? new LruCache<string, JsonValue | null>(cacheSize, { max: cacheBytes, of: heapWeight }) : new Map<string, JsonValue | null>();
    const fp = projection as FoldingProjection<JsonValue>;
    this.definition = {
      name: fp.name,
      version: fp.version,
      handles: (type) => fp.handles(type),
      apply: (event) => this.applyStep(fp, event),
    };
  }

  /** Live mode: make sure the prior state of `event`'s fold key is in the cache. */
  async prime(event: SequencedEvent): Promise<void> {
    if (this.mode !== 'live' || !this.projection.handles(event.type)) return;
    const key = this.projection.stateKeyOf(event);
    if (key === null || this.states.get(key) !== undefined) return;
    if (!this.loader) throw new ProjectionError(`projection ${this.projection.name}: no loader for live mode`);
    this.states.set(key, await this.loader(key));
  }

  /** Live mode: record what the engine did with the event `prime`d last. */
  settle(result: ApplyResult | 'failed'): void {
    const staged = this.staged;
    this.staged = null;
    if (!staged) return;
    if (result !== 'failed' && result.status === 'applied') this.states.set(staged.key, staged.state);
    else this.states.delete(staged.key);
  }

  /** Forget every cached state (after a rebuild swapped a new generation in). */
  clear(): void {
    this.states.clear();
    this.staged = null;
  }

  private applyStep(fp: FoldingProjection<JsonValue>, event: SequencedEvent<EventEnvelope>): ProjectionOp[] {
    const key = fp.stateKeyOf(event);
    let prior: JsonValue | null = null;
    if (key !== null) {
      const cached = this.states.get(key);
      if (cached === undefined && this.mode === 'live') {
        throw new ProjectionError(`projection ${fp.name}: state ${key} was not primed before seq ${event.seq}`);
      }
      prior = cached ?? null;
    }
    const result = fp.step(prior, event);
    const ops = [...result.ops];
    if (key !== null && result.state !== undefined) {
      const next = result.state === null ? null : toJson(result.state);
      ops.push(next === null ? Op.del(key) : Op.jsonSet(key, next));
      if (this.mode === 'rebuild') this.states.set(key, next);
      else this.staged = { key, state: next };
    }
    return ops;
  }
}

/**
 * What Redis will hold and a reload will return: a JSON copy without `undefined` members. A value
 * that already is exactly that (`isExactJson`: plain data, no `undefined` member, no -0) is
 * returned as it is, without the copy — folds and projections are pure and never mutate what they
 * were given or returned, so sharing it is safe and saves a serialise-and-parse per event.
 */
export function toJson<T>(value: T): JsonValue {
  return toJsonValue(value);
}

/**
 * Apply one event to a folding projection live: prime, apply atomically (seq guard), settle.
 * Idempotent: an event at or below the projection's last applied seq writes nothing.
 */
export async function applyLive(store: ProjectionStore, session: FoldSession, event: SequencedEvent): Promise<ApplyResult> {
  await session.prime(event);
  let result: ApplyResult;
  try {
    result = await store.apply(session.definition, event);
  } catch (error) {
    session.settle('failed');
    throw error;
  }
  session.settle(result);
  return result;
}
