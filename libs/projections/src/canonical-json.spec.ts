import fc from 'fast-check';
import { canonicalJson, canonicalJsonChecked, freezeJson, isExactJson } from './canonical-json';

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
