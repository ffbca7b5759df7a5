import { clipAround, differenceLines } from './rebuild';

describe('a difference between two long values shows where they differ', () => {
  const long = (hops: number) =>
    JSON.stringify({ workflow_run_id: 'wr-1', project: 'demo', people: { started_by: 'sam' }, variables: { a: 'x'.repeat(150) }, hops });

  it('both sides are cut around the first character that differs, not at the same leading characters', () => {
    const [a, b] = [long(2), long(7)];
    expect(a.slice(0, 160)).toBe(b.slice(0, 160));
    const [shownA, shownB] = [clipAround(a, b), clipAround(b, a)];
    expect(shownA).not.toBe(shownB);
    expect(shownA).toContain('"hops":2');
    expect(shownB).toContain('"hops":7');
    expect(shownA.startsWith('…')).toBe(true);
    expect(shownA.length).toBeLessThanOrEqual(160);
  });

  it('a short value is shown whole, and a long one with nothing to compare is cut at its start', () => {
    expect(clipAround('{"a":1}', '{"a":2}')).toBe('{"a":1}');
    const cut = clipAround('y'.repeat(300));
    expect(cut).toBe(`${'y'.repeat(159)}…`);
  });

  it('differenceLines uses it for both sides', () => {
    const text = differenceLines([{ key: 'run:demo:wr-1', a: { type: 'string', value: long(2) }, b: { type: 'string', value: long(7) } }] as never);
    expect(text).toMatch(/live: .*hops\\":2/);
    expect(text).toMatch(/rebuilt: .*hops\\":7/);
  });

  it('a key compared member by member shows each differing member (or hash field) with both sides, absent ones said, the rest counted', () => {
    const text = differenceLines([
      {
        key: '~items:inbox:doc:big',
        a: { type: 'hash', value: { f1: '"live"', f2: '"only live"' } },
        b: { type: 'hash', value: { f1: '"rebuilt"' } },
        differing_members: 2,
      },
      {
        key: 'ids',
        a: { type: 'set', value: [] },
        b: { type: 'set', value: Array.from({ length: 12 }, (_, i) => `m${String(i).padStart(2, '0')}`) },
        differing_members: 40,
      },
    ]);
    expect(text).toBe(
      [
        '  ~items:inbox:doc:big (hash compared field by field; 2 fields differ)',
        '    "f1": live "\\"live\\"", rebuilt "\\"rebuilt\\""',
        '    "f2": live "\\"only live\\"", rebuilt (absent)',
        '  ids (set compared member by member; 40 members differ)',
        ...Array.from({ length: 10 }, (_, i) => `    "m${String(i).padStart(2, '0')}": live (absent), rebuilt present`),
        '    … and 30 more members',
        '',
      ].join('\n'),
    );
  });
});
