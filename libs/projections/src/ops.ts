import { z } from 'zod';
import { canonicalJson, canonicalJsonChecked, sortedKeys, type JsonValue } from './canonical-json';
import { MAX_KEY_LENGTH } from './keys';

/** The fields of an indexed item that get an index of their own (one sorted set per value). */
export const INDEXED_FIELDS = ['project', 'kind', 'why', 'agent', 'priority', 'status'] as const;
export type IndexedField = (typeof INDEXED_FIELDS)[number];

/** The orders an item store can be read in. */
export const ItemOrder = {
  /** `at` descending, then `id` ascending. */
  newest: 'newest',
  /** `urgency` descending, then `at` descending, then `id` ascending. */
  urgent: 'urgent',
} as const;
export type ItemOrder = (typeof ItemOrder)[keyof typeof ItemOrder];

/**
 * An item of an indexed item store (the operator inbox, stop packets). The named fields are indexed
 * or sorted on; any other member is stored and returned as JSON. `at` is epoch milliseconds.
 */
export interface IndexedItem {
  id: string;
  project: string;
  kind: string;
  why?: string;
  agent?: string;
  priority?: string;
  status: string;
  urgency: number;
  at: number;
  [extra: string]: unknown;
}

const KeySchema = z
  .string()
  .min(1)
  .max(MAX_KEY_LENGTH)
  .refine((k) => !k.startsWith('~'), 'keys starting with "~" are reserved for the engine');
const IndexValueSchema = z.string().min(1).max(200);
const StoreSchema = z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/, 'store names are lowercase letters, digits, _ and -');
// 256: an inbox item id holds its kind, a project key (64) and an id (128), e.g. `escalation:<project>:<id>`.
const ItemIdSchema = z.string().min(1).max(256);
const FieldValueSchema = z.union([z.string(), z.number().finite()]);
const MemberListSchema = z.array(z.string()).min(1).max(1000);
const JsonSchema: z.ZodType<JsonValue> = z.json();

const itemCore = {
  id: ItemIdSchema,
  project: IndexValueSchema,
  kind: IndexValueSchema,
  why: IndexValueSchema.optional(),
  agent: IndexValueSchema.optional(),
  priority: IndexValueSchema.optional(),
  status: IndexValueSchema,
  urgency: z.number().finite(),
  at: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
};
/** Validates a full item: the indexed fields plus any JSON members. */
export const IndexedItemSchema = z.object(itemCore).catchall(JsonSchema.optional());
const ItemPatchSchema = z.object(itemCore).omit({ id: true }).partial().catchall(JsonSchema.optional());
const REQUIRED_ITEM_FIELDS = ['id', 'project', 'kind', 'status', 'urgency', 'at'];
/** A patch's condition: the item's `field` holds the string `is` (else the patch does nothing). */
const ItemWhenSchema = z.strictObject({ field: z.string().min(1).max(100), is: z.string().max(1_000) });

/**
 * The closed set of data operations a projection may return for one event. Keys are relative to
 * the projection's generation namespace (the engine adds `<prefix>:<projection>:g<gen>:`).
 * There is deliberately no TTL operation: a projection must be a pure function of the events, and
 * a TTL would make a rebuilt projection differ from the live one.
 */
export const ProjectionOpSchema = z.discriminatedUnion('op', [
  z.object({ op: z.literal('hset'), key: KeySchema, fields: z.record(z.string(), FieldValueSchema) }),
  z.object({ op: z.literal('hdel'), key: KeySchema, fields: MemberListSchema }),
  z.object({ op: z.literal('del'), key: KeySchema }),
  z.object({ op: z.literal('set'), key: KeySchema, value: z.string() }),
  z.object({ op: z.literal('json.set'), key: KeySchema, value: JsonSchema }),
  z.object({ op: z.literal('zadd'), key: KeySchema, score: z.number().finite(), member: z.string() }),
  z.object({ op: z.literal('zrem'), key: KeySchema, members: MemberListSchema }),
  z.object({ op: z.literal('sadd'), key: KeySchema, members: MemberListSchema }),
  z.object({ op: z.literal('srem'), key: KeySchema, members: MemberListSchema }),
  z.object({ op: z.literal('item.upsert'), store: StoreSchema, item: IndexedItemSchema }),
  z.object({
    op: z.literal('item.patch'),
    store: StoreSchema,
    id: ItemIdSchema,
    set: ItemPatchSchema,
    unset: z
      .array(z.string().min(1))
      .max(100)
      .refine((fields) => fields.every((f) => !REQUIRED_ITEM_FIELDS.includes(f)), 'required item fields cannot be unset')
      .optional(),
    when: ItemWhenSchema.optional(),
  }),
  z.object({ op: z.literal('item.remove'), store: StoreSchema, id: ItemIdSchema }),
]);
type ParsedOp = z.infer<typeof ProjectionOpSchema>;

