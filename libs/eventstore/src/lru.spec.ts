import { ProcessedIds } from '@baton/domain';
import { heapWeight } from './heap-weight';
import { LruCache } from './lru';

describe('LruCache', () => {
  it('evicts the least recently used entry past its capacity (a get refreshes)', () => {
    const cache = new LruCache<string, number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    expect(cache.get('a')).toBe(1);
    cache.set('c', 3);
    expect(cache.get('b')).toBeUndefined();
    expect([cache.get('a'), cache.get('c')]).toEqual([1, 3]);
    expect(cache.evicted).toBe(1);
    expect(cache.weight).toBe(0);
  });

  it('tells onEvict of each entry evicted to keep within the bounds, never of one deleted, cleared or replaced', () => {
    const evicted: [string, number][] = [];
    const cache = new LruCache<string, number>(2, undefined, (key, value) => evicted.push([key, value]));
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('a', 10); // replaced: a is the newest now
    cache.set('c', 3); // b goes
    cache.delete('c');
    cache.set('d', 4);
    cache.set('e', 5); // a goes
    cache.clear();
    expect(evicted).toEqual([
      ['b', 2],
      ['a', 10],
    ]);
    expect(cache.evicted).toBe(2);
  });

  describe('with a weight bound', () => {
    const weighed = (max: number, capacity = 100) => new LruCache<string, { w: number }>(capacity, { max, of: (v) => v.w });

    it('evicts the oldest entries until the rest weigh no more than the bound, and keeps the total', () => {
      const cache = weighed(100);
      cache.set('a', { w: 40 });
      cache.set('b', { w: 40 });
      expect(cache.weight).toBe(80);
      cache.get('a');
      cache.set('c', { w: 30 }); // 110 > 100: b (oldest now) goes
      expect(cache.get('b')).toBeUndefined();
      expect(cache.weight).toBe(70);
      expect(cache.size).toBe(2);
      expect(cache.evicted).toBe(1);
    });

    it('replacing a key swaps its weight, and deleting or clearing takes it off', () => {
      const cache = weighed(100);
      cache.set('a', { w: 10 });
      cache.set('a', { w: 25 });
      expect(cache.weight).toBe(25);
      cache.set('b', { w: 5 });
      cache.delete('a');
      expect(cache.weight).toBe(5);
      cache.delete('missing');
      expect(cache.weight).toBe(5);
      cache.clear();
      expect([cache.size, cache.weight]).toEqual([0, 0]);
    });

    it('takes a weight the caller gives instead of weighing the value, and takes that weight off again', () => {
      const cache = weighed(100);
      cache.set('a', { w: 1 }, 60);
      cache.set('b', { w: 1 }, 30);
      expect(cache.weight).toBe(90);
      cache.set('c', { w: 1 }, 20); // 110: a goes
      expect(cache.get('a')).toBeUndefined();
      expect(cache.weight).toBe(50);
      cache.delete('b');
      expect(cache.weight).toBe(20);
      expect(() => cache.set('d', { w: 1 }, -5)).toThrow(/finite number/);
    });

    it('keeps an entry heavier than the whole bound alone rather than not at all (it is the one in use)', () => {
      const cache = weighed(100);
      cache.set('a', { w: 30 });
      cache.set('b', { w: 30 });
      cache.set('huge', { w: 500 });
      expect(cache.size).toBe(1);
      expect(cache.get('huge')).toEqual({ w: 500 });
      expect(cache.weight).toBe(500);
      cache.set('c', { w: 10 }); // the huge one is now the oldest and over the bound
      expect(cache.get('huge')).toBeUndefined();
      expect(cache.weight).toBe(10);
    });

    it('the count bound still holds when entries weigh little', () => {
      const cache = weighed(1_000_000, 3);
      for (const key of ['a', 'b', 'c', 'd', 'e']) cache.set(key, { w: 1 });
      expect(cache.size).toBe(3);
      expect(cache.weight).toBe(3);
      expect(cache.evicted).toBe(2);
    });

    it('refuses a bound that is not positive and a weight that is not a finite number ≥ 0', () => {
      expect(() => weighed(0)).toThrow(/weight bound/);
      const cache = weighed(10);
      expect(() => cache.set('a', { w: -1 })).toThrow(/finite number/);
      expect(() => cache.set('b', { w: Number.NaN })).toThrow(/finite number/);
      expect([cache.size, cache.weight]).toEqual([0, 0]);
    });
  });
});

describe('heapWeight', () => {
  it('counts strings by length, objects and arrays by their slots, and numbers that are not small integers', () => {
    expect(heapWeight('abcd')).toBe(20);
    expect(heapWeight(7)).toBe(0);
    expect(heapWeight(1.5)).toBe(16);
    expect(heapWeight(2 ** 40)).toBe(16);
    expect(heapWeight(null)).toBe(0);
    expect(heapWeight(true)).toBe(0);
    expect(heapWeight({ a: 'xy' })).toBe(24 + 8 + 18);
    expect(heapWeight(['xy', 1])).toBe(32 + 16 + 18);
  });

  it('grows with what a value holds, and walks deep values without recursion', () => {
    const context = 'x'.repeat(550);
    expect(heapWeight({ summary: 's', context })).toBeGreaterThan(heapWeight({ summary: 's' }) + 550);
    let deep: unknown = 'leaf';
    for (let i = 0; i < 100_000; i++) deep = { next: deep };
    expect(heapWeight(deep)).toBe(100_000 * 32 + 20);
  });

  it("weighs a value with a JSON form of its own by that form, and one that names what it keeps (a run's processed ids) by that", () => {
    const dated = { when: new Date(0) };
    expect(heapWeight(dated)).toBe(24 + 8 + 24 + heapWeight(new Date(0).toJSON()));
    const ids = ProcessedIds.of(['r-1', 'r-2', 'r-3']);
    const strings = heapWeight(['r-1', 'r-2', 'r-3']) - 32 - 8 * 3;
    // The history: its ids and the map from each id to its place (the strings counted once per side).
    const history = 24 + 2 * 8 + heapWeight(['r-1', 'r-2', 'r-3']) + (24 + 32 * 3 + strings);
    expect(heapWeight({ processedIds: ids })).toBe(24 + 8 + 24 + history);
    // More than its JSON form: the look-up map is a third or more of a long run's ids.
    const long = ProcessedIds.of(Array.from({ length: 10_000 }, (_, i) => `res-${i}`));
    expect(heapWeight(long)).toBeGreaterThan(1.4 * heapWeight(long.toJSON()));
  });

  it('weighs a Map and a Set by their entries, keys and values', () => {
    expect(heapWeight(new Map([['ab', 'cd']]))).toBe(24 + 32 + 18 + 18);
    expect(heapWeight(new Map([[1, 2]]))).toBe(24 + 32);
    expect(heapWeight(new Set(['ab', 'cde']))).toBe(24 + 2 * 32 + 18 + 19);
    expect(heapWeight({ s: new Set() })).toBe(24 + 8 + 24);
  });

  it('stops counting at the limit it is given', () => {
    const big = Array.from({ length: 10_000 }, (_, i) => `item-${i}`);
    const full = heapWeight(big);
    // The array's own slots pass the limit at once: none of its strings is visited.
    expect(heapWeight(big, 1_000)).toBe(32 + 8 * 10_000);
    expect(full).toBeGreaterThan(32 + 8 * 10_000 + 10_000 * 16);
  });
});
