import { JetStreamEventStore, type StoredEvent } from './store';
import { batonStreamNames } from './topology';
import {
  counterDecider,
  counterFold,
  counterRef,
  counterRegistry,
  meta,
  useTopology,
  type CounterCommand,
  type CounterEvent,
  type CounterState,
} from './int/support';

/*
 * `stateAt(ref, fold, seq)`: the aggregate's state as of a stream sequence, served by the store's
 * one fold cache. Reactors ask it for the state before and after each event they handle, so it
 * must be exact for every sequence and must not read the stream again for what the store folded.
 */
describe('JetStreamEventStore.stateAt (real NATS)', () => {
  const topology = useTopology('state-at');
  const storeOn = (opts: { cacheSize?: number; cacheHistory?: number } = {}) => {
    const nats = topology.nats();
    return new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix: topology.prefix(), registry: counterRegistry(), ...opts });
  };
  const ref = counterRef;
  const foldOf = counterFold;

  /** `count` events on agg-1, each followed by an event of another aggregate, so agg-1's sequences are not contiguous. */
  async function writeInterleaved(writer: JetStreamEventStore, count: number): Promise<StoredEvent[]> {
    for (let i = 1; i <= count; i++) {
      await writer.handleCommand(ref(), counterDecider, { type: 'add', n: i }, meta());
      await writer.handleCommand(ref(`other-${i % 3}`), counterDecider, { type: 'add', n: 100 + i }, meta());
    }
    return (await writer.read(ref())).events;
  }

  it('stateAt equals a fresh fold of the first N events, for every N and every sequence in between, in any order, cache or none', async () => {
    const events = await writeInterleaved(storeOn(), 24);
    const lastSeq = (events.at(-1) as StoredEvent).seq;
    // Expected: the fold of the events at or before each sequence of the stream.
    const expected = (seq: number) => foldOf(events.filter((e) => e.seq <= seq));
    const seqs = Array.from({ length: lastSeq + 2 }, (_, i) => i); // 0 .. lastSeq + 1 (stored: another aggregate's)
    const shuffled = [...seqs].sort((x, y) => ((x * 7919) % 31) - ((y * 7919) % 31) || x - y);
    for (const store of [storeOn({ cacheSize: 100 }), storeOn({ cacheSize: 100, cacheHistory: 3 }), storeOn({ cacheSize: 0 })]) {
      for (const order of [seqs, [...seqs].reverse(), shuffled]) {
        for (const seq of order) expect({ seq, state: await store.stateAt(ref(), counterDecider, seq) }).toEqual({ seq, state: expected(seq) });
      }
    }
  });

  it("cache hits do no stream read: the writer's fold answers for its last events, and an older sequence reads from the start", async () => {
    const writer = storeOn({ cacheSize: 100, cacheHistory: 8 });
    const events = await writeInterleaved(writer, 12);
    const before = writer.stats();
    // The last 8 events (and the state before the oldest of them) come from the cache alone.
    for (const event of events.slice(-8)) {
      expect(await writer.stateAt(ref(), counterDecider, event.seq)).toEqual(foldOf(events.filter((e) => e.seq <= event.seq)));
      expect(await writer.stateAt(ref(), counterDecider, event.seq - 1)).toEqual(foldOf(events.filter((e) => e.seq < event.seq)));
    }
    const hits = writer.stats();
    expect(hits.readRoundTrips).toBe(before.readRoundTrips);
    expect(hits.stateHits - before.stateHits).toBe(16);
    expect(hits.stateReads).toBe(before.stateReads);
    // Further back than the cache keeps: read from the start, once, and still exact.
    const old = events[1] as StoredEvent;
    expect(await writer.stateAt(ref(), counterDecider, old.seq)).toEqual(foldOf(events.slice(0, 2)));
    expect(writer.stats().stateReads).toBe(hits.stateReads + 1);
    expect(writer.stats().readRoundTrips).toBeGreaterThan(hits.readRoundTrips);
    // ...without displacing the writer's fold: the next command decides on it without a read.
    const reads = writer.stats().readRoundTrips;
    const next = await writer.handleCommand(ref(), counterDecider, { type: 'add', n: 1000 }, meta());
    expect(next.ok && next.state.total).toBe(foldOf(events).total + 1000);
    expect(writer.stats().readRoundTrips).toBe(reads);
  });

  it("a command's two events keep the states before them: a reactor asking for those folds nothing; a one-event command keeps none", async () => {
    let evolves = 0;
    const counting = {
      ...counterDecider,
      evolve: (state: CounterState, event: CounterEvent) => {
        evolves++;
        return counterDecider.evolve(state, event);
      },
    };
    // The same fold (same evolve), deciding two events per command.
    const twice = {
      ...counting,
      decide: (command: CounterCommand, state: CounterState) => ({
        ok: true as const,
        events: [1, 2].map(
          (k): CounterEvent => ({ type: 'counter.added', data: { n: command.n, total: state.total + k * command.n, version: state.version + k } }),
        ),
      }),
    };
    const writer = storeOn({ cacheSize: 100 });
    for (let i = 1; i <= 4; i++) await writer.handleCommand(ref(), counting, { type: 'add', n: i }, meta());
    await writer.handleCommand(ref(), twice, { type: 'add', n: 10 }, meta());
    let events = (await writer.read(ref())).events;
    const around = (index: number) => ({ before: foldOf(events.slice(0, index)), after: foldOf(events.slice(0, index + 1)) });
    expect(events).toHaveLength(6);
    evolves = 0;
    const reads = writer.stats().readRoundTrips;
    // The command's two events, as a reactor is handed them.
    expect(await writer.eventStates(ref(), counting, (events[4] as StoredEvent).seq)).toEqual(around(4));
    expect(await writer.eventStates(ref(), counting, (events[5] as StoredEvent).seq)).toEqual(around(5));
    expect(evolves).toBe(0);
    // Before them: folded from the entry's base over the tail it keeps (still no read).
    expect(await writer.eventStates(ref(), counting, (events[3] as StoredEvent).seq)).toEqual(around(3));
    expect(evolves).toBeGreaterThan(0);
    // A one-event command keeps no state besides its fold: the state before it is folded again.
    await writer.handleCommand(ref(), counting, { type: 'add', n: 100 }, meta());
    expect(writer.stats().readRoundTrips).toBe(reads);
    events = (await writer.read(ref())).events;
    const readsAfter = writer.stats().readRoundTrips;
    evolves = 0;
    expect(await writer.eventStates(ref(), counting, (events[6] as StoredEvent).seq)).toEqual(around(6));
    expect(evolves).toBeGreaterThan(0);
    expect(writer.stats().readRoundTrips).toBe(readsAfter);
  });

  it("a state asked for while this store's command appends it waits for the command instead of reading the event back", async () => {
    const writer = storeOn({ cacheSize: 100 });
    const events = await writeInterleaved(writer, 3);
    const before = writer.stats();
    const next = (await topology.nats().jsm.streams.info(batonStreamNames(topology.prefix()).events)).state.last_seq + 1;
    // What the command is about to store is what a reactor of the same process asks for next.
    const [result, state] = await Promise.all([
      writer.handleCommand(ref(), counterDecider, { type: 'add', n: 7 }, meta()),
      writer.stateAt(ref(), counterDecider, next),
    ]);
    if (!result.ok) throw new Error('the command was refused');
    expect(result.lastSeq).toBe(next);
    expect(state).toEqual(result.state);
    expect(state.total).toBe(foldOf(events).total + 7);
    const after = writer.stats();
    expect({ waits: after.stateWaits - before.stateWaits, reads: after.stateReads - before.stateReads }).toEqual({ waits: 1, reads: 0 });
    expect(after.readRoundTrips).toBe(before.readRoundTrips);
    // With no command running, the same question is a plain cache hit.
    await expect(writer.stateAt(ref(), counterDecider, next)).resolves.toEqual(state);
    expect(writer.stats().stateWaits).toBe(after.stateWaits);
  });

  it('walking the events in order reads each event once (one point read per event), never the whole stream again', async () => {
    const events = await writeInterleaved(storeOn(), 20);
    for (const ask of ['eventStates', 'stateAt'] as const) {
      const reader = storeOn({ cacheSize: 100 });
      let previous = reader.stats().readRoundTrips;
      for (const [index, event] of events.entries()) {
        if (ask === 'eventStates') {
          // What a reactor is given for the event at `seq`: the state before it and after it.
          expect(await reader.eventStates(ref(), counterDecider, event.seq)).toEqual({
            before: foldOf(events.slice(0, index)),
            after: foldOf(events.slice(0, index + 1)),
          });
        } else {
          expect(await reader.stateAt(ref(), counterDecider, event.seq)).toEqual(foldOf(events.slice(0, index + 1)));
        }
        const now = reader.stats().readRoundTrips;
        expect(now - previous).toBe(1);
        previous = now;
      }
      // Asked again, everything the cache keeps (the last 16 events) is answered without a read.
      for (const event of events.slice(-16)) await reader.eventStates(ref(), counterDecider, event.seq);
      expect(reader.stats().readRoundTrips).toBe(previous);
    }
  });

  it('a fold cached at or before the sequence is brought up to it by reading only the events another writer appended since', async () => {
    const reader = storeOn({ cacheSize: 100 });
    const first = await writeInterleaved(storeOn(), 5);
    expect(await reader.stateAt(ref(), counterDecider, (first.at(-1) as StoredEvent).seq)).toEqual(foldOf(first));
    const all = [...first];
    const other = storeOn();
    for (let n = 1; n <= 3; n++) {
      const appended = await other.handleCommand(ref(), counterDecider, { type: 'add', n: 50 + n }, meta());
      if (appended.ok) all.push(...(appended.events as StoredEvent[]));
    }
    const reads = reader.stats().readRoundTrips;
    expect(await reader.stateAt(ref(), counterDecider, (all.at(-1) as StoredEvent).seq)).toEqual(foldOf(all));
    // Three new events, read one by one (`next_by_subj`): three round trips, not a reread of eight.
    expect(reader.stats().readRoundTrips - reads).toBe(3);
  });

  it("current: the state as stored now from the fold a reactor's stateAt cached — one point read when nothing was appended since, the new events when some were", async () => {
    const reader = storeOn({ cacheSize: 100 });
    const first = await writeInterleaved(storeOn(), 4);
    // A reactor handled the last event: the fold is cached through it.
    await reader.stateAt(ref(), counterDecider, (first.at(-1) as StoredEvent).seq);
    let reads = reader.stats().readRoundTrips;
    expect(await reader.current(ref(), counterDecider)).toEqual({ state: foldOf(first), lastSeq: (first.at(-1) as StoredEvent).seq });
    expect(reader.stats().readRoundTrips - reads).toBe(1);
    // Another writer appends two events: they are read (and only they) and folded on top.
    const all = [...first];
    for (const n of [7, 8]) {
      const appended = await storeOn().handleCommand(ref(), counterDecider, { type: 'add', n }, meta());
      if (appended.ok) all.push(...(appended.events as StoredEvent[]));
    }
    reads = reader.stats().readRoundTrips;
    expect(await reader.current(ref(), counterDecider)).toEqual({ state: foldOf(all), lastSeq: (all.at(-1) as StoredEvent).seq });
    expect(reader.stats().readRoundTrips - reads).toBe(3);
    // Nothing cached: the whole aggregate; an aggregate with no events: the initial state.
    expect(await storeOn().current(ref(), counterDecider)).toEqual({ state: foldOf(all), lastSeq: (all.at(-1) as StoredEvent).seq });
    expect(await storeOn().current(ref('never'), counterDecider)).toEqual({ state: counterDecider.initialState(), lastSeq: 0 });
  });

  it('hasEventsAfter: true when the aggregate has a later event, from the cache when it knows one', async () => {
    const writer = storeOn({ cacheSize: 100 });
    const events = await writeInterleaved(writer, 3);
    const reads = writer.stats().readRoundTrips;
    expect(await writer.hasEventsAfter(ref(), (events[0] as StoredEvent).seq)).toBe(true);
    expect(writer.stats().readRoundTrips).toBe(reads);
    expect(await writer.hasEventsAfter(ref(), (events.at(-1) as StoredEvent).seq)).toBe(false);
    expect(await storeOn().hasEventsAfter(ref(), (events[1] as StoredEvent).seq)).toBe(true);
    expect(await storeOn().hasEventsAfter(ref('never'), 0)).toBe(false);
  });

  it('cachedNext: the next event of the aggregate when the cache keeps both, never a read; null past what it keeps, for the last event and without a cache', async () => {
    const writer = storeOn({ cacheSize: 100, cacheHistory: 4 });
    const events = await writeInterleaved(writer, 8);
    const reads = writer.stats().readRoundTrips;
    // The tail keeps the last 4 events after the base: each of them but the last has its next one,
    // and so does the base's event (the one just before the tail).
    for (const [i, event] of events.entries()) {
      const next = events[i + 1];
      const kept = i >= events.length - 5 && next !== undefined;
      expect({ i, next: writer.cachedNext(ref(), event.seq) }).toEqual({
        i,
        next: kept ? { seq: next.seq, id: next.id, type: next.type, payload: next.payload } : null,
      });
    }
    // A sequence between two of its events (another aggregate's) is no event of this one.
    expect(writer.cachedNext(ref(), (events.at(-2) as StoredEvent).seq + 1)).toBeNull();
    expect(writer.cachedNext(ref('never'), 1)).toBeNull();
    expect(storeOn().cachedNext(ref(), (events[0] as StoredEvent).seq)).toBeNull();
    expect(writer.stats().readRoundTrips).toBe(reads);
  });
});
