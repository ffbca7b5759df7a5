import { randomBytes } from 'node:crypto';
import { AckPolicy } from 'nats';
import { MsgIds, Subjects, createEventRegistry } from '@baton/contracts';
import { batonStreamNames, batonTopology, connectNats, eventHeaders, headersFrom, provision, type NatsHandle } from '@baton/eventstore';
import {
  PROJECTION_DURABLE,
  batonProjections,
  createBatonProjector,
  createProjectionStore,
  createRedis,
  foldScenario,
  jetStreamReplaySource,
  scenarioEnvelope,
  scenarioSteps,
  type ProjectionStore,
  type RedisHandle,
  type SequencedEvent,
} from '@baton/projections';
import { main } from './main';
import { bufferedIo } from './output';

/*
 * `baton replay` of a `notices` projection Redis lost stops where the notifiers had published
 * notices — the notifier's projection consumer's ack floor — so that a notifier applying the events
 * after it publishes their notices (stored while Redis was lost and no notifier applied them).
 * Before, the replay folded `notices` to the stream's end and those notices were never sent.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const encoder = new TextEncoder();
const PROJECTIONS = ['inbox', 'stops', 'handoffs', 'runs', 'notices'];

interface SwappedOutcome {
  projection: string;
  status: string;
  last_seq: number;
  notices_from_seq?: number;
}

describe('baton replay of a lost notices projection (real NATS and Redis)', () => {
  let nats: NatsHandle;
  let redis: RedisHandle;
  let prefix: string;
  let store: ProjectionStore;
  const registry = createEventRegistry();
  const template = foldScenario(scenarioSteps({ project: 'zzz' }));

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix } });
    return { code, out: io.out(), err: io.err() };
  }

  /** Store the scenario once in each of `projects` projects, as the event store stores it; the stream's last sequence. */
  async function fill(projects: number): Promise<number> {
    for (let p = 0; p < projects; p++) {
      const project = `p${p}`;
      for (const [index, e] of template.entries()) {
        const stored = scenarioEnvelope(registry, e, `ev-${index}`, project);
        const envelope = { ...stored, payload: JSON.parse(JSON.stringify(stored.payload).split('"zzz"').join(`"${project}"`)) as unknown };
        await nats.js.publish(Subjects.aggregate(prefix, project, e.aggregate, e.id), encoder.encode(JSON.stringify(envelope)), {
          msgID: MsgIds.event(project, e.aggregate, e.id, envelope.id),
          headers: headersFrom(eventHeaders(registry, envelope.type, envelope.version)),
        });
      }
    }
    return (await nats.jsm.streams.info(batonStreamNames(prefix).events)).state.last_seq;
  }

  /** The notifier's projection consumer, as a notifier that applied (and acknowledged) the first `count` events leaves it. */
  async function notifierAcknowledged(count: number): Promise<void> {
    const stream = batonStreamNames(prefix).events;
    await nats.jsm.consumers.add(stream, { durable_name: PROJECTION_DURABLE, ack_policy: AckPolicy.Explicit, filter_subject: Subjects.events(prefix) });
    const consumer = await nats.js.consumers.get(stream, PROJECTION_DURABLE);
    let acked = 0;
    while (acked < count) {
      const batch = await consumer.fetch({ max_messages: Math.min(100, count - acked), expires: 2_000 });
      for await (const msg of batch) {
        await msg.ackAck();
        acked++;
      }
    }
    expect((await nats.jsm.consumers.info(stream, PROJECTION_DURABLE)).ack_floor.stream_seq).toBe(count);
  }

  beforeEach(async () => {
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, name: 'cli-replay-notices-int', reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    redis = createRedis(REDIS_URL, { commandTimeout: 15_000 });
    store = createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` });
  });

  afterEach(async () => {
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 1000 })) {
      const keys = batch as string[];
      if (keys.length > 0) await redis.client.unlink(...keys);
    }
    await redis.close();
    await nats.close();
  });

  it('stops notices at the notifier consumer’s ack floor, says where notices resume, and folds the other projections to the end', async () => {
    const last = await fill(4);
    const floor = Math.floor(last / 2);
    await notifierAcknowledged(floor);

    const replay = await baton('replay', '--json');
    expect({ code: replay.code, err: replay.err }).toEqual({ code: 0, err: '' });
    const outcomes = JSON.parse(replay.out) as SwappedOutcome[];
    expect(outcomes.map((o) => [o.projection, o.status, o.last_seq, o.notices_from_seq]).sort()).toEqual(
      PROJECTIONS.map((name) => (name === 'notices' ? [name, 'swapped', floor, floor + 1] : [name, 'swapped', last, undefined])).sort(),
    );
    const statuses = await Promise.all(batonProjections().map(async (p) => [p.name, (await store.status(p)).lastSeq] as const));
    expect(Object.fromEntries(statuses)).toEqual(Object.fromEntries(PROJECTIONS.map((name) => [name, name === 'notices' ? floor : last])));

    // A second replay, of a projection that is live again, still stops there: no notifier has
    // applied the events after it, and their notices are still to be published.
    const again = await baton('replay', '--projection', 'notices');
    expect(again.code).toBe(0);
    expect(again.out).toContain(`(to seq ${floor})`);
    expect(again.out).not.toContain('Redis had lost it');
    expect(again.out).toContain(`no notifier has applied the events after seq ${floor} (none ran since they were stored), so it stops there`);
  });

  it('a live notices projection is rebuilt only to what it has applied when no notifier applied the events after it (stored while none ran): their notices are still published', async () => {
    const last = await fill(3);
    const applied = Math.floor(last / 2);
    // A notifier applied the first `applied` events (acknowledging fewer) and stopped; more were stored since.
    await notifierAcknowledged(applied - 4);
    const projector = createBatonProjector({ store });
    const events = jetStreamReplaySource({ nats, prefix, registry });
    const head: SequencedEvent[] = [];
    for await (const event of events(1)) {
      if (event.seq > applied) break;
      head.push(event);
    }
    await projector.applyRange({ fromSeq: 1, toSeq: applied, events: head });
    const replay = await baton('replay', '--json', '--projection', 'notices');
    expect({ code: replay.code, err: replay.err }).toEqual({ code: 0, err: '' });
    expect(JSON.parse(replay.out)).toEqual([
      expect.objectContaining({ projection: 'notices', status: 'swapped', last_seq: applied, notices_from_seq: applied + 1 }),
    ]);
    expect((await store.status({ name: 'notices', version: 0 })).lastSeq).toBe(applied);
    // Once a notifier has applied everything, a replay runs to the end and names no sequence.
    const rest: SequencedEvent[] = [];
    for await (const event of events(applied + 1)) {
      rest.push(event);
      if (event.seq === last) break;
    }
    await projector.applyRange({ fromSeq: applied + 1, toSeq: last, events: rest });
    const caughtUp = await baton('replay', '--json', '--projection', 'notices');
    expect(JSON.parse(caughtUp.out)).toEqual([expect.objectContaining({ projection: 'notices', status: 'swapped', last_seq: last })]);
    expect((JSON.parse(caughtUp.out) as SwappedOutcome[])[0]).not.toHaveProperty('notices_from_seq');
  });

  it('the text output names the first sequence a notifier will publish notices for', async () => {
    const last = await fill(2);
    await notifierAcknowledged(10);
    const replay = await baton('replay', '--projection', 'notices');
    expect(replay.code).toBe(0);
    expect(replay.out).toContain('(to seq 10)');
    expect(replay.out).toContain('a notifier publishes the notices of seq 11 on as it applies them');
    expect(last).toBeGreaterThan(10);
  });

  it('no notifier ever ran (no projection consumer): notices fold to the end, with no notices_from_seq', async () => {
    const last = await fill(2);
    const replay = await baton('replay', '--json', '--projection', 'notices');
    expect(replay.code).toBe(0);
    expect(JSON.parse(replay.out)).toEqual([expect.objectContaining({ projection: 'notices', status: 'swapped', last_seq: last })]);
    expect((JSON.parse(replay.out) as SwappedOutcome[])[0]).not.toHaveProperty('notices_from_seq');
  });
});
