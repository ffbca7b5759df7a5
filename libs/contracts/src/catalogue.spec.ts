import { createEventRegistry } from './catalogue';
import { HandoffEventSchemas } from './handoff';
import { RunEventSchemas } from './run';
import { MeshEventSchemas } from './mesh';
import { ProjectControlEventSchemas } from './governance';

describe('the event catalogue', () => {
  it('registers every run, handoff, definition and mesh event type exactly once', () => {
    const registry = createEventRegistry();
    const expected = [
      ...Object.keys(RunEventSchemas),
      ...Object.keys(HandoffEventSchemas),
      'definition.published',
      ...Object.keys(MeshEventSchemas),
      ...Object.keys(ProjectControlEventSchemas),
    ].sort();
    expect(registry.types()).toEqual(expected);
  });

  it('files each type under its own aggregate kind', () => {
    const registry = createEventRegistry();
    for (const type of registry.types()) {
      expect(type.split('.')[0]).toBe(registry.spec(type)!.aggregate);
    }
  });
});
