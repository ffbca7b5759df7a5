import { DeliverPolicy, type Consumer, type ConsumerConfig, type ConsumerInfo, type JetStreamClient } from 'nats';
import { DeadLetterReason, deadLetter, errorText, type DeadLetterInput } from './dead-letter';
import { ackInfo, consumerGone, DeliveredMessage, headerRecord, PullSession, pullTarget, type PullTarget } from './pull';
import { maxPayloadOf, pullCount } from './pull-size';
import { JsErrCode, PoisonError, PullEndedError, TransientError, jsErrCode } from './errors';
import { LruCache } from './lru';

/** A message handed to a runner handler: what it needs, without the client types. */
export interface ConsumedMessage {
  subject: string;
  data: Uint8Array;
  headers: Record<string, string[]>;
  /** Stream sequence. */
  seq: number;
  /** 1 on first delivery. */
  deliveryCount: number;
  stream: string;
  consumer: string;
  /** Messages still pending for the consumer after this one. */
  pending: number;
  /** When the stream stored the message, in ms since the epoch. */
  timestampMs: number;
  /** The delivered message with its acknowledgements (escape hatch; Baton code should not need it). */
  raw: DeliveredMessage;
}

/** What happened to a message; reported through `onOutcome` (logs, metrics, tests). */
export type MessageOutcome =
  | { kind: 'acked'; msg: ConsumedMessage }
  | { kind: 'retry'; msg: ConsumedMessage; delayMs: number; error: unknown }
  /**
   * `gated`: its letter went through `letterGate`, which logged it (or counted it for its sender's
   * summary): no second line. `suppressed`: it has no letter of its own, only its count in its
   * sender's `refusals_suppressed` letter (`baton_events_handled_total` counts it as `suppressed`).
   */
  | { kind: 'dead_lettered'; msg: ConsumedMessage; reason: string; error: unknown; gated: boolean; suppressed: boolean }
  | { kind: 'dead_letter_failed'; msg: ConsumedMessage; delayMs: number; error: unknown }
  /** Given up on without a dead letter (`deadLetters: false`): terminated, never redelivered. */
  | { kind: 'terminated'; msg: ConsumedMessage; reason: string; error: unknown };

/** What a `letterGate` did with a letter: wrote it, or counted it in its sender's `refusals_suppressed` letter. */
export type LetterGateOutcome = 'written' | 'suppressed';

