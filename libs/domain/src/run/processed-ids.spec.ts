import fc from 'fast-check';
import { hasProcessedId, withProcessedId } from './state';

/**
 * `hasProcessedId` answers what `Array.prototype.includes` answers, for lists grown by
 * `withProcessedId` along any branches (an older list grown again, the same id appended on two
 * branches at different positions) and for lists built otherwise (a state decoded from JSON).
 */
describe('processed ids: the index agrees with a scan', () => {
  const idArb = fc.integer({ min: 0, max: 150 }).map((n) => `res-${n}`);

  it('on lists grown along random branches, past the length from which they are indexed', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ from: fc.nat(), id: idArb }), { minLength: 50, maxLength: 400 }),
        fc.array(idArb, { minLength: 20, maxLength: 40 }),
        (steps, queries) => {
          const lists: (readonly string[])[] = [Array.from({ length: 60 }, (_, i) => `seed-${i}`)];
          for (const step of steps) lists.push(withProcessedId(lists[step.from % lists.length] as readonly string[], step.id));
          for (const list of lists) {
            for (const query of [...queries, ...list.slice(-3)]) expect(hasProcessedId(list, query)).toBe(list.includes(query));
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it('appends only ids the list does not hold, whatever branch indexed them first', () => {
    const base = Array.from({ length: 70 }, (_, i) => `id-${i}`);
    const left = withProcessedId(withProcessedId(base, 'x'), 'y'); // x at 70, y at 71
    const right = withProcessedId(withProcessedId(base, 'y'), 'x'); // y at 70, x at 71: the index says otherwise
    expect(right.slice(-2)).toEqual(['y', 'x']);
    for (const list of [left, right]) {
      expect(hasProcessedId(list, 'x')).toBe(true);
      expect(hasProcessedId(list, 'y')).toBe(true);
      expect(withProcessedId(list, 'x')).toBe(list);
      expect(hasProcessedId(list, 'z')).toBe(false);
    }
    expect(hasProcessedId(withProcessedId(base, 'y'), 'x')).toBe(false);
    expect(hasProcessedId(base, 'x')).toBe(false);
  });

  it('on a list no withProcessedId built (a decoded state)', () => {
    const decoded = JSON.parse(JSON.stringify(Array.from({ length: 100 }, (_, i) => `r-${i}`))) as string[];
    expect(hasProcessedId(decoded, 'r-99')).toBe(true);
    expect(hasProcessedId(decoded, 'r-100')).toBe(false);
    expect(hasProcessedId(withProcessedId(decoded, 'r-100'), 'r-100')).toBe(true);
  });
});
