import { randomUUID } from 'node:crypto';
import { headers as natsHeaders, type JetStreamClient, type JetStreamManager } from 'nats';
import {
  EventEnvelopeSchema,
  MsgIds,
  SubjectTable,
  Subjects,
  isSubjectToken,
  rejectionFromZod,
  type AggregateKind,
  type EventAttribution,
  type EventEnvelope,
  type EventRegistry,
  type Origin,
} from '@baton/contracts';
import type { DecisionResult, DomainError } from '@baton/domain';
import { decodeEvent } from './decode';
import { eventHeaders } from './schema-fingerprint';
import { ConcurrencyConflict, EventDecodeError, EventStoreError, EventValidationError, JsErrCode, StreamNotFound, jsErrCode, mapPublishError } from './errors';
import { heapWeight } from './heap-weight';
import { hopTraceHeaders, type HopTrace } from './trace-context';
import { LruCache } from './lru';
import { streamReader, type StoredMessage, type StreamReader } from './stream-reader';
import { batonStreamNames } from './topology';

/** Identifies one aggregate instance, hence one subject: `<prefix>.ev.<project>.<kind>.<id>`. */
export interface AggregateRef {
  project: string;
  kind: AggregateKind;
  id: string;
}

/** An event as read back: its envelope (upcast to the current version) and its stream sequence. */
export type StoredEvent<P = unknown> = EventEnvelope<P> & { seq: number };

export interface ReadResult {
  events: StoredEvent[];
  /** Stream sequence of the aggregate's last event (0 when it has none): the next append's expectation. */
  lastSeq: number;
}

export interface ReadOptions {
  /** Only return events stored after this stream sequence (default 0: the whole history). */
  afterSeq?: number;
  /**
   * Stop at this stream sequence: return only events up to it (inclusive) and do not look further.
   * The read then skips asking for the aggregate's last sequence, so `lastSeq` is the last event
   * returned (or `afterSeq`), not necessarily the aggregate's last. For a consumer that holds an
   * event and wants the history up to it.
   */
  untilSeq?: number;
}

export interface AppendOptions {
  /**
   * The last subject sequence the writer read: 0 for a new aggregate. The server refuses the
   * append with {@link ConcurrencyConflict} if anything was appended since.
   */
  expectedVersion: number;
  /** The trace the events continue (their `traceparent` header): the hop that caused them. */
  trace?: HopTrace;
  /** See {@link HandleCommandOptions.onPublished}: called once the first event's publish has been sent. */
  onPublished?: () => void;
}

export interface AppendResult {
  /** Stream sequence of each event, in order (the original sequence for a duplicate). */
  seqs: number[];
  lastSeq: number;
  /** How many events the server recognised as already stored (same `Nats-Msg-Id`). */
  duplicates: number;
}

/** A domain event as deciders see it: `{ type, data }`. */
export interface DomainEventLike {
  type: string;
  data: unknown;
  /** Whom the event speaks for when not the command's actor (written as its `actor` and `origin`). */
  by?: EventAttribution;
}

/**
 * How an aggregate's state is folded from its events: the `initialState` and `evolve` of its
 * decider. The fold cache is shared by everything that folds with the same two functions (a
 * decider, a reactor, `stateAt`), so a reactor reads what the writer in its process just folded.
 */
export interface FoldLike<Event extends DomainEventLike, State> {
  initialState(): State;
  evolve(state: State, event: Event): State;
  /**
   * How many of the aggregate's last events the fold cache keeps with this fold's state (at most
   * the store's `cacheHistory`, 16 by default): they answer `stateAt` / `eventStates` for recent
   * events without a read. A fold only ever asked for the current state (`current`) keeps none,
   * so its entry weighs its state alone.
   */
  readonly cacheHistory?: number;
}

/** The three pure functions `handleCommand` needs (structurally a `Decider` from `@baton/domain`). */
export interface DeciderLike<Command, Event extends DomainEventLike, State> extends FoldLike<Event, State> {
  decide(command: Command, state: State): DecisionResult<Event>;
  /**
   * Event types that only record (a refused input, a notice) and decide nothing for the commands
   * after them. A command whose multi-event append was cut short and that finds, on its retry,
   * only such events of others after its stored ones is still completed (see `completeCommand`);
   * without this, any event after them makes the retry decide afresh on a state that holds half
   * the command.
   */
  passive?(type: string): boolean;
  /**
   * The command to decide again when its first events (`stored`) are already there and the rest is
   * to be completed (see `completeCommand`). A decider may waive here a check whose outside input
   * has moved on since those events were decided, when the events themselves prove the check
   * passed (a claim that lapsed after the result it covered was recorded). Absent: the command is
   * decided again as it came.
   */
  resuming?(command: Command, stored: readonly Event[]): Command;
}

/** Counters of what the store read (see {@link JetStreamEventStore.stats}). */
export interface EventStoreStats {
  /** Round trips to the server to read the stream: point reads, reader consumers and their pulls. */
  readRoundTrips: number;
  /** `stateAt` calls answered from the fold cache with no read. */
  stateHits: number;
  /** `stateAt` calls that read: the events after the cached fold, or the aggregate from its start. */
  stateReads: number;
  /** `stateAt` calls that waited for a command of this store appending to the aggregate (then hit or read). */
  stateWaits: number;
  /** Delivered events folded onto the cache by {@link EventStore.observe}. */
  observed: number;
  /** Commands found with their first events already stored (a retry after a crash or a lost reply), by outcome. */
  resumed: Record<ResumedCommandOutcome, number>;
}

/**
 * What became of a command found with its first events already at the aggregate's tail (a retry
 * after a crash between two appends, or after a reply that never arrived):
 * - `already_complete`: every event it decides was stored; nothing appended (the usual retry);
 * - `completed`: the events a crash cut short were appended;
 * - `refused`: deciding again on the state before its events refused it, so the rest was not
 *   appended — the stored events stand, and the command's remaining effect is lost;
 * - `diverged`: deciding again gave other events than the ones stored (a decider that is not
 *   deterministic on its command and state); nothing appended.
 * The last two mean a decider broke the store's contract: services log them as errors.
 */
export type ResumedCommandOutcome = 'already_complete' | 'completed' | 'refused' | 'diverged';

export interface ResumedCommand {
  /** The aggregate's subject. */
  subject: string;
  /** The command's first event id (`<commandId>:0`, or the caller's own). */
  firstEventId: string;
  outcome: ResumedCommandOutcome;
  /** Events of the command found stored, and appended now. */
  stored: number;
  appended: number;
  /** The stored events' types, and the types deciding again gave (same order). */
  storedTypes: string[];
  decidedTypes: string[];
  /** The refusal, when `refused`. */
  error?: unknown;
}

