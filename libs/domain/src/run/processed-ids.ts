/**
 * The ids a run has applied — results, answers, messages, stop packets — for idempotency: every
 * decision and every fold of such an event asks whether an id is in them, and each applied one
 * adds an id. Immutable, as states are: `with` returns a new value and leaves this one as it was.
 *
 * Appending to an array by copying it (what this replaced) made a fold of a run cost the square of
 * its ids — 20 000 ids, about 9 s of one core; a run's refused results are recorded too, so any
 * agent of the project could grow one run until a cold fold stalled the router. Here the values
 * grown from one another share one history: `with` on the newest value appends to it in place (the
 * values before only ever read up to their own length), and `has` is one map look-up. A value
 * grown from an older one (a decision on an earlier state) starts a history of its own, copied.
 */
interface IdHistory {
  readonly ids: string[];
  /** Where each id of `ids` was appended. */
  readonly at: Map<string, number>;
}

export class ProcessedIds implements Iterable<string> {
  /** The shared history (not enumerable: two values of equal ids are equal, whatever they share). */
  declare private readonly history: IdHistory;
  readonly length: number;

  private constructor(history: IdHistory, length: number) {
    Object.defineProperty(this, 'history', { value: history });
    this.length = length;
  }

  /** The ids of `ids`, each once, in order. */
  static of(ids: Iterable<string>): ProcessedIds {
    const history: IdHistory = { ids: [], at: new Map() };
    for (const id of ids) {
      if (history.at.has(id)) continue;
      history.at.set(id, history.ids.length);
      history.ids.push(id);
    }
    return new ProcessedIds(history, history.ids.length);
  }

  has(id: string): boolean {
    const at = this.history.at.get(id);
    return at !== undefined && at < this.length;
  }

  /** Same as {@link has}, as arrays name it. */
  includes(id: string): boolean {
    return this.has(id);
  }

  /** These ids and `id` (this value when it holds `id` already). */
  with(id: string): ProcessedIds {
    const at = this.history.at.get(id);
    if (at !== undefined && at < this.length) return this;
    let history = this.history;
    // Another value grown from this one by the same id first (the router's decision evolves the
    // state it decides on, then the store folds the same event onto it) shares the history: it
    // holds exactly these ids and `id`. Copying it there cost a hop the whole history, and kept two.
    if (at === this.length) return new ProcessedIds(history, this.length + 1);
    if (history.ids.length !== this.length) {
      // Another value was grown from this one already: a history of this branch's own.
      const ids = history.ids.slice(0, this.length);
      history = { ids, at: new Map(ids.map((known, i) => [known, i])) };
    }
    history.at.set(id, history.ids.length);
    history.ids.push(id);
    return new ProcessedIds(history, this.length + 1);
  }

  *[Symbol.iterator](): Iterator<string> {
    for (let i = 0; i < this.length; i++) yield this.history.ids[i] as string;
  }

  /**
   * What the event store's byte bound weighs for this value (`heapWeight`): the whole history it
   * shares, the look-up map included — not its JSON form, which leaves the map out.
   */
  [Symbol.for('baton.heapWeight')](): unknown {
    return this.history;
  }

  /** As JSON: the ids, in order. */
  toJSON(): string[] {
    return this.history.ids.slice(0, this.length);
  }
}
