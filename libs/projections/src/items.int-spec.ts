import type { EventEnvelope } from '@baton/contracts';
import { InvalidCursorError } from './errors';
import type { ItemFilters, ItemStore } from './items';
import { INDEXED_FIELDS, Op, type IndexedItem, type ItemOrder, type ProjectionOp } from './ops';
import type { ProjectionDefinition } from './store';
import { redisFixture, taskEvent, type RedisFixture } from './test-support';

interface InboxItem extends IndexedItem {
  title: string;
}

/** A projection whose events carry the ops to run, so the tests drive the item store directly. */
const inbox: ProjectionDefinition<EventEnvelope<{ ops: ProjectionOp[] }>> = {
  name: 'inbox',
  version: 1,
  handles: () => true,
  apply: (event) => event.payload.ops,
};

function makeItem(i: number): InboxItem {
  return {
    id: `item-${String(i).padStart(3, '0')}`,
    project: ['alpha', 'beta', 'gamma'][i % 3],
    kind: ['stop', 'hold', 'handback', 'escalation'][i % 4],
    ...(i % 5 === 0 ? {} : { why: ['needs_input', 'loop_guard', 'deadline'][i % 3 === 0 ? 0 : (i % 7) % 3] }),
    ...(i % 6 === 0 ? {} : { agent: `agent-${i % 4}` }),
    priority: ['p1', 'p2', 'p3'][(i * 5) % 3],
    status: i % 9 === 0 ? 'resolved' : 'open',
    urgency: (i * 37) % 5, // many ties
    at: 1_700_000_000_000 + Math.floor(i / 3) * 1000, // ties in threes
    title: `item ${i}`,
  };
}

function compare(order: ItemOrder) {
  return (a: IndexedItem, b: IndexedItem): number => {
    if (order === 'urgent' && a.urgency !== b.urgency) return b.urgency - a.urgency;
    if (a.at !== b.at) return b.at - a.at;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  };
}

function matches(item: IndexedItem, filters: ItemFilters): boolean {
  return INDEXED_FIELDS.every((field) => {
    const wanted = filters[field];
    if (wanted === undefined) return true;
    const list = typeof wanted === 'string' ? [wanted] : wanted;
    return item[field] !== undefined && list.includes(item[field] as string);
  });
}

