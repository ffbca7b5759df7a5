import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { z } from 'zod';
import { EventRegistry, type EventEnvelope } from '@baton/contracts';
import { batonStreamNames, batonTopology, ConcurrencyConflict, JetStreamEventStore, provision, type AggregateRef, type NatsHandle } from '@baton/eventstore';
import { cpuFigures, type CpuReading } from './platform';
import { nowMs, round, summarize, type LatencySummary } from './stats';

/*
 * The store-level phase: what a user comparing event stores measures first — optimistic appends to
 * one aggregate in sequence, to many aggregates at once, and reading an aggregate back — through
 * Baton's own `JetStreamEventStore` (libs/eventstore) on its own file-backed events stream (same
 * configuration as a deployment's `<PREFIX>_EVENTS`), deleted afterwards. No service, no
 * projection, no Redis: the figures can be set beside another event store (e.g. Emmett on
 * PostgreSQL) run on the same machine with the same event size.
 */

/** How much the store phase does; `--quick` shrinks it, `--store-appends=N` / `--store-reads=N` override. */
export interface StoreSettings {
  /** Appends to one aggregate, one after another, each expecting the previous one's sequence. */
  sequentialAppends: number;
  /** Aggregates appended to concurrently (one writer chain each). */
  aggregates: number;
  /** Appends per aggregate in the concurrent part. */
  appendsPerAggregate: number;
  /** Events of the aggregate read back. */
  readEvents: number;
  /** Whole-aggregate reads timed. */
  reads: number;
  /** Approximate size of one event's JSON envelope, bytes (about a Baton event; the raw phase publishes 1 KiB). */
  eventBytes: number;
}

export function storeSettings(argv: readonly string[]): StoreSettings {
  const quick = argv.includes('--quick');
  const flag = (name: string) => {
    const hit = argv.find((a) => a.startsWith(`--${name}=`));
    const value = hit === undefined ? Number.NaN : Number(hit.slice(name.length + 3));
    return Number.isInteger(value) && value > 0 ? value : undefined;
  };
  return {
    sequentialAppends: flag('store-appends') ?? (quick ? 500 : 5_000),
    aggregates: 64,
    appendsPerAggregate: quick ? 25 : 200,
    readEvents: 1_000,
    reads: flag('store-reads') ?? (quick ? 5 : 50),
    eventBytes: 1_024,
  };
}

/** CPU of the processes accounted in one part, per unit of work. */
interface PartCpu {
  /** CPU microseconds per append (or per event read) of each process; null when not measured. */
  cpu_us: Record<string, number | null>;
  /** Why a `cpu_us` figure is null. */
  cpu_not_measured: Record<string, string>;
}

export interface StoreResult {
  settings: StoreSettings;
  stream: { storage: 'file'; replicas: 1 };
  /** Bytes the stream stores per event (envelope JSON, subject, headers), measured. */
  stored_bytes_per_event: number;
  /** One aggregate, appends one after another, each with Nats-Expected-Last-Subject-Sequence. */
  sequential: { appends: number; seconds: number; appends_per_s: number; latency: LatencySummary } & PartCpu;
  /** `aggregates` writer chains at once, each appending to its own aggregate in sequence. */
  concurrent: { aggregates: number; appends: number; seconds: number; appends_per_s: number; latency: LatencySummary; conflicts: number } & PartCpu;
  /** Whole reads (`JetStreamEventStore.read`) of one aggregate of `events` events, decoded and validated. */
  read: { events: number; reads: number; interleave: number; events_per_s: number; read_ms: LatencySummary } & PartCpu;
  /** 1-minute load average when the phase started and ended. */
  load_average_1m: { start: number; end: number };
}

export interface StoreOptions {
  nats: NatsHandle;
  settings: StoreSettings;
  /** CPU seconds so far of the accounted processes (nats-server, the bench); see `readCpu`. */
  cpu?: () => Record<string, CpuReading>;
  log: (line: string) => void;
}

const EVENT_TYPE = 'bench.recorded';
const PROJECT = 'bench';
/** The read aggregate's events are one in this many of the stream's messages over its span. */
const READ_INTERLEAVE = 8;

/** The one event type of the phase: a counter and padding to the chosen size. */
function benchRegistry(): EventRegistry {
  return new EventRegistry().register({ type: EVENT_TYPE, aggregate: 'run', version: 1, schema: z.object({ n: z.number().int(), note: z.string() }) });
}

/** Measure `work` (which does `units` units) with the CPU of the accounted processes. */
async function timed<T>(cpu: StoreOptions['cpu'], units: () => number, work: () => Promise<T>): Promise<{ result: T; seconds: number } & PartCpu> {
  const before = cpu?.() ?? {};
  const started = nowMs();
  const result = await work();
  const seconds = (nowMs() - started) / 1000;
  const figures = cpuFigures(before, cpu?.() ?? {}, units(), 1e6, 1);
  return { result, seconds, cpu_us: figures.values, cpu_not_measured: figures.not_measured };
}