/** One data operation of a projection (see {@link Op} for the factories). */
export type ProjectionOp =
  | { op: 'hset'; key: string; fields: Record<string, string | number> }
  | { op: 'hdel'; key: string; fields: string[] }
  | { op: 'del'; key: string }
  | { op: 'set'; key: string; value: string }
  | { op: 'json.set'; key: string; value: JsonValue }
  | { op: 'zadd'; key: string; score: number; member: string }
  | { op: 'zrem'; key: string; members: string[] }
  | { op: 'sadd'; key: string; members: string[] }
  | { op: 'srem'; key: string; members: string[] }
  | { op: 'item.upsert'; store: string; item: IndexedItem }
  | { op: 'item.patch'; store: string; id: string; set: Partial<Omit<IndexedItem, 'id'>>; unset?: string[]; when?: ItemWhen }
  | { op: 'item.remove'; store: string; id: string };

/** The condition of an item patch: it applies only while the item's `field` holds the string `is`. */
export interface ItemWhen {
  field: string;
  is: string;
}

/** Factories for {@link ProjectionOp}s, so projection code reads as a list of intentions. */
export const Op = {
  hset: (key: string, fields: Record<string, string | number>): ProjectionOp => ({ op: 'hset', key, fields }),
  hdel: (key: string, ...fields: string[]): ProjectionOp => ({ op: 'hdel', key, fields }),
  del: (key: string): ProjectionOp => ({ op: 'del', key }),
  set: (key: string, value: string): ProjectionOp => ({ op: 'set', key, value }),
  /** Store a JSON document under `key`, serialised canonically (sorted keys). */
  jsonSet: (key: string, value: JsonValue): ProjectionOp => ({ op: 'json.set', key, value }),
  zadd: (key: string, score: number, member: string): ProjectionOp => ({ op: 'zadd', key, score, member }),
  zrem: (key: string, ...members: string[]): ProjectionOp => ({ op: 'zrem', key, members }),
  sadd: (key: string, ...members: string[]): ProjectionOp => ({ op: 'sadd', key, members }),
  srem: (key: string, ...members: string[]): ProjectionOp => ({ op: 'srem', key, members }),
  /** Insert or replace an item; every index moves with it. */
  itemUpsert: (store: string, item: IndexedItem): ProjectionOp => ({ op: 'item.upsert', store, item }),
  /**
   * Change some members of an existing item (indexes follow); a no-op when the item does not exist,
   * or when `when` is given and the item's `when.field` does not hold the string `when.is`.
   */
  itemPatch: (store: string, id: string, set: Partial<Omit<IndexedItem, 'id'>>, unset?: string[], when?: ItemWhen): ProjectionOp => ({
    op: 'item.patch',
    store,
    id,
    set,
    ...(unset ? { unset } : {}),
    ...(when ? { when } : {}),
  }),
  /** Remove an item and all its index entries; a no-op when it does not exist. */
  itemRemove: (store: string, id: string): ProjectionOp => ({ op: 'item.remove', store, id }),
} as const;

/** The compact shape the apply script decodes. Every scalar travels as a string. */
export type WireOp =
  | { o: 'hset' | 'hdel' | 'zrem' | 'sadd' | 'srem'; k: string; a: string[] }
  | { o: 'del'; k: string }
  | { o: 'set'; k: string; v: string }
  | { o: 'zadd'; k: string; s: string; m: string }
  | { o: 'iput'; st: string; id: string; a: string[] }
  | { o: 'ipatch'; st: string; id: string; a: string[]; u: string[]; w?: [string, string] }
  | { o: 'irem'; st: string; id: string };

/**
 * Validate one event's ops and encode them for the apply script. Throws the zod error message as
 * a string reason via the returned `error` instead of throwing, so the engine can attach context.
 */