/** Envelope fields the writer supplies for the events a command produces. */
export interface CommandMeta {
  /** Command id. When given, event ids are `<commandId>:<index>`, so a retried command is deduplicated. */
  commandId?: string;
  occurredAt: string;
  actor: string;
  origin: Origin;
  causationId: string | null;
  correlationId: string;
  /** Custom event ids; overrides the `commandId` rule. */
  eventId?: (index: number) => string;
  /**
   * The inverse of `eventId`: which of the command's events an id would name (0-based), or null.
   * The store asks it whether an aggregate's last event is this command's (a retry); its answer
   * is checked against `eventId`, so a wrong one can only miss. Without it the store compares the
   * id with each id `eventId` can give, building up to 32 of them on every command.
   */
  eventIndex?: (eventId: string) => number | null;
  /** The trace of the message that caused the command: its events carry it on (`traceparent`). */
  trace?: HopTrace;
}

export interface HandleCommandOptions {
  /** Attempts on concurrency conflicts before giving up with {@link ConcurrencyConflict} (default 5). */
  maxAttempts?: number;
  /**
   * The aggregate is expected not to exist yet (a create with a fresh id): with nothing cached for
   * it, the first attempt decides on the initial state without reading, and the append expects an
   * empty subject. It is checked as a cached fold is: if the aggregate exists after all, the append
   * conflicts (or the decision was a refusal or a duplicate) and the next attempt reads it.
   */
  assumeNew?: boolean;
  /**
   * Called once, synchronously, right after the command's first event was handed to the connection
   * (its decision made, its append not yet acknowledged); never for a refusal or a command with
   * nothing to append. Whatever the callback publishes on the same connection reaches the server
   * after that event, so JetStream stores it after — if the event is stored at all: a conflict
   * refuses it, and the command then reads, decides and appends again (or ends refused). The
   * callback must not throw: what it starts reports its own failures.
   */
  onPublished?: () => void;
}

/**
 * What a command did. `events` are the command's events — appended now, or, for a retry, the ones
 * stored by its first attempt (found at the aggregate's tail or in the stream's duplicate window);
 * `appended` counts those THIS call stored (0 for a retry), what a reply's "changed" must follow.
 */
export type HandleCommandResult<State> =
  | { ok: true; events: StoredEvent[]; appended: number; state: State; lastSeq: number }
  | { ok: false; error: DomainError; state: State; lastSeq: number };

/**
 * Baton's event store. One subject per aggregate instance; optimistic concurrency through the
 * expected last subject sequence; idempotent appends through the event id, scoped by its
 * aggregate, as `Nats-Msg-Id` (`MsgIds.event`: `ev:<project>:<kind>:<aggregate id>:<event id>`),
 * so the same event id on two aggregates (two projects that chose the same run id) is two events.
 */
export interface EventStore {
  /** The subject an aggregate's events live on. */
  subjectOf(ref: AggregateRef): string;
  /**
   * Append events to an aggregate if its last stored sequence is still `expectedVersion`.
   * Each event is validated against the registry first (nothing is written if one is invalid).
   * Events are published one by one, each expecting the previous one's sequence; an event whose
   * id was already stored on this aggregate (within the duplicate window; `Nats-Msg-Id` is
   * `MsgIds.event(project, kind, aggregate id, event id)`) counts as appended at its original
   * sequence. Throws {@link ConcurrencyConflict}, {@link EventValidationError},
   * {@link StreamNotFound}, {@link PublishTimeout} (retry with the same ids is safe).
   */
  append(ref: AggregateRef, events: EventEnvelope[], opts: AppendOptions): Promise<AppendResult>;
  /** Read an aggregate's events (decoded and upcast) and its last sequence. Empty aggregate → `{ events: [], lastSeq: 0 }`. */
  read(ref: AggregateRef, opts?: ReadOptions): Promise<ReadResult>;
  /**
   * The aggregate's state as of stream sequence `seq` (inclusive): the fold of its events stored
   * at or before `seq`, with `fold`. `seq` must already be stored (e.g. the sequence of a
   * delivered event, or one before it). Served from the fold cache (shared with `handleCommand`
   * and every other caller folding with the same `evolve`): a cached fold at or before `seq` is
   * brought up to `seq` by reading only the events after it; a cached fold past `seq` answers from
   * the events it keeps behind it (`cacheHistory`); otherwise the aggregate is read from its start
   * up to `seq`. A sequence at or below 0 is the initial state.
   */
  stateAt<Event extends DomainEventLike, State>(ref: AggregateRef, fold: FoldLike<Event, State>, seq: number): Promise<State>;
  /**
   * The aggregate's state just before and just after stream sequence `seq` (`stateAt(seq - 1)`
   * and `stateAt(seq)`, served and read together): what a reactor handling the aggregate's event
   * at `seq` is given.
   */
  eventStates<Event extends DomainEventLike, State>(ref: AggregateRef, fold: FoldLike<Event, State>, seq: number): Promise<{ before: State; after: State }>;
  /** True when the aggregate has events after stream sequence `seq` (the fold cache, else one point read). */
  hasEventsAfter(ref: AggregateRef, seq: number): Promise<boolean>;
  /**
   * The aggregate's next event after its event at stream sequence `seq`, when the fold cache
   * keeps both (the event at `seq` and the one right after it, e.g. the two events of one command
   * this process appended); null otherwise. Never reads and never waits: a null says nothing
   * about the stream. For a reactor that acts on two events of one command together.
   */
  cachedNext(ref: AggregateRef, seq: number): CachedNextEvent | null;
  /**
   * The aggregate's state as stored now, and its last sequence: the fold cache's entry (of any
   * fold with the same `evolve` and initial state: a reactor's, a writer's) plus the events
   * appended after it — one point read (the subject's last sequence) when nothing was. The read is
   * never skipped, so the state is the stream's as of this call. For readers of an aggregate
   * another service writes (the router's claim check of a handoff).
   */
  current<Event extends DomainEventLike, State>(ref: AggregateRef, fold: FoldLike<Event, State>): Promise<{ state: State; lastSeq: number }>;
  /**
   * A consumer of this process was delivered the aggregate's event `event` (stored at `event.seq`),
   * whose append expected the subject's last sequence to be `previousSeq` (its stored
   * `Nats-Expected-Last-Subject-Sequence` header, which the server checked when it stored the
   * event, so it is the sequence of the aggregate's event just before this one; 0 for its first).
   * When the fold cache holds `fold`'s fold of the aggregate through exactly `previousSeq` (or
   * nothing, and the event is the first), the event is folded on: a later `current` or `stateAt`
   * of an aggregate another process writes then reads nothing but the subject's last sequence.
   * Anything else (a fold further on, a gap, another fold's entry, a command of this store
   * appending to the aggregate at that moment) leaves the cache as it is. Never reads; returns
   * true when the event was folded on.
   */
  observe<Event extends DomainEventLike, State>(ref: AggregateRef, fold: FoldLike<Event, State>, event: StoredEvent, previousSeq: number): boolean;
  /**
   * The projects whose events stream holds an aggregate of `kind` with this `id` (any event on
   * `<prefix>.ev.<project>.<kind>.<id>`), sorted: an id is unique only within its project. One
   * stream-info request filtered on `<prefix>.ev.*.<kind>.<id>`; an id that is not a subject token
   * is held by none.
   */
  projectsOf(kind: AggregateKind, id: string): Promise<string[]>;
  /**
   * Read and fold the aggregate, decide, append with the expected sequence; on a concurrency
   * conflict re-read, re-decide and retry (up to `maxAttempts`, tiny jittered backoff). Never
   * overwrites. A domain refusal is returned as `{ ok: false, error }`, not thrown.
   */
  handleCommand<Command, Event extends DomainEventLike, State>(
    ref: AggregateRef,
    decider: DeciderLike<Command, Event, State>,
    command: Command,
    meta: CommandMeta,
    opts?: HandleCommandOptions,
  ): Promise<HandleCommandResult<State>>;
}

