import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Controller, Module, UseFilters, type INestMicroservice } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern } from '@nestjs/microservices';
import { z } from 'zod';
import { EventRegistry, type EventEnvelope } from '@baton/contracts';
import {
  DlqHeader,
  JetStreamEventStore,
  TransientError,
  batonStreamNames,
  batonTopology,
  connectNats,
  provision,
  reactor,
  type AggregateRef,
  type MessageOutcome,
  type NatsHandle,
} from '@baton/eventstore';
import { waitFor } from '@baton/wait';
import { JetStreamContext } from './jetstream.context';
import { JetStreamExceptionFilter } from './jetstream.exception-filter';
import { JetStreamServer } from './jetstream.server';
import { durableNameFor } from './subject';

/*
 * Reactors as handler tables through the Nest transport: `ctx.react(table)` decodes the stored
 * event once, refuses one whose envelope disagrees with its subject, and hands the handler the
 * typed event with the aggregate's state before and after it from the event store's fold cache;
 * the transport's runner acknowledges, retries and dead-letters.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const PATTERN = '{prefix}.ev.*.handoff.*';

const AddedSchema = z.object({ n: z.number().int(), total: z.number().int() });
const NotedSchema = z.object({ note: z.string() });
type CounterEvent = { type: 'counter.added'; data: z.infer<typeof AddedSchema> } | { type: 'counter.noted'; data: z.infer<typeof NotedSchema> };
type CounterState = { total: number; adds: number };
const registry = () =>
  new EventRegistry()
    .register({ type: 'counter.added', aggregate: 'handoff', version: 1, schema: AddedSchema })
    .register({ type: 'counter.noted', aggregate: 'handoff', version: 1, schema: NotedSchema });
const counter = {
  initialState: (): CounterState => ({ total: 0, adds: 0 }),
  evolve: (state: CounterState, event: CounterEvent): CounterState =>
    event.type === 'counter.added' ? { total: event.data.total, adds: state.adds + 1 } : state,
  decide: (command: { n: number }, state: CounterState) => ({
    ok: true as const,
    events: [{ type: 'counter.added' as const, data: { n: command.n, total: state.total + command.n } }],
  }),
};

interface Reaction {
  type: string;
  n: number;
  before: CounterState;
  after: CounterState;
  seq: number;
  ref: AggregateRef;
}

/** What the table's handlers saw; reset per test. */
const probe = { reactions: [] as Reaction[], failOnce: new Set<number>(), letters: new Set<number>() };

const table = reactor({
  aggregate: 'handoff',
  decider: counter,
  on: {
    'counter.added': async (event, state, ctx) => {
      if (probe.failOnce.delete(event.payload.n)) throw new TransientError('not yet', { delayMs: 200 });
      if (probe.letters.has(event.payload.n)) await ctx.deadLetter({ source: 'counter-reactor', reason: 'refused_by_test', detail: `n=${event.payload.n}` });
      probe.reactions.push({ type: event.type, n: event.payload.n, before: state.before, after: state.after, seq: ctx.seq, ref: ctx.ref });
    },
  },
});

@Controller()
@UseFilters(new JetStreamExceptionFilter())
class CounterReactorController {
  @EventPattern(PATTERN)
  onEvent(@Ctx() ctx: JetStreamContext): Promise<void> {
    return ctx.react(table);
  }
}

@Module({ controllers: [CounterReactorController] })
class TestModule {}

