import { decodeEvent } from './decode';
import { reactor, reactorEdge } from './reactor';
import { JetStreamEventStore, type FoldLike, type StoredEvent } from './store';
import { streamReader, type StoredMessage } from './stream-reader';
import { batonStreamNames } from './topology';
import { counterDecider, counterFold, counterRef, counterRegistry, meta, useTopology, type CounterEvent, type CounterState } from './int/support';

/*
 * `observe`: a consumer's delivered event keeps the fold cache of an aggregate another process
 * writes up with the stream, but only when the event provably follows the cached fold: the server
 * stored, with each append, the subject sequence the append expected
 * (`Nats-Expected-Last-Subject-Sequence`). Reads stay exact whatever was or was not observed.
 */
describe('JetStreamEventStore.observe (real NATS)', () => {
  const topology = useTopology('observe');
  const registry = counterRegistry();
  const storeOn = (cacheSize = 100) => {
    const nats = topology.nats();
    return new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix: topology.prefix(), registry, cacheSize });
  };
  const ref = counterRef;
  const foldOf = counterFold;

  /** `count` events on agg-1 written by another store (another process), interleaved with another aggregate's. */
  async function written(count: number): Promise<StoredEvent[]> {
    const writer = storeOn();
    for (let i = 1; i <= count; i++) {
      await writer.handleCommand(ref(), counterDecider, { type: 'add', n: i }, meta());
      await writer.handleCommand(ref('other'), counterDecider, { type: 'add', n: 100 + i }, meta());
    }
    return (await writer.read(ref())).events;
  }

  /** agg-1's messages as a consumer is delivered them: bytes and every stored header. */
  async function delivered(): Promise<StoredMessage[]> {
    const messages: StoredMessage[] = [];
    const nats = topology.nats();
    const reader = streamReader({ js: nats.js, jsm: nats.jsm }, batonStreamNames(topology.prefix()).events);
    for await (const message of reader.range({ fromSeq: 1, filterSubject: `${topology.prefix()}.ev.proj.handoff.agg-1` })) messages.push(message);
    return messages;
  }

  const previousOf = (message: StoredMessage) => Number(message.header('Nats-Expected-Last-Subject-Sequence'));
  const eventOf = (message: StoredMessage): StoredEvent => {
    const decoded = decodeEvent(registry, message.data, (name) => message.header(name));
    if (!decoded.ok) throw new Error(decoded.rejection.message);
    return { ...decoded.envelope, seq: message.seq };
  };

  it('the server stores with each appended event the sequence of the event before it on the subject (0 for the first)', async () => {
    const events = await written(4);
    const messages = await delivered();
    expect(messages.map(previousOf)).toEqual([0, ...events.slice(0, -1).map((e) => e.seq)]);
  });

  it('events observed in order from the first make the reader current with one point read (the last sequence), and exact', async () => {
    const events = await written(5);
    const reader = storeOn();
    const observed = (await delivered()).map((message) => reader.observe(ref(), counterDecider, eventOf(message), previousOf(message)));
    expect(observed).toEqual([true, true, true, true, true]);
    const before = reader.stats();
    const current = await reader.current(ref(), counterDecider);
    expect(current).toEqual({ state: foldOf(events), lastSeq: (events.at(-1) as StoredEvent).seq });
    expect(reader.stats().readRoundTrips - before.readRoundTrips).toBe(1);
    expect(reader.stats().observed).toBe(5);
    // A reactor's states around an observed event are served from the cache too.
    const third = events[2] as StoredEvent;
    expect(await reader.eventStates(ref(), counterDecider, third.seq)).toEqual({ before: foldOf(events.slice(0, 2)), after: foldOf(events.slice(0, 3)) });
    expect(reader.stats().readRoundTrips - before.readRoundTrips).toBe(1);
  });

  it('a gap, a late start, a redelivery, an event out of order or another fold leave the cache alone, and reads stay exact', async () => {
    const events = await written(5);
    const messages = await delivered();
    const [m1, m2, m3, m4, m5] = messages as [StoredMessage, StoredMessage, StoredMessage, StoredMessage, StoredMessage];
    const reader = storeOn();
    const observe = (message: StoredMessage, fold: FoldLike<CounterEvent, CounterState> = counterDecider) =>
      reader.observe(ref(), fold, eventOf(message), previousOf(message));

    // Nothing cached and not the first event: the history before it is unknown.
    expect(observe(m2)).toBe(false);
    expect(observe(m1)).toBe(true);
    // Out of order: 3 arrives before 2 was observed... after 1, 3 does not follow the fold.
    expect(observe(m3)).toBe(false);
    expect(observe(m2)).toBe(true);
    // A redelivery of an event already folded.
    expect(observe(m2)).toBe(false);
    expect(observe(m1)).toBe(false);
    // A gap: 4 is never delivered, so 5 cannot be folded on.
    expect(observe(m5)).toBe(false);
    // Another fold's entry is never extended.
    const otherFold = { initialState: counterDecider.initialState, evolve: (state: CounterState, event: CounterEvent) => counterDecider.evolve(state, event) };
    expect(observe(m3, otherFold)).toBe(false);
    expect(reader.stats().observed).toBe(2);

    // The cache holds events 1–2: the read fetches the rest and is the stream's.
    const before = reader.stats();
    await expect(reader.current(ref(), counterDecider)).resolves.toEqual({ state: foldOf(events), lastSeq: m5.seq });
    expect(reader.stats().readRoundTrips - before.readRoundTrips).toBe(1 + 3);
    // Now current through 5: a late 4 is old news.
    expect(observe(m4)).toBe(false);
    await expect(reader.current(ref(), counterDecider)).resolves.toEqual({ state: foldOf(events), lastSeq: m5.seq });
  });

  it("an event delivered while this store's own command appends to the aggregate is left to the command", async () => {
    await written(1);
    const [first] = (await delivered()) as [StoredMessage];
    const reader = storeOn();
    // The command runs (and owns the aggregate's next fold) until its append returns.
    const command = reader.handleCommand(ref(), counterDecider, { type: 'add', n: 5 }, meta());
    expect(reader.observe(ref(), counterDecider, eventOf(first), previousOf(first))).toBe(false);
    const result = await command;
    expect(result.ok && result.state.total).toBe(1 + 5);
    expect(reader.stats().observed).toBe(0);
    await expect(reader.current(ref(), counterDecider)).resolves.toMatchObject({ state: { total: 6 } });
  });

  it('without a cache nothing is observed', async () => {
    await written(1);
    const reader = storeOn(0);
    const [first] = (await delivered()) as [StoredMessage];
    expect(reader.observe(ref(), counterDecider, eventOf(first), previousOf(first))).toBe(false);
    expect(reader.stats().observed).toBe(0);
  });

  it('a reactor edge observes every event of its aggregate, handled or not, so a later read of it in the process is one point read', async () => {
    const events = await written(3);
    const reader = storeOn();
    const handled: number[] = [];
    // A table that reacts to nothing of this type: the edge still keeps the fold current.
    const table = reactor<CounterEvent, CounterState>({ aggregate: 'handoff', decider: counterDecider, on: {} });
    const busy = reactor<CounterEvent, CounterState>({
      aggregate: 'handoff',
      decider: counterDecider,
      on: { 'counter.added': (event, state) => void handled.push(event.seq, state.after.total - state.before.total) },
    });
    const edge = reactorEdge({ prefix: topology.prefix(), registry, store: reader, js: topology.nats().js });
    const [m1, m2, m3] = (await delivered()) as [StoredMessage, StoredMessage, StoredMessage];
    const deliveredAs = (message: StoredMessage) => ({
      subject: message.subject,
      data: message.data,
      headers: message.headers(),
      seq: message.seq,
      deliveryCount: 1,
      stream: batonStreamNames(topology.prefix()).events,
      consumer: 'observe-test',
    });
    await edge.deliver(table, deliveredAs(m1));
    await edge.deliver(table, deliveredAs(m2));
    const before = reader.stats();
    // The handled event's states come from the observed fold: no read.
    await edge.deliver(busy, deliveredAs(m3));
    expect(handled).toEqual([m3.seq, 3]);
    expect(reader.stats().readRoundTrips).toBe(before.readRoundTrips);
    expect(reader.stats().observed).toBe(3);
    await expect(reader.current(ref(), counterDecider)).resolves.toEqual({ state: foldOf(events), lastSeq: m3.seq });
    expect(reader.stats().readRoundTrips - before.readRoundTrips).toBe(1);
  });
});