export interface RunConsumerOptions {
  js: JetStreamClient;
  /**
   * Where acknowledgements go, given a message's reply subject (`$JS.ACK.…`): the reply subject
   * itself by default. An agent acknowledges its offers through its edge (`edgeAckSubject`).
   */
  ackVia?: (reply: string) => string;
  stream: string;
  /** An existing durable pull consumer with explicit ack (see `provision`). */
  durable: string;
  /** Handles one message; resolving acks it. Give either `handler` or `handleBatch`. */
  handler?: (msg: ConsumedMessage) => Promise<void>;
  /**
   * Handles the messages that have arrived, in delivery order, up to `batch` at a time and one
   * batch at a time (messages keep arriving, up to `concurrency`, while a batch runs). Resolving
   * acks every message except those the returned map gives a verdict: `failed` is handled as if a
   * per-message handler had thrown that error (retry with backoff, dead letter); `later` naks the
   * message with that delay and never dead-letters it for this (it waits for something else). A
   * throw fails every message of the batch with that error.
   */
  handleBatch?: (msgs: ConsumedMessage[]) => Promise<ReadonlyMap<ConsumedMessage, BatchVerdict> | void>;
  /** Subject prefix for dead letters (`<prefix>.dlq.<source>`). */
  prefix: string;
  /** Dead-letter source token (default: the durable name). */
  source?: string;
  /** Deliveries after which a failing message is dead-lettered (default 5). */
  maxDeliver?: number;
  /** Nak delays in ms by delivery count (1st failure → [0], ...; the last repeats). Default [1000, 5000, 15000, 30000]. */
  backoffMs?: number[];
  /** Handlers running at once (default 1: messages are handled in stream order). */
  concurrency?: number;
  /**
   * With `concurrency` above 1: messages with the same key are handled one at a time, in delivery
   * order, while messages with different keys run in parallel (e.g. the aggregate subject, or the
   * workflow run a result belongs to). Undefined (or a key function that throws) puts the message
   * under no key. Messages waiting behind their key count against `concurrency` and get
   * in-progress heartbeats while they wait.
   */
  orderingKey?: (msg: ConsumedMessage) => string | undefined;
  /** Most messages per pull (default 100, never more than the free handler slots). */
  batch?: number;
  /**
   * Most bytes of message data the runner holds at once — delivered and not yet settled, waiting
   * or running (default {@link DEFAULT_RUNNER_BYTES}, 16 MiB). No pull is made while the held
   * messages weigh this much, and a pull asks for no more messages than fit in what is left at
   * the size of the largest message of the previous pull (of the server's `max_payload` before
   * the first), made only once one such message fits: events that carry large contexts cannot
   * fill the heap however many are pending. It is exceeded only by a pull whose messages are
   * larger than every message of the one before (by at most that pull), and by a single message
   * larger than the whole bound (delivered alone, when nothing else is held).
   */
  maxBytes?: number;
  /** How long a pull waits for messages, in ms (default 2000, at least 1000). Bounds how long `stop` waits for the pull. */
  pullExpiresMs?: number;
  /** Classify a handler error; default: TransientError → retry, PoisonError/ZodError/SyntaxError → poison, anything else → retry. */
  classify?: (error: unknown) => ErrorClass;
  onOutcome?: (outcome: MessageOutcome) => void;
  /**
   * Called when pulling fails (connection trouble, consumer missing); the runner waits (1 s, then
   * doubling up to 30 s while it keeps failing) and pulls again. Default: console.error. Never
   * throws out of the runner: an exception from it is swallowed.
   */
  onError?: (error: unknown) => void;
  /**
   * Re-create the durable when it disappears at runtime (deleted through the JetStream API, lost
   * with a server's state) with the configuration the server had for it, starting after the ack
   * floor last read from the server (`deliver_policy: by_start_sequence`), so what was acknowledged
   * is not delivered (or dead-lettered) again and what came after is not skipped. Default true.
   */
  recreateLostConsumer?: boolean;
  /** Told each time the durable was found missing and re-created (or could not be). Default: console.warn. */
  onConsumerLost?: (event: ConsumerLostEvent) => void;
  /**
   * How a lost durable is made again, when this process may not create consumers itself (an agent:
   * the ledger makes its offers durable, `open_offers`). Called with the stream sequence the
   * durable must start after (its ack floor); the runner then pulls it again. Default: re-create
   * it through the JetStream API with the configuration the server last reported.
   */
  recreateConsumer?: (afterSeq: number) => Promise<void>;
  /**
   * Dead-letter messages given up on (default true). A principal that may not publish dead letters
   * (an agent) passes false: such a message is terminated and reported (`terminated`), never
   * redelivered forever.
   */
  deadLetters?: boolean;
  /**
   * Where the letter of a message given up on goes: null writes it as usual; a promise means the
   * gate took it — wrote it, or counted it toward its sender's summary (a per-sender budget for
   * messages from outside: `RefusedLetters` in @baton/platform), and logged what it did — and
   * settles when that is done, with what it did; a rejection is a failed write, handled as one
   * (the message is delivered again). The outcome says `gated`, so the letter is not logged twice,
   * and `suppressed` when the message has no letter of its own.
   */
  letterGate?: (msg: ConsumedMessage, letter: DeadLetterInput) => Promise<LetterGateOutcome> | null;
  /**
   * How long after an ack (or term) the runner reads the consumer's ack floor from the server, in
   * ms (default 1000; at most one read per interval). The floor is where a lost durable restarts.
   */
  ackFloorSampleMs?: number;
}

/** A durable found missing at runtime. */
export interface ConsumerLostEvent {
  stream: string;
  durable: string;
  /** The stream sequence the re-created durable starts at (absent when it could not be re-created). */
  startSeq?: number;
  /** The ack floor it starts after. */
  ackFloor: number;
  /** `recreated`: made again by this runner; `exists`: another instance made it first; `failed`: see `error` (retried with backoff). */
  outcome: 'recreated' | 'exists' | 'failed';
  error?: unknown;
}

/** How a handler's failure is handled: retried (past `maxDeliver` too when `unbounded`), or dead-lettered at once. */
export type ErrorClass = { kind: 'retry'; delayMs?: number; unbounded?: true } | { kind: 'poison'; reason: string };

/** What a batch handler says about one message it did not simply process (see `handleBatch`). */
export type BatchVerdict = { kind: 'failed'; error: unknown } | { kind: 'later'; delayMs: number };

export interface ConsumerRunner {
  /** Stop pulling, let in-flight handlers finish (and ack / nak / dead-letter), then resolve. */
  stop(): Promise<void>;
  /** Resolves when the runner has stopped. */
  readonly done: Promise<void>;
  /** Handlers running now. */
  inFlight(): number;
}

