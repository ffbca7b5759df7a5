/**
 * The known key nearest to an unknown one — a misspelling (`nxt` → `next`, `max_iteration` →
 * `max_iterations`) — for the diagnostics of unknown keys. The rule of the services' own check of
 * their environment (`unknownOwnVariables` in libs/platform, which this library may not import):
 * a known key at most a third of the key's length of single-character edits away, the closest one
 * winning (the first of equals, in the order given).
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

/**
 * ` (did you mean 'next'?)` for an unknown key as written (`raw`; `key` is its normalized form, read
 * against the normalized `known` keys), the suggestion spelt in the key's own style: `NXT` →
 * `NEXT`, `maxIteration` → `maxIterations`, `max_iteration` → `max_iterations`. Empty when no known
 * key is close.
 */
export function didYouMean(raw: string, key: string, known: Iterable<string>): string {
  const nearest = nearestKey(key, known);
  return nearest === undefined ? '' : ` (did you mean '${inStyleOf(raw, nearest)}'?)`;
}

/** A snake_case key written as `raw` is written: all capitals, camelCase, or as it is. */
function inStyleOf(raw: string, key: string): string {
  if (/[A-Z]/.test(raw) && !/[a-z]/.test(raw)) return key.toUpperCase();
  if (/[a-z0-9][A-Z]/.test(raw) && !raw.includes('_')) return key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
  return key;
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
