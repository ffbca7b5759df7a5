import { canonicalJson } from './canonical-json';
import { InvalidCursorError } from './errors';
import { decodeCursor, encodeCursor } from './items';
import { assertName, assertPrefix } from './keys';
import fc from 'fast-check';
import { decodeItemFields, encodeOps, Op, ProjectionOpSchema } from './ops';

describe('projection ops', () => {
  it('encodes every op to the compact wire shape, scalars as strings', () => {
    const encoded = encodeOps([
      Op.hset('h', { a: 1, b: 'x' }),
      Op.zadd('z', 1.5, 'm'),
      Op.jsonSet('j', { b: 1, a: [2, { d: 1, c: 0 }] }),
      Op.itemUpsert('inbox', { id: 'i1', project: 'p', kind: 'stop', status: 'open', urgency: 2, at: 10, extra: { y: 1, x: 2 } }),
      Op.itemPatch('inbox', 'i1', { status: 'done' }, ['why']),
      Op.itemRemove('inbox', 'i1'),
    ]);
    expect(encoded).toEqual({
      wire: [
        { o: 'hset', k: 'h', a: ['a', '1', 'b', 'x'] },
        { o: 'zadd', k: 'z', s: '1.5', m: 'm' },
        { o: 'set', k: 'j', v: '{"a":[2,{"c":0,"d":1}],"b":1}' },
        {
          o: 'iput',
          st: 'inbox',
          id: 'i1',
          a: ['at', '10', 'extra', '{"x":2,"y":1}', 'id', '"i1"', 'kind', '"stop"', 'project', '"p"', 'status', '"open"', 'urgency', '2'],
        },
        { o: 'ipatch', st: 'inbox', id: 'i1', a: ['status', '"done"'], u: ['why'] },
        { o: 'irem', st: 'inbox', id: 'i1' },
      ],
    });
  });

  it('refuses keys reserved for the engine, non-finite scores, incomplete items and unsetting required item fields', () => {
    expect(encodeOps([Op.set('~meta', 'x')])).toMatchObject({ opIndex: 0, error: expect.stringMatching(/reserved/) });
    expect(encodeOps([Op.del('ok'), Op.zadd('z', Infinity, 'm')])).toMatchObject({ opIndex: 1 });
    expect(encodeOps([{ op: 'item.upsert', store: 'inbox', item: { id: 'x', project: 'p' } }])).toMatchObject({ opIndex: 0 });
    expect(encodeOps([Op.itemPatch('inbox', 'x', {}, ['status'])])).toMatchObject({ error: expect.stringMatching(/required/) });
    expect(encodeOps([{ op: 'expire', key: 'k', seconds: 10 }])).toMatchObject({ opIndex: 0 });
    expect(encodeOps([Op.sadd('s')])).toMatchObject({ opIndex: 0 });
  });

  it('json.set is checked and serialised in one walk: non-JSON values and reserved keys are refused with where and why', () => {
    expect(encodeOps([Op.jsonSet('j', { a: [1, { b: Number.NaN }] })])).toEqual({ opIndex: 0, error: 'value.a[1].b: the number NaN is not finite' });
    expect(encodeOps([Op.del('x'), { op: 'json.set', key: 'j', value: { at: new Date(0) } }])).toEqual({ opIndex: 1, error: 'value.at: not a plain object' });
    expect(encodeOps([{ op: 'json.set', key: 'j', value: { f: () => 1 } }])).toMatchObject({ error: 'value.f: a function is not JSON' });
    expect(encodeOps([{ op: 'json.set', key: 'j', value: undefined }])).toMatchObject({ error: 'value: a undefined is not JSON' });
    expect(encodeOps([{ op: 'json.set', key: 'j', value: [1, undefined] }])).toMatchObject({ error: 'value[1]: a undefined is not JSON' });
    expect(encodeOps([{ op: 'json.set', key: '~meta', value: 1 }])).toMatchObject({ opIndex: 0, error: expect.stringMatching(/reserved/) });
    expect(encodeOps([{ op: 'json.set', key: 'j', value: { a: 1, gone: undefined } }])).toEqual({ wire: [{ o: 'set', k: 'j', v: '{"a":1}' }] });
  });

  it('the json.set walk accepts exactly the JSON values the op schema accepts, and writes their canonical text', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const encoded = encodeOps([{ op: 'json.set', key: 'k', value }]);
        const bySchema = ProjectionOpSchema.safeParse({ op: 'json.set', key: 'k', value });
        expect('wire' in encoded).toBe(bySchema.success);
        if ('wire' in encoded) expect(encoded.wire[0]).toEqual({ o: 'set', k: 'k', v: canonicalJson(value) });
      }),
      { numRuns: 500 },
    );
    const notJson = fc.oneof(
      fc.constant(Number.NaN),
      fc.constant(Number.POSITIVE_INFINITY),
      fc.constant(new Date(0)),
      fc.constant(() => 1),
      fc.constant(BigInt(1)),
      fc.constant(new Map()),
    );
    fc.assert(
      fc.property(fc.jsonValue(), notJson, (value, bad) => {
        const poisoned = { wrap: [value, { bad }] };
        expect(encodeOps([{ op: 'json.set', key: 'k', value: poisoned }])).toMatchObject({
          opIndex: 0,
          error: expect.stringMatching(/^value\.wrap\[1\]\.bad: /),
        });
        expect(ProjectionOpSchema.safeParse({ op: 'json.set', key: 'k', value: poisoned }).success).toBe(false);
      }),
      { numRuns: 200 },
    );
  });

  it('canonical JSON sorts object keys at every level and drops undefined members', () => {
    expect(canonicalJson({ b: 1, a: { d: undefined, c: [3, { z: 1, y: 2 }] } })).toBe('{"a":{"c":[3,{"y":2,"z":1}]},"b":1}');
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(/non-finite/);
  });

  it('cursors round-trip, and a cursor of another order, another listing or a forged one is refused', () => {
    const member = `${'a'.repeat(16)}:item-1`;
    const cursor = encodeCursor('newest', member, 'inbox');
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor('newest', cursor, 'inbox')).toBe(member);
    expect(() => decodeCursor('urgent', cursor, 'inbox')).toThrow(/made for order "newest", not "urgent"/);
    expect(() => decodeCursor('newest', cursor, 'stops')).toThrow(/made for the inbox listing, not stops/);
    expect(() => decodeCursor('newest', encodeCursor('newest', 'no-sort-key', 'inbox'), 'inbox')).toThrow(InvalidCursorError);
    expect(() => decodeCursor('newest', '%%%', 'inbox')).toThrow(InvalidCursorError);
    // A cursor made before cursors named their listing still pages.
    const older = Buffer.from(JSON.stringify({ v: 1, o: 'newest', k: member }), 'utf8').toString('base64url');
    expect(decodeCursor('newest', older, 'stops')).toBe(member);
    expect(decodeCursor('newest', older, 'stops', '[["status",["open"]]]')).toBe(member);
  });

  it('a cursor made under some filters pages only the listing with those filters (another status, kind or project scope is refused)', () => {
    const member = `${'b'.repeat(16)}:item-2`;
    const open = '[["project",["alpha"]],["status",["open"]]]';
    const cursor = encodeCursor('newest', member, 'inbox', open);
    expect(decodeCursor('newest', cursor, 'inbox', open)).toBe(member);
    // The refusal names the filters that differ (the project filter is also the token's scope).
    expect(() => decodeCursor('newest', cursor, 'inbox', '[["project",["alpha"]],["status",["closed"]]]')).toThrow(/other filters \(`status`\)/);
    expect(() => decodeCursor('newest', cursor, 'inbox', '[["project",["beta"]],["status",["open"]]]')).toThrow(
      /other filters \(`project`, or the token`s project scope\)/,
    );
    expect(() => decodeCursor('newest', cursor, 'inbox', '[]')).toThrow(/other filters \(`project`, or the token`s project scope, `status`\)/);
    expect(() => decodeCursor('newest', cursor, 'inbox', '[["kind",["stop"]],["project",["alpha"]],["status",["open"]]]')).toThrow(/other filters \(`kind`\)/);
  });

  it('prefixes and names may not hold glob characters or empty segments', () => {
    expect(() => assertPrefix('baton:proj')).not.toThrow();
    expect(() => assertPrefix('baton:*')).toThrow();
    expect(() => assertPrefix('a::b')).toThrow();
    expect(() => assertName('projection', 'inbox')).not.toThrow();
    expect(() => assertName('projection', 'In[box]')).toThrow();
  });
});

describe('decodeItemFields: an item reads the same whatever order its hash keeps its fields in', () => {
  it('gives its fields in name order, so the same content serialises (and is tagged) the same', () => {
    const first = decodeItemFields<Record<string, unknown>>(['trace_id', '"t1"', 'project', '"ops"', 'kind', '"hold"', 'at', '"2026-12-07T00:00:00Z"']);
    const rewritten = decodeItemFields<Record<string, unknown>>(['at', '"2026-12-07T00:00:00Z"', 'kind', '"hold"', 'trace_id', '"t1"', 'project', '"ops"']);
    expect(JSON.stringify(rewritten)).toBe(JSON.stringify(first));
    expect(Object.keys(first)).toEqual(['at', 'kind', 'project', 'trace_id']);
  });
});
