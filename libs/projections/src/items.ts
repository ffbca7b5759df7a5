import { createHash } from 'node:crypto';
import type Redis from 'ioredis';
import { InvalidCursorError, ProjectionError } from './errors';
import { hexdesc } from './image';
import { activeKey } from './keys';
import { decodeItemFields, INDEXED_FIELDS, ItemOrder, type IndexedField, type IndexedItem } from './ops';
import { queryScript } from './scripts';

/** A filter on one indexed field: one value, or a list matching any of its values (an empty list matches nothing). */
export type ItemFilterValue = string | readonly string[];
export type ItemFilters = Partial<Record<IndexedField, ItemFilterValue>>;

export interface ItemQuery {
  filters?: ItemFilters;
  /** Default `newest`. */
  order?: ItemOrder;
  /** Page size, 1..500, default 50. */
  limit?: number;
  /** `nextCursor` of the previous page; absent or null for the first page. */
  cursor?: string | null;
  /**
   * Most items one page examines (default the larger of 2 000 and 20 × `limit`): a page whose
   * filters match few of the items it walks ends early at this bound, with a cursor to go on from —
   * so a page's cost is bounded whatever the history holds.
   */
  scanBudget?: number;
  /**
   * `newest` order only: the items whose time (`at`, epoch ms) lies in this window, both ends
   * included. The page starts at `until` and ends at `since` inside Redis, so a window far back in
   * a long history costs no more than the window itself (pages are not spent walking what is newer).
   */
  window?: { since?: number; until?: number };
}

export interface ItemPage<T> {
  items: T[];
  /** Opaque; null when this page is the last. */
  nextCursor: string | null;
}

/** Read side of one indexed item store of a projection (always its active generation). */
export interface ItemStore<T extends IndexedItem = IndexedItem> {
  /**
   * One page of items matching every filtered field (any of a field's values), in `order`.
   * Paging is keyset paging on the sort key (order fields, then id): an item that existed before
   * the first page and did not change is returned exactly once across the pages, whatever is
   * inserted or removed meanwhile. Items inserted after the cursor position appear in later pages;
   * those inserted before it do not. Each page is read atomically against the active generation.
   * Throws {@link InvalidCursorError} for a cursor of another order or one not made here.
   */
  query(query?: ItemQuery): Promise<ItemPage<T>>;
  /** The number of items matching the filters (same semantics as `query`). */
  count(filters?: ItemFilters): Promise<number>;
  /** One item by id, or null. */
  get(id: string): Promise<T | null>;
}

const MAX_LIMIT = 500;
const CURSOR_MEMBER = { newest: /^[0-9a-f]{16}:.+$/s, urgent: /^[0-9a-f]{32}:.+$/s } as const;

/** A short digest of one filter's values, or of a listing's whole normalised filters (cursors before marks per field). */
function mark(text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 8);
}

/**
 * One mark per filter field of a listing's normalised filters (JSON: `[[field, [values]], …]`,
 * the caller's project scope among them), so a cursor refused under other filters can say which.
 */
function filterMarks(filters: string): Record<string, string> {
  const parsed = JSON.parse(filters) as [string, string[]][] | null;
  return Object.fromEntries((parsed ?? []).map(([field, values]) => [field, mark(JSON.stringify(values))]));
}

/**
 * Encode a sort-set member as an opaque cursor bound to its order, to the item store it pages
 * (`inbox`, `stops`) and, given them, to the listing's normalised filters (JSON).
 */
export function encodeCursor(order: ItemOrder, member: string, store: string, filters?: string): string {
  return Buffer.from(JSON.stringify({ v: 1, o: order, s: store, k: member, ...(filters !== undefined ? { f: filterMarks(filters) } : {}) }), 'utf8').toString(
    'base64url',
  );
}

/**
 * Decode a cursor made by {@link encodeCursor} for `order` and `store`; throws
 * {@link InvalidCursorError} otherwise — a cursor of one listing given to another would page it
 * from a position that means nothing there. So is one made under other filters (`filters`: another
 * status, kind, project — a token scoped to other projects lists under other project filters): its
 * next page would skip or repeat items of this listing. A cursor made before cursors named their
 * store or filters (no `s`, no `f`) is still taken, so a client paging across an upgrade is not refused.
 */
