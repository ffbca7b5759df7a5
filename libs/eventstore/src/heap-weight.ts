/**
 * Estimated bytes a JSON-shaped value takes on a 64-bit V8 heap (Node 20, no pointer
 * compression): an object 24 bytes and 8 per property, an array 32 and 8 per element, a string
 * 16 and one per character, a number that is not a small integer 16. Hidden classes are not
 * counted (values of one shape share theirs), nor is sharing: a string or sub-object reachable
 * twice counts twice, so the estimate errs high where a state shares what an event brought.
 *
 * An object with a `Symbol.for('baton.heapWeight')` method is weighed by what that returns (a value
 * that keeps more than it shows: a run's processed ids and their look-up map); else one with a
 * `toJSON` method by what `toJSON` returns. A `Map` or `Set` weighs 24 bytes and about 32 per entry
 * (V8's ordered hash tables: the entry, its chain link and the bucket share), plus its keys and values.
 *
 * Used to bound the event store's fold cache by bytes; the walk is iterative (a deep value cannot
 * overflow the stack) and stops counting at `limit`, so its cost is bounded by the caller.
 */
export function heapWeight(value: unknown, limit = Number.MAX_SAFE_INTEGER): number {
  let total = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0 && total < limit) {
    const next = pending.pop();
    switch (typeof next) {
      case 'string':
        total += 16 + next.length;
        break;
      case 'number':
        if (!Number.isInteger(next) || next > SMI_MAX || next < SMI_MIN) total += 16;
        break;
      case 'object':
        if (next === null) break;
        if (Array.isArray(next)) {
          total += 32 + 8 * next.length;
          for (let i = 0; i < next.length; i++) pending.push(next[i]);
        } else if (typeof (next as { [WEIGHED_AS]?: unknown })[WEIGHED_AS] === 'function') {
          total += 24;
          pending.push((next as { [WEIGHED_AS](): unknown })[WEIGHED_AS]());
        } else if (next instanceof Map) {
          total += 24 + MAP_ENTRY_BYTES * next.size;
          for (const [key, entry] of next) pending.push(key, entry);
        } else if (next instanceof Set) {
          total += 24 + MAP_ENTRY_BYTES * next.size;
          for (const member of next) pending.push(member);
        } else if (typeof (next as { toJSON?: unknown }).toJSON === 'function') {
          // A value with a JSON form of its own (a run's processed ids: their history is not
          // enumerable) weighs what that form weighs, and at least an object.
          total += 24;
          pending.push((next as { toJSON(): unknown }).toJSON());
        } else {
          for (const key in next) {
            total += 8;
            pending.push((next as Record<string, unknown>)[key]);
          }
          total += 24;
        }
        break;
      default:
        // booleans, undefined: immediates
        break;
    }
  }
  return total;
}

/** The method a value weighs itself by instead of its properties (see {@link heapWeight}). */
const WEIGHED_AS: unique symbol = Symbol.for('baton.heapWeight');

/** Estimated bytes one entry of a `Map` or `Set` adds besides its key and value. */
const MAP_ENTRY_BYTES = 32;

/** V8's small integers on 64-bit builds without pointer compression are 32-bit. */
const SMI_MAX = 2 ** 31 - 1;
const SMI_MIN = -(2 ** 31);
