/** A bound on what an {@link LruCache}'s entries weigh together (bytes, say), besides their count. */
export interface LruWeightBound<V> {
  /** Most the entries may weigh together; the entry used last is kept even when it alone weighs more. */
  max: number;
  /** An entry's weight, unless `set` is given one: a finite number ≥ 0. */
  of: (value: V) => number;
}

/**
 * A small least-recently-used map. `get` refreshes an entry; `set` evicts the oldest entries once
 * there are more than `capacity` of them or, with a weight bound, once they weigh more than its
 * `max` (never the entry just set: a value heavier than the bound is kept alone rather than not
 * at all). Used to cache folded aggregate state; a miss is always safe (the state is rebuilt from
 * the stream). A map whose entries must not vanish unseen (counts still to be reported) is told of
 * each eviction through `onEvict`.
 */
export class LruCache<K, V> {
  private readonly entries = new Map<K, V>();
  private readonly weigh: ((value: V) => number) | null;
  /** Each entry's weight as it was set (with a weight bound). */
  private readonly weights = new Map<K, number>();
  private total = 0;
  private evictions = 0;
  private readonly onEvict: ((key: K, value: V) => void) | null;
  /** Most the entries may weigh together (Infinity without a weight bound). */
  readonly maxWeight: number;

  constructor(
    readonly capacity: number,
    bound?: LruWeightBound<V>,
    /** Called with each entry evicted to keep within the bounds (never for `delete`, `clear` or a replaced key), once it is gone. */
    onEvict?: (key: K, value: V) => void,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error('LRU capacity must be a positive integer');
    if (bound && !(bound.max > 0)) throw new Error('LRU weight bound must be a positive number');
    this.weigh = bound?.of ?? null;
    this.maxWeight = bound?.max ?? Infinity;
    this.onEvict = onEvict ?? null;
  }

  get size(): number {
    return this.entries.size;
  }

  /** What the entries weigh together (0 without a weight bound). */
  get weight(): number {
    return this.total;
  }

  /** Entries evicted to keep within the bounds, since the cache was made. */
  get evicted(): number {
    return this.evictions;
  }

  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, value);
    return value;
  }

  /**
   * Set `key`, the most recently used entry now. With a weight bound its weight is `weight` when
   * given (the caller knows it cheaply, e.g. the length of the text it was parsed from), else the
   * bound's `of(value)`.
   */
  set(key: K, value: V, weight?: number): void {
    const w = this.weigh ? this.checked(weight ?? this.weigh(value)) : 0;
    this.delete(key);
    this.entries.set(key, value);
    if (this.weigh) {
      this.weights.set(key, w);
      this.total += w;
    }
    while (this.entries.size > this.capacity || (this.total > this.maxWeight && this.entries.size > 1)) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      const value = this.entries.get(oldest.value) as V;
      this.delete(oldest.value);
      this.evictions++;
      this.onEvict?.(oldest.value, value);
    }
  }

  /** The entries, least recently used first, without refreshing any (a saved copy set again in this order ages alike). */
  *oldestFirst(): IterableIterator<[K, V]> {
    yield* this.entries;
  }

  delete(key: K): void {
    if (this.weigh) {
      const weight = this.weights.get(key);
      if (weight !== undefined) {
        this.total -= weight;
        this.weights.delete(key);
      }
    }
    this.entries.delete(key);
    if (this.entries.size === 0) this.total = 0;
  }

  clear(): void {
    this.entries.clear();
    this.weights.clear();
    this.total = 0;
  }

  private checked(weight: number): number {
    if (!Number.isFinite(weight) || weight < 0) throw new Error(`LRU entry weight must be a finite number ≥ 0, got ${weight}`);
    return weight;
  }
}
