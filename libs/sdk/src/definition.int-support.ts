import { createEventRegistry } from '@baton/contracts';
import { JetStreamEventStore, type NatsHandle } from '@baton/eventstore';

/**
 * Store a project definition as the router publishes it (`definition.published` on the project's
 * `definition` / `current` aggregate), for the SDK's specs that boot the ledger alone: the ledger
 * reads its roster, and the agent edge the workflows a start may name, from it. The project's
 * first definition (expected version 0).
 */
export async function storeDefinition(nats: NatsHandle, prefix: string, definition: { project: string } & Record<string, unknown>): Promise<void> {
  const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
  const now = new Date().toISOString();
  await store.append(
    { project: definition.project, kind: 'definition', id: 'current' },
    [
      {
        id: `def-${prefix}`,
        type: 'definition.published',
        version: 1,
        aggregate: { kind: 'definition', id: 'current' },
        project: definition.project,
        occurredAt: now,
        actor: 'test-router',
        origin: 'operator',
        causationId: null,
        correlationId: 'test',
        payload: { definition, published_by: 'test-router', published_at: now, digest: 'd1' },
      },
    ],
    { expectedVersion: 0 },
  );
}