export function decodeCursor(order: ItemOrder, cursor: string, store: string, filters?: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new InvalidCursorError('cursor is not a cursor returned by this API');
  }
  const body = parsed as { v?: unknown; o?: unknown; s?: unknown; k?: unknown; f?: unknown; r?: unknown } | null;
  if (body && body.v === 1 && body.r !== undefined) throw new InvalidCursorError("cursor was made for one run's stop packets (`run`), not this listing");
  if (!body || body.v !== 1 || typeof body.k !== 'string') throw new InvalidCursorError('cursor is not a cursor returned by this API');
  // What the cursor was made for is said first: its member's form depends on its order.
  if (body.s !== undefined && body.s !== store) throw new InvalidCursorError(`cursor was made for the ${String(body.s)} listing, not ${store}`);
  if (body.o !== order) throw new InvalidCursorError(`cursor was made for order "${String(body.o)}", not "${order}"`);
  if (!CURSOR_MEMBER[order].test(body.k)) throw new InvalidCursorError('cursor is not a cursor returned by this API');
  // Marks per field (a cursor that holds none predates the rule and is taken).
  const made = typeof body.f === 'object' && body.f !== null ? (body.f as Record<string, unknown>) : null;
  if (filters !== undefined && made !== null) {
    const now = filterMarks(filters);
    const differing = [...new Set([...Object.keys(made), ...Object.keys(now)])].filter((field) => made[field] !== now[field]).sort();
    if (differing.length > 0) {
      const which = differing.map((field) => (field === 'project' ? '`project`, or the token`s project scope' : `\`${field}\``)).join(', ');
      throw new InvalidCursorError(
        `cursor was made for a listing with other filters (${which}); page with the filters it was returned for, or start again without a cursor`,
      );
    }
  }
  return body.k;
}

/** Normalise filters to `[[field, [values...]], ...]`, sorted and de-duplicated; null if some list is empty. */
function normaliseFilters(filters: ItemFilters | undefined): [string, string[]][] | null {
  const out: [string, string[]][] = [];
  for (const field of INDEXED_FIELDS) {
    const raw = filters?.[field];
    if (raw === undefined) continue;
    const values = [...new Set(typeof raw === 'string' ? [raw] : raw)].sort();
    if (values.length === 0) return null;
    if (values.some((v) => typeof v !== 'string' || v.length === 0)) {
      throw new ProjectionError(`filter ${field} holds an empty or non-string value`);
    }
    out.push([field, values]);
  }
  return out;
}

export function createItemStore<T extends IndexedItem>(redis: Redis, base: string, store: string): ItemStore<T> {
  const pointer = activeKey(base);
  return {
    async query(query = {}) {
      const order = query.order ?? ItemOrder.newest;
      if (!(order in CURSOR_MEMBER)) throw new ProjectionError(`unknown order "${String(order)}"`);
      const limit = query.limit ?? 50;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
        throw new ProjectionError(`limit must be an integer between 1 and ${MAX_LIMIT}`);
      }
      const filters = normaliseFilters(query.filters);
      const filtersJson = JSON.stringify(filters);
      let after = query.cursor ? decodeCursor(order, query.cursor, store, filtersJson) : '';
      if (filters === null) return { items: [], nextCursor: null };
      // A time window seeks: members are `<hexdesc(at)>:<id>`, newest first, so everything newer than
      // `until` sorts before `hexdesc(until)` and everything older than `since` after `hexdesc(since);`.
      let upTo = '+';
      const window = query.window;
      if (window !== undefined && (window.since !== undefined || window.until !== undefined)) {
        if (order !== ItemOrder.newest) throw new ProjectionError('a time window pages the newest order only');
        if (window.until !== undefined) {
          const seek = hexdesc(window.until);
          if (after < seek) after = seek;
        }
        if (window.since !== undefined) upTo = `(${hexdesc(window.since)};`;
      }
      const budget = query.scanBudget ?? Math.max(2_000, 20 * limit);
      if (!Number.isInteger(budget) || budget < 1) throw new ProjectionError('scanBudget must be a positive integer');
      const reply = (await queryScript.run(redis, [pointer], [base, store, order, 'query', after, limit, filtersJson, budget, upTo])) as [
        string,
        ...string[][],
      ];
      const [next, ...docs] = reply;
      return {
        items: docs.map((flat) => decodeItemFields<T>(flat)),
        nextCursor: next ? encodeCursor(order, next, store, filtersJson) : null,
      };
    },
    async count(filters) {
      const normalised = normaliseFilters(filters);
      if (normalised === null) return 0;
      const reply = await queryScript.run(redis, [pointer], [base, store, ItemOrder.newest, 'count', '', 0, JSON.stringify(normalised)]);
      return Number(reply);
    },
    async get(id) {
      const reply = (await queryScript.run(redis, [pointer], [base, store, ItemOrder.newest, 'get', id, 0, '[]'])) as [string, string[]?];
      const flat = reply[1];
      return flat && flat.length > 0 ? decodeItemFields<T>(flat) : null;
    },
  };
}
