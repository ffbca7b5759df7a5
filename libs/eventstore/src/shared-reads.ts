/** Something read from a sequence on: `(fromSeq) => items in stream order`. */
export type SeqSource<T> = (fromSeq: number) => AsyncIterable<T>;

/** Items a reader may run ahead of the slowest reader of the same read before it waits. */
const DEFAULT_WINDOW = 2_048;

/**
 * One read of the underlying source, shared by every reader that joined it. Events are kept from
 * the slowest reader's position onwards (and all of them until the buffer first fills); a reader
 * that would take the buffer past `window` events ahead of the slowest waits. A read can be joined
 * only while it still holds its first event (nothing has been dropped yet).
 */
class SharedRead<T> {
  private readonly buffer: T[] = [];
  /** Index (since the start of the read) of `buffer[0]`. */
  private dropped = 0;
  private readonly positions = new Map<number, number>();
  private nextReader = 0;
  private iterator: AsyncIterator<T> | null = null;
  private pulling: Promise<void> | null = null;
  private ended = false;
  private failure: { error: unknown } | null = null;
  private waiters: Array<() => void> = [];

  constructor(
    private readonly open: () => AsyncIterable<T>,
    private readonly window: number,
  ) {}

  private closed = false;

  /** Whether a new reader can still start at the first event (nothing dropped, not failed, not closed). */
  get joinable(): boolean {
    return this.dropped === 0 && this.failure === null && !this.closed;
  }

  get readers(): number {
    return this.positions.size;
  }

  async *reader(): AsyncGenerator<T> {
    const id = this.nextReader++;
    this.positions.set(id, 0);
    try {
      for (;;) {
        const position = this.positions.get(id) as number;
        const event = await this.eventAt(position);
        if (event === undefined) return;
        this.positions.set(id, position + 1);
        this.trim();
        yield event;
      }
    } finally {
      this.positions.delete(id);
      this.trim();
    }
  }

  /** The event at `position` of the read, pulling (or waiting for the slowest reader) as needed; undefined at the end. */
  private async eventAt(position: number): Promise<T | undefined> {
    for (;;) {
      if (this.failure) throw this.failure.error;
      const index = position - this.dropped;
      if (index < this.buffer.length) return this.buffer[index];
      if (this.ended) return undefined;
      if (this.buffer.length >= this.window && this.slowest() < position) {
        await new Promise<void>((resolve) => this.waiters.push(resolve)); // let the slowest reader catch up
        continue;
      }
      this.pulling ??= this.pull().finally(() => {
        this.pulling = null;
        this.wake();
      });
      await this.pulling;
    }
  }

  private async pull(): Promise<void> {
    try {
      this.iterator ??= this.open()[Symbol.asyncIterator]();
      const next = await this.iterator.next();
      if (next.done) this.ended = true;
      else this.buffer.push(next.value);
    } catch (error) {
      this.failure = { error };
    }
  }

  private slowest(): number {
    let min = Number.POSITIVE_INFINITY;
    for (const position of this.positions.values()) min = Math.min(min, position);
    return min;
  }

  /**
   * Drop the events every reader has passed — only once the buffer is full, so a reader that
   * starts a little later (its rebuild still setting up) can still join at the first event — and
   * wake readers waiting for room.
   */
  private trim(): void {
    const slowest = this.positions.size === 0 ? this.dropped + this.buffer.length : this.slowest();
    const drop = this.buffer.length >= this.window || this.positions.size === 0 ? Math.min(slowest - this.dropped, this.buffer.length) : 0;
    if (drop > 0) {
      this.buffer.splice(0, drop);
      this.dropped += drop;
    }
    if (this.positions.size === 0 && this.nextReader > 0 && !this.closed) {
      // The last reader left: the read is over for good; stop the underlying one.
      this.closed = true;
      if (!this.ended) {
        this.ended = true;
        void Promise.resolve(this.iterator?.return?.()).catch(() => undefined);
      }
    }
    this.wake();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }
}

/**
 * Lets concurrent readers share one read of a stream: calls with the same `fromSeq` made while a
 * read from there is still at its first item join that read, so the stream is read (and decoded,
 * and validated) once for all of them instead of once each — a rebuild of every projection reads
 * the whole stream at the same moment. Readers keep their own pace within `window` items of the
 * slowest; a reader that stops (returns or throws) leaves the read without holding the others. A
 * call that finds no joinable read from its `fromSeq` starts a new one, so a catch-up round of one
 * rebuild never waits for the others. Every reader sees exactly the items `source` yields for that
 * `fromSeq`, in order.
 */
export function shareReads<T>(source: SeqSource<T>, options: { window?: number } = {}): SeqSource<T> {
  const window = Math.max(1, options.window ?? DEFAULT_WINDOW);
  const open = new Map<number, SharedRead<T>>();
  return (fromSeq: number) =>
    (async function* () {
      // Join (or start) the read when iteration begins, so a reader never joins a read whose
      // first items were already dropped.
      let shared = open.get(fromSeq);
      if (!shared || !shared.joinable) {
        shared = new SharedRead<T>(() => source(fromSeq), window);
        open.set(fromSeq, shared);
      }
      const read = shared;
      try {
        yield* read.reader();
      } finally {
        if (open.get(fromSeq) === read && !read.joinable) open.delete(fromSeq);
      }
    })();
}
