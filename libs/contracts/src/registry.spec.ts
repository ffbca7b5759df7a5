import { z } from 'zod';
import { AgentNameSchema, namedRecord, RecordKeySchema } from './common';
import { EventRegistry } from './registry';
import { parseUntrustedJson } from './rejection';

const envelope = (over: Record<string, unknown> = {}) => ({
  id: 'ev-1',
  type: 'handoff.noted',
  version: 2,
  aggregate: { kind: 'handoff', id: 'h-1' },
  project: 'acme',
  occurredAt: '2026-11-29T10:00:00.000Z',
  actor: 'architect',
  origin: 'agent',
  causationId: null,
  correlationId: 'wf-1',
  payload: { note: 'hello', severity: 'low' },
  ...over,
});

function registry() {
  return new EventRegistry().register({
    type: 'handoff.noted',
    aggregate: 'handoff',
    version: 2,
    schema: z.object({ note: z.string(), severity: z.enum(['low', 'high']) }),
    // v1 had `text` and no severity.
    upcasters: { 1: (p) => ({ note: (p as { text: string }).text, severity: 'low' }) },
  });
}

describe('event envelopes are versioned and zod-validated; older versions are upcast on read', () => {
  it('decodes a current-version envelope unchanged', () => {
    const decoded = registry().decode(envelope());
    expect(decoded).toEqual({ ok: true, value: envelope() });
  });

  it('upcasts a v1 payload to the current version on read', () => {
    const decoded = registry().decode(envelope({ version: 1, payload: { text: 'old' } }));
    expect(decoded.ok && decoded.value).toMatchObject({ version: 2, payload: { note: 'old', severity: 'low' } });
  });

  it('refuses a version newer than this build understands', () => {
    const decoded = registry().decode(envelope({ version: 3 }));
    expect(!decoded.ok && decoded.rejection.code).toBe('unsupported_version');
  });

  it('refuses an unknown event type with a typed rejection', () => {
    const decoded = registry().decode(envelope({ type: 'handoff.unknown' }));
    expect(!decoded.ok && decoded.rejection.code).toBe('unknown_event_type');
  });

  it('names the offending field when the envelope breaks the schema', () => {
    const decoded = registry().decode(envelope({ origin: 'martian' }));
    expect(decoded.ok).toBe(false);
    if (!decoded.ok) {
      expect(decoded.rejection.code).toBe('schema_violation');
      expect(decoded.rejection.issues[0]?.path).toBe('origin');
    }
  });

  it('refuses to register a version without upcasters from every older version', () => {
    expect(() => new EventRegistry().register({ type: 'run.x', aggregate: 'run', version: 2, schema: z.object({}) })).toThrow(/no upcaster from v1/);
  });
});

describe('untrusted JSON is size-capped and cannot pollute prototypes', () => {
  it('rejects text over the cap as payload_too_large', () => {
    const result = parseUntrustedJson(JSON.stringify({ a: 'x'.repeat(100) }), 50);
    expect(!result.ok && result.rejection.code).toBe('payload_too_large');
  });

  it('rejects malformed JSON as malformed_json', () => {
    const result = parseUntrustedJson('{"a":', 1000);
    expect(!result.ok && result.rejection.code).toBe('malformed_json');
  });

  it.each(['__proto__', 'constructor', 'prototype'])('rejects a %s key anywhere in the document', (key) => {
    const result = parseUntrustedJson(`{"a":{"${key}":{"polluted":true}}}`, 1000);
    expect(!result.ok && result.rejection.code).toBe('schema_violation');
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });

  it.each([
    ['__proto__', '{"a":{"\\u005f_proto__":{"polluted":true}}}'],
    ['constructor', '{"\\u0063onstructor":1}'],
    ['prototype', '[{"x":{"prot\\u006ftype":1}}]'],
  ])('rejects a %s key spelled with \\u escapes', (key, text) => {
    const result = parseUntrustedJson(text, 1000);
    expect(!result.ok && result.rejection).toMatchObject({ code: 'schema_violation', message: `the key "${key}" is not allowed` });
  });

  it('accepts the forbidden words as values, and escapes that spell other keys', () => {
    expect(parseUntrustedJson('{"a":"__proto__","b":["constructor","prototype"]}', 1000)).toEqual({
      ok: true,
      value: { a: '__proto__', b: ['constructor', 'prototype'] },
    });
    expect(parseUntrustedJson('{"caf\\u00e9":"\\u00e9t\\u00e9"}', 1000)).toEqual({ ok: true, value: { café: 'été' } });
  });

  it('refuses by its depth a document just past the cap, accepts one at it, whatever brackets its strings hold', () => {
    const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
    expect(parseUntrustedJson(nested(64), 1000).ok).toBe(true);
    expect(parseUntrustedJson(nested(65), 1000)).toMatchObject({ ok: false, rejection: { message: expect.stringContaining('nests 65 levels') } });
    // Many brackets, shallow: inside strings, or side by side.
    expect(parseUntrustedJson(JSON.stringify({ a: '{['.repeat(100), b: Array.from({ length: 100 }, () => [{}]) }), 10_000).ok).toBe(true);
  });

  it('refuses documents nested deeper than the cap by name, without deep recursion', () => {
    const deep = '['.repeat(10_000) + ']'.repeat(10_000);
    const result = parseUntrustedJson(deep, 1_000_000);
    expect(!result.ok && result.rejection).toMatchObject({ code: 'schema_violation', message: expect.stringContaining('nests 10000 levels') });
    expect(parseUntrustedJson('{"a":"[[[[[[[[[["}', 1000).ok).toBe(true);
  });

  it('counts UTF-8 bytes, not UTF-16 units', () => {
    expect(parseUntrustedJson(JSON.stringify('é'.repeat(30)), 61).ok).toBe(false);
    expect(parseUntrustedJson(JSON.stringify('é'.repeat(30)), 62).ok).toBe(true);
  });
});

