import fc from 'fast-check';
import { canonicalJson, canonicalJsonChecked, freezeJson, isExactJson, sortedKeys } from './canonical-json';

/*
 * canonicalJsonChecked keeps the sorted copy of a value frozen all the way down and reuses it for
 * every later value that holds it (a run's hundred routes, written with each run event). What it
 * writes must never depend on that: same text as a fresh serialisation, every time, whatever is
 * frozen, and a frozen value whose members can still change is never taken from memory.
 */
describe('canonicalJsonChecked with frozen values', () => {
  const textOf = (value: unknown) => {
    const out = canonicalJsonChecked(value);
    if (!out.ok) throw new Error(`not JSON at ${out.notJson.path}: ${out.notJson.problem}`);
    return out.text;
  };

  it('writes the same text as the unfrozen value, on first and later calls, frozen parts shared between values', () => {
    fc.assert(
      fc.property(fc.array(fc.jsonValue(), { minLength: 1, maxLength: 6 }), fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }), (parts, freeze) => {
        const expected = canonicalJson(parts);
        const shared = parts.map((part, i) =>
          freeze[i] ? freezeJson(JSON.parse(JSON.stringify(part)) as unknown) : (JSON.parse(JSON.stringify(part)) as unknown),
        );
        for (let call = 0; call < 3; call++) {
          // A new holder each time, as a fold's next state is: only the frozen parts are the same objects.
          expect(textOf({ items: [...shared], call })).toBe(canonicalJson({ items: parts, call }));
        }
        expect(textOf(shared)).toBe(expected);
      }),
      { numRuns: 200 },
    );
  });

  it('an own "__proto__" member (as JSON.parse makes it) is written as a member, frozen or not; never dropped, never turning the object into an array', () => {
    // The counterexample the property above once found: the sorted copy assigned `__proto__`, which
    // set the copy's prototype instead (unfrozen: the member vanished; frozen: the object came out as `[]`).
    const parsed = () => JSON.parse('{"__proto__":[],"a":{"__proto__":{"b":1}}}') as unknown;
    const text = '{"__proto__":[],"a":{"__proto__":{"b":1}}}';
    expect(canonicalJson(parsed())).toBe(text);
    expect(textOf(parsed())).toBe(text);
    const frozen = freezeJson(parsed());
    expect(textOf(frozen)).toBe(text);
    expect(textOf({ items: [frozen, {}], call: 0 })).toBe(`{"call":0,"items":[${text},{}]}`);
    expect(isExactJson(parsed())).toBe(true);
  });

  it('a frozen object with a member that can change is serialised afresh', () => {
    const inner = { b: 1 };
    const outer = Object.freeze({ z: inner, a: 'x' });
    expect(textOf(outer)).toBe('{"a":"x","z":{"b":1}}');
    inner.b = 2;
    expect(textOf(outer)).toBe('{"a":"x","z":{"b":2}}');
    // Frozen all the way down, it is remembered; a fresh holder still sees it.
    const deep = freezeJson({ y: [1, { c: null }], x: true });
    expect(textOf({ deep })).toBe('{"deep":{"x":true,"y":[1,{"c":null}]}}');
    expect(textOf([deep, deep])).toBe('[{"x":true,"y":[1,{"c":null}]},{"x":true,"y":[1,{"c":null}]}]');
  });

  it('a frozen value that is not JSON is refused every time, with where and why', () => {
    const bad = freezeJson({ a: [1, Number.NaN] });
    for (let call = 0; call < 2; call++)
      expect(canonicalJsonChecked({ v: bad })).toEqual({ ok: false, notJson: { path: 'v.a[1]', problem: 'the number NaN is not finite' } });
  });

  it('isExactJson answers alike for a frozen value, on every call, and looks again at a frozen value with a member that can change', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.oneof(fc.constant(undefined), fc.constant(-0), fc.constant(1)), (value, odd) => {
        // The JSON round trip makes `value` exact (a -0 becomes 0); `odd` decides for the holder.
        const plain = { frozen: JSON.parse(JSON.stringify({ value })) as unknown, odd };
        const frozen = freezeJson(JSON.parse(JSON.stringify({ value })) as Record<string, unknown>);
        const holder = { frozen, odd };
        for (let call = 0; call < 2; call++) {
          expect(isExactJson(holder)).toBe(isExactJson(plain));
          expect(isExactJson(frozen)).toBe(true);
        }
      }),
      { numRuns: 200 },
    );
    const inner: Record<string, unknown> = { b: 1 };
    const outer = Object.freeze({ inner });
    expect(isExactJson(outer)).toBe(true);
    inner['b'] = undefined;
    expect(isExactJson(outer)).toBe(false);
  });
});

/*
 * sortedKeys remembers the sorted order of the key lists it has met. Whatever it remembers, its
 * answer must be exactly `Object.keys(value).sort()`: for lists met again, for lists that share a
 * first key or a length with a remembered one but differ further on, for integer-like keys (which
 * Object.keys lists first, in numeric order), past its bounds, and without the caller's objects
 * or the remembered orders being changed by a caller that reads the answer.
 */
describe('sortedKeys', () => {
  const keyName = fc.oneof(fc.constantFrom('a', 'b', 'id', 'status', 'z', '10', '2', '0', '__proto__x', ''), fc.string({ maxLength: 4 }));

  it('answers Object.keys(value).sort() for every object, met once or many times', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uniqueArray(keyName, { maxLength: 12 }), { minLength: 1, maxLength: 30 }),
        fc.array(fc.nat(), { maxLength: 60 }),
        (lists, order) => {
          const objects = lists.map((keys) => Object.fromEntries(keys.map((k, i) => [k, i])) as Record<string, number>);
          // Every object once, then again in a random order: remembered answers must still be right.
          for (const o of objects) expect(sortedKeys(o)).toEqual(Object.keys(o).sort());
          for (const pick of order) {
            const o = objects[pick % objects.length] as Record<string, number>;
            expect(sortedKeys(o)).toEqual(Object.keys(o).sort());
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('stays right past its bounds: many lists with one first key, long lists, objects used as maps', () => {
    for (let i = 0; i < 40; i++) {
      const o: Record<string, number> = { first: 0 };
      for (let k = 0; k <= i % 11; k++) o[`k${(i * 7 + k * 3) % 23}`] = k;
      expect(sortedKeys(o)).toEqual(Object.keys(o).sort());
      expect(sortedKeys(o)).toEqual(Object.keys(o).sort());
    }
    const long = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`key${(i * 37) % 100}`, i]));
    expect(sortedKeys(long)).toEqual(Object.keys(long).sort());
    for (let i = 0; i < 3000; i++) {
      const map = { [`agent-${i}`]: 1, [`agent-${i + 1}`]: 2, a: 3 };
      expect(sortedKeys(map)).toEqual(Object.keys(map).sort());
    }
  });

  it('the same keys inserted in another order give the same sorted answer', () => {
    const one = { status: 1, id: 2, at: 3 };
    const two = { at: 3, status: 1, id: 2 };
    expect(sortedKeys(one)).toEqual(['at', 'id', 'status']);
    expect(sortedKeys(two)).toEqual(['at', 'id', 'status']);
    expect(canonicalJson(one)).toBe(canonicalJson(two));
  });
});
