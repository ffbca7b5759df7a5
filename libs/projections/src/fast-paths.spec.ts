import fc from 'fast-check';
import { canonicalJson, canonicalJsonChecked, isExactJson, toJsonValue } from './canonical-json';
import { hexdesc } from './image';
import { encodeOps, opError } from './ops';

/*
 * The rebuild's shortcuts must agree with what they replace: `toJsonValue` with a JSON round trip,
 * `opError` with the op schema (encodeOps), `hexdesc` with the apply script's sort keys.
 */

const anything = fc.anything({
  withBoxedValues: true,
  withMap: true,
  withSet: true,
  withSparseArray: true,
  withDate: true,
  withNullPrototype: true,
  withObjectString: true,
  withTypedArray: false,
});

describe('rebuild fast paths agree with what they replace', () => {
  it('canonicalJsonChecked(v) is canonicalJson(v) for JSON values, and names where and why for anything else', () => {
    /** The reference verdict, walked plainly: the first problem in key order of the value as given. */
    const problemOf = (value: unknown, path: string): { path: string; problem: string } | null => {
      if (typeof value === 'string' || typeof value === 'boolean' || value === null) return null;
      if (typeof value === 'number') return Number.isFinite(value) ? null : { path, problem: `the number ${value} is not finite` };
      if (typeof value !== 'object') return { path, problem: `a ${typeof value} is not JSON` };
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          const inner = problemOf(value[i], `${path}[${i}]`);
          if (inner) return inner;
        }
        return null;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return { path, problem: 'not a plain object' };
      // The first problem in sorted key order.
      const keys = Object.keys(value).sort();
      for (const key of keys) {
        const member = (value as Record<string, unknown>)[key];
        if (member === undefined) continue;
        const inner = problemOf(member, path === '' ? key : `${path}.${key}`);
        if (inner) return inner;
      }
      return null;
    };
    fc.assert(
      fc.property(anything, (value) => {
        const problem = problemOf(value, '');
        const got = canonicalJsonChecked(value);
        if (problem) expect(got).toEqual({ ok: false, notJson: problem });
        else expect(got).toEqual({ ok: true, text: canonicalJson(value) });
      }),
      { numRuns: 3000 },
    );
    expect(canonicalJsonChecked({ b: [1, { d: 2, c: -0 }], a: 'x', u: undefined })).toEqual({ ok: true, text: '{"a":"x","b":[1,{"c":0,"d":2}]}' });
    // Array-index keys first, in numeric order, as in any JavaScript object (and so in canonicalJson).
    const indexed = { b: 1, '10': 2, '': 3, '9': 4, '01': 5, '4294967295': 6 };
    expect(canonicalJsonChecked(indexed)).toEqual({ ok: true, text: canonicalJson(indexed) });
    expect(canonicalJson(indexed)).toBe('{"9":4,"10":2,"":3,"01":5,"4294967295":6,"b":1}');
    expect(canonicalJsonChecked({ a: [{ b: Number.NaN }] })).toEqual({ ok: false, notJson: { path: 'a[0].b', problem: 'the number NaN is not finite' } });
  });

  it('toJsonValue(v) equals JSON.parse(JSON.stringify(v)), and returns v itself only when that is exact', () => {
    fc.assert(
      fc.property(anything, (value) => {
        let expected: unknown;
        try {
          const text = JSON.stringify(value);
          if (text === undefined) return; // not JSON at the top (undefined, a function): not a state
          expected = JSON.parse(text);
        } catch {
          return; // a bigint, a cycle: JSON.stringify throws, and so does the round trip
        }
        const got = toJsonValue(value);
        expect(got).toStrictEqual(expected);
        if (got === value) expect(JSON.stringify(value)).toBe(JSON.stringify(expected));
      }),
      { numRuns: 3000 },
    );
    expect(isExactJson({ a: [1, 'x', null, { b: true }] })).toBe(true);
    // A sparse array (a hole is not JSON) is one of the inexact values on purpose.
    // eslint-disable-next-line no-sparse-arrays
    for (const inexact of [{ a: undefined }, [1, , 2], -0, { d: new Date(0) }, { toJSON: () => 1 }, [undefined], Number.NaN, Object.create(null)])
      expect(isExactJson(inexact)).toBe(false);
  });

  it('toJsonValue answers a second call for the value it last returned as is without walking it again; any other value is walked', () => {
    // Counts the reads a walk makes (isExactJson reads every member through the proxy).
    let reads = 0;
    const counted = <T extends object>(target: T): T =>
      new Proxy(target, {
        get(t, key, receiver) {
          reads++;
          return Reflect.get(t, key, receiver) as unknown;
        },
      });
    const state = counted({ a: 1, b: ['x', { c: true }] });
    expect(toJsonValue(state)).toBe(state);
    const walked = reads;
    expect(walked).toBeGreaterThan(0);
    expect(toJsonValue(state)).toBe(state); // what a projection's step returned, stored by the engine
    expect(reads).toBe(walked);
    // Another value in between: the first one is walked again (only the last is remembered).
    expect(toJsonValue({ other: 1 })).toEqual({ other: 1 });
    expect(toJsonValue(state)).toBe(state);
    expect(reads).toBe(2 * walked);
    // An inexact value is never remembered: each call copies it.
    const inexact = { a: undefined, b: 1 };
    const first = toJsonValue(inexact);
    expect(first).toEqual({ b: 1 });
    expect(first).not.toBe(inexact);
    expect(toJsonValue(inexact)).not.toBe(inexact);
  });

  it('opError accepts exactly the ops encodeOps accepts, whatever they hold', () => {
    const key = fc.oneof(fc.constantFrom('k', '~meta', '', 'x'.repeat(513)), fc.string({ maxLength: 6 }));
    const index = fc.oneof(fc.string({ maxLength: 4 }), fc.constant('x'.repeat(201)), fc.integer(), fc.constant(undefined));
    const json = fc.oneof(fc.jsonValue({ maxDepth: 3 }), anything);
    const item = fc.record(
      {
        id: fc.oneof(fc.string({ maxLength: 4 }), fc.constant('y'.repeat(257)), fc.integer()),
        project: index,
        kind: index,
        status: index,
        why: index,
        agent: index,
        priority: index,
        urgency: fc.oneof(fc.double(), fc.integer(), fc.constant('1')),
        at: fc.oneof(fc.integer({ min: -5, max: 2e12 }), fc.double(), fc.constant(Number.MAX_SAFE_INTEGER + 2)),
        extra: json,
      },
      { requiredKeys: [] },
    );
    const op = fc.oneof(
      fc.record({ op: fc.constant('json.set'), key, value: json }),
      fc.record({ op: fc.constant('zadd'), key, score: fc.oneof(fc.double(), fc.integer()), member: fc.oneof(fc.string(), fc.integer()) }),
      fc.record({ op: fc.constant('del'), key }),
      fc.record({ op: fc.constant('set'), key, value: fc.oneof(fc.string(), fc.integer()) }),
      fc.record({ op: fc.constant('item.upsert'), store: fc.constantFrom('inbox', 'Bad', '', 'a'.repeat(70)), item }),
      fc.record(
        {
          op: fc.constant('item.patch'),
          store: fc.constantFrom('inbox', 'Bad'),
          id: fc.oneof(fc.string({ maxLength: 3 }), fc.integer()),
          set: item,
          unset: fc.option(fc.array(fc.constantFrom('why', 'at', '', 'x'), { maxLength: 3 }), { nil: undefined }),
          when: fc.option(
            fc.oneof(
              fc.record({
                field: fc.constantFrom('status', '', 'x'.repeat(101)),
                is: fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), fc.constant('y'.repeat(1_001))),
              }),
              fc.record({ field: fc.constant('status'), is: fc.constant('open'), more: fc.constant(1) }),
              anything,
            ),
            { nil: undefined },
          ),
        },
        { requiredKeys: ['op', 'store', 'id', 'set'] },
      ),
      fc.record({ op: fc.constant('item.remove'), store: fc.constantFrom('inbox', 'Bad'), id: fc.oneof(fc.string({ maxLength: 3 }), fc.integer()) }),
      fc.record({
        op: fc.constantFrom('hset', 'zrem', 'bogus'),
        key,
        fields: fc.dictionary(fc.string({ maxLength: 2 }), fc.oneof(fc.string(), fc.integer())),
        members: fc.array(fc.string(), { maxLength: 2 }),
      }),
      anything,
    );
    fc.assert(
      fc.property(op, (candidate) => {
        const encoded = encodeOps([candidate]);
        expect(opError(candidate) === null).toBe(!('error' in encoded));
      }),
      { numRuns: 5000 },
    );
  });

  it("hexdesc gives the apply script's sort keys: byte order is descending numeric order", () => {
    expect(hexdesc(0)).toBe(hexdesc(-0));
    expect(hexdesc(0)).toBe('7fffffffffffffff');
    fc.assert(
      fc.property(fc.double({ noNaN: true }), fc.double({ noNaN: true }), (a, b) => {
        const [ka, kb] = [hexdesc(a), hexdesc(b)];
        expect(ka).toMatch(/^[0-9a-f]{16}$/);
        if (a > b) expect(ka < kb).toBe(true);
        if (a === b) expect(ka).toBe(kb);
      }),
      { numRuns: 2000 },
    );
  });
});