export interface JetStreamEventStoreOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** Subject prefix, e.g. `baton`. */
  prefix: string;
  registry: EventRegistry;
  /** Events stream name (default `<PREFIX>_EVENTS`). */
  stream?: string;
  /** Entries in the folded-state cache (default 0: no cache). */
  cacheSize?: number;
  /**
   * Most the cached folds may weigh together, in estimated heap bytes (default: no bound but the
   * count). An entry weighs its state as last measured (`heapWeight`, re-measured whenever the
   * events folded on since weigh more than it did), those events, and its kept tail; the entry
   * used last is kept even when it alone weighs more, so a long aggregate is never refolded per
   * command.
   */
  cacheBytes?: number;
  /**
   * Events each cache entry keeps behind its fold, so it can answer `stateAt` for a sequence
   * before its last event (a reactor a few events behind the writer) without reading (default 16).
   */
  cacheHistory?: number;
  /** Events per pull when reading (default 500). */
  readBatch?: number;
  /**
   * Reads of up to this many events fetch them one by one (`STREAM.MSG.GET` with `next_by_subj`,
   * one round trip each) instead of opening an ephemeral consumer (default 8; 0 always opens one).
   */
  smallReadEvents?: number;
  /** Told of every command found with its first events already stored, and what became of it. */
  onResumedCommand?: (resumed: ResumedCommand) => void;
}

/** An aggregate's event as {@link EventStore.cachedNext} hands it out: its sequence, id, type and payload. */
export interface CachedNextEvent {
  seq: number;
  id: string;
  type: string;
  payload: unknown;
}

/** One of the aggregate's events as the cache keeps it. */
interface CachedEvent {
  seq: number;
  id: string;
  event: DomainEventLike;
}

/**
 * What the fold cache holds for one aggregate: the fold through `throughSeq`, and the last few
 * events with the fold before them, so it can answer "as of" any sequence from `base.seq` on.
 * Entries are never changed in place (a new one replaces it), so concurrent commands and reads
 * each see a consistent entry.
 */
interface FoldEntry {
  /** The fold that built it: `evolve` and `initialState` of the decider (or reactor) that folded it. */
  evolve: (state: unknown, event: DomainEventLike) => unknown;
  initialState: () => unknown;
  /** The fold through the event at `base.seq` (0: before the first event), with that event's id. */
  base: { seq: number; state: unknown; eventId: string | null };
  /** The aggregate's events after `base.seq`, oldest first (at most `history`). */
  tail: readonly CachedEvent[];
  /** How many events `tail` keeps: the store's `cacheHistory`, or the fold's own when smaller. */
  history: number;
  /** The fold of every event (`base` + `tail`). */
  state: unknown;
  /** Every event of the aggregate stored at or before this sequence is in the fold (at least the last event's sequence). */
  throughSeq: number;
  /**
   * When the entry's last events were appended by one command of this store (two or more of
   * them), the fold just before each, oldest first: `before` is the state as of every sequence
   * from `fromSeq` (the event before it, or the base) up to `seq - 1`. A reactor of the same
   * process is handed those events next and asks for the state before each; these answer it
   * without folding the tail again (a run's fold copies its id list and transcript per event).
   * Empty otherwise, so that memory stays one state per entry where nobody asks.
   */
  recent: readonly RecentState[];
  /** Estimated heap bytes of `state` when it was last weighed (0 until a byte bound asks). */
  measured: number;
  /** Estimated heap bytes of the events folded on since `state` was last weighed. */
  since: number;
}

/** What the fold cache holds and weighs now (see {@link JetStreamEventStore.foldCache}). */
export interface FoldCacheStats {
  /** Folds it may hold (0: no cache). */
  capacity: number;
  /** Most they may weigh together, estimated bytes (null: bounded by the count alone). */
  maxBytes: number | null;
  entries: number;
  /** What they weigh together, estimated bytes (0 without a byte bound: nothing is weighed). */
  bytes: number;
  /** Folds evicted to keep within the bounds since the store was made. */
  evicted: number;
}

/** Estimated heap bytes an entry keeps besides its states' contents: the entry, its base and arrays. */
const ENTRY_BYTES = 448;
/** Estimated heap bytes of one kept tail event besides its payload (which the state mostly shares): the wrappers and the id. */
const TAIL_EVENT_BYTES = 352;

/** An entry's weight for the byte-bounded cache. */
function entryWeight(entry: FoldEntry): number {
  return ENTRY_BYTES + entry.measured + entry.since + TAIL_EVENT_BYTES * entry.tail.length;
}

interface RecentState {
  seq: number;
  fromSeq: number;
  before: unknown;
}

/**
 * States kept before the last events of a command's append: two, for the router's result
 * (`run.result_recorded` and `run.routed`). Bounded, and kept only for multi-event commands, so
 * that memory stays near one state per entry: with one kept per tail event the ledger did not
 * live through the bench, and with two kept for every entry it measured 149.4 MB with 100 000
 * open handoffs (docs/performance.md).
 */
const RECENT_STATES = 2;

/** Sequence of the aggregate's last folded event (0: none): the next append's expectation. */
function lastSeqOf(entry: FoldEntry): number {
  return entry.tail.at(-1)?.seq ?? entry.base.seq;
}

function lastEventIdOf(entry: FoldEntry): string | null {
  return entry.tail.at(-1)?.id ?? entry.base.eventId;
}

/** What {@link entryStateAt} answers for a sequence before what the entry keeps. */
const NOT_KEPT = Symbol('not kept');

/** The entry's fold as of `seq` (inclusive; at most its `throughSeq`), or {@link NOT_KEPT} when `seq` is before what it keeps. */
function entryStateAt(entry: FoldEntry, seq: number): unknown {
  if (seq >= lastSeqOf(entry)) return entry.state;
  if (seq < entry.base.seq) return NOT_KEPT;
  for (const recent of entry.recent) if (seq >= recent.fromSeq && seq < recent.seq) return recent.before;
  let state = entry.base.state;
  for (const cached of entry.tail) {
    if (cached.seq > seq) break;
    state = entry.evolve(state, cached.event);
  }
  return state;
}

