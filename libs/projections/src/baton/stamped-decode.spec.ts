import { createEventRegistry } from '@baton/contracts';
import { decodeEvent, eventHeaders, headerOf } from '@baton/eventstore';
import { foldScenario, scenarioEnvelope } from './scenario';

/*
 * A rebuild reads events the store stamped with its schema fingerprint and skips their second
 * validation. For every event of the example scenario (every type the projections fold), stored as
 * the store stores it, the stamped decode must give exactly what the full decode gives.
 */
describe('stamped events decode as the full decode does (every event of the example scenario)', () => {
  it('same envelope, value for value', () => {
    const registry = createEventRegistry();
    const encoder = new TextEncoder();
    const events = foldScenario();
    const types = new Set<string>();
    for (const [index, e] of events.entries()) {
      const stored = scenarioEnvelope(registry, e, `ev-${index}`, 'p');
      const bytes = encoder.encode(JSON.stringify(stored));
      const headers = Object.fromEntries(Object.entries(eventHeaders(registry, stored.type, stored.version)).map(([k, v]) => [k, [v]]));
      expect(decodeEvent(registry, bytes, headerOf(headers))).toEqual(decodeEvent(registry, bytes));
      types.add(stored.type);
    }
    expect(types.size).toBeGreaterThanOrEqual(8);
  });
});
