import { randomBytes } from 'node:crypto';
import { createBatonProjector, createProjectionStore, createRedis, HandoffKeys, scenarioLog, type RedisHandle, type SequencedEvent } from '@baton/projections';
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

  it("follows every status change of a whole scenario (claims, returns, handbacks, completions): the counts equal the states' statuses, read one by one", async () => {
    const store = createProjectionStore({ redis: redis.client, prefix: `${prefix}:scenario` });
    const projector = createBatonProjector({ store });
    const log = scenarioLog();
    const fromStates = async () => {
      const counts = { pending: 0, claimed: 0, returned: 0 };
      const snapshot = await store.snapshot('handoffs');
      for (const [key, value] of Object.entries(snapshot.keys)) {
        if (!HandoffKeys.isState(key) || value.type !== 'string') continue;
        const status = (JSON.parse(value.value) as { status: string }).status;
        if (status in counts) counts[status as keyof typeof counts]++;
      }
      return counts;
    };
    const seen = new Set<string>();
    for (const event of log) {
      await projector.apply(event);
      const counts = await countOpenHandoffs(store);
      expect({ seq: event.seq, counts }).toEqual({ seq: event.seq, counts: await fromStates() });
      for (const [status, n] of Object.entries(counts)) if (n > 0) seen.add(status);
    }
    // The scenario moves handoffs through every open status, and closes some.
    expect([...seen].sort()).toEqual(['claimed', 'pending', 'returned']);
    const handoffEvents = log.filter((e) => e.type.startsWith('handoff.'));
    expect(handoffEvents.some((e) => e.type === 'handoff.completed')).toBe(true);
  });
});