export async function measureStore(opts: StoreOptions): Promise<StoreResult> {
  const { nats, settings } = opts;
  const loadStart = loadavg()[0] ?? 0;
  const prefix = `benchstore${randomBytes(4).toString('hex')}`;
  const stream = batonStreamNames(prefix).events;
  const eventsStream = batonTopology(prefix).streams.filter((s) => s.name === stream);
  await provision(nats.jsm, { streams: eventsStream });
  const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: benchRegistry() });
  const runTag = randomBytes(3).toString('hex');
  const ref = (id: string): AggregateRef => ({ project: PROJECT, kind: 'run', id: `${id}-${runTag}` });
  const envelope = (aggregate: AggregateRef, n: number, note: string): EventEnvelope => ({
    id: `e${n}`,
    type: EVENT_TYPE,
    version: 1,
    aggregate: { kind: aggregate.kind, id: aggregate.id },
    project: PROJECT,
    occurredAt: new Date().toISOString(),
    actor: 'bench',
    origin: 'agent',
    causationId: null,
    correlationId: `${aggregate.id}-${n}`,
    payload: { n, note },
  });
  const bare = JSON.stringify(envelope(ref('seq'), 1_000_000, '')).length;
  const note = 'x'.repeat(Math.max(0, settings.eventBytes - bare));

  /** Append `count` events to `aggregate` one at a time, each expecting the previous sequence; latencies in ms. */
  const chain = async (aggregate: AggregateRef, count: number, latencies: number[]): Promise<number> => {
    let expected = 0;
    let conflicts = 0;
    for (let n = 1; n <= count; n++) {
      const t0 = nowMs();
      try {
        expected = (await store.append(aggregate, [envelope(aggregate, n, note)], { expectedVersion: expected })).lastSeq;
      } catch (error) {
        if (!(error instanceof ConcurrencyConflict)) throw error;
        conflicts++; // nobody else writes these aggregates: counted, and the chain stops
        break;
      }
      latencies.push(nowMs() - t0);
    }
    return conflicts;
  };

  try {
    // Warm the path (connection buffers, the stream's first block, the store's code).
    await chain(ref('warm'), 100, []);

    const sequentialLatencies: number[] = [];
    const sequential = await timed(
      opts.cpu,
      () => sequentialLatencies.length,
      () => chain(ref('seq'), settings.sequentialAppends, sequentialLatencies),
    );
    if (sequential.result > 0) throw new Error('the sequential appends met a concurrency conflict: nothing else writes that aggregate');
    const sequentialRate = sequentialLatencies.length / sequential.seconds;
    opts.log(`  sequential: ${Math.round(sequentialRate)} appends/s (p50 ${round(summarize(sequentialLatencies).p50_ms, 3)} ms)`);

    const concurrentLatencies: number[] = [];
    const aggregates = Array.from({ length: settings.aggregates }, (_, i) => ref(`par${i}`));
    const concurrent = await timed(
      opts.cpu,
      () => concurrentLatencies.length,
      async () => (await Promise.all(aggregates.map((a) => chain(a, settings.appendsPerAggregate, concurrentLatencies)))).reduce((sum, c) => sum + c, 0),
    );
    const concurrentRate = concurrentLatencies.length / concurrent.seconds;
    opts.log(`  ${settings.aggregates} aggregates at once: ${Math.round(concurrentRate)} appends/s`);

    // The aggregate read back, written as real ones are: interleaved with other aggregates' events
    // (here one in READ_INTERLEAVE of the stream's messages over its span), one append per event.
    const readRef = ref('read');
    const writers = [readRef, ...Array.from({ length: READ_INTERLEAVE - 1 }, (_, i) => ref(`fill${i}`))];
    const lastSeqs = new Map<string, number>(writers.map((w) => [w.id, 0]));
    for (let n = 1; n <= settings.readEvents; n++) {
      await Promise.all(
        writers.map(async (w) => {
          const appended = await store.append(w, [envelope(w, n, note)], { expectedVersion: lastSeqs.get(w.id) ?? 0 });
          lastSeqs.set(w.id, appended.lastSeq);
        }),
      );
    }
    const warmRead = await store.read(readRef);
    if (warmRead.events.length !== settings.readEvents) throw new Error(`read ${warmRead.events.length} events of ${settings.readEvents}`);
    const readTimes: number[] = [];
    const read = await timed(
      opts.cpu,
      () => readTimes.length * settings.readEvents,
      async () => {
        for (let i = 0; i < settings.reads; i++) {
          const t0 = nowMs();
          const result = await store.read(readRef);
          readTimes.push(nowMs() - t0);
          if (result.events.length !== settings.readEvents) throw new Error(`read ${result.events.length} events of ${settings.readEvents}`);
        }
      },
    );
    const readRate = (readTimes.length * settings.readEvents) / read.seconds;
    opts.log(`  reading a ${settings.readEvents}-event aggregate: ${Math.round(readRate)} events/s (p50 ${round(summarize(readTimes).p50_ms, 2)} ms per read)`);

    const state = (await nats.jsm.streams.info(stream)).state;
    return {
      settings,
      stream: { storage: 'file', replicas: 1 },
      stored_bytes_per_event: Math.round(state.bytes / Math.max(1, state.messages)),
      sequential: {
        appends: sequentialLatencies.length,
        seconds: round(sequential.seconds, 2),
        appends_per_s: Math.round(sequentialRate),
        latency: summarize(sequentialLatencies),
        cpu_us: sequential.cpu_us,
        cpu_not_measured: sequential.cpu_not_measured,
      },
      concurrent: {
        aggregates: settings.aggregates,
        appends: concurrentLatencies.length,
        seconds: round(concurrent.seconds, 2),
        appends_per_s: Math.round(concurrentRate),
        latency: summarize(concurrentLatencies),
        conflicts: concurrent.result,
        cpu_us: concurrent.cpu_us,
        cpu_not_measured: concurrent.cpu_not_measured,
      },
      read: {
        events: settings.readEvents,
        reads: readTimes.length,
        interleave: READ_INTERLEAVE,
        events_per_s: Math.round(readRate),
        read_ms: summarize(readTimes),
        cpu_us: read.cpu_us,
        cpu_not_measured: read.cpu_not_measured,
      },
      load_average_1m: { start: round(loadStart, 2), end: round(loadavg()[0] ?? 0, 2) },
    };
  } finally {
    await nats.jsm.streams.delete(stream).catch(() => undefined);
  }
}
