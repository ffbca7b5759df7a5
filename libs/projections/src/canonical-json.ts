import { setOwn } from '@baton/contracts';

/** A JSON value as it is stored and compared by this library. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * Serialise a JSON value with object keys sorted at every level, so that equal values always give
 * equal strings (used for `json.set` values and for snapshots). `undefined` object members are
 * dropped, as `JSON.stringify` does; non-finite numbers are rejected. Integer-like keys come
 * first in ascending numeric order (how `JSON.stringify` writes an object's own keys), the rest
 * sorted. Not the domain's `stableStringify` (digests of frozen calls, code-unit order throughout):
 * both texts are stored, so neither can become the other.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortDeep(value));
}

/**
 * The sorted key orders of the object shapes met so far. The values a projection serialises are
 * built by a few functions, so nearly every object has one of a few dozen key lists in the same
 * insertion order; sorting each one's keys anew allocated a copy and a sort's work space per
 * object (a tenth of the notifier's allocations, measured). A key list is looked up by its first
 * key and compared member by member (property names are interned, so mostly pointer compares); a
 * list met before gives the sorted order kept for it, which callers only read. Bounded: lists of
 * up to {@link MAX_SHAPE_KEYS} keys, {@link MAX_SHAPES_PER_FIRST_KEY} lists per first key,
 * {@link MAX_FIRST_KEYS} first keys; past a bound a list is sorted as before and not kept, so
 * objects used as maps with arbitrary keys cost one failed lookup each.
 */
const keyOrders = new Map<string, Array<{ keys: readonly string[]; sorted: readonly string[] }>>();
const MAX_SHAPE_KEYS = 64;
const MAX_SHAPES_PER_FIRST_KEY = 8;
const MAX_FIRST_KEYS = 2048;

/** `Object.keys(value).sort()`, from {@link keyOrders} when this key list was met before. The result must not be changed. */
export function sortedKeys(value: object): readonly string[] {
  const keys = Object.keys(value);
  const n = keys.length;
  if (n < 2) return keys;
  if (n > MAX_SHAPE_KEYS) return keys.sort();
  const first = keys[0] as string;
  let shapes = keyOrders.get(first);
  if (shapes !== undefined) {
    next: for (let s = 0; s < shapes.length; s++) {
      const shape = shapes[s] as { keys: readonly string[]; sorted: readonly string[] };
      const known = shape.keys;
      if (known.length !== n) continue;
      for (let i = 1; i < n; i++) if (known[i] !== keys[i]) continue next;
      return shape.sorted;
    }
  }
  const sorted = keys.slice().sort();
  if (shapes === undefined) {
    if (keyOrders.size >= MAX_FIRST_KEYS) return sorted;
    shapes = [];
    keyOrders.set(first, shapes);
  }
  if (shapes.length < MAX_SHAPES_PER_FIRST_KEY) shapes.push({ keys, sorted });
  return sorted;
}

function sortDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : sortDeep(v)));
  if (typeof value === 'number' && !Number.isFinite(value)) {
    throw new TypeError(`cannot serialise non-finite number ${value} as JSON`);
  }
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of sortedKeys(value)) {
      const member = (value as Record<string, unknown>)[key];
      if (member !== undefined) setOwn(out, key, sortDeep(member));
    }
    return out;
  }
  return value;
}

/** Why a value is not JSON: where (a path like `a.b[2]`) and what. */
export interface NotJson {
  path: string;
  problem: string;
}

/**
 * {@link canonicalJson} for a value that must be JSON already, checked in the same walk: `null`,
 * booleans, strings, finite numbers, arrays and plain objects only (`undefined` object members are
 * dropped, as `JSON.stringify` does). Returns the text, or where and why the value is not JSON.
 * One walk builds the sorted copy and checks it (the path of a problem is kept as a stack of keys,
 * written out only when there is one), then the native serialiser writes it: projections write a
 * JSON state on almost every event, and a run's view holds up to a hundred routes.
 */
export function canonicalJsonChecked(value: unknown): { ok: true; text: string } | { ok: false; notJson: NotJson } {
  const path: Array<string | number> = [];
  try {
    walkMetFrozen = false;
    const sorted = sortChecked(value, path);
    // With frozen parts, their text is spliced in as kept (see FrozenPart); else the native serialiser.
    return { ok: true, text: walkMetFrozen ? emit(sorted) : JSON.stringify(sorted) };
  } catch (error) {
    if (!(error instanceof NotJsonAt)) throw error;
    return { ok: false, notJson: { path: pathText(path), problem: error.problem } };
  }
}

/** Thrown inside {@link sortChecked}; `path` then holds where (the walk stops popping). */
class NotJsonAt {
  constructor(readonly problem: string) {}
}

function pathText(path: ReadonlyArray<string | number>): string {
  let out = '';
  for (const segment of path) out += typeof segment === 'number' ? `[${segment}]` : out === '' ? segment : `.${segment}`;
  return out;
}

/**
 * The sorted copies of deeply frozen objects and arrays, built once: a frozen value cannot change,
 * so its copy (checked, keys sorted, `undefined` members dropped) stays right, and the next value
 * that holds it — a run's next state, with the same hundred routes — skips walking it again.
 * Only values whose every object member is memoised too (frozen all the way down) are kept; a
 * frozen value with a mutable member is walked every time. Weak: nothing is kept alive by it.
 */
const sortedFrozen = new WeakMap<object, FrozenPart>();

/**
 * A frozen value's sorted copy and, once written, its text: what {@link sortChecked} puts in a
 * sorted copy in place of a frozen value, so that its text is written once and spliced into every
 * later value that holds it.
 */
class FrozenPart {
  text: string | null = null;
  constructor(readonly copy: unknown) {}
}

