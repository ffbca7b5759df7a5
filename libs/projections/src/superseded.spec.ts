import { Op } from './ops';
import { opAt, supersededWrites, type PreparedEvent } from './store';

describe('supersededWrites: value writes a later write of the same key replaces within one atomic call', () => {
  const events = (...ops: Array<ReturnType<typeof Op.set>[]>): PreparedEvent[] => ops.map((list, i) => ({ seq: i + 1, ops: list }));

  it('a set or json.set followed by a set, json.set or del of the same key is superseded; the last write is kept', () => {
    const skipped = supersededWrites(
      events(
        [Op.jsonSet('rs:a', { n: 1 }), Op.set('x', '1')],
        [Op.jsonSet('rs:a', { n: 2 }), Op.zadd('rt:a', 2, 'two')],
        [Op.set('x', '2'), Op.del('rs:a')],
        [Op.jsonSet('rs:a', { n: 4 })],
      ),
    );
    expect([...skipped].sort()).toEqual([opAt(0, 0), opAt(0, 1), opAt(1, 0)].sort());
  });

  it('another op on the key in between keeps the write (its type check would see it), and so does a del before a write', () => {
    expect(supersededWrites(events([Op.set('k', 'a')], [Op.zadd('k', 1, 'm')], [Op.set('k', 'b')])).size).toBe(0);
    expect(supersededWrites(events([Op.set('k', 'a')], [Op.hset('k', { f: 1 })], [Op.del('k')])).size).toBe(0);
    expect(supersededWrites(events([Op.del('k')], [Op.set('k', 'a')])).size).toBe(0);
    // Item ops name a store, not a key: they leave the keys' writes alone.
    const item = Op.itemRemove('inbox', 'k');
    expect([...supersededWrites(events([Op.set('k', 'a')], [item], [Op.set('k', 'b')]))]).toEqual([opAt(0, 0)]);
  });

  it('names ops by position, so one op object given twice is still written where it is last', () => {
    const shared = Op.set('k', 'same');
    expect([...supersededWrites(events([shared], [shared]))]).toEqual([opAt(0, 0)]);
    expect(supersededWrites([]).size).toBe(0);
  });
});
