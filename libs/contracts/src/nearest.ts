/**
 * The known name nearest to an unknown one — a misspelling (`nxt` → `next`, `NOTIFIER_WEBHOK_URL`
 * → `NOTIFIER_WEBHOOK_URL`): a known name at most a third of the name's length of single-character
 * edits away, the closest one winning (the first of equals, in the order given); undefined when
 * none is that close. The one rule for every "did you mean" Baton says: the definitions' unknown
 * keys, the services' unknown settings.
 */
export function nearestKey(key: string, known: Iterable<string>): string | undefined {
  let nearest: string | undefined;
  let best = Math.floor(key.length / 3) + 1;
  for (const name of known) {
    if (name === key) continue;
    const distance = editDistance(key, name, best);
    if (distance < best) [best, nearest] = [distance, name];
  }
  return nearest;
}

/** Single-character insertions, deletions and substitutions from `a` to `b`; `bound` or more once it is sure to be. */
function editDistance(a: string, b: string, bound: number): number {
  if (Math.abs(a.length - b.length) >= bound) return bound;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      const value = Math.min((previous[j] as number) + 1, (row[j - 1] as number) + 1, (previous[j - 1] as number) + cost);
      row.push(value);
      rowMin = Math.min(rowMin, value);
    }
    if (rowMin >= bound) return bound;
    previous = row;
  }
  return previous[b.length] as number;
}