export function encodeOps(ops: readonly unknown[]): { wire: WireOp[] } | { error: string; opIndex: number } {
  const wire: WireOp[] = [];
  for (let index = 0; index < ops.length; index++) {
    const op = ops[index];
    if (isJsonSet(op)) {
      // The common op (a fold state on nearly every event): the key by its schema, the value
      // checked and serialised in one walk instead of a deep schema validation, then a second walk.
      const key = KeySchema.safeParse(op.key);
      if (!key.success) return { error: key.error.issues.map((i) => `key: ${i.message}`).join('; '), opIndex: index };
      const value = canonicalJsonChecked(op.value);
      if (!value.ok)
        return {
          error: `value${value.notJson.path === '' || value.notJson.path.startsWith('[') ? '' : '.'}${value.notJson.path}: ${value.notJson.problem}`,
          opIndex: index,
        };
      wire.push({ o: 'set', k: key.data, v: value.text });
      continue;
    }
    const parsed = ProjectionOpSchema.safeParse(op);
    if (!parsed.success) {
      return { error: parsed.error.issues.map((i) => `${i.path.join('.') || '(op)'}: ${i.message}`).join('; '), opIndex: index };
    }
    wire.push(toWire(parsed.data));
  }
  return { wire };
}

function isJsonSet(op: unknown): op is { op: 'json.set'; key: unknown; value: unknown } {
  return typeof op === 'object' && op !== null && (op as { op?: unknown }).op === 'json.set' && 'value' in op;
}

function toWire(op: ParsedOp): WireOp {
  switch (op.op) {
    case 'hset':
      return { o: 'hset', k: op.key, a: Object.entries(op.fields).flatMap(([f, v]) => [f, String(v)]) };
    case 'hdel':
      return { o: 'hdel', k: op.key, a: op.fields };
    case 'del':
      return { o: 'del', k: op.key };
    case 'set':
      return { o: 'set', k: op.key, v: op.value };
    case 'json.set':
      return { o: 'set', k: op.key, v: canonicalJson(op.value) };
    case 'zadd':
      return { o: 'zadd', k: op.key, s: String(op.score === 0 ? 0 : op.score), m: op.member };
    case 'zrem':
      return { o: 'zrem', k: op.key, a: op.members };
    case 'sadd':
      return { o: 'sadd', k: op.key, a: op.members };
    case 'srem':
      return { o: 'srem', k: op.key, a: op.members };
    case 'item.upsert':
      return { o: 'iput', st: op.store, id: op.item.id, a: itemFields(op.item) };
    case 'item.patch':
      return {
        o: 'ipatch',
        st: op.store,
        id: op.id,
        a: itemFields(op.set),
        u: op.unset ?? [],
        ...(op.when ? { w: [op.when.field, canonicalJson(op.when.is)] } : {}),
      };
    case 'item.remove':
      return { o: 'irem', st: op.store, id: op.id };
    default:
      return assertNever(op);
  }
}

/** An item as hash fields: member name → canonical JSON of its value. `undefined` members are dropped. */
function itemFields(item: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const name of sortedKeys(item)) {
    const value = item[name];
    if (value !== undefined) out.push(name, canonicalJson(value));
  }
  return out;
}

/** Decode an item stored as hash fields back into an object. */
export function decodeItemFields<T>(flat: readonly string[]): T {
  // In field-name order, not the hash's: a document rewritten with the same content (its fields
  // set in another order) reads the same, so its answer — and the API's ETag over it — does not change.
  const names: number[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) names.push(i);
  names.sort((a, b) => (flat[a]! < flat[b]! ? -1 : flat[a]! > flat[b]! ? 1 : 0));
  const out: Record<string, unknown> = {};
  for (const i of names) out[flat[i]!] = JSON.parse(flat[i + 1]!);
  return out as T;
}

function assertNever(x: never): never {
  throw new Error(`unexpected value ${JSON.stringify(x)}`);
}

/**
 * Validate one op the way {@link encodeOps} does, without building its wire form (a rebuild folds
 * ops in memory and writes only final values). The common ops are accepted by a hand-written check
 * that accepts only what {@link ProjectionOpSchema} accepts (plain JSON data within the schema's
 * limits; anything unusual is left to the schema); whatever it does not accept goes through the
 * schema, which gives the verdict and the message. Returns null when the op is valid.
 */
export function opError(op: unknown): string | null {
  if (fastValid(op)) return null;
  if (isJsonSet(op)) {
    const key = KeySchema.safeParse(op.key);
    if (!key.success) return key.error.issues.map((i) => `key: ${i.message}`).join('; ');
    const value = canonicalJsonChecked(op.value);
    return value.ok
      ? null
      : `value${value.notJson.path === '' || value.notJson.path.startsWith('[') ? '' : '.'}${value.notJson.path}: ${value.notJson.problem}`;
  }
  const parsed = ProjectionOpSchema.safeParse(op);
  return parsed.success ? null : parsed.error.issues.map((i) => `${i.path.join('.') || '(op)'}: ${i.message}`).join('; ');
}