/** Most events one command may produce for the partial-append check (deciders emit a handful). */
const MAX_EVENTS_PER_COMMAND = 32;

const textEncoder = new TextEncoder();

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** {@link EventStore} on NATS JetStream. */
export class JetStreamEventStore implements EventStore {
  private readonly js: JetStreamClient;
  private readonly jsm: JetStreamManager;
  private readonly prefix: string;
  private readonly registry: EventRegistry;
  private readonly stream: string;
  private readonly reader: StreamReader;
  private readonly readBatch: number;
  private readonly smallReadEvents: number;
  private readonly cache: LruCache<string, FoldEntry> | null;
  private readonly history: number;
  /** The cache is bounded by bytes too (`cacheBytes`): entries are weighed as they are built. */
  private readonly weighing: boolean;
  private readonly counters: EventStoreStats = {
    readRoundTrips: 0,
    stateHits: 0,
    stateReads: 0,
    stateWaits: 0,
    observed: 0,
    resumed: { already_complete: 0, completed: 0, refused: 0, diverged: 0 },
  };
  private readonly onResumedCommand: ((resumed: ResumedCommand) => void) | undefined;
  /** Per aggregate subject, the command of this process appending to it now (settles, never rejects). */
  private readonly writing = new Map<string, Promise<void>>();

  constructor(opts: JetStreamEventStoreOptions) {
    this.js = opts.js;
    this.jsm = opts.jsm;
    this.prefix = opts.prefix;
    this.registry = opts.registry;
    this.stream = opts.stream ?? batonStreamNames(opts.prefix).events;
    this.reader = streamReader({ js: opts.js, jsm: opts.jsm }, this.stream, { onRoundTrip: () => void this.counters.readRoundTrips++ });
    this.readBatch = opts.readBatch ?? 500;
    this.smallReadEvents = Math.max(0, opts.smallReadEvents ?? 8);
    this.weighing = opts.cacheBytes !== undefined;
    if (this.weighing && !((opts.cacheBytes as number) > 0)) throw new EventStoreError(`cacheBytes must be a positive number of bytes, got ${opts.cacheBytes}`);
    this.cache =
      opts.cacheSize && opts.cacheSize > 0
        ? new LruCache<string, FoldEntry>(opts.cacheSize, this.weighing ? { max: opts.cacheBytes as number, of: entryWeight } : undefined)
        : null;
    this.history = Math.max(0, opts.cacheHistory ?? 16);
    this.onResumedCommand = opts.onResumedCommand;
  }

  /** Folds the cache may hold (0: no cache). */
  get cacheCapacity(): number {
    return this.cache?.capacity ?? 0;
  }

  /** What the fold cache holds and weighs now (metrics; the bounds it keeps to). */
  foldCache(): FoldCacheStats {
    const cache = this.cache;
    return {
      capacity: cache?.capacity ?? 0,
      maxBytes: cache && this.weighing ? cache.maxWeight : null,
      entries: cache?.size ?? 0,
      bytes: cache?.weight ?? 0,
      evicted: cache?.evicted ?? 0,
    };
  }

  /** What this store has read so far (counters only grow). */
  stats(): EventStoreStats {
    return { ...this.counters, resumed: { ...this.counters.resumed } };
  }

  subjectOf(ref: AggregateRef): string {
    for (const token of [ref.project, ref.kind, ref.id]) {
      if (!isSubjectToken(token)) throw new EventStoreError(`invalid aggregate reference token "${token}"`);
    }
    return Subjects.aggregate(this.prefix, ref.project, ref.kind, ref.id);
  }

  async append(ref: AggregateRef, events: EventEnvelope[], opts: AppendOptions): Promise<AppendResult> {
    const subject = this.subjectOf(ref);
    const encoded = events.map((event) => this.encode(ref, event));
    let expected = opts.expectedVersion;
    const seqs: number[] = [];
    let duplicates = 0;
    const trace = Object.entries(hopTraceHeaders(opts.trace));
    for (const { id, type, version, bytes } of encoded) {
      const hdrs = natsHeaders();
      for (const [name, value] of Object.entries(eventHeaders(this.registry, type, version))) hdrs.set(name, value);
      for (const [name, value] of trace) hdrs.set(name, value);
      try {
        const acked = this.js.publish(subject, bytes, {
          msgID: MsgIds.event(ref.project, ref.kind, ref.id, id),
          expect: { lastSubjectSequence: expected, streamName: this.stream },
          headers: hdrs,
        });
        // The client writes the message before its publish returns: what the callback publishes follows it.
        if (seqs.length === 0) opts.onPublished?.();
        const ack = await acked;
        if (ack.duplicate) duplicates++;
        seqs.push(ack.seq);
        expected = ack.seq;
      } catch (err) {
        throw mapPublishError(err, subject, expected);
      }
    }
    return { seqs, lastSeq: seqs.length > 0 ? (seqs[seqs.length - 1] as number) : opts.expectedVersion, duplicates };
  }

  async read(ref: AggregateRef, opts: ReadOptions = {}): Promise<ReadResult> {
    const subject = this.subjectOf(ref);
    const afterSeq = opts.afterSeq ?? 0;
    const untilSeq = opts.untilSeq;
    if (untilSeq !== undefined && untilSeq <= afterSeq) return { events: [], lastSeq: afterSeq };
    // Without a bound, the aggregate's last sequence is the bound (and tells a recreated stream apart).
    const target = untilSeq ?? (await this.lastSubjectSeq(subject));
    if (target <= afterSeq) return { events: [], lastSeq: target };

    // Few events expected (a cached fold that is one or two events behind): fetch them one by one,
    // one round trip each, instead of paying for an ephemeral consumer.
    const events: StoredEvent[] = [];
    let lastSeq = afterSeq;
    for (let fetched = 0; fetched < this.smallReadEvents && lastSeq < target; fetched++) {
      const msg = await this.reader.nextOnSubject(subject, lastSeq + 1);
      if (msg === null || msg.seq > target) return { events, lastSeq: untilSeq !== undefined ? lastSeq : target };
      events.push(this.decodeStored(msg));
      lastSeq = msg.seq;
    }
    if (lastSeq >= target) return { events, lastSeq };
    // The rest through the stream reader's range (one ephemeral consumer filtered on the subject).
    for await (const msg of this.reader.range({ fromSeq: lastSeq + 1, toSeq: target, filterSubject: subject, batch: this.readBatch })) {
      events.push(this.decodeStored(msg));
      lastSeq = msg.seq;
    }
    return { events, lastSeq: untilSeq !== undefined ? lastSeq : Math.max(lastSeq, target) };
  }

