import { GenerationImage } from './image';
import { WrittenKeys } from './written-keys';

describe('WrittenKeys', () => {
  const keys = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}:${i.toString(36)}:${(i * 2654435761) % 1000003}`);

  it('never says "absent" for a key it was given, whatever its size', () => {
    for (const log2Bits of [5, 10, 23]) {
      const filter = new WrittenKeys(log2Bits);
      const added = keys('m:ho:proj', 20_000);
      for (const key of added) filter.add(key);
      expect(added.filter((key) => !filter.mightHave(key))).toEqual([]);
      expect(filter.added).toBe(20_000);
    }
    // CPU-bound (a few seconds alone): room for a CI machine running other suites beside it.
  }, 60_000);

  it('says "absent" for nearly every key it was not given at its default size', () => {
    const filter = new WrittenKeys();
    for (const key of keys('m:run:proj', 100_000)) filter.add(key);
    const others = keys('m:ho:other', 100_000);
    const falsePositives = others.filter((key) => filter.mightHave(key)).length;
    // 4 hashes over 2^23 bits with 100 000 keys: about 0.0005 % in theory.
    expect(falsePositives / others.length).toBeLessThan(0.001);
    // A full tiny filter says "maybe" to everything: safe, only useless.
    const tiny = new WrittenKeys(5);
    for (const key of keys('a', 1_000)) tiny.add(key);
    expect(keys('b', 100).every((key) => tiny.mightHave(key))).toBe(true);
  }, 60_000);

  it('refuses sizes it cannot hold', () => {
    expect(() => new WrittenKeys(4)).toThrow(RangeError);
    expect(() => new WrittenKeys(32)).toThrow(RangeError);
    expect(() => new WrittenKeys(20, 0)).toThrow(RangeError);
  });
});

describe('GenerationImage: keys it never wrote are absent without a read', () => {
  it('a state key never written is taken as absent; one written and evicted from memory must be read back', () => {
    const image = new GenerationImage('t', { stateCacheSize: 1 });
    // Chunk 1: a state for `s:a`, and `s:b` written only by an op (not as a fold state).
    expect(image.missing(['s:a'])).toEqual([]);
    expect(image.state('s:a')).toBeNull();
    image.setState('s:a', { n: 1 });
    image.apply([{ op: 'json.set', key: 's:b', value: { n: 2 } }], { projection: 't', seq: 1 });
    image.unpin();
    image.itemsToLoad();
    image.drain(new Map());
    // Chunk 2: `s:c` evicts `s:a` from the one-entry cache.
    expect(image.missing(['s:c'])).toEqual([]);
    image.setState('s:c', { n: 3 });
    image.unpin();
    image.itemsToLoad();
    image.drain(new Map());
    expect(image.skippedReads).toBe(2);
    // `s:a` was written (and left memory), `s:b` was written by an op: both are read back.
    expect(image.missing(['s:a', 's:b', 's:never'])).toEqual(['s:a', 's:b']);
    expect(image.state('s:never')).toBeNull();
    expect(image.skippedReads).toBe(3);
  });

  it('an item document never written is taken as absent; one written and evicted is loaded', () => {
    const image = new GenerationImage('t', { itemCacheSize: 1 });
    const upsert = (id: string, seq: number) =>
      image.apply([{ op: 'item.upsert', store: 'tasks', item: { id, project: 'p', kind: 'task', status: 'open', urgency: 1, at: seq } }], {
        projection: 't',
        seq,
      });
    upsert('x', 1);
    expect(image.itemsToLoad()).toEqual([]);
    image.drain(new Map());
    upsert('y', 2);
    expect(image.itemsToLoad()).toEqual([]);
    image.drain(new Map());
    // `x` left the one-entry cache: its document is in the shadow and must be loaded.
    upsert('x', 3);
    expect(image.itemsToLoad()).toHaveLength(1);
  });
});