describe('indexed item store (real Redis)', () => {
  let fx: RedisFixture;
  let items: ItemStore<InboxItem>;
  let seq = 0;
  const run = (...ops: ProjectionOp[]) => fx.store.apply(inbox, { ...taskEvent(++seq, 'inbox.ops', 'x', {}), payload: { ops } });

  beforeEach(async () => {
    fx = await redisFixture();
    items = fx.store.items<InboxItem>('inbox', 'inbox');
    seq = 0;
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  async function readAll(order: ItemOrder, filters: ItemFilters = {}, limit = 20, scanBudget?: number): Promise<InboxItem[]> {
    const out: InboxItem[] = [];
    let cursor: string | null = null;
    do {
      const page: { items: InboxItem[]; nextCursor: string | null } = await items.query({
        filters,
        order,
        limit,
        cursor,
        ...(scanBudget ? { scanBudget } : {}),
      });
      expect(page.items.length).toBeLessThanOrEqual(limit);
      out.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor);
    return out;
  }

  it('a time window (newest order) seeks: its pages hold exactly the items in the window, both ends included, with no empty page before them, whatever the filters', async () => {
    const all = Array.from({ length: 90 }, (_, i) => makeItem(i));
    await run(...all.map((item) => Op.itemUpsert('inbox', item)));
    const t = (k: number) => 1_700_000_000_000 + k * 1000;
    const windows = [
      { since: t(5), until: t(10) },
      { until: t(3) },
      { since: t(27) },
      { since: t(12), until: t(12) },
      { since: t(40), until: t(50) },
      { since: t(11), until: t(10) },
    ];
    for (const window of windows) {
      for (const filters of [{}, { project: 'alpha' }, { kind: ['stop', 'hold'], status: 'open' }] as ItemFilters[]) {
        const expected = all
          .filter(
            (item) =>
              matches(item, filters) && (window.since === undefined || item.at >= window.since) && (window.until === undefined || item.at <= window.until),
          )
          .sort(compare('newest'));
        const got: InboxItem[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const page: { items: InboxItem[]; nextCursor: string | null } = await items.query({ filters, order: 'newest', limit: 1, cursor, window });
          pages++;
          got.push(...page.items);
          cursor = page.nextCursor;
        } while (cursor);
        expect({ window, filters, ids: got.map((i) => i.id) }).toEqual({ window, filters, ids: expected.map((i) => i.id) });
        // One page per item (limit 1), the last with no cursor: nothing is spent on what lies outside the window.
        expect({ window, filters, pages }).toEqual({ window, filters, pages: Math.max(1, expected.length) });
      }
    }
    await expect(items.query({ order: 'urgent', window: { since: t(1) } })).rejects.toThrow(/newest order only/);
  });

  it('query filters by each indexed field, by combinations and by lists of values, and count matches', async () => {
    const all = Array.from({ length: 90 }, (_, i) => makeItem(i));
    await run(...all.map((item) => Op.itemUpsert('inbox', item)));
    const cases: ItemFilters[] = [
      {},
      { project: 'alpha' },
      { kind: 'hold' },
      { why: 'needs_input' },
      { agent: 'agent-1' },
      { priority: 'p2' },
      { status: 'resolved' },
      { project: 'beta', status: 'open' },
      { project: ['alpha', 'gamma'], why: ['loop_guard', 'deadline'] },
      { kind: ['stop', 'hold'], agent: 'agent-1', priority: ['p1', 'p3'], status: 'open' },
      { project: 'alpha', kind: 'hold', why: 'needs_input', agent: 'agent-1', priority: 'p1', status: 'open' },
      { project: 'nobody' },
      { project: [] },
    ];
    for (const filters of cases) {
      for (const order of ['newest', 'urgent'] as const) {
        const expected = all.filter((item) => matches(item, filters)).sort(compare(order));
        const got = await readAll(order, filters, 7);
        expect({ filters, order, ids: got.map((i) => i.id) }).toEqual({ filters, order, ids: expected.map((i) => i.id) });
      }
      expect({ filters, count: await items.count(filters) }).toEqual({ filters, count: all.filter((item) => matches(item, filters)).length });
    }
    // Sanity: the cases are not all trivially empty or full.
    expect(all.filter((item) => matches(item, cases[9])).length).toBeGreaterThan(0);
    expect(all.filter((item) => matches(item, cases[10])).map((i) => i.id)).toEqual(['item-021', 'item-033', 'item-057', 'item-069']);
    expect(await items.get('item-004')).toEqual(all[4]);
    expect(await items.get('missing')).toBeNull();
  });

  it('a count with a filter of several values (a token that sees several projects) is exact past a batch of its driver, and unions no history (no ZUNIONSTORE, nothing written)', async () => {
    const all = Array.from({ length: 1_200 }, (_, i) => makeItem(i));
    for (let i = 0; i < all.length; i += 300) await run(...all.slice(i, i + 300).map((item) => Op.itemUpsert('inbox', item)));
    const stats = async () => {
      const info = await fx.handle.client.info('commandstats');
      const calls = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
      return { zunionstore: calls('zunionstore'), zinterstore: calls('zinterstore') };
    };
    const before = await stats();
    const cases: ItemFilters[] = [
      { project: ['alpha', 'beta'], status: 'open' },
      { project: ['alpha', 'gamma'], kind: ['stop', 'hold'], status: 'open' },
      { project: ['alpha', 'beta', 'gamma'], status: 'resolved' },
      { kind: 'hold', status: 'open' },
      { project: ['alpha', 'beta'] },
    ];
    for (const filters of cases) {
      const expected = all.filter((item) => matches(item, filters)).length;
      expect({ filters, count: await items.count(filters) }).toEqual({ filters, count: expected });
    }
    // The open items of two projects are more than one batch (500) of the driver: the walk goes on.
    expect(all.filter((item) => matches(item, cases[0]!)).length).toBeGreaterThan(500);
    expect(await stats()).toEqual(before);
  });

  it('a page examines at most its scan budget: pages end early with a cursor, and reading on gives exactly the matching items in order', async () => {
    const all = Array.from({ length: 90 }, (_, i) => makeItem(i));
    await run(...all.map((item) => Op.itemUpsert('inbox', item)));
    const cases: ItemFilters[] = [
      { project: ['alpha', 'gamma'], why: ['loop_guard', 'deadline'] },
      { kind: ['stop', 'hold'], agent: 'agent-1', priority: ['p1', 'p3'], status: 'open' },
      { status: 'resolved' },
      { project: ['alpha', 'beta', 'gamma'], status: 'resolved' },
      {},
    ];
    for (const filters of cases) {
      for (const order of ['newest', 'urgent'] as const) {
        const expected = all
          .filter((item) => matches(item, filters))
          .sort(compare(order))
          .map((i) => i.id);
        for (const [limit, budget] of [
          [5, 1],
          [5, 3],
          [1, 2],
          [50, 7],
        ] as const) {
          const got = (await readAll(order, filters, limit, budget)).map((i) => i.id);
          expect({ filters, order, limit, budget, ids: got }).toEqual({ filters, order, limit, budget, ids: expected });
        }
      }
    }
    // The bound holds: with a budget of 3, a first page of a rare filter holds what 3 candidates gave.
    const rare = await items.query({ filters: { status: 'resolved', project: ['alpha', 'beta', 'gamma'] }, limit: 50, scanBudget: 3 });
    expect(rare.items.length).toBeLessThanOrEqual(3);
    expect(rare.nextCursor).not.toBeNull();
  });

  it('upsert moves an item out of its old index sets when an indexed field changes; patch and remove keep every index right', async () => {
    const item = makeItem(1);
    await run(Op.itemUpsert('inbox', item));
    await run(Op.itemUpsert('inbox', { ...item, project: 'beta', why: 'deadline', urgency: 9 }));
    expect(await items.count({ project: 'alpha' })).toBe(0);
    expect(await items.count({ project: 'beta' })).toBe(1);
    expect(item.why).toBe('loop_guard');
    expect(await items.count({ why: 'loop_guard' })).toBe(0);
    expect(await items.count({ why: 'deadline' })).toBe(1);
    await run(Op.itemPatch('inbox', item.id, { status: 'resolved', at: 5 }, ['agent']));
    expect(await items.count({ status: 'open' })).toBe(0);
    expect(await items.count({ agent: item.agent! })).toBe(0);
    expect(await items.get(item.id)).toEqual({ ...item, project: 'beta', why: 'deadline', urgency: 9, status: 'resolved', at: 5, agent: undefined });
    await run(Op.itemPatch('inbox', 'missing', { status: 'resolved' }));
    expect(await items.count()).toBe(1);
    await run(Op.itemRemove('inbox', item.id));
    expect(await items.count()).toBe(0);
    expect(await items.count({ status: 'resolved' })).toBe(0);
    const snapshot = await fx.store.snapshot('inbox');
    expect(Object.keys(snapshot.keys)).toEqual([]);
  });

  it('a conditional patch changes an item only while the named field holds the value, indexes included', async () => {
    const item = { ...makeItem(2), status: 'open' };
    await run(Op.itemUpsert('inbox', item));
    await run(Op.itemPatch('inbox', item.id, { status: 'closed', title: 'first' }, undefined, { field: 'status', is: 'open' }));
    // The item is closed now: a second close on the same condition leaves the first one's fields.
    await run(Op.itemPatch('inbox', item.id, { status: 'archived', title: 'second' }, ['agent'], { field: 'status', is: 'open' }));
    expect(await items.get(item.id)).toEqual({ ...item, status: 'closed', title: 'first' });
    expect(await items.count({ status: 'closed' })).toBe(1);
    expect(await items.count({ status: 'archived' })).toBe(0);
    expect(await items.count({ agent: item.agent! })).toBe(1);
    // A field the item lacks never holds the value; a missing item stays missing.
    await run(Op.itemPatch('inbox', item.id, { title: 'third' }, undefined, { field: 'nope', is: '' }));
    await run(Op.itemPatch('inbox', 'missing', { status: 'open' }, undefined, { field: 'status', is: 'open' }));
    expect((await items.get(item.id))?.title).toBe('first');
    expect(await items.count()).toBe(1);
  });

  it.each(['newest', 'urgent'] as const)(
    'cursor paging (%s) over 250 items with page size 20 visits each item exactly once, in order, while new items are inserted',
    async (order) => {
      const original = Array.from({ length: 250 }, (_, i) => makeItem(i));
      await run(...original.map((item) => Op.itemUpsert('inbox', item)));
      const seen: InboxItem[] = [];
      let cursor: string | null = null;
      let inserted = 0;
      let pages = 0;
      do {
        const page: { items: InboxItem[]; nextCursor: string | null } = await items.query({ order, limit: 20, cursor });
        seen.push(...page.items);
        cursor = page.nextCursor;
        pages++;
        // Between pages: one item sorting before everything (already passed), one after everything,
        // and one tying exactly with the cursor's sort fields.
        const n = 1000 + inserted++;
        const last = page.items[page.items.length - 1];
        await run(
          Op.itemUpsert('inbox', { ...makeItem(n), id: `new-${n}-first`, urgency: 100, at: 1_800_000_000_000 }),
          Op.itemUpsert('inbox', { ...makeItem(n), id: `new-${n}-last`, urgency: -100, at: 1_600_000_000_000 + n }),
          Op.itemUpsert('inbox', { ...makeItem(n), id: `new-${n}-tie`, urgency: last.urgency, at: last.at }),
        );
      } while (cursor);
      const ids = seen.map((i) => i.id);
      expect(new Set(ids).size).toBe(ids.length);
      const originalIds = new Set(original.map((i) => i.id));
      const seenOriginal = seen.filter((i) => originalIds.has(i.id));
      expect(seenOriginal.map((i) => i.id)).toEqual([...original].sort(compare(order)).map((i) => i.id));
      expect([...seen].sort(compare(order)).map((i) => i.id)).toEqual(ids);
      expect(ids.some((id) => id.endsWith('-first'))).toBe(false);
      expect(ids.filter((id) => id.endsWith('-last')).length).toBeGreaterThan(0);
      expect(pages).toBeGreaterThanOrEqual(13);
      expect(await items.count()).toBe(250 + 3 * inserted);
    },
  );

  it('a cursor is opaque and bound to its order; a forged or foreign cursor is refused', async () => {
    await run(...Array.from({ length: 5 }, (_, i) => Op.itemUpsert('inbox', makeItem(i))));
    const page = await items.query({ order: 'newest', limit: 2 });
    expect(page.nextCursor).toMatch(/^[A-Za-z0-9_-]+$/);
    await expect(items.query({ order: 'urgent', cursor: page.nextCursor })).rejects.toThrow(InvalidCursorError);
    await expect(items.query({ cursor: 'not-a-cursor' })).rejects.toThrow(InvalidCursorError);
    await expect(items.query({ limit: 0 })).rejects.toThrow(/limit/);
  });

  it('negative, fractional and zero urgencies sort numerically', async () => {
    const urgencies = [-3.5, 0, -0, 2, 2.25, -1e9, 1e9, 0.001];
    await run(...urgencies.map((urgency, i) => Op.itemUpsert('inbox', { ...makeItem(i), urgency, at: 1000 + i })));
    const got = await readAll('urgent', {}, 3);
    const expected = urgencies.map((urgency, i) => ({ ...makeItem(i), urgency, at: 1000 + i })).sort(compare('urgent'));
    expect(got.map((i) => i.id)).toEqual(expected.map((i) => i.id));
  });

  it('an item store lives in the projection generation: a rebuild rebuilds its indexes too', async () => {
    const all = Array.from({ length: 30 }, (_, i) => makeItem(i));
    const events = all.map((item, i) => ({ ...taskEvent(i + 1, 'inbox.ops', 'x', {}), payload: { ops: [Op.itemUpsert('inbox', item)] } }));
    await fx.store.applyBatch(inbox, events);
    const before = await readAll('urgent', { status: 'open' });
    await fx.store.rebuild(inbox, (from) =>
      (async function* () {
        yield* events.filter((e) => e.seq >= from);
      })(),
    );
    expect(await fx.store.activeGeneration('inbox')).toBe(2);
    expect(await readAll('urgent', { status: 'open' })).toEqual(before);
  });
});