describe('names reserved after events were stored: stored events keep decoding, new ones are refused', () => {
  const named = () =>
    new EventRegistry().register({
      type: 'mesh.declared',
      aggregate: 'mesh',
      version: 1,
      schema: z.strictObject({ entry: AgentNameSchema, outputs: z.array(AgentNameSchema), vars: namedRecord(RecordKeySchema, z.string()) }),
    });
  const stored = (payload: Record<string, unknown>) => envelope({ type: 'mesh.declared', version: 1, aggregate: { kind: 'mesh', id: 'm-1' }, payload });

  it('an agent named "constructor" or "prototype" in a stored event decodes as stored; the same payload is refused as a new append', () => {
    const payload = { entry: 'constructor', outputs: ['writer', 'prototype'], vars: {} };
    expect(named().decode(stored(payload))).toEqual({ ok: true, value: stored(payload) });
    const fresh = named().validatePayload('mesh.declared', payload);
    expect(!fresh.ok && fresh.rejection.issues.map((issue) => issue.path)).toEqual(['entry', 'outputs.1']);
  });

  it('anything else wrong still refuses the event: a bad name beside a reserved one, a reserved record key, a reserved name where no name goes', () => {
    const refused = (payload: Record<string, unknown>) => {
      const decoded = named().decode(stored(payload));
      return !decoded.ok && decoded.rejection.code;
    };
    expect(refused({ entry: 'constructor', outputs: ['a.b'], vars: {} })).toBe('schema_violation');
    expect(refused({ entry: 'writer', outputs: [], vars: JSON.parse('{"constructor":"prototype"}') })).toBe('schema_violation');
    expect(refused({ entry: 'writer', outputs: 'prototype', vars: {} })).toBe('schema_violation');
  });
});

describe('keys a newer build added are ignored when read, never when written', () => {
  const strict = () =>
    new EventRegistry().register({
      type: 'handoff.claimed',
      aggregate: 'handoff',
      version: 1,
      schema: z.strictObject({
        claimed_by: AgentNameSchema,
        lease: z.strictObject({ ms: z.number().int() }),
        steps: z.array(z.strictObject({ name: AgentNameSchema })),
        outcome: z.discriminatedUnion('kind', [z.strictObject({ kind: z.literal('done'), at: z.string() }), z.strictObject({ kind: z.literal('open') })]),
      }),
    });
  const stored = (payload: Record<string, unknown>) => envelope({ type: 'handoff.claimed', version: 1, payload });
  const current = { claimed_by: 'bob', lease: { ms: 1000 }, steps: [{ name: 'a' }], outcome: { kind: 'done', at: 'now' } };

  it('an event written with optional fields this build does not know decodes without them, at any depth; the stored payload is not changed', () => {
    const newer = {
      ...current,
      command_digest: 'abc',
      lease: { ms: 1000, renewals: 2 },
      steps: [{ name: 'a', took_ms: 5 }],
      outcome: { kind: 'done', at: 'now', by: 'x' },
    };
    const before = JSON.stringify(newer);
    expect(strict().decode(stored(newer))).toEqual({ ok: true, value: stored(current) });
    expect(JSON.stringify(newer)).toBe(before);
  });

  it('a new append with an unknown key is still refused, and anything else wrong beside an unknown key still refuses a stored event', () => {
    const fresh = strict().validatePayload('handoff.claimed', { ...current, command_digest: 'abc' });
    expect(!fresh.ok && fresh.rejection.code).toBe('schema_violation');
    const wrong = strict().decode(stored({ ...current, command_digest: 'abc', lease: { ms: 'soon' } }));
    expect(!wrong.ok && wrong.rejection.issues.map((issue) => issue.path)).toEqual(['lease.ms']);
  });
});
