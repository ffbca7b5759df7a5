/** A JSON value as it is stored and compared by this library. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * Serialise a JSON value with object keys sorted at every level, so that equal values always give
 * equal strings (used for `json.set` values and for snapshots). `undefined` object members are
 * dropped, as `JSON.stringify` does; non-finite numbers are rejected.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortDeep(value));
}

function sortDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : sortDeep(v)));
  if (typeof value === 'number' && !Number.isFinite(value)) {
    throw new TypeError(`cannot serialise non-finite number ${value} as JSON`);
  }
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) {
      const member = (value as Record<string, unknown>)[key];
      if (member !== undefined) out[key] = sortDeep(member);
    }
    return out;
  }
  return value;
}
