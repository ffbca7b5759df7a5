import { randomBytes } from 'node:crypto';
import { createEventRegistry } from '@baton/contracts';
import { JetStreamEventStore, batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';
import {
  batonProjections,
  createBatonProjector,
  createProjectionStore,
  createRedis,
  foldScenario,
  scenarioEnvelope,
  jetStreamReplaySource,
  type ProjectionSnapshot,
  type ProjectionStore,
  type RedisHandle,
} from '@baton/projections';
import { main } from './main';
import { createCliContext } from './context';
import { bufferedIo } from './output';
import { replayCommand } from './commands/replay';
import type { StreamHealth } from './commands/streams';
import { tapped } from './tapped-source.int-support';

/*
 * SRE commands against the real NATS and Redis: `baton streams`, `baton run|handoff <id> --at
 * <seq>`, `baton replay --from-seq|--from-time`. The stream holds the projections' example
 * scenario (runs that stop, hold and resume; handoffs returned, decided, escalated).
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

describe('SRE commands (real NATS and Redis)', () => {
  let nats: NatsHandle;
  let redis: RedisHandle;
  let prefix: string;
  let store: ProjectionStore;
  /** Stream sequence of each appended event, in order, with its aggregate and type. */
  let appended: Array<{ seq: number; aggregate: string; id: string; type: string; payload: unknown }>;
  const registry = createEventRegistry();

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix } });
    return { code, out: io.out(), err: io.err() };
  }

  async function snapshots(): Promise<Record<string, ProjectionSnapshot['keys']>> {
    const out: Record<string, ProjectionSnapshot['keys']> = {};
    for (const p of batonProjections()) out[p.name] = (await store.snapshot(p.name)).keys;
    return out;
  }

  beforeEach(async () => {
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, name: 'cli-sre-int', reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    redis = createRedis(REDIS_URL);
    store = createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` });
    const events = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry });
    const last = new Map<string, number>();
    appended = [];
    for (const [index, e] of foldScenario().entries()) {
      const key = `${e.aggregate}/${e.id}`;
      const envelope = scenarioEnvelope(registry, e, `ev-${index}`, 'demo');
      const result = await events.append({ project: 'demo', kind: e.aggregate, id: e.id }, [envelope], { expectedVersion: last.get(key) ?? 0 });
      last.set(key, result.lastSeq);
      appended.push({ seq: result.lastSeq, aggregate: e.aggregate, id: e.id, type: e.event.type, payload: envelope.payload });
    }
    const projector = createBatonProjector({ store });
    for await (const event of jetStreamReplaySource({ nats, prefix, registry })(1)) await projector.apply(event);
  });

  afterEach(async () => {
    const keys: string[] = [];
    for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 500 })) keys.push(...(batch as string[]));
    if (keys.length > 0) await redis.client.unlink(...keys);
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    await redis.close();
    await nats.drain();
  });

  it('streams --json lists the three streams with their counts and each consumer with pending, ack pending, redeliveries and lag', async () => {
    const names = batonStreamNames(prefix);
    await nats.jsm.consumers.add(names.events, { durable_name: 'sre_probe', ack_policy: 'explicit' as never, filter_subject: `${prefix}.ev.>` });
    const { code, out } = await baton('streams', '--json');
    expect(code).toBe(0);
    const report = JSON.parse(out) as StreamHealth[];
    expect(report.map((s) => [s.role, s.stream])).toEqual([
      ['events', names.events],
      ['inbox', names.inbox],
      ['dlq', names.dlq],
    ]);
    const events = report[0]!;
    expect(events).toMatchObject({ messages: appended.length, first_seq: 1, last_seq: appended.at(-1)!.seq });
    expect(events.bytes).toBeGreaterThan(0);
    const probe = events.consumers.find((c) => c.name === 'sre_probe');
    expect(probe).toMatchObject({ durable: true, pending: appended.length, ack_pending: 0, redelivered: 0, lag: appended.length, delivered_seq: 0 });
    expect(report[2]).toMatchObject({ messages: 0, consumers: [] });

    const text = await baton('streams');
    expect(text.out).toContain('sre_probe');
    expect(text.out).toMatch(/LAG\s+PENDING\s+ACK PENDING\s+REDELIVERED/);
    // First and last sequence and time (docs/sre.md).
    expect(text.out).toMatch(/FIRST SEQ\s+LAST SEQ\s+FIRST MESSAGE\s+LAST MESSAGE/);

    // Another prefix has no streams: not_found (as dlq says), for streams and for verify alike, not "unavailable".
    for (const command of [['streams'], ['verify'], ['run', 'wr-c', '--project', 'demo']]) {
      const io = bufferedIo();
      const missing = await main([...command, '--json'], { io, env: { NATS_URL, REDIS_URL, BATON_PREFIX: `${prefix}none` } });
      expect({ command, code: missing }).toEqual({ command, code: 1 });
      // It names the NATS server it read: a stopped platform's CLI reads the default server, which may be another deployment's.
      expect(JSON.parse(io.err())).toMatchObject({
        error: {
          code: 'not_found',
          message: expect.stringContaining(`on NATS at ${NATS_URL}: is this the platform's NATS, is BATON_PREFIX=${prefix}none right`),
          details: { nats_url: NATS_URL, prefix: `${prefix}none` },
        },
      });
    }
  });

  it('run <id> --at <seq> shows the run as of that point in the log: only events with seq <= N are folded', async () => {
    const stopped = appended.find((e) => e.id === 'wr-c' && e.type === 'run.stopped')!;
    const now = JSON.parse((await baton('run', 'wr-c', '--json')).out) as { run: { status: string }; timeline: { seq: number }[] };
    const then = await baton('run', 'wr-c', '--at', String(stopped.seq), '--json');
    expect(then.code).toBe(0);
    const report = JSON.parse(then.out) as {
      run: { status: string; open_stop_id: string | null };
      at_seq: number;
      view_source: string;
      handoffs: Array<{ project: string; id: string }>;
      timeline: { seq: number }[];
    };
    expect(report).toMatchObject({ at_seq: stopped.seq, view_source: 'events', run: { status: 'stopped' } });
    // The handoffs its routes had created by then (from its own events: the projection is of now).
    const routedThen = appended.filter((e) => e.id === 'wr-c' && e.type === 'run.routed' && e.seq <= stopped.seq);
    expect(routedThen.length).toBeGreaterThan(0);
    expect(report.handoffs.map((h) => h.id)).toEqual([...new Set(routedThen.map((e) => (e.payload as { handoff_id: string }).handoff_id))]);
    expect(report.run.open_stop_id).toBeTruthy();
    expect(now.run.status).not.toBe('stopped'); // the operator's answer resumed it later
    expect(report.timeline.every((e) => e.seq <= stopped.seq)).toBe(true);
    expect(report.timeline.length).toBeLessThan(now.timeline.length);
    // A sequence past the run's last event shows the run as it is, and says where its events end.
    const far = await baton('run', 'wr-c', '--at', '99999');
    expect(far.out).toContain(`folded from the events up to seq 99999 (its last event by then: seq ${now.timeline.at(-1)!.seq})`);

    const first = appended.find((e) => e.id === 'wr-c')!;
    const before = await baton('run', 'wr-c', '--at', String(first.seq - 1));
    // The run did not exist yet: not found (exit 1), not a usage error.
    expect(before.code).toBe(1);
    expect(before.err).toContain(`had no events at seq ${first.seq - 1}`);
    const typed = await baton('run', 'wr-c', '--at', String(first.seq - 1), '--json');
    expect(JSON.parse(typed.err)).toMatchObject({ error: { code: 'not_found', details: { at_seq: first.seq - 1, first_seq: first.seq } } });
  });

  it('handoff <id> --at <seq> shows the handoff as it stood then (pending before its claim)', async () => {
    const created = appended.find((e) => e.id === 'h-1' && e.type === 'handoff.created')!;
    const then = JSON.parse((await baton('handoff', 'h-1', '--at', String(created.seq), '--json')).out) as { handoff: { status: string }; timeline: unknown[] };
    const now = JSON.parse((await baton('handoff', 'h-1', '--json')).out) as { handoff: { status: string } };
    expect(then.handoff.status).toBe('pending');
    expect(then.timeline).toHaveLength(1);
    expect(now.handoff.status).not.toBe('pending');
    // Read by a person: when it was created, and (claimed) since when and by whom (docs/sre.md "A run is stuck").
    const text = (await baton('handoff', 'h-1', '--at', String(created.seq))).out;
    expect(text).toMatch(/^created: +\d{4}-\d\d-\d\dT/m);
    expect(text).not.toMatch(/^claimed at:/m);
  });

  it('replay --from-seq gives the same projections as a full replay, even when the live state before N was damaged', async () => {
    expect((await baton('replay')).code).toBe(0);
    const full = await snapshots();
    // Damage a key written by an event before N: a seed copied from the live generation would keep it.
    const early = appended.find((e) => e.aggregate === 'handoff')!;
    const fromSeq = early.seq + 3;
    expect(fromSeq).toBeLessThan(appended.length);
    const active = await store.status({ name: 'handoffs', version: 0 });
    await redis.client.set(`${prefix}:proj:handoffs:g${active.activeGeneration}:hs:${early.id}`, '{"damaged":true}');

    const { code, out, err } = await baton('replay', '--from-seq', String(fromSeq), '--json');
    expect(code).toBe(0);
    const outcomes = JSON.parse(out) as Array<{ projection: string; status: string; from_seq: number; seeded: number; events: number; last_seq: number }>;
    for (const outcome of outcomes) {
      expect(outcome).toMatchObject({
        status: 'swapped',
        from_seq: fromSeq,
        seeded: fromSeq - 1,
        events: appended.length - (fromSeq - 1),
        last_seq: appended.at(-1)!.seq,
      });
    }
    // With --json stderr holds JSON only: no progress; without, the progress line names the start.
    expect(err).toBe('');
    expect(await snapshots()).toEqual(full);
    const prose = await baton('replay', '--from-seq', String(fromSeq));
    expect(prose.code).toBe(0);
    expect(prose.err).toContain(`replay from seq ${fromSeq}: `);
    expect(await snapshots()).toEqual(full);
  });

  it('replay --from-time starts at the first event stored at or after that time', async () => {
    const target = appended[5]!.seq;
    const stored = await nats.jsm.streams.getMessage(batonStreamNames(prefix).events, { seq: target });
    const { code, out } = await baton('replay', '--projection', 'runs', '--from-time', stored.time.toISOString(), '--json');
    expect(code).toBe(0);
    const [outcome] = JSON.parse(out) as Array<{ from_seq: number }>;
    // Several events may share a millisecond: the first of them is where the replay starts.
    expect(outcome!.from_seq).toBeLessThanOrEqual(target);
    const previous = await nats.jsm.streams.getMessage(batonStreamNames(prefix).events, { seq: outcome!.from_seq });
    expect(previous.time.getTime()).toBeGreaterThanOrEqual(stored.time.getTime() - 1);
    expect((await baton('replay', '--from-time', 'yesterday-ish')).code).toBe(2);
    // Past the end of the stream there is nothing to replay from.
    const last = appended.at(-1)!.seq;
    const past = await baton('replay', '--projection', 'runs', '--from-seq', String(last + 2));
    expect(past.code).toBe(2);
    expect(past.err).toContain(`--from-seq ${last + 2} is past the end of the events stream (its last sequence is ${last})`);
    // So is a time after the last event stored (it used to replay the stream's tail as if stored after it).
    const future = await baton('replay', '--projection', 'runs', '--from-time', '2100-01-01T00:00:00Z');
    expect(future.code).toBe(2);
    expect(future.err).toContain(`--from-time 2100-01-01T00:00:00Z is after the last event stored (seq ${last}, at `);
    expect((await baton('replay', '--from-seq', '3', '--from-time', stored.time.toISOString())).code).toBe(2);
    // A dry run compares a whole rebuild: a starting point would be ignored without a word.
    expect((await baton('replay', '--from-seq', '3', '--dry-run')).code).toBe(2);
    expect((await baton('replay', '--from-time', stored.time.toISOString(), '--dry-run')).code).toBe(2);
  });

  it("replay exits 0 when another rebuild (the notifier's) swapped in the same projection first: the projection is rebuilt", async () => {
    const before = await snapshots();
    const io = bufferedIo();
    const ctx = createCliContext({ io, env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix }, nats, redis });
    const real = await ctx.projections();
    let raced = false;
    // Once this replay has made its shadow and read its first event, a second rebuild of the same
    // projection runs to the end and swaps first, as the notifier's self-healing check would.
    const racing: ProjectionStore = Object.assign(Object.create(real) as ProjectionStore, {
      rebuildMany: ((targets, source, options) =>
        real.rebuildMany(
          targets,
          tapped(source, {
            each: async () => {
              if (raced) return;
              raced = true;
              const other = await real.rebuildMany(targets, source);
              expect(other['runs']?.status).toBe('swapped');
            },
          }),
          options,
        )) as ProjectionStore['rebuildMany'],
    });
    ctx.projections = async () => racing;
    try {
      const code = await replayCommand.run(['--projection', 'runs', '--json'], ctx);
      expect(code).toBe(0);
    } finally {
      await ctx.close();
    }
    expect(raced).toBe(true);
    const [outcome] = JSON.parse(io.out()) as Array<{ status: string }>;
    expect(outcome?.status).toBe('lost');
    expect(await snapshots()).toEqual(before);
  });

  it('replay whose shadow Redis loses mid-rebuild stops with a clear error and swaps nothing; running it again rebuilds the projections', async () => {
    const before = await snapshots();
    const ctx = createCliContext({ io: bufferedIo(), env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix }, nats, redis });
    const real = await ctx.projections();
    let lost = false;
    // Redis loses every key of this test (one UNLINK, as a FLUSHALL would) once the rebuild has
    // created its shadow and read its first event.
    const lossy: ProjectionStore = Object.assign(Object.create(real) as ProjectionStore, {
      rebuildMany: ((targets, source, options) =>
        real.rebuildMany(
          targets,
          tapped(source, {
            each: async () => {
              if (lost) return;
              lost = true;
              const keys: string[] = [];
              for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 500 })) keys.push(...(batch as string[]));
              await redis.client.unlink(...keys);
            },
          }),
          options,
        )) as ProjectionStore['rebuildMany'],
    });
    ctx.projections = async () => lossy;
    try {
      const failed = replayCommand.run(['--projection', 'inbox'], ctx);
      await expect(failed).rejects.toThrow(/rebuilding inbox stopped: Redis lost its data .* it was not swapped in\. Run baton replay again/);
    } finally {
      await ctx.close();
    }
    expect(lost).toBe(true);
    expect(await redis.client.get(`${prefix}:proj:inbox:active`)).toBeNull();
    expect((await baton('replay')).code).toBe(0);
    expect(await snapshots()).toEqual(before);
  });
});