const DEFAULT_BACKOFF = [1000, 5000, 15000, 30000];
/** Messages whose excused deliveries a runner remembers (unsettled ones: bounded by what is in flight). */
const EXCUSED_CAPACITY = 16_384;

/** Which runner an instrumentation callback is about. */
export interface RunnerIdentity {
  stream: string;
  durable: string;
  /** Dead-letter source token of the runner. */
  source: string;
}

/**
 * Observers of every consumer runner started on one JetStream client (a service's connection):
 * metrics and trace context without each caller of {@link runConsumer} wiring them.
 */
export interface RunnerInstrumentation {
  /** A runner started (e.g. sample its consumer's info for lag gauges). */
  onStart?(runner: RunnerIdentity): void;
  /** A runner stopped. */
  onStop?(runner: RunnerIdentity): void;
  /** Wraps each handler call (trace context, latency); must call `run` once and return its result. */
  around?(msg: ConsumedMessage, runner: RunnerIdentity, run: () => Promise<void>): Promise<void>;
  /** Wraps each batch handler call (`handleBatch`: latency per message); must call `run` once and return its result. */
  aroundBatch?<T>(msgs: readonly ConsumedMessage[], runner: RunnerIdentity, run: () => Promise<T>): Promise<T>;
  /** Every outcome, after the runner's own `onOutcome`. */
  onOutcome?(outcome: MessageOutcome, runner: RunnerIdentity): void;
}

const instrumentations = new WeakMap<object, RunnerInstrumentation>();

/**
 * Register `instrumentation` for every runner started from now on with `js` as its client (null
 * removes it). One per client: registering again replaces the previous one.
 */
export function instrumentRunners(js: JetStreamClient, instrumentation: RunnerInstrumentation | null): void {
  if (instrumentation) instrumentations.set(js, instrumentation);
  else instrumentations.delete(js);
}

/** The default error classification (see {@link RunConsumerOptions.classify}). */
export function classifyError(error: unknown): ErrorClass {
  if (error instanceof PoisonError) return { kind: 'poison', reason: error.reason };
  if (error instanceof TransientError) {
    return { kind: 'retry', ...(error.delayMs !== undefined ? { delayMs: error.delayMs } : {}), ...(error.unbounded ? { unbounded: true as const } : {}) };
  }
  if (error instanceof SyntaxError) return { kind: 'poison', reason: DeadLetterReason.malformedJson };
  if (typeof error === 'object' && error !== null) {
    const name = (error as { name?: unknown }).name;
    // By name: zod 4 errors built with `new ZodError()` are not Error instances.
    if (name === 'ZodError') return { kind: 'poison', reason: DeadLetterReason.schemaViolation };
    if (name === 'PoisonError') {
      const reason = (error as { reason?: unknown }).reason;
      return { kind: 'poison', reason: typeof reason === 'string' ? reason : DeadLetterReason.poison };
    }
  }
  return { kind: 'retry' };
}

/**
 * The stream sequence up to which the consumer has settled everything it will ever deliver, from
 * its info (counting every instance that shares it): its ack floor, or — when nothing is awaiting
 * an ack (a naked message still is) — the last sequence it delivered. The server reports an ack
 * floor of 0 until something was acknowledged, and moves it only one by one while acks are
 * outstanding, so a new (`deliver_policy: new`) or idle consumer is read by its delivered sequence.
 */
function settledThrough(info: ConsumerInfo): number {
  const floor = info.ack_floor?.stream_seq ?? 0;
  return info.num_ack_pending === 0 ? Math.max(floor, info.delivered?.stream_seq ?? 0) : floor;
}

/** Bytes of message data a runner holds at once unless told otherwise (see `RunConsumerOptions.maxBytes`). */
export const DEFAULT_RUNNER_BYTES = 16 * 1024 * 1024;

/** Pull retry delays while failures go on: 1 s, doubling, at most 30 s. */
const retryDelay = (failures: number) => Math.min(30_000, 1000 * 2 ** Math.max(0, Math.min(failures - 1, 5)));

