import { createEventRegistry } from '@baton/contracts';
import { decodeEvent } from './decode';

describe('decodeEvent: the one decoder of stored events', () => {
  const registry = createEventRegistry();
  const encoder = new TextEncoder();

  it('bytes that are not UTF-8 are refused invalid_utf8 (never decoded with U+FFFD), before JSON', () => {
    const bad = new Uint8Array([...encoder.encode('{"id":"e'), 0xff, ...encoder.encode('"}')]);
    const decoded = decodeEvent(registry, bad);
    expect(decoded).toMatchObject({ ok: false, rejection: { code: 'invalid_utf8', message: expect.stringContaining('not UTF-8') } });
  });

  it('UTF-8 that is not JSON stays malformed_json; JSON that is not an envelope gets the registry code', () => {
    expect(decodeEvent(registry, encoder.encode('{nope'))).toMatchObject({ ok: false, rejection: { code: 'malformed_json' } });
    expect(decodeEvent(registry, encoder.encode('{"type":"café.unknown"}'))).toMatchObject({ ok: false, rejection: { code: 'schema_violation' } });
  });
});
