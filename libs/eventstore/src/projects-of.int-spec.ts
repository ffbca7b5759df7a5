import type { EventEnvelope } from '@baton/contracts';
import type { NatsHandle } from './connection';
import { StreamNotFound } from './errors';
import { JetStreamEventStore } from './store';
import { connectTest, counterRegistry, deleteTopology, provisionTopology, randomPrefix } from './int/support';

/**
 * `projectsOf(kind, id)`: which projects hold an aggregate of that kind and id, from the events
 * stream's subjects (an id is unique only within its project): what the id-only mesh routes and
 * `baton mesh` use to find a mesh, with no projection involved.
 */
describe('JetStreamEventStore.projectsOf (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;
  let store: JetStreamEventStore;

  beforeAll(async () => {
    prefix = randomPrefix();
    nats = await connectTest('projects-of-int');
    await provisionTopology(nats, prefix);
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: counterRegistry() });
    const envelope = (project: string, id: string): EventEnvelope => ({
      id: `e-${project}-${id}`,
      type: 'counter.added',
      version: 1,
      aggregate: { kind: 'handoff', id },
      project,
      occurredAt: '2025-01-01T00:00:00.000Z',
      actor: 'tester',
      origin: 'agent',
      causationId: null,
      correlationId: 'c',
      payload: { n: 1, total: 1, version: 1 },
    });
    for (const [project, id] of [
      ['beta', 'h-1'],
      ['alpha', 'h-1'],
      ['alpha', 'h-1x'],
      ['gamma', 'h-2'],
    ] as const) {
      await store.append({ project, kind: 'handoff', id }, [envelope(project, id)], { expectedVersion: 0 });
    }
  });

  afterAll(async () => {
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  it('names every project holding the id, sorted, and only that kind and exact id', async () => {
    expect(await store.projectsOf('handoff', 'h-1')).toEqual(['alpha', 'beta']);
    expect(await store.projectsOf('handoff', 'h-2')).toEqual(['gamma']);
    expect(await store.projectsOf('handoff', 'h-3')).toEqual([]);
    expect(await store.projectsOf('mesh', 'h-1')).toEqual([]);
    // Not a subject token: no aggregate can have it (and it never reaches the server as a filter).
    expect(await store.projectsOf('handoff', 'h.*')).toEqual([]);
  });

  it('a missing events stream is StreamNotFound', async () => {
    const other = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix: randomPrefix(), registry: counterRegistry() });
    await expect(other.projectsOf('handoff', 'h-1')).rejects.toBeInstanceOf(StreamNotFound);
  });
});