/**
 * Run a durable pull consumer: pull batches, call `handler` for each message and ack only after
 * it resolves (double ack: the server confirms; the next message does not wait for the
 * confirmation, `stop` does). Order: with one handler at a time (the default) messages are handled
 * in delivery order, a pull bringing up to `batch` of them; with `concurrency` above 1, messages
 * sharing an `orderingKey` run one at a time in delivery order and the rest in parallel (without
 * a key, up to `concurrency` at once in any order). With `handleBatch` instead of `handler`, the
 * messages that have arrived are handed over together, one batch at a time.
 * On failure, by classification:
 * - retry: nak with a delay from `backoffMs` by delivery count, so a failing message is never
 *   hot-looped; once deliveries reach `maxDeliver`, dead-letter (`max_deliveries`) and term —
 *   except an `unbounded` TransientError (the infrastructure's failure, not the message's), which
 *   is retried at the last backoff delay until it passes. Deliveries spent on unbounded retries
 *   (and on a batch's 'wait') do not count against `maxDeliver` when the same message later fails
 *   for itself (counted per runner instance);
 * - poison (PoisonError, zod failure, bad JSON): dead-letter with the reason and term at once.
 * If the dead letter cannot be published the message is naked with a delay instead of termed,
 * so nothing is dropped. While a handler runs longer than ackWait/3 the runner sends
 * in-progress (`working`) heartbeats, and for messages waiting behind their key. `stop()` stops
 * pulling, waits for running handlers, then resolves (within `pullExpiresMs` plus the slowest
 * handler); messages that have not started, and those the last pull still brings, are naked
 * without delay so a peer takes them.
 * A durable deleted or lost under a running runner is noticed on the next pull (consumer not
 * found), reported through `onConsumerLost` and re-created with its configuration as the server
 * last reported it, `by_start_sequence` from the consumer's ack floor + 1 (read from the server
 * at start and at most `ackFloorSampleMs` after each ack, so it counts every instance's acks; see
 * `settledThrough`): nothing acked
 * before the loss is delivered again, except what was acked in the last sample interval (the
 * handlers are idempotent, and a dead letter of the same message is stored once), and nothing
 * after the floor is skipped. Failing pulls and re-creations back off up to 30 s; the runner never
 * throws out of its loop.
 */