describe('reactor tables through the JetStream transport (real NATS)', () => {
  let prefix: string;
  let nats: NatsHandle;
  let store: JetStreamEventStore;
  let app: INestMicroservice | null;
  let outcomes: MessageOutcome[];

  const ref = (id = 'agg-1'): AggregateRef => ({ project: 'proj', kind: 'handoff', id });
  const meta = { occurredAt: '2025-01-01T00:00:00.000Z', actor: 'tester', origin: 'agent' as const, causationId: null, correlationId: 'c-1' };
  const envelope = (id: string, aggregateId: string, payload: unknown, type = 'counter.added'): EventEnvelope => ({
    id,
    type,
    version: 1,
    aggregate: { kind: 'handoff', id: aggregateId },
    project: 'proj',
    ...meta,
    payload,
  });

  const startApp = async () => {
    const server = new JetStreamServer({
      name: 'svc',
      prefix,
      connection: nats,
      consumer: { pullExpiresMs: 1000, backoffMs: [200], maxDeliver: 3 },
      onOutcome: (o) => outcomes.push(o),
      events: { registry: registry(), store },
    });
    const instance = await NestFactory.createMicroservice(TestModule, { strategy: server, logger: false });
    instance.useGlobalFilters(new JetStreamExceptionFilter());
    await instance.listen();
    app = instance;
  };

  beforeEach(async () => {
    probe.reactions = [];
    probe.failOnce.clear();
    probe.letters.clear();
    outcomes = [];
    app = null;
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: registry(), cacheSize: 100 });
  });

  afterEach(async () => {
    await app?.close();
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    await nats.close();
  });

  it("a handler gets the typed event and the aggregate's state before and after it, from the writer's fold cache without a stream read; types without a handler are acked untouched", async () => {
    for (const n of [1, 2, 4]) await store.handleCommand(ref(), counter, { n }, meta);
    await store.append(ref(), [envelope('note-1', 'agg-1', { note: 'hello' }, 'counter.noted')], { expectedVersion: (await store.read(ref())).lastSeq });
    for (const n of [8]) await store.handleCommand(ref(), counter, { n }, meta);
    const seqs = (await store.read(ref())).events.map((e) => e.seq);
    const reads = store.stats().readRoundTrips;
    await startApp();
    await waitFor(() => outcomes.length === 5, 'five outcomes', { timeoutMs: 8000 });
    expect(outcomes.map((o) => o.kind)).toEqual(['acked', 'acked', 'acked', 'acked', 'acked']);
    expect(probe.reactions).toEqual([
      { type: 'counter.added', n: 1, before: { total: 0, adds: 0 }, after: { total: 1, adds: 1 }, seq: seqs[0], ref: ref() },
      { type: 'counter.added', n: 2, before: { total: 1, adds: 1 }, after: { total: 3, adds: 2 }, seq: seqs[1], ref: ref() },
      { type: 'counter.added', n: 4, before: { total: 3, adds: 2 }, after: { total: 7, adds: 3 }, seq: seqs[2], ref: ref() },
      { type: 'counter.added', n: 8, before: { total: 7, adds: 3 }, after: { total: 15, adds: 4 }, seq: seqs[4], ref: ref() },
    ]);
    // The append of the note went around handleCommand, so the next command read it once; the
    // reactions read nothing: every state came from the fold the writer left in the cache.
    expect(store.stats().readRoundTrips).toBe(reads);
  });

  it('an event whose envelope disagrees with its subject is refused (identity_mismatch), as are bytes that do not decode; none reaches a handler', async () => {
    await startApp();
    const encoder = new TextEncoder();
    // Stored on agg-2's subject but naming agg-1; then naming another project; then not JSON; then an unknown type.
    await nats.js.publish(`${prefix}.ev.proj.handoff.agg-2`, encoder.encode(JSON.stringify(envelope('forged-1', 'agg-1', { n: 5, total: 5 }))));
    await nats.js.publish(`${prefix}.ev.other.handoff.agg-1`, encoder.encode(JSON.stringify(envelope('forged-2', 'agg-1', { n: 5, total: 5 }))));
    await nats.js.publish(`${prefix}.ev.proj.handoff.agg-3`, encoder.encode('{not json'));
    await nats.js.publish(`${prefix}.ev.proj.handoff.agg-4`, encoder.encode(JSON.stringify(envelope('odd-1', 'agg-4', {}, 'counter.unknown'))));
    // An honest event after them is still handled.
    await store.handleCommand(ref('agg-5'), counter, { n: 3 }, meta);
    await waitFor(() => outcomes.length === 5, 'five outcomes', { timeoutMs: 8000 });
    expect(outcomes.map((o) => (o.kind === 'dead_lettered' ? o.reason : o.kind))).toEqual([
      'identity_mismatch',
      'identity_mismatch',
      'malformed_json',
      'unknown_event_type',
      'acked',
    ]);
    expect(probe.reactions.map((r) => [r.ref.id, r.n])).toEqual([['agg-5', 3]]);
    const dlq = batonStreamNames(prefix).dlq;
    const letter = await nats.jsm.streams.getMessage(dlq, { seq: (await nats.jsm.streams.info(dlq)).state.first_seq });
    expect(letter.header.get(DlqHeader.reason)).toBe('identity_mismatch');
    expect(letter.header.get(DlqHeader.subject)).toBe(`${prefix}.ev.proj.handoff.agg-2`);
    expect(letter.header.get(DlqHeader.consumer)).toBe(durableNameFor('svc', PATTERN));
  });

  it("a handler's TransientError is retried; a dead letter the handler records itself leaves the event acknowledged", async () => {
    probe.failOnce.add(1);
    probe.letters.add(2);
    await store.handleCommand(ref(), counter, { n: 1 }, meta);
    await store.handleCommand(ref(), counter, { n: 2 }, meta);
    await startApp();
    await waitFor(() => probe.reactions.length === 2, 'two reactions', { timeoutMs: 8000 });
    await sleep(300);
    // (The retried event comes back after its delay, so the second one may be handled first.)
    expect(outcomes.map((o) => o.kind).sort()).toEqual(['acked', 'acked', 'retry']);
    expect(probe.reactions.map((r) => [r.n, r.before.total, r.after.total]).sort()).toEqual([
      [1, 0, 1],
      [2, 1, 3],
    ]);
    const letter = await nats.jsm.streams.getMessage(batonStreamNames(prefix).dlq, { last_by_subj: `${prefix}.dlq.counter-reactor` });
    expect(letter.header.get(DlqHeader.reason)).toBe('refused_by_test');
    expect(letter.header.get(DlqHeader.seq)).toBe(String(probe.reactions.find((r) => r.n === 2)!.seq));
  });
});