/** Set by {@link sortChecked} when the walk put a {@link FrozenPart} in the copy (then {@link emit} writes it). */
let walkMetFrozen = false;

/**
 * The text of a sorted copy that holds frozen parts: the same text `JSON.stringify` would give for
 * the copy with each part's own copy in its place (members in the copy's own order, strings,
 * numbers and keys written by `JSON.stringify`), each part written once and kept.
 */
function emit(value: unknown): string {
  if (value instanceof FrozenPart) return (value.text ??= emit(value.copy));
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + emit(value[i]);
    return `${out}]`;
  }
  let out = '{';
  let first = true;
  for (const key of Object.keys(value)) {
    out += `${first ? '' : ','}${JSON.stringify(key)}:${emit((value as Record<string, unknown>)[key])}`;
    first = false;
  }
  return `${out}}`;
}

/**
 * Freeze a JSON value all the way down (objects and arrays; primitives are immutable), so that
 * {@link canonicalJsonChecked} serialises its parts once however many values share them. Returns
 * the value. A value that is frozen already is taken as frozen all the way down.
 */
export function freezeJson<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const member of Object.values(value)) freezeJson(member);
    Object.freeze(value);
  }
  return value;
}

/** `sortDeep` that refuses what is not JSON (see {@link canonicalJsonChecked}). */
function sortChecked(value: unknown, path: Array<string | number>): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value)) throw new NotJsonAt(`the number ${value} is not finite`);
      return value;
    case 'object': {
      if (value === null) return null;
      const frozen = Object.isFrozen(value);
      if (frozen) {
        const known = sortedFrozen.get(value);
        if (known !== undefined) {
          walkMetFrozen = true;
          return known;
        }
      }
      // Whether every object member is a memoised frozen value (then so may this one be).
      let deep = frozen;
      let out: unknown;
      if (Array.isArray(value)) {
        const items = new Array<unknown>(value.length);
        for (let i = 0; i < value.length; i++) {
          path.push(i);
          const member: unknown = value[i];
          items[i] = sortChecked(member, path);
          path.pop();
          if (deep && member !== null && typeof member === 'object' && !sortedFrozen.has(member)) deep = false;
        }
        out = items;
      } else {
        const proto = Object.getPrototypeOf(value) as unknown;
        if (proto !== Object.prototype && proto !== null) throw new NotJsonAt('not a plain object');
        const fields: Record<string, unknown> = {};
        for (const key of sortedKeys(value)) {
          const member = (value as Record<string, unknown>)[key];
          if (member === undefined) continue;
          path.push(key);
          setOwn(fields, key, sortChecked(member, path));
          path.pop();
          if (deep && member !== null && typeof member === 'object' && !sortedFrozen.has(member)) deep = false;
        }
        out = fields;
      }
      if (!deep) return out;
      const part = new FrozenPart(out);
      sortedFrozen.set(value, part);
      walkMetFrozen = true;
      return part;
    }
    default:
      throw new NotJsonAt(`a ${typeof value} is not JSON`);
  }
}

/**
 * Whether `value` is already exactly what a JSON round trip (`JSON.parse(JSON.stringify(value))`)
 * would give back, so that the round trip can be skipped: strings, booleans, `null`, finite numbers
 * other than -0, dense arrays of such values and plain objects (prototype `Object.prototype`, no
 * own `toJSON`) whose members are all such values — no `undefined` member, no function, symbol or
 * bigint anywhere. Anything else answers false (the caller then does the round trip). A walk that
 * allocates nothing: much cheaper than serialising and parsing a fold state on every event.
 */
export function isExactJson(value: unknown): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value) && !Object.is(value, -0);
    case 'object': {
      if (value === null) return true;
      // A value frozen all the way down that was found exact once stays exact (see sortedFrozen).
      const frozen = Object.isFrozen(value);
      if (frozen && exactFrozen.has(value)) return true;
      let deep = frozen;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          const member: unknown = value[i];
          if (!(i in value) || !isExactJson(member)) return false;
          if (deep && member !== null && typeof member === 'object' && !exactFrozen.has(member)) deep = false;
        }
        if (Object.getPrototypeOf(value) !== Array.prototype) return false;
      } else {
        if (Object.getPrototypeOf(value) !== Object.prototype) return false;
        for (const key in value) {
          if (!Object.prototype.hasOwnProperty.call(value, key)) return false;
          const member = (value as Record<string, unknown>)[key];
          if (key === 'toJSON' || !isExactJson(member)) return false;
          if (deep && member !== null && typeof member === 'object' && !exactFrozen.has(member)) deep = false;
        }
      }
      if (deep) exactFrozen.add(value);
      return true;
    }
    default:
      return false;
  }
}

/** Values frozen all the way down that {@link isExactJson} found exact (weak, as `sortedFrozen`). */
const exactFrozen = new WeakSet<object>();

/**
 * The object or array {@link toJsonValue} last found exact and returned as it is. A fold's state
 * goes through `toJsonValue` twice with nothing in between — in the projection's `step` (`toJson`)
 * and again in the engine that stores it (rebuild image, live range) — and the second call is
 * answered here instead of walking the whole state again. Sound under the rule every caller of this
 * library-internal function follows: a value handed to it is never mutated afterwards (folds and
 * projections are pure). One reference: keeps at most one state alive.
 */
let lastExact: object | null = null;

/** `JSON.parse(JSON.stringify(value))`, skipped when `value` already is exactly that ({@link isExactJson}). */
export function toJsonValue(value: unknown): JsonValue {
  if (value !== null && value === lastExact) return value as JsonValue;
  if (!isExactJson(value)) return JSON.parse(JSON.stringify(value)) as JsonValue;
  if (value !== null && typeof value === 'object') lastExact = value;
  return value as JsonValue;
}
