import { waitFor } from '@baton/wait';
import type { NatsHandle } from './connection';
import { DlqHeader } from './dead-letter';
import { PoisonError } from './errors';
import { provision } from './provision';
import { runConsumer, type BatchVerdict, type ConsumedMessage, type ConsumerRunner } from './runner';
import { JetStreamEventStore, type AggregateRef } from './store';
import { batonStreamNames } from './topology';
import { connectTest, counterDecider, counterRegistry, deleteTopology, meta, provisionTopology, randomPrefix, sleep } from './int/support';

/** The paths that make Baton fast (ordered parallel handlers, batches, cached folds) keep its guarantees. */
describe('throughput paths (real NATS)', () => {
  let nats: NatsHandle;
  let other: NatsHandle;
  let prefix: string;
  let inbox: string;
  let runners: ConsumerRunner[];

  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest('throughput-a');
    other = await connectTest('throughput-b');
    await provisionTopology(nats, prefix);
    inbox = batonStreamNames(prefix).inbox;
    runners = [];
  });

  afterEach(async () => {
    await Promise.all(runners.map((r) => r.stop()));
    await deleteTopology(nats, prefix);
    await nats.close();
    await other.close();
  });

  const durable = (name: string) => provision(nats.jsm, { consumers: [{ stream: inbox, durable: name, filterSubject: `${prefix}.in.>` }] });
  // Inbox subjects some consumer reads (the stream stores nothing else): results keyed by agent, and starts.
  const publish = (subject: string, body: string) => nats.js.publish(`${prefix}.in.${subject}`, new TextEncoder().encode(body));
  const start = (opts: Omit<Parameters<typeof runConsumer>[0], 'js' | 'stream' | 'prefix'>) => {
    const runner = runConsumer({ js: nats.js, stream: inbox, prefix, pullExpiresMs: 1000, ...opts });
    runners.push(runner);
    return runner;
  };

  it('with an ordering key, messages of one key are handled one at a time in stream order while different keys run in parallel', async () => {
    await durable('ordered');
    for (let i = 0; i < 6; i++) for (const key of ['a', 'b', 'c']) await publish(`k.result.${key}`, `${key}${i}`);
    const seen: Record<string, string[]> = { a: [], b: [], c: [] };
    const busy = new Set<string>();
    let overlapSameKey = false;
    let maxParallel = 0;
    let running = 0;
    start({
      durable: 'ordered',
      concurrency: 8,
      orderingKey: (msg) => msg.subject.split('.').at(-1),
      handler: async (msg: ConsumedMessage) => {
        const key = msg.subject.split('.').at(-1) as string;
        if (busy.has(key)) overlapSameKey = true;
        busy.add(key);
        running++;
        maxParallel = Math.max(maxParallel, running);
        await sleep(15);
        seen[key]!.push(new TextDecoder().decode(msg.data));
        running--;
        busy.delete(key);
      },
    });
    await waitFor(() => Object.values(seen).every((list) => list.length === 6), 'six messages of every key', { timeoutMs: 8000 });
    expect(overlapSameKey).toBe(false);
    expect(maxParallel).toBeGreaterThan(1);
    for (const key of ['a', 'b', 'c']) expect(seen[key]).toEqual([0, 1, 2, 3, 4, 5].map((i) => `${key}${i}`));
  });

  it('one handler at a time (the default) handles every message in stream order, never two at once, though a pull brings many', async () => {
    await durable('sequential');
    for (let i = 0; i < 25; i++) await publish('s.start', String(i));
    const order: number[] = [];
    let running = 0;
    let overlap = false;
    start({
      durable: 'sequential',
      handler: async (msg) => {
        if (running > 0) overlap = true;
        running++;
        await sleep(2);
        order.push(Number(new TextDecoder().decode(msg.data)));
        running--;
      },
    });
    await waitFor(() => order.length === 25, 'all 25 messages', { timeoutMs: 8000 });
    expect(overlap).toBe(false);
    expect(order).toEqual(Array.from({ length: 25 }, (_, i) => i));
  });

  it('a batch handler: unmarked messages are acked, a failed one is dead-lettered with its reason, a "later" one is redelivered without using up its deliveries', async () => {
    await durable('batches');
    for (const body of ['ok-1', 'poison', 'wait', 'ok-2']) await publish('b.start', body);
    const acked: string[] = [];
    let waits = 0;
    start({
      durable: 'batches',
      concurrency: 16,
      batch: 16,
      maxDeliver: 2,
      handleBatch: async (msgs) => {
        const verdicts = new Map<ConsumedMessage, BatchVerdict>();
        for (const msg of msgs) {
          const body = new TextDecoder().decode(msg.data);
          if (body === 'poison') verdicts.set(msg, { kind: 'failed', error: new PoisonError('bad', 'schema_violation') });
          else if (body === 'wait' && waits < 3) {
            waits++;
            verdicts.set(msg, { kind: 'later', delayMs: 50 });
          }
        }
        return verdicts;
      },
      onOutcome: (outcome) => {
        if (outcome.kind === 'acked') acked.push(new TextDecoder().decode(outcome.msg.data));
      },
    });
    await waitFor(() => acked.length === 3, 'three acked', { timeoutMs: 8000 });
    expect(acked.sort()).toEqual(['ok-1', 'ok-2', 'wait']);
    expect(waits).toBe(3); // three deliveries over maxDeliver 2, and no dead letter for it
    const dlq = batonStreamNames(prefix).dlq;
    await waitFor(async () => (await nats.jsm.streams.info(dlq)).state.messages === 1, 'one dead letter', { timeoutMs: 8000 });
    const letter = await nats.jsm.streams.getMessage(dlq, { seq: (await nats.jsm.streams.info(dlq)).state.first_seq });
    expect([new TextDecoder().decode(letter.data), letter.header?.get(DlqHeader.reason)]).toEqual(['poison', 'schema_violation']);
  });

  it('two writers with cached folds: a stale cache costs a conflict and a re-read, never a lost or doubled event', async () => {
    const ref: AggregateRef = { project: 'proj', kind: 'handoff', id: 'shared' };
    const storeOn = (handle: NatsHandle) => new JetStreamEventStore({ js: handle.js, jsm: handle.jsm, prefix, registry: counterRegistry(), cacheSize: 10 });
    const a = storeOn(nats);
    const b = storeOn(other);
    for (let i = 1; i <= 6; i++) {
      // Each writer decides on its cached fold first; the other one moved the aggregate meanwhile.
      const result = await (i % 2 === 0 ? b : a).handleCommand(ref, counterDecider, { type: 'add', n: i }, { ...meta(), commandId: `add-${i}` });
      expect(result.ok).toBe(true);
    }
    const { events } = await a.read(ref);
    expect(events.map((e) => (e.payload as { total: number }).total)).toEqual([1, 3, 6, 10, 15, 21]);
    expect(events.map((e) => (e.payload as { version: number }).version)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('a read bounded by untilSeq returns the history up to that sequence and no further', async () => {
    const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: counterRegistry() });
    const ref: AggregateRef = { project: 'proj', kind: 'handoff', id: 'bounded' };
    for (let i = 1; i <= 12; i++) await store.handleCommand(ref, counterDecider, { type: 'add', n: i }, { ...meta(), commandId: `b-${i}` });
    const all = await store.read(ref);
    const third = all.events[2]!.seq;
    const upTo = await store.read(ref, { untilSeq: third });
    expect(upTo.events.map((e) => e.seq)).toEqual(all.events.slice(0, 3).map((e) => e.seq));
    // Past the small-read threshold (8 events) the rest comes through a consumer, still bounded.
    const tenth = all.events[9]!.seq;
    const window = await store.read(ref, { afterSeq: all.events[0]!.seq, untilSeq: tenth });
    expect(window.events.map((e) => e.seq)).toEqual(all.events.slice(1, 10).map((e) => e.seq));
    expect(window.lastSeq).toBe(tenth);
  });
});
