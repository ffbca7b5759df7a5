import { randomBytes } from 'node:crypto';
import { createEventRegistry, type EventEnvelope } from '@baton/contracts';
import { JetStreamEventStore, batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';
import {
  createBatonProjector,
  createBatonViews,
  createProjectionStore,
  createRedis,
  jetStreamReplaySource,
  type ProjectionStore,
  type RedisHandle,
} from '@baton/projections';
import { main } from '../main';
import { bufferedIo } from '../output';

/*
 * `baton inbox --json-page` prints the page GET /v1/inbox answers: `{ items, next_cursor,
 * open_count }`, `open_count` the open items the filters other than `--status` select (the size of
 * the inbox, not of the page), counted by the same read (BatonViews.inboxOpenCount). Against the
 * real NATS and Redis, with a prefix of its own.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const iso = (s: number) => new Date(T0 + s * 1000).toISOString();

describe('baton inbox --json-page carries open_count (real NATS and Redis)', () => {
  let nats: NatsHandle;
  let redis: RedisHandle;
  let prefix: string;
  let store: ProjectionStore;
  const registry = createEventRegistry();

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix } });
    return { code, out: io.out(), err: io.err() };
  }

  /** A completion handback of `project` (an open inbox item: planner reviews coder's work). */
  function handback(project: string, id: string, s: number): EventEnvelope {
    return {
      id: `${id}-ev-1`,
      type: 'handoff.created',
      version: registry.currentVersion('handoff.created'),
      aggregate: { kind: 'handoff', id },
      project,
      occurredAt: iso(s),
      actor: 'tester',
      origin: 'agent',
      causationId: null,
      correlationId: id,
      payload: {
        handoff_id: id,
        at: iso(s),
        idempotency_key: `create-${id}`,
        project,
        kind: 'completion_handback',
        priority: 'medium',
        from_agent: 'coder',
        to_agent: 'planner',
        summary: `review ${id}`,
        context: {},
        acceptance: {},
        max_retries: 3,
        workflow_run_id: 'wr-1',
        reply_to_handoff_id: 'h-0',
        reviewed_worker: 'coder',
      },
    };
  }

  beforeAll(async () => {
    prefix = `ti${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, name: 'cli-inbox-int', reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    redis = createRedis(REDIS_URL);
    store = createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` });
    const events = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry });
    const items: Array<[string, string]> = [
      ['demo', 'hb-1'],
      ['demo', 'hb-2'],
      ['demo', 'hb-3'],
      ['other', 'hb-4'],
    ];
    let s = 0;
    for (const [project, id] of items) await events.append({ project, kind: 'handoff', id }, [handback(project, id, ++s)], { expectedVersion: 0 });
    const projector = createBatonProjector({ store });
    for await (const event of jetStreamReplaySource({ nats, prefix, registry })(1)) await projector.apply(event);
  });

  afterAll(async () => {
    const keys: string[] = [];
    for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 500 })) keys.push(...(batch as string[]));
    if (keys.length > 0) await redis.client.unlink(...keys);
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    await redis.close();
    await nats.drain();
  });

  it('open_count is the size of the inbox the filters select, not of the page, as BatonViews.inboxOpenCount counts it', async () => {
    const page = await baton('inbox', '--json-page', '--limit', '1');
    expect(page.code).toBe(0);
    const first = JSON.parse(page.out) as { items: unknown[]; next_cursor: string | null; open_count: number };
    expect(Object.keys(first)).toEqual(['items', 'next_cursor', 'open_count']);
    expect(first.items).toHaveLength(1);
    expect(typeof first.next_cursor).toBe('string');
    expect(first.open_count).toBe(4);
    expect(first.open_count).toBe(await createBatonViews(store).inboxOpenCount({}));

    // The next page counts the same inbox.
    const next = JSON.parse((await baton('inbox', '--json-page', '--limit', '1', '--cursor', first.next_cursor!)).out) as { open_count: number };
    expect(next.open_count).toBe(4);

    // The filters select what is counted; --status does not (it is the open items, as the API's).
    expect(JSON.parse((await baton('inbox', '--json-page', '--project', 'other')).out)).toMatchObject({ items: [{ project: 'other' }], open_count: 1 });
    expect(JSON.parse((await baton('inbox', '--json-page', '--project', 'demo', '--kind', 'stop')).out)).toEqual({
      items: [],
      next_cursor: null,
      open_count: 0,
    });
    expect(JSON.parse((await baton('inbox', '--json-page', '--status', 'answered')).out)).toEqual({ items: [], next_cursor: null, open_count: 4 });
  });

  it('--json stays the items as a JSON array (no count), and stops --json-page stays { items, next_cursor }', async () => {
    const items = JSON.parse((await baton('inbox', '--json')).out) as unknown[];
    expect(items).toHaveLength(4);
    expect(Object.keys(JSON.parse((await baton('stops', '--json-page')).out) as object)).toEqual(['items', 'next_cursor']);
  });
});
