import { z } from 'zod';
import { v8Shapes } from '@baton/domain';
import { EventRegistry, type EventEnvelope } from '@baton/contracts';
import type { NatsHandle } from './connection';
import { ConcurrencyConflict, EventValidationError } from './errors';
import { SCHEMA_HEADER, schemaFingerprint } from './schema-fingerprint';
import { JetStreamEventStore, type AggregateRef, type ResumedCommand } from './store';
import { batonStreamNames } from './topology';
import { heapWeight } from './heap-weight';
import {
  connectTest,
  counterDecider,
  counterRegistry,
  deleteTopology,
  meta,
  provisionTopology,
  randomPrefix,
  type CounterCommand,
  type CounterEvent,
  type CounterState,
} from './int/support';

describe('JetStreamEventStore (real NATS)', () => {
  let a: NatsHandle;
  let b: NatsHandle;
  let prefix: string;

  beforeEach(async () => {
    prefix = randomPrefix();
    a = await connectTest('writer-a');
    b = await connectTest('writer-b');
    await provisionTopology(a, prefix);
  });

  afterEach(async () => {
    await deleteTopology(a, prefix);
    await a.close();
    await b.close();
  });

  const storeOn = (
    handle: NatsHandle,
    opts: { cacheSize?: number; cacheBytes?: number; registry?: EventRegistry; onResumedCommand?: (resumed: ResumedCommand) => void } = {},
  ) =>
    new JetStreamEventStore({
      js: handle.js,
      jsm: handle.jsm,
      prefix,
      registry: opts.registry ?? counterRegistry(),
      cacheSize: opts.cacheSize,
      ...(opts.cacheBytes !== undefined ? { cacheBytes: opts.cacheBytes } : {}),
      ...(opts.onResumedCommand ? { onResumedCommand: opts.onResumedCommand } : {}),
    });

  const ref = (id = 'agg-1'): AggregateRef => ({ project: 'proj', kind: 'handoff', id });

  const envelope = (id: string, n: number, total: number, version: number, aggregateId = 'agg-1'): EventEnvelope => ({
    id,
    type: 'counter.added',
    version: 1,
    aggregate: { kind: 'handoff', id: aggregateId },
    project: 'proj',
    ...meta(),
    payload: { n, total, version },
  });

  it('events read back, and events just appended, share one hidden class (not one each)', async () => {
    // %HaveSameMap: V8's own answer. `{ ...envelope, seq }` failed this once warm on Node 20.
    const { haveSameMap } = v8Shapes();
    const store = storeOn(a);
    let last = 0;
    for (let i = 1; i <= 40; i++) last = (await store.append(ref(), [envelope(`e${i}`, 1, i, i)], { expectedVersion: last })).lastSeq;
    const read = (await store.read(ref())).events;
    expect(read).toHaveLength(40);
    expect(haveSameMap(read[38]!, read[39]!)).toBe(true);
    const decided: object[] = [];
    for (let i = 0; i < 40; i++) {
      const result = await store.handleCommand(ref(`agg-${i}`), counterDecider, { type: 'add', n: 1 }, meta());
      if (result.ok) decided.push(...result.events);
    }
    expect(decided).toHaveLength(40);
    expect(haveSameMap(decided[38]!, decided[39]!)).toBe(true);
  });

  it('reads an empty aggregate as no events and last sequence 0', async () => {
    const result = await storeOn(a).read(ref('never-written'));
    expect(result).toEqual({ events: [], lastSeq: 0 });
  });

  it('a concurrency conflict never overwrites: an append expecting a stale sequence is refused', async () => {
    const store = storeOn(a);
    const first = await store.append(ref(), [envelope('e1', 1, 1, 1)], { expectedVersion: 0 });
    await expect(store.append(ref(), [envelope('e2', 5, 5, 1)], { expectedVersion: 0 })).rejects.toBeInstanceOf(ConcurrencyConflict);
    const read = await store.read(ref());
    expect(read.events.map((e) => e.id)).toEqual(['e1']);
    expect(read.lastSeq).toBe(first.lastSeq);
  });

  it("stamps every event with its type, version and this build's schema fingerprint, and reads it back as written", async () => {
    const registry = counterRegistry();
    const store = storeOn(a, { registry });
    const result = await store.append(ref(), [envelope('e1', 1, 1, 1)], { expectedVersion: 0 });
    const stored = await a.jsm.streams.getMessage(batonStreamNames(prefix).events, { seq: result.lastSeq });
    expect(stored.header.get('Baton-Event-Type')).toBe('counter.added');
    expect(stored.header.get('Baton-Event-Version')).toBe('1');
    expect(stored.header.get(SCHEMA_HEADER)).toBe(schemaFingerprint(registry, 'counter.added'));
    expect((await storeOn(b, { registry }).read(ref())).events.map((e) => e.payload)).toEqual([{ n: 1, total: 1, version: 1 }]);
  });

  it('assumeNew: a create on a fresh aggregate makes no read; on one that exists after all it conflicts, reads and decides on the real state', async () => {
    const fresh = storeOn(a);
    const before = fresh.stats().readRoundTrips;
    const created = await fresh.handleCommand(ref('new-1'), counterDecider, { type: 'add', n: 2 }, { ...meta(), commandId: 'c1' }, { assumeNew: true });
    expect(created).toMatchObject({ ok: true, state: { total: 2, version: 1 } });
    expect(fresh.stats().readRoundTrips).toBe(before);
    // Another store (its own cache) assumes the same aggregate is new: the append expecting an
    // empty subject conflicts, the next attempt reads, and the decision counts the first event.
    const other = storeOn(b);
    const second = await other.handleCommand(ref('new-1'), counterDecider, { type: 'add', n: 5 }, { ...meta(), commandId: 'c2' }, { assumeNew: true });
    expect(second).toMatchObject({ ok: true, state: { total: 7, version: 2 } });
    expect(other.stats().readRoundTrips).toBeGreaterThan(0);
    // The same create again (a retry with the same command id): answered from the stream, not stored twice.
    const retried = await storeOn(b).handleCommand(ref('new-1'), counterDecider, { type: 'add', n: 2 }, { ...meta(), commandId: 'c1' }, { assumeNew: true });
    expect(retried.ok).toBe(true);
    expect((await storeOn(a).read(ref('new-1'))).events.map((e) => e.payload)).toEqual([
      { n: 2, total: 2, version: 1 },
      { n: 5, total: 7, version: 2 },
    ]);
  });

  it('onPublished: called before the append is acknowledged, once per command (not again when a conflict makes it publish twice), never for a refusal; what it appends on the same connection is stored after', async () => {
    const store = storeOn(a);
    const order: string[] = [];
    let second: Promise<unknown> | null = null;
    const first = store
      .handleCommand(ref('first'), counterDecider, { type: 'add', n: 1 }, meta(), {
        onPublished: () => {
          order.push('published');
          // Started before the first append is acknowledged (its ack cannot have come in yet: this runs synchronously).
          second = store.handleCommand(ref('second'), counterDecider, { type: 'add', n: 2 }, meta(), { assumeNew: true });
        },
      })
      .then((result) => (order.push('acknowledged'), result));
    expect(order).toEqual([]);
    await first;
    expect(order).toEqual(['published', 'acknowledged']);
    expect(await second).toMatchObject({ ok: true });
    const [one, two] = [(await store.read(ref('first'))).events, (await store.read(ref('second'))).events];
    expect(one[0]!.seq).toBeLessThan(two[0]!.seq);

    // A refusal publishes nothing: no call.
    let calls = 0;
    expect(await store.handleCommand(ref('first'), counterDecider, { type: 'add', n: -1 }, meta(), { onPublished: () => void calls++ })).toMatchObject({
      ok: false,
    });
    // A first attempt that conflicts (another writer moved the aggregate past the cached fold) and
    // a second that stores: one call, for the first publish.
    await storeOn(b).handleCommand(ref('first'), counterDecider, { type: 'add', n: 5 }, meta());
    const retried = await store.handleCommand(ref('first'), counterDecider, { type: 'add', n: 1 }, meta(), { onPublished: () => void calls++ });
    expect(retried).toMatchObject({ ok: true, state: { total: 7, version: 3 } });
    expect(calls).toBe(1);
  });

  it('several events in one append chain their expectations and land in order', async () => {
    const store = storeOn(a);
    const result = await store.append(ref(), [envelope('e1', 1, 1, 1), envelope('e2', 2, 3, 2), envelope('e3', 3, 6, 3)], {
      expectedVersion: 0,
    });
    expect(result.seqs).toHaveLength(3);
    const read = await store.read(ref());
    expect(read.events.map((e) => [e.id, e.seq])).toEqual([
      ['e1', result.seqs[0]],
      ['e2', result.seqs[1]],
      ['e3', result.seqs[2]],
    ]);
  });

  it("an event a decider attributes (by) is written with that actor and origin; the command's other events keep the command's", async () => {
    // Two events of one command: the second speaks for someone else (a customer's queued words delivered by an agent's reply).
    const attributing = {
      ...counterDecider,
      decide: (command: CounterCommand, state: CounterState) => {
        const first: CounterEvent = { type: 'counter.added', data: { n: command.n, total: state.total + command.n, version: state.version + 1 } };
        const second: CounterEvent = {
          type: 'counter.added',
          data: { n: command.n, total: state.total + 2 * command.n, version: state.version + 2 },
          by: { actor: 'customer', origin: 'human' },
        };
        return { ok: true as const, events: [first, second] };
      },
    };
    const result = await storeOn(a).handleCommand(ref(), attributing, { type: 'add', n: 2 }, meta('replying-agent'));
    expect(result.ok).toBe(true);
    // Read back from the stream by another connection: what was stored, not what was cached.
    const read = await storeOn(b).read(ref());
    expect(read.events.map((e) => [e.actor, e.origin])).toEqual([
      ['replying-agent', 'agent'],
      ['customer', 'human'],
    ]);
  });

  it('the same message id appended twice stores one event (idempotent retry)', async () => {
    const store = storeOn(a);
    const first = await store.append(ref(), [envelope('same-id', 1, 1, 1)], { expectedVersion: 0 });
    // A retry after a lost ack carries the same id and the same (now stale) expectation.
    const retry = await store.append(ref(), [envelope('same-id', 1, 1, 1)], { expectedVersion: 0 });
    expect(retry.duplicates).toBe(1);
    expect(retry.seqs).toEqual(first.seqs);
    const read = await store.read(ref());
    expect(read.events).toHaveLength(1);
  });

  it('the same event id on aggregates of two projects is two events: the Nats-Msg-Id names project, kind and aggregate', async () => {
    const store = storeOn(a);
    const other: AggregateRef = { project: 'other', kind: 'handoff', id: 'agg-1' };
    const first = await store.append(ref(), [envelope('same-id', 1, 1, 1)], { expectedVersion: 0 });
    const second = await store.append(other, [{ ...envelope('same-id', 2, 2, 1), project: 'other' }], { expectedVersion: 0 });
    expect(second.duplicates).toBe(0);
    expect(second.seqs[0]).not.toBe(first.seqs[0]);
    expect((await store.read(other)).events.map((e) => [e.id, e.payload])).toEqual([['same-id', { n: 2, total: 2, version: 1 }]]);
    expect((await store.read(ref())).events.map((e) => [e.id, e.payload])).toEqual([['same-id', { n: 1, total: 1, version: 1 }]]);
    const stored = await a.jsm.streams.getMessage(batonStreamNames(prefix).events, { seq: second.seqs[0] as number });
    expect(stored.header.get('Nats-Msg-Id')).toBe('ev:other:handoff:agg-1:same-id');
    // A retry on the same aggregate is still one event.
    const retry = await store.append(other, [{ ...envelope('same-id', 2, 2, 1), project: 'other' }], { expectedVersion: 0 });
    expect(retry).toMatchObject({ duplicates: 1, seqs: second.seqs });
  });

  it('rejects an event that breaks its schema and writes nothing', async () => {
    const store = storeOn(a);
    const bad = { ...envelope('bad', 1, 1, 1), payload: { n: 'one' } };
    await expect(store.append(ref(), [envelope('ok', 1, 1, 1), bad], { expectedVersion: 0 })).rejects.toBeInstanceOf(EventValidationError);
    expect((await store.read(ref())).events).toHaveLength(0);
  });

  it('reads an aggregate with 2,000 events completely and in order, ignoring other aggregates', async () => {
    const store = storeOn(a);
    const events = Array.from({ length: 2000 }, (_, i) => envelope(`big-${i}`, 1, i + 1, i + 1, 'big'));
    // Interleave another aggregate so the stream holds more than the one subject.
    await store.append(ref('other'), [envelope('other-1', 1, 1, 1, 'other')], { expectedVersion: 0 });
    const appended = await store.append(ref('big'), events, { expectedVersion: 0 });
    await store.append(ref('other'), [envelope('other-2', 1, 2, 2, 'other')], { expectedVersion: appended.seqs[0]! - 1 });

    const read = await store.read(ref('big'));
    expect(read.events).toHaveLength(2000);
    expect(read.events.map((e) => (e.payload as { version: number }).version)).toEqual(events.map((_, i) => i + 1));
    expect(read.lastSeq).toBe(appended.lastSeq);

    const tail = await store.read(ref('big'), { afterSeq: appended.seqs[1989]! });
    expect(tail.events.map((e) => e.id)).toEqual(events.slice(1990).map((e) => e.id));
  });

  it('upcasts old event versions on read', async () => {
    const v1 = new EventRegistry().register({
      type: 'counter.added',
      aggregate: 'handoff',
      version: 1,
      schema: z.object({ n: z.number(), total: z.number(), version: z.number() }),
    });
    const v2 = new EventRegistry().register({
      type: 'counter.added',
      aggregate: 'handoff',
      version: 2,
      schema: z.object({ amount: z.number(), total: z.number(), version: z.number() }),
      upcasters: { 1: (p) => ({ amount: (p as { n: number }).n, total: (p as { total: number }).total, version: (p as { version: number }).version }) },
    });
    await storeOn(a, { registry: v1 }).append(ref(), [envelope('old', 4, 4, 1)], { expectedVersion: 0 });
    const read = await storeOn(a, { registry: v2 }).read(ref());
    expect(read.events[0]).toMatchObject({ version: 2, payload: { amount: 4, total: 4, version: 1 } });
  });

  it('returns a domain refusal from decide instead of throwing, and appends nothing', async () => {
    const result = await storeOn(a).handleCommand(ref(), counterDecider, { type: 'add', n: -1 }, meta());
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.code).toBe('negative');
    expect((await storeOn(a).read(ref())).lastSeq).toBe(0);
  });

  it('two writers racing on one aggregate: exactly one wins each version, the loser re-reads and re-decides, nothing is overwritten', async () => {
    let decisions = 0;
    const counting = {
      ...counterDecider,
      decide: (c: CounterCommand, s: ReturnType<typeof counterDecider.initialState>) => (decisions++, counterDecider.decide(c, s)),
    };
    const writerA = storeOn(a, { cacheSize: 10 });
    const writerB = storeOn(b, { cacheSize: 10 });
    const run = async (store: JetStreamEventStore, amounts: number[]) => {
      for (const n of amounts) {
        const result = await store.handleCommand(ref(), counting, { type: 'add', n }, meta(), { maxAttempts: 50 });
        expect(result.ok).toBe(true);
      }
    };
    const amountsA = Array.from({ length: 15 }, (_, i) => i + 1);
    const amountsB = Array.from({ length: 15 }, (_, i) => 100 * (i + 1));
    await Promise.all([run(writerA, amountsA), run(writerB, amountsB)]);

    const read = await storeOn(a).read(ref());
    const payloads = read.events.map((e) => e.payload as { n: number; total: number; version: number });
    // Every command applied exactly once...
    expect(payloads).toHaveLength(30);
    expect(payloads.map((p) => p.n).sort((x, y) => x - y)).toEqual([...amountsA, ...amountsB].sort((x, y) => x - y));
    // ...each decided on the state left by the one before it (one winner per version, no lost update).
    payloads.forEach((p, i) => expect(p.version).toBe(i + 1));
    let running = 0;
    for (const p of payloads) {
      running += p.n;
      expect(p.total).toBe(running);
    }
    // The race really happened: some commands were decided more than once.
    expect(decisions).toBeGreaterThan(30);

    // The folded final state reflects both writers' commands in sequence.
    const final = await writerA.handleCommand(ref(), counterDecider, { type: 'add', n: 0 }, meta());
    expect(final.ok && final.state.total).toBe(amountsA.reduce((x, y) => x + y) + amountsB.reduce((x, y) => x + y));
  });

  it('a cached state catches up with events another writer appended before deciding', async () => {
    const cached = storeOn(a, { cacheSize: 10 });
    await cached.handleCommand(ref(), counterDecider, { type: 'add', n: 1 }, meta());
    await storeOn(b).handleCommand(ref(), counterDecider, { type: 'add', n: 10 }, meta());
    const result = await cached.handleCommand(ref(), counterDecider, { type: 'add', n: 100 }, meta());
    expect(result.ok && result.state).toEqual({ total: 111, version: 3, history: [1, 10, 100] });
  });

  describe('a fold cache bounded by bytes (cacheBytes)', () => {
    const add = (store: JetStreamEventStore, id: string, n = 1) => store.handleCommand(ref(id), counterDecider, { type: 'add', n }, meta());

    it('keeps what its folds weigh within the bound, evicting the least recently used, whatever their count', async () => {
      const store = storeOn(a, { cacheSize: 1_000, cacheBytes: 4_000 });
      for (let i = 0; i < 20; i++) await add(store, `small-${i}`);
      const stats = store.foldCache();
      expect(stats).toMatchObject({ capacity: 1_000, maxBytes: 4_000 });
      expect(stats.bytes).toBeGreaterThan(0);
      expect(stats.bytes).toBeLessThanOrEqual(4_000);
      expect(stats.entries).toBeLessThan(20);
      expect(stats.evicted).toBe(20 - stats.entries);
      // The most recent folds are the ones kept: deciding on the last needs no read, on the first it does.
      const before = store.stats().readRoundTrips;
      await add(store, 'small-19');
      expect(store.stats().readRoundTrips).toBe(before);
      await add(store, 'small-0');
      expect(store.stats().readRoundTrips).toBeGreaterThan(before);
      expect((await store.read(ref('small-0'))).events).toHaveLength(2);
    });

    it('keeps no events with a fold that asks for none (cacheHistory 0): its entry weighs its state alone, folds on from it, and still answers the state around an event by reading', async () => {
      const writer = storeOn(a);
      for (let i = 0; i < 20; i++) await add(writer, 'bare', 1);
      const light = { initialState: counterDecider.initialState, evolve: counterDecider.evolve, cacheHistory: 0 };
      const full = storeOn(a, { cacheSize: 10, cacheBytes: 1_000_000 });
      const bare = storeOn(a, { cacheSize: 10, cacheBytes: 1_000_000 });
      await full.current(ref('bare'), counterDecider);
      await bare.current(ref('bare'), light);
      expect(bare.foldCache().bytes).toBeGreaterThan(0);
      expect(bare.foldCache().bytes).toBeLessThan(full.foldCache().bytes);
      await add(writer, 'bare', 5);
      const before = bare.stats().readRoundTrips;
      const next = await bare.current(ref('bare'), light);
      expect(next.state).toEqual((await full.current(ref('bare'), counterDecider)).state);
      expect(next.state).toMatchObject({ total: 25, version: 21 });
      expect(bare.stats().readRoundTrips - before).toBeLessThanOrEqual(2); // the last sequence and the one new event
      const around = await bare.eventStates(ref('bare'), light, next.lastSeq);
      expect(around.after).toEqual(next.state);
      expect(around.before).toMatchObject({ total: 20, version: 20 });
    });

    it('weighs a growing state again as it grows (within twice its measured weight), and keeps one heavier than the bound alone, still deciding without reads', async () => {
      const store = storeOn(a, { cacheSize: 1_000, cacheBytes: 4_000 });
      await add(store, 'other');
      let state: CounterState | undefined;
      for (let i = 0; i < 700; i++) {
        const result = await add(store, 'long', 2);
        if (result.ok) state = result.state as CounterState;
      }
      expect(state?.history).toHaveLength(700);
      const weight = heapWeight(state);
      expect(weight).toBeGreaterThan(4_000);
      const stats = store.foldCache();
      expect(stats.entries).toBe(1); // 'other' was evicted to make room, the long one stays alone
      expect(stats.bytes).toBeGreaterThanOrEqual(weight);
      expect(stats.bytes).toBeLessThanOrEqual(2 * weight + 256 + 160 * 16);
      const before = store.stats().readRoundTrips;
      const next = await add(store, 'long', 2);
      expect(next.ok && next.state).toMatchObject({ total: 1_402, version: 701 });
      expect(store.stats().readRoundTrips).toBe(before);
    });

    it('without cacheBytes nothing is weighed, and a bound that is not positive is refused', () => {
      expect(storeOn(a, { cacheSize: 10 }).foldCache()).toEqual({ capacity: 10, maxBytes: null, entries: 0, bytes: 0, evicted: 0 });
      expect(() => storeOn(a, { cacheSize: 10, cacheBytes: 0 })).toThrow(/cacheBytes/);
    });
  });

  it('a command retried with the same command id is stored once and answers with the stored events', async () => {
    const store = storeOn(a, { cacheSize: 10 });
    const first = await store.handleCommand(ref(), counterDecider, { type: 'add', n: 7 }, { ...meta(), commandId: 'cmd-7' });
    // The caller lost the reply and retries: the retry decides on the new state, but its event
    // id (cmd-7:0) is already stored, so nothing new is written.
    const retry = await store.handleCommand(ref(), counterDecider, { type: 'add', n: 7 }, { ...meta(), commandId: 'cmd-7' });
    expect(first.ok && retry.ok).toBe(true);
    if (!first.ok || !retry.ok) return;
    expect(retry.events.map((e) => [e.id, e.seq, e.payload])).toEqual(first.events.map((e) => [e.id, e.seq, e.payload]));
    expect(retry.state).toEqual({ total: 7, version: 1, history: [7] });
    expect((await store.read(ref())).events).toHaveLength(1);
  });

  // A decider that records every addition as two events (the added amount, then a double-check).
  const twoStep = {
    ...counterDecider,
    decide: (command: CounterCommand, state: { total: number; version: number }) => ({
      ok: true as const,
      events: [
        { type: 'counter.added' as const, data: { n: command.n, total: state.total + command.n, version: state.version + 1 } },
        { type: 'counter.added' as const, data: { n: 0, total: state.total + command.n, version: state.version + 2 } },
      ],
    }),
  };

  it('a command whose multi-event append was cut short is completed by its retry, not lost', async () => {
    const resumed: ResumedCommand[] = [];
    const store = storeOn(a, { cacheSize: 10, onResumedCommand: (r) => resumed.push(r) });
    // The writer crashed after storing only the first of the two events.
    await store.append(ref(), [{ ...envelope('cmd-9:0', 5, 5, 1) }], { expectedVersion: 0 });
    const retry = await store.handleCommand(ref(), twoStep, { type: 'add', n: 5 }, { ...meta(), commandId: 'cmd-9' });
    expect(retry.ok).toBe(true);
    const read = await store.read(ref());
    expect(read.events.map((e) => e.id)).toEqual(['cmd-9:0', 'cmd-9:1']);
    expect(read.events.map((e) => e.payload)).toEqual([
      { n: 5, total: 5, version: 1 },
      { n: 0, total: 5, version: 2 },
    ]);
    // A further retry finds the command complete and writes nothing.
    await store.handleCommand(ref(), twoStep, { type: 'add', n: 5 }, { ...meta(), commandId: 'cmd-9' });
    expect((await store.read(ref())).events).toHaveLength(2);
    // Both retries were reported, with what became of them.
    expect(resumed.map(({ outcome, stored, appended, firstEventId }) => ({ outcome, stored, appended, firstEventId }))).toEqual([
      { outcome: 'completed', stored: 1, appended: 1, firstEventId: 'cmd-9:0' },
      { outcome: 'already_complete', stored: 2, appended: 0, firstEventId: 'cmd-9:0' },
    ]);
    expect(store.stats().resumed).toEqual({ already_complete: 1, completed: 1, refused: 0, diverged: 0 });
  });

  describe('a cut-short command retried after another command appended to the aggregate', () => {
    // A decider whose decision says "already applied" once the first half is folded in (as a run
    // does for an answer whose `run.resumed` is stored): deciding afresh on the current state
    // would leave the command half done for good.
    const halfAware = (passive: (type: string) => boolean) => ({
      ...counterDecider,
      decide: (command: CounterCommand, state: CounterState) => (state.total >= command.n ? { ok: true as const, events: [] } : twoStep.decide(command, state)),
      passive,
    });
    const setUp = async (store: JetStreamEventStore) => {
      // The writer stored the first of its two events, then its second publish failed (a timeout).
      await store.append(ref(), [{ ...envelope('cmd-12:0', 5, 5, 1) }], { expectedVersion: 0 });
      // Meanwhile another command recorded something (a refused input, say).
      await store.append(ref(), [{ ...envelope('other:0', 0, 5, 2) }], { expectedVersion: 1 });
    };

    it('only passive events came after it: the retry completes it after them (its missing events appended), reported completed', async () => {
      const resumed: ResumedCommand[] = [];
      const store = storeOn(a, { cacheSize: 10, onResumedCommand: (r) => resumed.push(r) });
      await setUp(store);
      const decider = halfAware((type) => type === 'counter.added');
      const retry = await store.handleCommand(ref(), decider, { type: 'add', n: 5 }, { ...meta(), commandId: 'cmd-12' });
      expect(retry.ok && retry.events.map((e) => e.id)).toEqual(['cmd-12:0', 'cmd-12:1']);
      expect((await store.read(ref())).events.map((e) => e.id)).toEqual(['cmd-12:0', 'other:0', 'cmd-12:1']);
      expect(resumed).toEqual([expect.objectContaining({ outcome: 'completed', stored: 1, appended: 1, firstEventId: 'cmd-12:0' })]);
      // Its state is the fold of all three, and a further retry writes nothing.
      expect(retry.ok && retry.state).toEqual((await storeOn(b).current(ref(), decider)).state);
      await store.handleCommand(ref(), decider, { type: 'add', n: 5 }, { ...meta(), commandId: 'cmd-12' });
      expect((await store.read(ref())).events).toHaveLength(3);
      // Another writer (a cold cache) retrying it finds it complete too.
      await storeOn(b, { cacheSize: 10 }).handleCommand(ref(), decider, { type: 'add', n: 5 }, { ...meta(), commandId: 'cmd-12' });
      expect((await store.read(ref())).events).toHaveLength(3);
    });

    it('an event after it that is not passive: the retry decides on the current state as before, and appends nothing', async () => {
      const store = storeOn(a, { cacheSize: 10 });
      await setUp(store);
      const retry = await store.handleCommand(
        ref(),
        halfAware(() => false),
        { type: 'add', n: 5 },
        { ...meta(), commandId: 'cmd-12' },
      );
      expect(retry.ok && retry.events).toEqual([]);
      expect((await store.read(ref())).events.map((e) => e.id)).toEqual(['cmd-12:0', 'other:0']);
    });

    it('a refusal or no-op of a command that has no events stored costs no read (the kept tail says so)', async () => {
      const store = storeOn(a, { cacheSize: 10 });
      await setUp(store);
      const decider = halfAware((type) => type === 'counter.added');
      // Warm the cache with the aggregate, then decide a command of another id that is a no-op.
      await store.current(ref(), decider);
      const before = store.stats().readRoundTrips;
      const result = await store.handleCommand(ref(), { ...decider, passive: () => false }, { type: 'add', n: 1 }, { ...meta(), commandId: 'cmd-13' });
      expect(result.ok && result.events).toEqual([]);
      expect(store.stats().readRoundTrips - before).toBeLessThanOrEqual(2);
    });
  });

  describe('resuming: what the stored events prove passed is not judged again on inputs that moved on', () => {
    // A rule on an outside input the command carries (as a result carries the claim it was read
    // under): open when first decided, closed by the retry.
    type Gated = CounterCommand & { gateOpen: boolean; proven?: true };
    const gated = (withResuming: boolean) => ({
      ...counterDecider,
      decide: (command: Gated, state: CounterState) =>
        command.gateOpen || command.proven === true
          ? twoStep.decide(command, state)
          : ({ ok: false, error: { code: 'gate_closed', kind: 'wrong_state', message: 'the gate closed' } } as const),
      ...(withResuming
        ? { resuming: (command: Gated, stored: readonly CounterEvent[]) => (stored[0]?.data.n === command.n ? { ...command, proven: true as const } : command) }
        : {}),
    });
    const cutShortThenRetry = async (withResuming: boolean) => {
      const resumed: ResumedCommand[] = [];
      const store = storeOn(a, { cacheSize: 10, onResumedCommand: (r) => resumed.push(r) });
      await store.append(ref(), [{ ...envelope('cmd-14:0', 5, 5, 1) }], { expectedVersion: 0 });
      const retry = await store.handleCommand(ref(), gated(withResuming), { type: 'add', n: 5, gateOpen: false }, { ...meta(), commandId: 'cmd-14' });
      return { retry, resumed, ids: (await store.read(ref())).events.map((e) => e.id) };
    };

    it('the decider waives the rule its stored events prove passed: the command is completed', async () => {
      const { retry, resumed, ids } = await cutShortThenRetry(true);
      expect(retry.ok && retry.events.map((e) => e.id)).toEqual(['cmd-14:0', 'cmd-14:1']);
      expect(ids).toEqual(['cmd-14:0', 'cmd-14:1']);
      expect(resumed).toEqual([expect.objectContaining({ outcome: 'completed', stored: 1, appended: 1 })]);
    });

    it('without resuming the rule is judged on the changed input: refused, the stored event stands alone', async () => {
      const { resumed, ids } = await cutShortThenRetry(false);
      expect(ids).toEqual(['cmd-14:0']);
      expect(resumed).toEqual([expect.objectContaining({ outcome: 'refused', error: expect.objectContaining({ code: 'gate_closed' }) })]);
    });

    it('a command with none of its events stored is decided as it came (resuming is not asked)', async () => {
      const store = storeOn(a, { cacheSize: 10 });
      const asked: unknown[] = [];
      const decider = { ...gated(true), resuming: (command: Gated) => (asked.push(command), { ...command, proven: true as const }) };
      const result = await store.handleCommand(ref(), decider, { type: 'add', n: 5, gateOpen: false }, { ...meta(), commandId: 'cmd-15' });
      expect(result.ok).toBe(false);
      expect(asked).toEqual([]);
      expect((await store.read(ref())).events).toEqual([]);
    });
  });

  it('custom event ids with their inverse (eventIndex): a cut-short command is completed, and the inverse is checked, not believed', async () => {
    const store = storeOn(a, { cacheSize: 10 });
    const ids = (cause: string) => ({
      eventId: (index: number) => `e${index}-${cause}`,
      eventIndex: (id: string) => {
        const digits = /^e(\d+)-/.exec(id)?.[1];
        return digits === undefined ? null : Number(digits);
      },
    });
    await store.append(ref(), [{ ...envelope('e0-c1', 5, 5, 1) }], { expectedVersion: 0 });
    await store.handleCommand(ref(), twoStep, { type: 'add', n: 5 }, { ...meta(), ...ids('c1') });
    expect((await store.read(ref())).events.map((e) => e.id)).toEqual(['e0-c1', 'e1-c1']);
    // Another command's ids share the pattern: the inverse names index 1, but e1-c1 is not e1-c2,
    // so the store decides anew and appends both of c2's events.
    await store.handleCommand(ref(), twoStep, { type: 'add', n: 1 }, { ...meta(), ...ids('c2') });
    // An inverse that lies (always 0) cannot make another command's event this one's.
    await store.handleCommand(ref(), twoStep, { type: 'add', n: 1 }, { ...meta(), eventId: ids('c3').eventId, eventIndex: () => 0 });
    expect((await store.read(ref())).events.map((e) => e.id)).toEqual(['e0-c1', 'e1-c1', 'e0-c2', 'e1-c2', 'e0-c3', 'e1-c3']);
  });

  describe('a cut-short command whose second decision does not continue the stored events', () => {
    // The writer crashed after storing the first of a command's two events.
    const cutShort = () => store().append(ref(), [{ ...envelope('cmd-11:0', 5, 5, 1) }], { expectedVersion: 0 });
    let resumed: ResumedCommand[];
    let current: JetStreamEventStore;
    const store = () => current;
    beforeEach(() => {
      resumed = [];
      current = storeOn(a, { cacheSize: 10, onResumedCommand: (r) => resumed.push(r) });
    });

    it('refused: the stored event stands, nothing is appended, and the refusal is reported', async () => {
      await cutShort();
      const refusing = {
        ...counterDecider,
        decide: () => ({ ok: false, error: { code: 'closed', kind: 'wrong_state', message: 'closed meanwhile' } }) as const,
      };
      const retry = await store().handleCommand(ref(), refusing, { type: 'add', n: 5 }, { ...meta(), commandId: 'cmd-11' });
      expect(retry.ok && retry.events.map((e) => e.id)).toEqual(['cmd-11:0']);
      expect((await store().read(ref())).events.map((e) => e.id)).toEqual(['cmd-11:0']);
      expect(resumed).toEqual([
        expect.objectContaining({
          outcome: 'refused',
          stored: 1,
          appended: 0,
          storedTypes: ['counter.added'],
          decidedTypes: [],
          error: expect.objectContaining({ code: 'closed' }),
        }),
      ]);
      expect(store().stats().resumed.refused).toBe(1);
    });

    it('diverged: a decision of other events appends none of them, and is reported with both lists', async () => {
      await cutShort();
      const otherwise = {
        ...counterDecider,
        decide: () => ({
          ok: true as const,
          events: [
            { type: 'counter.reset' as never, data: { n: 0, total: 0, version: 1 } },
            { type: 'counter.added' as const, data: { n: 5, total: 5, version: 2 } },
          ],
        }),
      };
      const retry = await store().handleCommand(ref(), otherwise, { type: 'add', n: 5 }, { ...meta(), commandId: 'cmd-11' });
      expect(retry.ok && retry.events.map((e) => e.id)).toEqual(['cmd-11:0']);
      expect((await store().read(ref())).events.map((e) => e.id)).toEqual(['cmd-11:0']);
      expect(resumed).toEqual([
        expect.objectContaining({
          outcome: 'diverged',
          stored: 1,
          appended: 0,
          storedTypes: ['counter.added'],
          decidedTypes: ['counter.reset', 'counter.added'],
        }),
      ]);
    });
  });

  it('a refusal decided on a cached fold is checked against the stream: the newer events of another writer are read and the command decided again', async () => {
    const cachedA = storeOn(a, { cacheSize: 10 });
    const cachedB = storeOn(b, { cacheSize: 10 });
    // Accepts only when the aggregate is at the version the command names (a state-dependent rule).
    const atVersion = {
      ...counterDecider,
      decide: (command: CounterCommand & { at?: number }, state: { total: number; version: number }) =>
        command.at !== undefined && command.at !== state.version
          ? ({ ok: false, error: { code: 'wrong_version', kind: 'wrong_state', message: `at ${state.version}` } } as const)
          : counterDecider.decide(command, state as never),
    };
    await cachedA.handleCommand(ref(), atVersion, { type: 'add', n: 1 }, meta());
    await cachedB.handleCommand(ref(), atVersion, { type: 'add', n: 2, at: 1 } as CounterCommand, meta());
    // A's cache still says version 1; the command needs version 2, which B wrote.
    const result = await cachedA.handleCommand(ref(), atVersion, { type: 'add', n: 4, at: 2 } as CounterCommand, meta());
    expect(result.ok).toBe(true);
    expect(result.state).toEqual({ total: 7, version: 3, history: [1, 2, 4] });
  });
});
