import { nearestKey } from '@baton/contracts';

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