export function runConsumer(opts: RunConsumerOptions): ConsumerRunner {
  const concurrency = Math.max(1, opts.concurrency ?? 1);
  const batch = Math.max(1, opts.batch ?? 100);
  const maxBytes = Math.max(1, opts.maxBytes ?? DEFAULT_RUNNER_BYTES);
  // Message data held now (delivered, not settled), and the largest message of the last pull.
  let heldBytes = 0;
  const maxPayload = maxPayloadOf(opts.js);
  let largestOfLastPull = maxPayload;
  let target: PullTarget | null = null;
  const maxDeliver = Math.max(1, opts.maxDeliver ?? 5);
  const backoff = opts.backoffMs && opts.backoffMs.length > 0 ? opts.backoffMs : DEFAULT_BACKOFF;
  const expires = Math.max(1000, opts.pullExpiresMs ?? 2000);
  /** How long a message handed back while stopping stays away: past the open pull's expiry. */
  const stopNakDelayMs = expires + 250;
  const classify = opts.classify ?? classifyError;
  const source = opts.source ?? opts.durable;
  const instrumentation = instrumentations.get(opts.js);
  const identity: RunnerIdentity = { stream: opts.stream, durable: opts.durable, source };
  const report = (outcome: MessageOutcome) => {
    opts.onOutcome?.(outcome);
    instrumentation?.onOutcome?.(outcome, identity);
  };
  if ((opts.handler === undefined) === (opts.handleBatch === undefined)) throw new Error('runConsumer needs exactly one of handler and handleBatch');
  const handler = opts.handler ?? (() => Promise.resolve());
  const callHandler = (msg: ConsumedMessage) => (instrumentation?.around ? instrumentation.around(msg, identity, () => handler(msg)) : handler(msg));

  let stopping = false;
  const running = new Set<Promise<void>>();
  let slotFreed: (() => void) | null = null;
  let wakeStop: (() => void) | null = null;

  const delayFor = (deliveryCount: number) => backoff[Math.min(deliveryCount, backoff.length) - 1] as number;
  // Per stream sequence, the deliveries this runner naked for something other than the message
  // itself: an `unbounded` failure (the infrastructure) or a batch's 'wait'. They do not count
  // against `maxDeliver`: a message that waited out an outage and then fails for itself gets its
  // own `maxDeliver` tries, not a dead letter at its first failure. Forgotten once the message is
  // settled; bounded by the LRU (a message handled by another instance meanwhile, or evicted,
  // counts every delivery, as the server does).
  const excused = new LruCache<number, number>(EXCUSED_CAPACITY);
  const excuse = (msg: ConsumedMessage) => excused.set(msg.seq, (excused.get(msg.seq) ?? 0) + 1);
  /** Deliveries of `msg` that count against `maxDeliver`: the server's count less the excused ones. */
  const counted = (msg: ConsumedMessage) => Math.max(1, msg.deliveryCount - (excused.get(msg.seq) ?? 0));

  const wrap = (raw: DeliveredMessage): ConsumedMessage => ({
    subject: raw.subject,
    data: raw.data,
    headers: headerRecord(raw.msg),
    seq: raw.seq,
    deliveryCount: raw.info.delivered,
    stream: raw.info.stream,
    consumer: raw.info.consumer,
    pending: raw.info.pending,
    timestampMs: raw.info.timestampMs,
    raw,
  });

  // The consumer's ack floor (stream sequence) as last read from the server, and what the runner
  // needs to re-create the durable if it is lost.
  const recreateLost = opts.recreateLostConsumer ?? true;
  const floorSampleMs = Math.max(50, opts.ackFloorSampleMs ?? 1000);
  let current: Consumer | null = null;
  let declared: ConsumerConfig | null = null;
  let ackFloor = 0;
  let floorTimer: NodeJS.Timeout | null = null;
  const readFloor = async () => {
    const consumer = current;
    if (!consumer) return;
    try {
      ackFloor = Math.max(ackFloor, settledThrough(await consumer.info()));
    } catch {
      // The pull loop notices a lost consumer; the last floor read stays.
    }
  };
  const sampleFloor = () => {
    if (!recreateLost || floorTimer !== null || stopping) return;
    floorTimer = setTimeout(() => {
      floorTimer = null;
      void readFloor();
    }, floorSampleMs);
    floorTimer.unref?.();
  };

  const giveUp = async (msg: ConsumedMessage, reason: string, error: unknown) => {
    excused.delete(msg.seq);
    if (opts.deadLetters === false) {
      msg.raw.term();
      sampleFloor();
      report({ kind: 'terminated', msg, reason, error });
      return;
    }
    try {
      const letter: DeadLetterInput = {
        prefix: opts.prefix,
        source,
        reason,
        detail: errorText(error),
        subject: msg.subject,
        headers: msg.headers,
        data: msg.data,
        deliveries: msg.deliveryCount,
        stream: msg.stream,
        seq: msg.seq,
        consumer: msg.consumer,
      };
      const gated = opts.letterGate?.(msg, letter) ?? null;
      const outcome: LetterGateOutcome = gated === null ? (await deadLetter(opts.js, letter), 'written') : await gated;
      // No reason string: `+TERM <reason>` is only understood from server 2.10.4 on.
      msg.raw.term();
      sampleFloor();
      report({ kind: 'dead_lettered', msg, reason, error, gated: gated !== null, suppressed: outcome === 'suppressed' });
      // What the handler says past its own letter (PoisonError.lettered), only once that letter is
      // stored; a hint, so a callback that throws changes nothing (the message is settled).
      if (outcome === 'written' && error instanceof PoisonError && error.lettered !== undefined) {
        try {
          error.lettered({ stream: msg.stream, seq: msg.seq });
        } catch {
          // the letter is the record
        }
      }
    } catch (dlqError) {
      const delayMs = delayFor(msg.deliveryCount);
      msg.raw.nak(delayMs);
      report({ kind: 'dead_letter_failed', msg, delayMs, error: dlqError });
    }
  };

  /** A handler failed on `msg`: nak with backoff, or dead-letter (poison, or out of deliveries). */
  const failed = async (msg: ConsumedMessage, error: unknown) => {
    const verdict = classify(error);
    if (verdict.kind === 'poison') return giveUp(msg, verdict.reason, error);
    // An unbounded failure waits at the backoff's last delay; a bounded one counts its own tries.
    const tries = verdict.unbounded === true ? msg.deliveryCount : counted(msg);
    if (verdict.unbounded === true) excuse(msg);
    else if (tries >= maxDeliver) return giveUp(msg, DeadLetterReason.maxDeliveries, error);
    const delayMs = verdict.delayMs ?? delayFor(tries);
    msg.raw.nak(delayMs);
    report({ kind: 'retry', msg, delayMs, error });
  };

  // A plain ack, not a confirmed one (`ackAck`, a request and a reply per message: about a tenth
  // of a service's CPU under load, measured). An ack that never reaches the server costs one
  // redelivery, which handlers absorb (they are idempotent); the acks of one event-loop turn leave
  // in one socket write (coalesceWrites), and `stop` flushes them before the connection drains.
  // The client's connection behind `js` (a public field of the nats 2.x JetStream client, not in
  // its type); absent on another client, when `stop` just lets a turn pass for the coalesced write.
  const connection = (opts.js as unknown as { nc?: { flush(): Promise<void>; isClosed(): boolean } }).nc;
  const serverHasAcks = async () => {
    if (connection && typeof connection.flush === 'function' && !connection.isClosed()) await connection.flush().catch(() => undefined);
    else await new Promise<void>((resolve) => setImmediate(resolve));
  };
  const acked = (msg: ConsumedMessage) => {
    excused.delete(msg.seq);
    msg.raw.ack();
    sampleFloor();
    report({ kind: 'acked', msg });
  };

  const handle = async (msg: ConsumedMessage, ackWaitMs: number) => {
    const raw = msg.raw;
    const beat = setInterval(() => raw.working(), Math.max(100, Math.floor(ackWaitMs / 3)));
    try {
      await callHandler(msg);
    } catch (error) {
      clearInterval(beat);
      return failed(msg, error);
    } finally {
      clearInterval(beat);
    }
    acked(msg);
  };

  // Batch mode: arrived messages wait in `queued`; one batch at a time is handed over.
  const queued: Array<{ msg: ConsumedMessage; done: () => void }> = [];
  let batchRunning = false;
  let batchBeat: NodeJS.Timeout | null = null;
  const inBatch = new Set<ConsumedMessage>();
  const runBatch = async (items: Array<{ msg: ConsumedMessage; done: () => void }>) => {
    const msgs = items.map((item) => item.msg);
    try {
      let verdicts: ReadonlyMap<ConsumedMessage, BatchVerdict> | void;
      try {
        const handleBatch = opts.handleBatch as NonNullable<RunConsumerOptions['handleBatch']>;
        verdicts = await (instrumentation?.aroundBatch ? instrumentation.aroundBatch(msgs, identity, () => handleBatch(msgs)) : handleBatch(msgs));
      } catch (error) {
        await Promise.all(msgs.map((msg) => failed(msg, error)));
        return;
      }
      await Promise.all(
        msgs.map((msg) => {
          const verdict = verdicts ? verdicts.get(msg) : undefined;
          if (verdict === undefined) return acked(msg);
          if (verdict.kind === 'failed') return failed(msg, verdict.error);
          excuse(msg);
          msg.raw.nak(verdict.delayMs);
          report({ kind: 'retry', msg, delayMs: verdict.delayMs, error: new Error('waiting for an earlier message') });
          return undefined;
        }),
      );
    } finally {
      for (const item of items) {
        inBatch.delete(item.msg);
        item.done();
      }
    }
  };
  const pump = () => {
    if (stopping) {
      // Stopping: what has not started goes back to the stream for a peer (once the open pull expired).
      for (const item of queued.splice(0)) {
        item.msg.raw.nak(stopNakDelayMs);
        item.done();
      }
      return;
    }
    if (batchRunning || queued.length === 0) return;
    batchRunning = true;
    const items = queued.splice(0, batch);
    for (const item of items) inBatch.add(item.msg);
    void runBatch(items).finally(() => {
      batchRunning = false;
      pump();
    });
  };
  const enqueue = (msg: ConsumedMessage, ackWaitMs: number): Promise<void> => {
    // One timer keeps every waiting or running message of the batch mode alive past its ack wait.
    batchBeat ??= setInterval(
      () => {
        for (const item of queued) item.msg.raw.working();
        for (const waiting of inBatch) waiting.raw.working();
      },
      Math.max(100, Math.floor(ackWaitMs / 3)),
    );
    return new Promise<void>((resolve) => {
      queued.push({ msg, done: resolve });
      // Let the rest of the pull arrive first, so a batch takes what is there.
      setImmediate(pump);
    });
  };

  /** Per ordering key, the last message's task: the next message of that key runs after it. */
  const tails = new Map<string, Promise<void>>();
  // One handler at a time: every message waits for the one before it (stream order), so the pull
  // may bring a whole batch at once instead of one message per round trip.
  const sequential = concurrency === 1 && !opts.handleBatch;
  const keyOf = (msg: ConsumedMessage): string | undefined => {
    if (sequential) return '';
    if (!opts.orderingKey) return undefined;
    try {
      return opts.orderingKey(msg);
    } catch {
      return undefined;
    }
  };
  // Messages delivered and not yet settled: with ordering (keys), more may wait than run.
  const window = opts.handleBatch || (!sequential && !opts.orderingKey) ? concurrency : Math.max(concurrency, batch);
  // Handlers running at once never exceed `concurrency`, however many messages wait.
  let runningHandlers = 0;
  const handlerSlots: Array<() => void> = [];
  const withSlot = async (run: () => Promise<void>): Promise<void> => {
    if (runningHandlers >= concurrency) await new Promise<void>((resolve) => handlerSlots.push(resolve));
    runningHandlers++;
    try {
      await run();
    } finally {
      runningHandlers--;
      handlerSlots.shift()?.();
    }
  };

  const dispatch = (raw: DeliveredMessage, ackWaitMs: number) => {
    const size = raw.data.length;
    const msg = wrap(raw);
    const key = keyOf(msg);
    heldBytes += size;
    let task: Promise<void>;
    const previous = key === undefined ? undefined : tails.get(key);
    if (opts.handleBatch) {
      task = enqueue(msg, ackWaitMs);
    } else if (previous === undefined && runningHandlers < concurrency) {
      task = withSlot(() => handle(msg, ackWaitMs));
    } else {
      // Waiting (behind an earlier message of the same key, or for a free handler): keep the ack
      // wait from running out.
      const waiting = setInterval(() => raw.working(), Math.max(100, Math.floor(ackWaitMs / 3)));
      const run = () =>
        withSlot(async () => {
          clearInterval(waiting);
          // Stopping: a message that has not started goes back to the stream for a peer (after the
          // open pull has expired, so that pull cannot take it again).
          if (stopping) return void raw.nak(stopNakDelayMs);
          return handle(msg, ackWaitMs);
        });
      task = previous === undefined ? run() : previous.then(run, run);
    }
    if (key !== undefined) {
      const tail = task.catch(() => undefined);
      tails.set(key, tail);
      void tail.then(() => {
        if (tails.get(key) === tail) tails.delete(key);
      });
    }
    const tracked: Promise<void> = task.finally(() => {
      running.delete(tracked);
      heldBytes -= size;
      slotFreed?.();
    });
    running.add(tracked);
  };

  const lost = (event: ConsumerLostEvent) => {
    try {
      (
        opts.onConsumerLost ??
        ((e: ConsumerLostEvent) => console.warn(`[runConsumer ${e.stream}/${e.durable}] consumer lost: ${e.outcome}`, e.startSeq ?? '', e.error ?? ''))
      )(event);
    } catch {
      // An observer's failure must not stop the runner.
    }
  };
  const pullFailed = (error: unknown) => {
    try {
      (opts.onError ?? ((e: unknown) => console.error(`[runConsumer ${opts.stream}/${opts.durable}] pull failed:`, e)))(error);
    } catch {
      // An observer's failure must not stop the runner.
    }
  };

  /** The durable is gone: make it again as the server had it, after the last ack floor read. */
  const recreate = async (config: ConsumerConfig): Promise<void> => {
    if (opts.recreateConsumer) {
      await opts.recreateConsumer(ackFloor);
      lost({ stream: opts.stream, durable: opts.durable, startSeq: ackFloor + 1, ackFloor, outcome: 'recreated' });
      return;
    }
    const jsm = await opts.js.jetstreamManager();
    const state = (await jsm.streams.info(opts.stream)).state;
    // A stream whose last sequence is below the floor was replaced: read the new one from its start.
    const startSeq = ackFloor <= state.last_seq ? ackFloor + 1 : state.first_seq;
    const { opt_start_time: _time, ...kept } = config;
    const wanted: Partial<ConsumerConfig> = { ...kept, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: Math.max(1, startSeq) };
    try {
      await jsm.consumers.add(opts.stream, wanted);
      lost({ stream: opts.stream, durable: opts.durable, startSeq: wanted.opt_start_seq, ackFloor, outcome: 'recreated' });
    } catch (error) {
      const exists = await jsm.consumers.info(opts.stream, opts.durable).then(
        () => true,
        () => false,
      );
      if (!exists) throw error;
      lost({ stream: opts.stream, durable: opts.durable, ackFloor, outcome: 'exists' });
    }
  };

  // Every pull of the runner replies over one subscription: a message the server still delivers
  // to a pull the runner has stopped waiting for is read with the next one (pull.ts).
  let session: PullSession | null = null;
  const loop = async () => {
    let consumer: Consumer | null = null;
    let ackWaitMs = 30_000;
    let failures = 0;
    while (!stopping) {
      try {
        if (!consumer) {
          try {
            consumer = await opts.js.consumers.get(opts.stream, opts.durable);
          } catch (error) {
            if (!(recreateLost && declared !== null && jsErrCode(error) === JsErrCode.consumerNotFound)) throw error;
            try {
              await recreate(declared);
            } catch (recreateError) {
              lost({ stream: opts.stream, durable: opts.durable, ackFloor, outcome: 'failed', error: recreateError });
              throw recreateError;
            }
            consumer = await opts.js.consumers.get(opts.stream, opts.durable);
          }
          const info = await consumer.info(true);
          declared ??= info.config;
          ackFloor = Math.max(ackFloor, settledThrough(info));
          current = consumer;
          ackWaitMs = Math.max(1, Math.floor((info.config.ack_wait ?? 30_000_000_000) / 1_000_000));
        }
        // Pull once a message as large as the last pull's largest fits (or nothing is held at all).
        while ((running.size >= window || (heldBytes + largestOfLastPull > maxBytes && running.size > 0)) && !stopping) {
          await new Promise<void>((resolve) => (slotFreed = resolve));
          slotFreed = null;
        }
        if (stopping) break;
        const free = pullCount(Math.min(batch, window - running.size), maxBytes - heldBytes, largestOfLastPull);
        // The count is sized from the last pull's sizes; the server also ends the pull at the
        // bytes left (never under two of its largest messages, so one always fits), which holds
        // when large messages follow small ones.
        target ??= { ...pullTarget(opts.js), ...(opts.ackVia ? { ackSubject: opts.ackVia } : {}) };
        session ??= new PullSession(target, opts.stream, opts.durable);
        const pull = session.pull({
          batch: free,
          maxBytes: Math.max(maxBytes - heldBytes, 2 * maxPayload),
          expiresMs: expires,
        });
        let largest = 0;
        let brought = 0;
        for await (const msg of pull) {
          const info = msg.reply ? ackInfo(msg.reply) : null;
          if (info === null) continue;
          brought++;
          const raw = new DeliveredMessage(target.nc, msg, info, target.ackSubject);
          if (stopping) {
            // Back to the stream once this pull has expired: naked at once, the same open pull
            // fetched it again at once, a delivery counted each time (16 in two seconds, measured),
            // and the next runner gave up on it at its first failure (past maxDeliver).
            raw.nak(stopNakDelayMs);
            continue;
          }
          largest = Math.max(largest, raw.data.length);
          dispatch(raw, ackWaitMs);
        }
        // A consumer deleted under the pull (or not there): find it again, or re-create it. A pull
        // the server never answered and that brought nothing may have gone to a consumer deleted
        // between two pulls: its info says (a consumer not found sends the loop to find or
        // re-create it). One that brought messages was expired unannounced (pull.ts). An info
        // that fails otherwise (a timeout while a cluster elects the consumer's leader) proves
        // nothing is wrong with the consumer: the next pull goes out at once, no failure counted,
        // no backoff — the pull itself reports a consumer that is really gone.
        const end = pull.endedBy();
        if (end !== null && consumerGone(end)) throw new PullEndedError(opts.stream, opts.durable, end);
        if (pull.silent() && brought === 0) {
          await consumer.info().catch((error: unknown) => {
            if (jsErrCode(error) === JsErrCode.consumerNotFound) throw error;
          });
        }
        // A pull that brought nothing says nothing about sizes: keep the last estimate.
        if (largest > 0) largestOfLastPull = largest;
        failures = 0;
      } catch (error) {
        if (stopping) break;
        pullFailed(error);
        consumer = null;
        current = null;
        failures++;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, retryDelay(failures));
          wakeStop = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wakeStop = null;
      }
    }
    if (floorTimer) clearTimeout(floorTimer);
    floorTimer = null;
    await Promise.allSettled([...running]);
    if (session && target) {
      // Messages come for a pull already given up on, never started: a peer takes them now.
      session.stop();
      for (const msg of session.drain()) if (msg.reply && ackInfo(msg.reply)) target.nc.publish(target.ackSubject?.(msg.reply) ?? msg.reply, '-NAK');
    }
    // The last acks are plain publishes: a PING round trip makes sure the server has them.
    await serverHasAcks();
    if (batchBeat) clearInterval(batchBeat);
  };

  instrumentation?.onStart?.(identity);
  const done = loop()
    .catch((error: unknown) => pullFailed(error))
    .finally(() => instrumentation?.onStop?.(identity));
  return {
    done,
    inFlight: () => running.size,
    async stop() {
      stopping = true;
      // The open pull is left to expire (at most pullExpiresMs): messages it still brings are
      // naked for a peer, delayed past that expiry, instead of being stranded until their ack wait
      // runs out.
      slotFreed?.();
      wakeStop?.();
      await done;
    },
  };
}