  async current<Event extends DomainEventLike, State>(ref: AggregateRef, fold: FoldLike<Event, State>): Promise<{ state: State; lastSeq: number }> {
    const loaded = await this.load(this.subjectOf(ref), ref, fold, false);
    return { state: loaded.state, lastSeq: loaded.lastSeq };
  }

  observe<Event extends DomainEventLike, State>(ref: AggregateRef, fold: FoldLike<Event, State>, event: StoredEvent, previousSeq: number): boolean {
    if (!this.cache || !Number.isSafeInteger(previousSeq) || previousSeq < 0 || event.seq <= previousSeq) return false;
    const key = this.subjectOf(ref);
    // A command of this store is appending to the aggregate: the event is most likely its own,
    // which it folds into the cache itself when its append returns (a run's fold is not cheap).
    if (this.writing.has(key)) return false;
    const cached = this.cache.get(key);
    let entry: FoldEntry;
    if (cached === undefined) {
      // Nothing cached: only the aggregate's first event starts an entry (it is the whole history).
      if (previousSeq !== 0) return false;
      entry = this.emptyEntry(fold);
    } else {
      // The entry must be this fold's and end exactly where the event's append said the subject ended.
      if (!this.sameFold(cached, fold) || lastSeqOf(cached) !== previousSeq || event.seq <= cached.throughSeq) return false;
      entry = cached;
    }
    this.counters.observed++;
    this.cache.set(key, this.extend(entry, [cachedEvent(event)], event.seq));
    return true;
  }

  async stateAt<Event extends DomainEventLike, State>(ref: AggregateRef, fold: FoldLike<Event, State>, seq: number): Promise<State> {
    return (await this.statesAt(ref, fold, [seq]))[0] as State;
  }

  async eventStates<Event extends DomainEventLike, State>(
    ref: AggregateRef,
    fold: FoldLike<Event, State>,
    seq: number,
  ): Promise<{ before: State; after: State }> {
    const [before, after] = (await this.statesAt(ref, fold, [seq - 1, seq])) as [State, State];
    return { before, after };
  }

  /**
   * The aggregate's states as of each of `seqs` (see {@link stateAt}), reading the stream at most
   * once, through the highest of them.
   */
  private async statesAt<Event extends DomainEventLike, State>(ref: AggregateRef, fold: FoldLike<Event, State>, seqs: readonly number[]): Promise<State[]> {
    const top = Math.max(...seqs);
    if (top <= 0) return seqs.map(() => fold.initialState());
    const key = this.subjectOf(ref);
    let cached = this.cache?.get(key);
    const inFlight = this.writing.get(key);
    if (inFlight && (!cached || top > cached.throughSeq)) {
      // A command of this process is appending to the aggregate: what is asked for is most likely
      // its events, which it folds into the cache when its append returns. Wait for it, then look again.
      this.counters.stateWaits++;
      await inFlight;
      cached = this.cache?.get(key);
    }
    const entry = cached && this.sameFold(cached, fold) ? cached : null;
    const fromEntry = (from: FoldEntry): State[] | null => {
      const states = seqs.map((seq) => (seq <= 0 ? fold.initialState() : entryStateAt(from, seq)));
      return states.includes(NOT_KEPT) ? null : (states as State[]);
    };
    if (entry && top <= entry.throughSeq) {
      const states = fromEntry(entry);
      if (states) {
        this.counters.stateHits++;
        return states;
      }
    }
    this.counters.stateReads++;
    if (entry && top > entry.throughSeq) {
      // The cached fold is at or before `top`: read only what lies between.
      const read = await this.read(ref, { afterSeq: entry.throughSeq, untilSeq: top });
      const next = this.extend(entry, read.events.map(cachedEvent), top);
      this.cache?.set(key, next);
      const states = fromEntry(next);
      if (states) return states;
    }
    // Nothing cached at or before `top` (or another fold's entry, or a sequence further back than
    // the entry keeps): fold from the start up to `top`.
    const read = await this.read(ref, { untilSeq: top });
    // Keep the fold unless the cache holds one of this aggregate that is further on (more useful to writers).
    if (!cached) this.cache?.set(key, this.extend(this.emptyEntry(fold), read.events.map(cachedEvent), top));
    return seqs.map((seq) =>
      read.events.reduce((state, e) => (e.seq <= seq ? fold.evolve(state, { type: e.type, data: e.payload } as Event) : state), fold.initialState()),
    );
  }

  async hasEventsAfter(ref: AggregateRef, seq: number): Promise<boolean> {
    const key = this.subjectOf(ref);
    const cached = this.cache?.get(key);
    if (cached && lastSeqOf(cached) > seq) return true;
    return (await this.lastSubjectSeq(key)) > seq;
  }

  cachedNext(ref: AggregateRef, seq: number): CachedNextEvent | null {
    const entry = this.cache?.get(this.subjectOf(ref));
    if (!entry) return null;
    // The tail is every event after the base, in order: the event after `seq` is the tail's first
    // when `seq` is the base's, else the one after `seq` in the tail.
    let at = -1;
    if (seq <= 0 || entry.base.seq !== seq) {
      at = entry.tail.findIndex((cached) => cached.seq === seq);
      if (at === -1) return null;
    }
    const next = entry.tail[at + 1];
    return next ? { seq: next.seq, id: next.id, type: next.event.type, payload: next.event.data } : null;
  }

