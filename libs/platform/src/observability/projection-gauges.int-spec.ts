import { randomBytes } from 'node:crypto';
import { createBatonProjector, createProjectionStore, createRedis, type RedisHandle, type SequencedEvent } from '@baton/projections';
import { countOpenHandoffs } from './projection-gauges';

/** A `handoff.created` event of `project` (pending, for bob). */
function created(seq: number, project: string, id: string): SequencedEvent {
  const at = new Date(Date.UTC(2026, 0, 1, 9, seq)).toISOString();
  return {
    seq,
    id: `ev-${seq}`,
    type: 'handoff.created',
    version: 1,
    aggregate: { kind: 'handoff', id },
    project,
    occurredAt: at,
    actor: 'alice',
    origin: 'agent',
    causationId: null,
    correlationId: id,
    payload: {
      handoff_id: id,
      at,
      idempotency_key: `create:${project}:${id}`,
      project,
      kind: 'task',
      priority: 'low',
      from_agent: 'alice',
      to_agent: 'bob',
      summary: `${project} ${id}`,
      context: {},
      acceptance: {},
      max_retries: 3,
    },
  };
}

describe('baton_open_handoffs counts the handoff records of every project (real Redis)', () => {
  let redis: RedisHandle;
  const prefix = `test:gauges-${randomBytes(5).toString('hex')}`;

  beforeAll(() => {
    redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  });
  afterAll(async () => {
    for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 500 })) {
      const keys = batch as string[];
      if (keys.length > 0) await redis.client.unlink(...keys);
    }
    await redis.close();
  });

  it('the same handoff id in two projects is two handoffs; an id holding ":" counts once; states, timelines and indexes never count', async () => {
    const store = createProjectionStore({ redis: redis.client, prefix });
    const projector = createBatonProjector({ store });
    for (const event of [created(1, 'alpha', 'h-1'), created(2, 'beta', 'h-1'), created(3, 'beta', 'h-2:x@y')]) await projector.apply(event);
    expect(await countOpenHandoffs(store)).toEqual({ pending: 3, claimed: 0, returned: 0 });
  });
});