const STORE_PATTERN = /^[a-z][a-z0-9_-]{0,63}$/;
const OPTIONAL_INDEXED = ['why', 'agent', 'priority'] as const;

function validKey(key: unknown): boolean {
  return typeof key === 'string' && key.length >= 1 && key.length <= MAX_KEY_LENGTH && key.charCodeAt(0) !== 126; /* ~ */
}

function indexValue(value: unknown): boolean {
  return typeof value === 'string' && value.length >= 1 && value.length <= 200;
}

function itemId(value: unknown): boolean {
  return typeof value === 'string' && value.length >= 1 && value.length <= 256;
}

function plainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype;
}

/** JSON data zod's `z.json()` accepts for sure: strings, finite numbers, booleans, null, arrays and plain objects of them. */
function plainJson(value: unknown, depth = 0): boolean {
  if (depth > 64) return false;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object':
      if (value === null) return true;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) if (!(i in value) || !plainJson(value[i], depth + 1)) return false;
        return true;
      }
      if (Object.getPrototypeOf(value) !== Object.prototype) return false;
      for (const key of Object.keys(value)) if (!plainJson((value as Record<string, unknown>)[key], depth + 1)) return false;
      return true;
    default:
      return false;
  }
}

/** The members of an item (or an item patch) other than the core fields: JSON or undefined. */
function extrasValid(item: Record<string, unknown>, core: ReadonlySet<string>): boolean {
  for (const key of Object.keys(item)) {
    if (core.has(key)) continue;
    const value = item[key];
    if (value !== undefined && !plainJson(value)) return false;
  }
  return true;
}

const CORE_FIELDS: ReadonlySet<string> = new Set(['id', 'project', 'kind', 'why', 'agent', 'priority', 'status', 'urgency', 'at']);

function coreValid(item: Record<string, unknown>, partial: boolean): boolean {
  const present = (name: string) => item[name] !== undefined || (!partial && name in item);
  for (const name of ['project', 'kind', 'status'] as const) {
    if (partial ? present(name) && !indexValue(item[name]) : !indexValue(item[name])) return false;
  }
  for (const name of OPTIONAL_INDEXED) if (item[name] !== undefined && !indexValue(item[name])) return false;
  const urgency = item['urgency'];
  if (
    partial ? urgency !== undefined && !(typeof urgency === 'number' && Number.isFinite(urgency)) : !(typeof urgency === 'number' && Number.isFinite(urgency))
  )
    return false;
  const at = item['at'];
  const atOk = typeof at === 'number' && Number.isSafeInteger(at) && at >= 0;
  if (partial ? at !== undefined && !atOk : !atOk) return false;
  return true;
}

function validWhen(when: unknown): boolean {
  if (!plainObject(when)) return false;
  const keys = Object.keys(when);
  const { field, is } = when;
  return keys.length === 2 && typeof field === 'string' && field.length > 0 && field.length <= 100 && typeof is === 'string' && is.length <= 1_000;
}

function fastValid(op: unknown): boolean {
  if (!plainObject(op)) return false;
  switch (op['op']) {
    case 'json.set':
      return validKey(op['key']) && plainJson(op['value']);
    case 'zadd':
      return validKey(op['key']) && typeof op['score'] === 'number' && Number.isFinite(op['score']) && typeof op['member'] === 'string';
    case 'del':
      return validKey(op['key']);
    case 'set':
      return validKey(op['key']) && typeof op['value'] === 'string';
    case 'item.upsert': {
      const item = op['item'];
      return (
        typeof op['store'] === 'string' &&
        STORE_PATTERN.test(op['store']) &&
        plainObject(item) &&
        itemId(item['id']) &&
        coreValid(item, false) &&
        extrasValid(item, CORE_FIELDS)
      );
    }
    case 'item.patch': {
      const set = op['set'];
      const unset = op['unset'];
      if (!(typeof op['store'] === 'string' && STORE_PATTERN.test(op['store']) && itemId(op['id']) && plainObject(set))) return false;
      if ('id' in set) return false;
      if (!coreValid(set, true) || !extrasValid(set, CORE_FIELDS)) return false;
      const when = op['when'];
      if (when !== undefined && !validWhen(when)) return false;
      if (unset === undefined) return true;
      return Array.isArray(unset) && unset.length <= 100 && unset.every((f) => typeof f === 'string' && f.length > 0 && !REQUIRED_ITEM_FIELDS.includes(f));
    }
    case 'item.remove':
      return typeof op['store'] === 'string' && STORE_PATTERN.test(op['store']) && itemId(op['id']);
    default:
      return false;
  }
}