  async projectsOf(kind: AggregateKind, id: string): Promise<string[]> {
    if (!isSubjectToken(id)) return [];
    const filter = SubjectTable.event.format(this.prefix, { kind, id });
    this.counters.readRoundTrips++;
    let subjects: Record<string, number>;
    try {
      subjects = (await this.jsm.streams.info(this.stream, { subjects_filter: filter })).state.subjects ?? {};
    } catch (err) {
      if (jsErrCode(err) === JsErrCode.streamNotFound) throw new StreamNotFound(this.stream, { cause: err });
      throw new EventStoreError(`cannot list the subjects ${filter} of ${this.stream}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    const projects = Object.keys(subjects).flatMap((subject) => {
      const event = SubjectTable.event.parse(this.prefix, subject);
      return event !== null && event.kind === kind && event.id === id ? [event.project] : [];
    });
    return [...new Set(projects)].sort();
  }

  handleCommand<Command, Event extends DomainEventLike, State>(
    ref: AggregateRef,
    decider: DeciderLike<Command, Event, State>,
    command: Command,
    meta: CommandMeta,
    opts: HandleCommandOptions = {},
  ): Promise<HandleCommandResult<State>> {
    // While the command runs, a reactor of this process asking for a state past the cached fold
    // waits for it (its events are likely the ones asked for) instead of reading them back.
    const key = this.subjectOf(ref);
    const running = this.decideAndAppend(key, ref, decider, command, meta, opts);
    const settled = running.then(
      () => undefined,
      () => undefined,
    );
    this.writing.set(key, settled);
    void settled.then(() => {
      if (this.writing.get(key) === settled) this.writing.delete(key);
    });
    return running;
  }

  private async decideAndAppend<Command, Event extends DomainEventLike, State>(
    key: string,
    ref: AggregateRef,
    decider: DeciderLike<Command, Event, State>,
    command: Command,
    meta: CommandMeta,
    opts: HandleCommandOptions,
  ): Promise<HandleCommandResult<State>> {
    const maxAttempts = opts.maxAttempts ?? 5;
    let lastConflict: ConcurrencyConflict | undefined;
    // Once per command, whatever attempt first publishes.
    let onPublished = opts.onPublished;
    const published =
      onPublished === undefined
        ? undefined
        : () => {
            const callback = onPublished;
            onPublished = undefined;
            callback?.();
          };
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      // First attempt: trust a cached fold without asking the server (the append's expected
      // sequence checks it); after a conflict, read what was appended since.
      const cachedEntry = this.cache?.get(key);
      const assumedNew = attempt === 1 && opts.assumeNew === true && cachedEntry === undefined;
      const trustedCache = attempt === 1 && ((cachedEntry !== undefined && this.sameFold(cachedEntry, decider)) || assumedNew);
      let loaded = assumedNew ? this.nothingYet(decider) : await this.load(key, ref, decider, attempt === 1);
      let { state, lastSeq } = loaded;
      const { lastEventId } = loaded;
      if (lastEventId !== null && this.ownEventIndex(meta, lastEventId) !== null) {
        // This command's events are at the tail already: all of them, or only the first few if a
        // crash cut a multi-event append short. Decide again on the state before them and append
        // only the missing suffix, so a retry completes the command instead of losing its rest.
        try {
          return await this.completeCommand(ref, decider, command, meta);
        } catch (err) {
          if (!(err instanceof ConcurrencyConflict)) throw err;
          lastConflict = err;
          await sleep(Math.floor(Math.random() * 4 * attempt) + 1);
          continue;
        }
      }
      let decision = decider.decide(command, state);
      if ((!decision.ok || decision.events.length === 0) && attempt === 1 && trustedCache) {
        // A refusal (or a no-op) decided on a cached fold is not checked by any append: another
        // instance may have moved the aggregate on. Read what was appended since and decide again.
        const fresh = await this.load(key, ref, decider, false);
        loaded = fresh;
        ({ state, lastSeq } = fresh);
        if (fresh.lastEventId !== null && this.ownEventIndex(meta, fresh.lastEventId) !== null) continue;
        decision = decider.decide(command, state);
      }
      if ((!decision.ok || decision.events.length === 0) && decider.passive !== undefined && this.mayHoldCutShort(loaded.entry, meta, decider.passive)) {
        // Nothing to do, or refused — perhaps because this very command is half stored, behind
        // events of others that only record: complete it instead (null: it is not there).
        try {
          const completed = await this.completeCommand(ref, decider, command, meta, true);
          if (completed !== null) return completed;
        } catch (err) {
          if (!(err instanceof ConcurrencyConflict)) throw err;
          lastConflict = err;
          await sleep(Math.floor(Math.random() * 4 * attempt) + 1);
          continue;
        }
      }
      if (!decision.ok) return { ok: false, error: decision.error, state, lastSeq };
      if (decision.events.length === 0) return { ok: true, events: [], appended: 0, state, lastSeq };

      const envelopes = decision.events.map((event, index) => this.envelope(ref, event, index, meta));
      try {
        const result = await this.append(ref, envelopes, { expectedVersion: lastSeq, trace: meta.trace, onPublished: published });
        if (result.duplicates > 0 && trustedCache) {
          // Decided on a cached fold that was behind: the events are an older command's, stored
          // already. Read the stream and decide again (the decider's own idempotency answers).
          this.cache?.delete(key);
          continue;
        }
        if (result.duplicates > 0) {
          // The command had already been applied (a retry with the same ids): the stream, not
          // this fold, is the truth. Return the events as stored and the state they produce.
          this.cache?.delete(key);
          const full = await this.read(ref);
          const entry = this.extend(this.emptyEntry(decider), full.events.map(cachedEvent), full.lastSeq);
          this.cache?.set(key, entry);
          const seqs = new Set(result.seqs);
          return {
            ok: true,
            events: full.events.filter((e) => seqs.has(e.seq)),
            appended: envelopes.length - result.duplicates,
            state: entry.state as State,
            lastSeq: full.lastSeq,
          };
        }
        const stored = envelopes.map((env, index): StoredEvent => Object.assign({}, env, { seq: result.seqs[index] as number }));
        // The append expected the fold's last sequence, so these events follow it directly.
        const next = this.extend(
          loaded.entry,
          decision.events.map((event, index) => ({ seq: result.seqs[index] as number, id: envelopes[index]!.id, event })),
          result.lastSeq,
          true,
        );
        this.cache?.set(key, next);
        return { ok: true, events: stored, appended: stored.length, state: next.state as State, lastSeq: result.lastSeq };
      } catch (err) {
        if (!(err instanceof ConcurrencyConflict)) throw err;
        lastConflict = err;
        await sleep(Math.floor(Math.random() * 4 * attempt) + 1);
      }
    }
    throw lastConflict ?? new EventStoreError(`handleCommand on ${key} made no attempt`);
  }

  /**
   * Whether the fold `entry` ends with this command's first events followed only by passive events
   * of others (so a retry should complete it), as far as its kept tail (and the event before it)
   * shows: false at the first later event of another command that is not passive. Costs no read;
   * `completeCommand` reads and checks before anything is appended.
   */
  private mayHoldCutShort(entry: FoldEntry, meta: CommandMeta, passive: (type: string) => boolean): boolean {
    for (let i = entry.tail.length - 1; i >= 0; i--) {
      const event = entry.tail[i] as CachedEvent;
      if (this.ownEventIndex(meta, event.id) !== null) return true;
      if (!passive(event.event.type)) return false;
    }
    // The kept tail was all passive (or empty): the event it starts after tells.
    return entry.base.eventId !== null && this.ownEventIndex(meta, entry.base.eventId) !== null;
  }

  /**
   * Where this command's stored events are (ids `<commandId>:0..k`, in order), when they are the
   * aggregate's last events but for passive events of others after or among them; null otherwise.
   */
  private cutShortPositions(events: readonly StoredEvent[], meta: CommandMeta, passive: ((type: string) => boolean) | undefined): number[] | null {
    const positions: number[] = [];
    for (let i = events.length - 1; i >= 0; i--) {
      const event = events[i] as StoredEvent;
      const index = this.ownEventIndex(meta, event.id);
      if (index !== null) {
        positions.unshift(i);
        if (index === 0) break;
        continue;
      }
      if (passive === undefined || !passive(event.type)) break;
    }
    if (positions.length === 0) return null;
    return positions.every((at, n) => this.ownEventIndex(meta, (events[at] as StoredEvent).id) === n) ? positions : null;
  }

  /**
   * Finish a command whose first events are already stored at the aggregate's tail (ids
   * `<commandId>:<n>`; with only passive events of others after or among them, when the decider
   * names such events): decide on the state before them and append only the events not yet
   * stored, after everything. `requireOwn`: return null when the command's events are not there
   * (the caller goes on as if this was never asked); otherwise such a command is decided afresh.
   */
  private async completeCommand<Command, Event extends DomainEventLike, State>(
    ref: AggregateRef,
    decider: DeciderLike<Command, Event, State>,
    command: Command,
    meta: CommandMeta,
    requireOwn: true,
  ): Promise<HandleCommandResult<State> | null>;
  private async completeCommand<Command, Event extends DomainEventLike, State>(
    ref: AggregateRef,
    decider: DeciderLike<Command, Event, State>,
    command: Command,
    meta: CommandMeta,
  ): Promise<HandleCommandResult<State>>;
  private async completeCommand<Command, Event extends DomainEventLike, State>(
    ref: AggregateRef,
    decider: DeciderLike<Command, Event, State>,
    command: Command,
    meta: CommandMeta,
    requireOwn = false,
  ): Promise<HandleCommandResult<State> | null> {
    const key = this.subjectOf(ref);
    const full = await this.read(ref);
    const positions = this.cutShortPositions(full.events, meta, decider.passive?.bind(decider));
    if (positions === null && requireOwn) return null;
    // Not this command's events at the tail after all: decide afresh on everything.
    const start = positions?.[0] ?? full.events.length;
    const toEvent = (e: StoredEvent) => ({ type: e.type, data: e.payload }) as Event;
    const before = full.events.slice(0, start).reduce((s, e) => decider.evolve(s, toEvent(e)), decider.initialState());
    const stored = (positions ?? []).map((at) => full.events[at] as StoredEvent);
    // What the stored events prove was checked the first time is not judged again on inputs that
    // have moved on since (the decider says which, through `resuming`).
    const again = stored.length > 0 && decider.resuming !== undefined ? decider.resuming(command, stored.map(toEvent)) : command;
    const decision = decider.decide(again, before);
    const storedTypes = stored.map((e) => e.type);
    const decidedTypes = decision.ok ? decision.events.map((e) => e.type) : [];
    // The stored events stand whatever deciding again says: they are facts others may have acted
    // on. Only a decision that agrees with them is continued.
    const agrees = decision.ok && storedTypes.every((type, i) => decidedTypes[i] === type);
    const missing = decision.ok && agrees ? decision.events.slice(stored.length) : [];
    let events: StoredEvent[] = stored;
    let lastSeq = full.lastSeq;
    if (missing.length > 0) {
      const envelopes = missing.map((event, index) => this.envelope(ref, event, stored.length + index, meta));
      const result = await this.append(ref, envelopes, { expectedVersion: full.lastSeq, trace: meta.trace });
      events = [...stored, ...envelopes.map((env, index) => ({ ...env, seq: result.seqs[index] as number }))];
      lastSeq = result.lastSeq;
    }
    // Everything stored (the command's events and any passive ones among or after them), then what was appended.
    const all = [...full.events, ...events.slice(stored.length)];
    const entry = this.extend(this.emptyEntry(decider), all.map(cachedEvent), lastSeq);
    this.cache?.set(key, entry);
    // Not a clean tail after all (the command's ids are there, but not as the tail's run): it was
    // decided afresh, and a refusal is the command's answer.
    if (stored.length === 0 && !decision.ok) return { ok: false, error: decision.error, state: entry.state as State, lastSeq };
    const outcome: ResumedCommandOutcome = !decision.ok ? 'refused' : !agrees ? 'diverged' : missing.length > 0 ? 'completed' : 'already_complete';
    this.counters.resumed[outcome]++;
    this.onResumedCommand?.({
      subject: key,
      firstEventId: stored[0]?.id ?? this.eventIdOf(meta, 0) ?? '',
      outcome,
      stored: stored.length,
      appended: missing.length,
      storedTypes,
      decidedTypes,
      ...(decision.ok ? {} : { error: decision.error }),
    });
    return { ok: true, events, appended: missing.length, state: entry.state as State, lastSeq };
  }

  /**
   * Fold the aggregate, starting from the cached fold when there is one. With `trustCache`, a
   * cached fold is returned without a round trip: the caller's append carries its sequence as the
   * expectation, so a stale cache costs a conflict and a re-read, never a wrong write. `entry` is
   * the fold as a cache entry (what the cache holds now, when there is a cache).
   */
  private async load<Event extends DomainEventLike, State>(
    key: string,
    ref: AggregateRef,
    fold: FoldLike<Event, State>,
    trustCache = false,
  ): Promise<{ state: State; lastSeq: number; lastEventId: string | null; entry: FoldEntry }> {
    const cached = this.cache?.get(key);
    // A cache entry is only reused by a fold with the same evolve and initial state.
    const base = cached && this.sameFold(cached, fold) ? cached : null;
    if (base && trustCache) return { state: base.state as State, lastSeq: lastSeqOf(base), lastEventId: lastEventIdOf(base), entry: base };
    const read = await this.read(ref, { afterSeq: base ? lastSeqOf(base) : 0 });
    if (base && read.lastSeq < lastSeqOf(base)) {
      // The stream went backwards (recreated): forget the cache and rebuild from scratch.
      this.cache?.delete(key);
      return this.load(key, ref, fold);
    }
    const entry = this.extend(base ?? this.emptyEntry(fold), read.events.map(cachedEvent), Math.max(read.lastSeq, base?.throughSeq ?? 0));
    this.cache?.set(key, entry);
    return { state: entry.state as State, lastSeq: lastSeqOf(entry), lastEventId: lastEventIdOf(entry), entry };
  }

  /** What {@link load} gives for an aggregate with no events, without asking the server. */
  private nothingYet<Event extends DomainEventLike, State>(
    fold: FoldLike<Event, State>,
  ): { state: State; lastSeq: number; lastEventId: string | null; entry: FoldEntry } {
    const entry = this.emptyEntry(fold);
    return { state: entry.state as State, lastSeq: 0, lastEventId: null, entry };
  }

  /** True when `entry` was folded with `fold`'s functions. */
  private sameFold(entry: FoldEntry, fold: FoldLike<never, unknown>): boolean {
    return entry.evolve === (fold.evolve as unknown) && entry.initialState === fold.initialState;
  }

  /** A cache entry holding nothing yet: the fold's initial state, before any event. */
  private emptyEntry<Event extends DomainEventLike, State>(fold: FoldLike<Event, State>): FoldEntry {
    const state = fold.initialState();
    return {
      evolve: fold.evolve as FoldEntry['evolve'],
      initialState: fold.initialState,
      base: { seq: 0, state, eventId: null },
      tail: [],
      history: Math.max(0, Math.min(this.history, fold.cacheHistory ?? this.history)),
      state,
      throughSeq: 0,
      recent: [],
      measured: 0,
      since: 0,
    };
  }

  /**
   * A new entry: `entry` with `events` (the aggregate's next events, in order, all after its
   * `throughSeq`) folded on, known complete through `throughSeq`; the oldest events beyond
   * `cacheHistory` are folded into the base.
   */
  private extend(entry: FoldEntry, events: readonly CachedEvent[], throughSeq: number, keepRecent = false): FoldEntry {
    if (events.length === 0) return throughSeq > entry.throughSeq ? { ...entry, throughSeq } : entry;
    let state = entry.state;
    let fromSeq = lastSeqOf(entry);
    const recent: RecentState[] = [];
    const keep = keepRecent && events.length > 1 ? Math.min(RECENT_STATES, entry.history) : 0;
    for (let i = 0; i < events.length; i++) {
      const cached = events[i] as CachedEvent;
      if (i >= events.length - keep) recent.push({ seq: cached.seq, fromSeq, before: state });
      state = entry.evolve(state, cached.event);
      fromSeq = cached.seq;
    }
    let base = entry.base;
    let tail = [...entry.tail, ...events];
    if (entry.history === 0) {
      // Nothing kept: the base is the fold of every event, which `state` already is.
      const last = tail[tail.length - 1] as CachedEvent;
      base = { seq: last.seq, state, eventId: last.id };
      tail = [];
    }
    while (tail.length > entry.history) {
      const oldest = tail.shift() as CachedEvent;
      base = { seq: oldest.seq, state: entry.evolve(base.state, oldest.event), eventId: oldest.id };
    }
    let measured = entry.measured;
    let since = entry.since;
    if (this.weighing) {
      for (let i = 0; i < events.length; i++) since += heapWeight((events[i] as CachedEvent).event.data);
      // Weigh the state itself once what was folded on since its last weighing weighs more than it
      // did: a state that grows is re-weighed at every doubling (amortised, a walk of its size per
      // doubling), one that does not (a lease's heartbeats) every few events of its own size.
      if (since > measured) {
        measured = heapWeight(state);
        since = 0;
      }
    }
    return { ...entry, base, tail, state, throughSeq: Math.max(throughSeq, (events.at(-1) as CachedEvent).seq), recent, measured, since };
  }

  /** The deterministic id of a command's `index`-th event, or null when the command has none. */
  private eventIdOf(meta: CommandMeta, index: number): string | null {
    return meta.eventId ? meta.eventId(index) : meta.commandId ? `${meta.commandId}:${index}` : null;
  }

  /** Which of this command's events `eventId` is (0-based), or null when it is not one of them. */
  private ownEventIndex(meta: CommandMeta, eventId: string): number | null {
    if (meta.eventId) {
      if (meta.eventIndex) {
        const index = meta.eventIndex(eventId);
        return index !== null && Number.isInteger(index) && index >= 0 && index < MAX_EVENTS_PER_COMMAND && meta.eventId(index) === eventId ? index : null;
      }
      for (let index = 0; index < MAX_EVENTS_PER_COMMAND; index++) {
        if (meta.eventId(index) === eventId) return index;
      }
      return null;
    }
    if (!meta.commandId) return null;
    // `<commandId>:<index>`, the index written as `String(index)` writes it.
    const prefix = `${meta.commandId}:`;
    if (!eventId.startsWith(prefix)) return null;
    const digits = eventId.slice(prefix.length);
    const index = Number(digits);
    return Number.isInteger(index) && index >= 0 && index < MAX_EVENTS_PER_COMMAND && String(index) === digits ? index : null;
  }

  private envelope(ref: AggregateRef, event: DomainEventLike, index: number, meta: CommandMeta): EventEnvelope {
    const id = this.eventIdOf(meta, index) ?? randomUUID();
    return {
      id,
      type: event.type,
      version: this.registry.has(event.type) ? this.registry.currentVersion(event.type) : 1,
      aggregate: { kind: ref.kind, id: ref.id },
      project: ref.project,
      occurredAt: meta.occurredAt,
      actor: event.by?.actor ?? meta.actor,
      origin: event.by?.origin ?? meta.origin,
      causationId: meta.causationId,
      correlationId: meta.correlationId,
      payload: event.data,
    };
  }

  private encode(ref: AggregateRef, event: EventEnvelope): { id: string; type: string; version: number; bytes: Uint8Array } {
    const envelope = EventEnvelopeSchema.safeParse(event);
    if (!envelope.success) throw new EventValidationError(String(event.type), rejectionFromZod(envelope.error));
    const env = envelope.data;
    if (env.project !== ref.project || env.aggregate.kind !== ref.kind || env.aggregate.id !== ref.id) {
      throw new EventValidationError(env.type, {
        code: 'schema_violation',
        message: `event ${env.id} belongs to ${env.project}/${env.aggregate.kind}/${env.aggregate.id}, not ${ref.project}/${ref.kind}/${ref.id}`,
        issues: [],
      });
    }
    if (!this.registry.has(env.type)) {
      throw new EventValidationError(env.type, { code: 'unknown_event_type', message: `unknown event type ${env.type}`, issues: [] });
    }
    const current = this.registry.currentVersion(env.type);
    if (env.version !== current) {
      throw new EventValidationError(env.type, {
        code: 'unsupported_version',
        message: `writers produce ${env.type} v${current}, got v${env.version}`,
        issues: [],
      });
    }
    const payload = this.registry.validatePayload(env.type, env.payload);
    if (!payload.ok) throw new EventValidationError(env.type, payload.rejection);
    const bytes = textEncoder.encode(JSON.stringify({ ...env, payload: payload.value }));
    return { id: env.id, type: env.type, version: env.version, bytes };
  }

  private decodeStored(msg: StoredMessage): StoredEvent {
    const decoded = decodeEvent(this.registry, msg.data, (name) => msg.header(name));
    if (!decoded.ok) throw new EventDecodeError(msg.subject, msg.seq, decoded.rejection, { cause: decoded.cause });
    // Not `{ ...envelope, seq }`: on Node 20 that gives every event a hidden class of its own.
    return Object.assign({}, decoded.envelope, { seq: msg.seq });
  }

  /** The stream sequence of the last message on `subject`, or 0 when there is none. */
  private async lastSubjectSeq(subject: string): Promise<number> {
    return (await this.reader.lastOnSubject(subject))?.seq ?? 0;
  }
}

/** A stored event as the fold cache keeps it. */
function cachedEvent(event: StoredEvent): CachedEvent {
  return { seq: event.seq, id: event.id, event: { type: event.type, data: event.payload } };
}
