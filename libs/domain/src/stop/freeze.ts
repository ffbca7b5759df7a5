import { setOwn } from '@baton/contracts';

// Frozen copies and digests of the pending tool call. A stop packet must never hold the caller's
// live args object (seed 003: "If you embed the live args dict, you failed freeze-payload again —
// copy"), and an operator's answer must name exactly the call they saw (the stale check).

/**
 * A deep, JSON-normal copy of `value`, recursively `Object.freeze`d. JSON semantics: `undefined`,
 * functions and symbols are dropped from objects (and become `null` in arrays), non-finite
 * numbers become `null` (and -0 becomes 0), a value with `toJSON` (a Date) is copied as what `toJSON` returns, a
 * bigint becomes its decimal string. A `__proto__` key is copied as an own property, never as a
 * prototype. Pure; throws a TypeError only for a cyclic value (a programmer error: a packet is JSON).
 */
export function frozenJsonCopy(value: unknown): unknown {
  return normalize(value, new Set(), true);
}

/** The same JSON normalisation as {@link frozenJsonCopy}, without freezing. */
export function jsonCopy(value: unknown): unknown {
  return normalize(value, new Set(), false);
}

/**
 * Serialises a JSON-normal value with object keys sorted, so two equal values always give the
 * same text whatever their key order. Input is normalised first (see {@link frozenJsonCopy}).
 *
 * Keys are in code-unit order at every level, integer-like keys included. This text is a stored
 * format: a stop packet's `pending_digest` is its hash, and an answer's digest is checked against
 * one recomputed from the stored call, so it never changes. Not the projections' `canonicalJson`
 * (`libs/projections/src/canonical-json.ts`), which leaves integer-like keys in ascending numeric
 * order first (as `JSON.stringify` writes them) and whose output is stored in Redis: making one
 * the other would change stored digests or stored values.
 */
export function stableStringify(value: unknown): string {
  return write(normalize(value, new Set(), false));
}

/**
 * 64-bit FNV-1a over the UTF-8 bytes of `text`, as 16 lowercase hex digits. Not a security hash:
 * it detects that an answer was made against a different frozen call, nothing more.
 */
export function fnv1a64(text: string): string {
  const prime = 0x100000001b3n;
  let hash = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= BigInt(byte);
    hash = BigInt.asUintN(64, hash * prime);
  }
  return hash.toString(16).padStart(16, '0');
}

function normalize(value: unknown, onPath: Set<object>, freeze: boolean): unknown {
  if (value === null) return null;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value)) return null;
      return Object.is(value, -0) ? 0 : value;
    case 'bigint':
      return value.toString();
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
    case 'object':
      return normalizeObject(value, onPath, freeze);
    default:
      return undefined;
  }
}

function normalizeObject(value: object, onPath: Set<object>, freeze: boolean): unknown {
  const withJson = value as { toJSON?: unknown };
  if (typeof withJson.toJSON === 'function') {
    return normalize((withJson.toJSON as () => unknown).call(value), onPath, freeze);
  }
  if (onPath.has(value)) throw new TypeError('a stop packet holds JSON: the value is cyclic');
  onPath.add(value);
  let out: unknown[] | Record<string, unknown>;
  if (Array.isArray(value)) {
    out = value.map((item: unknown) => {
      const copied = normalize(item, onPath, freeze);
      return copied === undefined ? null : copied;
    });
  } else {
    const record: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      const copied = normalize((value as Record<string, unknown>)[key], onPath, freeze);
      if (copied === undefined) continue;
      setOwn(record, key, copied);
    }
    out = record;
  }
  onPath.delete(value);
  return freeze ? Object.freeze(out) : out;
}

function write(value: unknown): string {
  if (value === undefined) return 'null';
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(write).join(',')}]`;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${write(record[key])}`).join(',')}}`;
}

/** Recursively freeze a JSON-like value in place and return it. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}
