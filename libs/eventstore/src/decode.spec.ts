import { z } from 'zod';
import { createEventRegistry, EventRegistry } from '@baton/contracts';
import { decodeEvent, headerOf } from './decode';
import { eventHeaders, SCHEMA_HEADER, schemaFingerprint } from './schema-fingerprint';

describe('decodeEvent: the one decoder of stored events', () => {
  const registry = createEventRegistry();
  const encoder = new TextEncoder();

  it('bytes that are not UTF-8 are refused invalid_utf8 (never decoded with U+FFFD), before JSON', () => {
    const bad = new Uint8Array([...encoder.encode('{"id":"e'), 0xff, ...encoder.encode('"}')]);
    const decoded = decodeEvent(registry, bad);
    expect(decoded).toMatchObject({ ok: false, rejection: { code: 'invalid_utf8', message: expect.stringContaining('not UTF-8') } });
  });

  it('a stored mesh turn by an agent named "constructor" (allowed until the name was reserved) still decodes; the same payload is refused as a new append', () => {
    const turn = {
      result_id: 'res-1',
      run_id: 'mr-1',
      agent: 'constructor',
      turn: 2,
      text: 'done',
      handoff_tool_calls: [],
      handoff_id: null,
      recorded_at: '2026-11-01T00:00:00.000Z',
    };
    const stored = {
      id: 'e1',
      type: 'mesh.turn_recorded',
      version: registry.currentVersion('mesh.turn_recorded'),
      aggregate: { kind: 'mesh', id: 'mr-1' },
      project: 'shop',
      occurredAt: '2026-11-01T00:00:00.000Z',
      actor: 'constructor',
      origin: 'agent',
      causationId: null,
      correlationId: 'mr-1',
      payload: turn,
    };
    expect(decodeEvent(registry, encoder.encode(JSON.stringify(stored)))).toEqual({ ok: true, envelope: stored });
    expect(registry.validatePayload('mesh.turn_recorded', turn)).toMatchObject({ ok: false, rejection: { issues: [{ path: 'agent' }] } });
  });

  it('UTF-8 that is not JSON stays malformed_json; JSON that is not an envelope gets the registry code', () => {
    expect(decodeEvent(registry, encoder.encode('{nope'))).toMatchObject({ ok: false, rejection: { code: 'malformed_json' } });
    expect(decodeEvent(registry, encoder.encode('{"type":"café.unknown"}'))).toMatchObject({ ok: false, rejection: { code: 'schema_violation' } });
  });
});

describe("decodeEvent: events stamped with this build's schema fingerprint are not validated twice", () => {
  const encoder = new TextEncoder();
  const schemaV1 = z.object({ n: z.number().int(), tag: z.string().default('plain') });
  const registryOf = (schema: z.ZodType) => new EventRegistry().register({ type: 'thing.made', aggregate: 'run', version: 1, schema });
  const registry = registryOf(schemaV1);
  const envelope = (payload: unknown, over: Record<string, unknown> = {}) => ({
    id: 'e1',
    type: 'thing.made',
    version: 1,
    aggregate: { kind: 'run', id: 'r1' },
    project: 'p',
    occurredAt: '2026-12-01T00:00:00.000Z',
    actor: 'a',
    origin: 'agent',
    causationId: null,
    correlationId: 'r1',
    payload,
    ...over,
  });
  const bytes = (value: unknown) => encoder.encode(JSON.stringify(value));
  const stamped = (reg: EventRegistry) => headerOf(Object.fromEntries(Object.entries(eventHeaders(reg, 'thing.made', 1)).map(([k, v]) => [k, [v]])));

  it('the store stamps the current version with the fingerprint of its schemas; an older version gets no stamp', () => {
    const headers = eventHeaders(registry, 'thing.made', 1);
    expect(headers).toEqual({ 'Baton-Event-Type': 'thing.made', 'Baton-Event-Version': '1', [SCHEMA_HEADER]: schemaFingerprint(registry, 'thing.made') });
    expect(schemaFingerprint(registry, 'thing.made')).toMatch(/^[0-9a-f]{32}$/);
    expect(schemaFingerprint(registry, 'thing.unknown')).toBeUndefined();
    const v2 = new EventRegistry().register({ type: 'thing.made', aggregate: 'run', version: 2, schema: schemaV1, upcasters: { 1: (p) => p } });
    expect(eventHeaders(v2, 'thing.made', 1)[SCHEMA_HEADER]).toBeUndefined();
  });

  it("every event type of Baton's catalogue has a fingerprint; a schema JSON Schema cannot describe gets none (decoded in full)", () => {
    const catalogue = createEventRegistry();
    const prints = catalogue.types().map((type) => schemaFingerprint(catalogue, type));
    expect(prints.every((p) => p !== undefined && /^[0-9a-f]{32}$/.test(p))).toBe(true);
    expect(new Set(prints).size).toBe(prints.length);
    const odd = new EventRegistry().register({ type: 'thing.odd', aggregate: 'run', version: 1, schema: z.object({ when: z.date() }) });
    expect(schemaFingerprint(odd, 'thing.odd')).toBeUndefined();
    expect(eventHeaders(odd, 'thing.odd', 1)[SCHEMA_HEADER]).toBeUndefined();
  });

  it('a stored (validated) event decodes to the same envelope stamped or not', () => {
    const stored = envelope(schemaV1.parse({ n: 3 }));
    const full = decodeEvent(registry, bytes(stored));
    const fast = decodeEvent(registry, bytes(stored), stamped(registry));
    expect(fast).toEqual(full);
    expect(fast).toEqual({ ok: true, envelope: stored });
  });

  it('the stamp skips the validation (what the store wrote is trusted); without it the same bytes are refused', () => {
    const notValidated = envelope({ n: 'three' });
    expect(decodeEvent(registry, bytes(notValidated), stamped(registry))).toEqual({ ok: true, envelope: notValidated });
    expect(decodeEvent(registry, bytes(notValidated))).toMatchObject({ ok: false, rejection: { code: 'schema_violation' } });
  });

  it("another build's schemas (another fingerprint), a body of another type or version, or a stamp on a non-object: decoded in full", () => {
    const changed = registryOf(z.object({ n: z.number().int(), tag: z.string().min(2).default('plain') }));
    expect(schemaFingerprint(changed, 'thing.made')).not.toBe(schemaFingerprint(registry, 'thing.made'));
    const lacking = envelope({ n: 1 });
    // Stamped by a build whose schema differs: the default is filled in by a full decode.
    expect(decodeEvent(registry, bytes(lacking), stamped(changed))).toEqual({ ok: true, envelope: envelope({ n: 1, tag: 'plain' }) });
    // Right stamp, but the body is not what the headers say.
    expect(decodeEvent(registry, bytes(envelope({ n: 'x' }, { type: 'thing.other' })), stamped(registry))).toMatchObject({ ok: false });
    expect(decodeEvent(registry, bytes(envelope({ n: 'x' }, { version: 7 })), stamped(registry))).toMatchObject({
      ok: false,
      rejection: { code: 'unsupported_version' },
    });
    expect(decodeEvent(registry, bytes([1, 2]), stamped(registry))).toMatchObject({ ok: false, rejection: { code: 'schema_violation' } });
    expect(decodeEvent(registry, bytes(envelope(null)), stamped(registry))).toMatchObject({ ok: false });
  });
});
