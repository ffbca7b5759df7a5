import fc from 'fast-check';
import { ProcessedIds } from './processed-ids';
import { hasProcessedId, withProcessedId } from './state';

/**
 * A run's applied ids answer what an array grown by copying would answer, for values grown along
 * any branches (an older value grown again, the same id added on two branches in another order)
 * and for arrays (a state decoded from JSON) — and a long run's ids grow in linear time.
 */
describe('processed ids', () => {
  const idArb = fc.integer({ min: 0, max: 150 }).map((n) => `res-${n}`);

  it('agree with arrays grown by copying, along random branches', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ from: fc.nat(), id: idArb }), { minLength: 50, maxLength: 400 }),
        fc.array(idArb, { minLength: 20, maxLength: 40 }),
        (steps, queries) => {
          const seed = Array.from({ length: 60 }, (_, i) => `seed-${i}`);
          const values: ProcessedIds[] = [ProcessedIds.of(seed)];
          const arrays: string[][] = [seed];
          for (const step of steps) {
            const from = step.from % values.length;
            values.push(withProcessedId(values[from]!, step.id));
            const array = arrays[from]!;
            arrays.push(array.includes(step.id) ? array : [...array, step.id]);
          }
          values.forEach((value, i) => {
            const array = arrays[i]!;
            expect([...value]).toEqual(array);
            expect(value.length).toBe(array.length);
            expect(value.toJSON()).toEqual(array);
            for (const query of [...queries, ...array.slice(-3)]) expect(hasProcessedId(value, query)).toBe(array.includes(query));
          });
        },
      ),
      { numRuns: 40 },
    );
  });

  it('adds only ids it does not hold, whatever branch added them first; the value grown from is unchanged', () => {
    const base = ProcessedIds.of(Array.from({ length: 70 }, (_, i) => `id-${i}`));
    const left = withProcessedId(withProcessedId(base, 'x'), 'y');
    const right = withProcessedId(withProcessedId(base, 'y'), 'x');
    expect([...right].slice(-2)).toEqual(['y', 'x']);
    expect([...left].slice(-2)).toEqual(['x', 'y']);
    for (const value of [left, right]) {
      expect(hasProcessedId(value, 'x')).toBe(true);
      expect(hasProcessedId(value, 'y')).toBe(true);
      expect(withProcessedId(value, 'x')).toBe(value);
      expect(hasProcessedId(value, 'z')).toBe(false);
    }
    expect(base.length).toBe(70);
    expect(hasProcessedId(base, 'x')).toBe(false);
    expect(left).toEqual(ProcessedIds.of([...base, 'x', 'y']));
    expect(JSON.stringify({ ids: right })).toBe(JSON.stringify({ ids: [...base, 'y', 'x'] }));
  });

  it('a value grown again by the id another value was grown by from it (a decision, then the fold of its event) shares that history instead of copying it', () => {
    const historyOf = (value: ProcessedIds) => Object.getOwnPropertyDescriptor(value, 'history')!.value as { ids: string[] };
    const base = ProcessedIds.of(Array.from({ length: 1_000 }, (_, i) => `id-${i}`));
    const decided = withProcessedId(withProcessedId(base, 'res-a'), 'msg-b');
    const folded = withProcessedId(withProcessedId(base, 'res-a'), 'msg-b');
    expect(folded).toEqual(decided);
    expect(historyOf(folded)).toBe(historyOf(base));
    expect(historyOf(base).ids.length).toBe(1_002);
    // Grown on from either, the newest value appends in place; the other then branches with a copy.
    const next = withProcessedId(folded, 'res-c');
    expect(historyOf(next)).toBe(historyOf(base));
    const other = withProcessedId(decided, 'res-d');
    expect(historyOf(other)).not.toBe(historyOf(base));
    expect([...other].slice(-3)).toEqual(['res-a', 'msg-b', 'res-d']);
    expect([...next].slice(-3)).toEqual(['res-a', 'msg-b', 'res-c']);
    expect(hasProcessedId(next, 'res-d')).toBe(false);
    expect(hasProcessedId(other, 'res-c')).toBe(false);
    // A different id from the same base branches too.
    const elsewhere = withProcessedId(base, 'res-z');
    expect(historyOf(elsewhere)).not.toBe(historyOf(base));
    expect(base.length).toBe(1_000);
    expect(hasProcessedId(base, 'res-a')).toBe(false);
  });

  it('on an array (a decoded state)', () => {
    const decoded = JSON.parse(JSON.stringify(Array.from({ length: 100 }, (_, i) => `r-${i}`))) as string[];
    expect(hasProcessedId(decoded, 'r-99')).toBe(true);
    expect(hasProcessedId(decoded, 'r-100')).toBe(false);
    const grown = withProcessedId(decoded, 'r-100');
    expect(hasProcessedId(grown, 'r-100')).toBe(true);
    expect(grown.length).toBe(101);
  });

  it('a long run: 100 000 ids, each added to the newest value in place; the values grown from keep their own view', () => {
    let ids = ProcessedIds.of(['wr-1']);
    const older: ProcessedIds[] = [];
    for (let i = 0; i < 100_000; i++) {
      ids = withProcessedId(ids, `res-${i}`);
      if (i % 25_000 === 0) older.push(ids);
    }
    expect(ids.length).toBe(100_001);
    expect(hasProcessedId(ids, 'res-99999')).toBe(true);
    // The values grown from kept their own view of the shared history.
    expect(older.map((value) => value.length)).toEqual([2, 25_002, 50_002, 75_002]);
    expect(hasProcessedId(older[1]!, 'res-25000')).toBe(true);
    expect(hasProcessedId(older[1]!, 'res-25001')).toBe(false);
  });
});
