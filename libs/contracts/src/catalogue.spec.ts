import { createEventRegistry } from './catalogue';
import { HandoffEventSchemas } from './handoff';
import { RunEventSchemas } from './run';

describe('the event catalogue', () => {
  it('registers every run, handoff and definition event type exactly once', () => {
    const registry = createEventRegistry();
    const expected = [...Object.keys(RunEventSchemas), ...Object.keys(HandoffEventSchemas), 'definition.published'].sort();
    expect(registry.types()).toEqual(expected);
  });

  it('files each type under its own aggregate kind', () => {
    const registry = createEventRegistry();
    for (const type of registry.types()) {
      expect(type.split('.')[0]).toBe(registry.spec(type)!.aggregate);
    }
  });
});
