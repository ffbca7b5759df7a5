import { AckPolicy, DeliverPolicy, nanos, nuid, type JetStreamClient, type JetStreamManager, type Msg } from 'nats';
import { EventStoreError, EventStoreErrorCode, JsErrCode, PermissionDenied, StreamNotFound, isPermissionsViolation, isTimeout, jsErrCode } from './errors';
import { headersToRecord } from './dead-letter';
import { followStream, FOLLOW_PULL_BYTES, FOLLOW_PULL_EXPIRES_MS } from './follow';
import { ackInfo, consumerGone, headerBlockRecord, headerInBlock, headerReader, pullTarget, PullStream } from './pull';
import { maxPayloadOf, pullCount } from './pull-size';

export { followStream, FOLLOW_PULL_BYTES, FOLLOW_PULL_EXPIRES_MS };

/*
 * Baton's one way to read a stream. Every reader of stored messages goes through here: the event
 * store's aggregate reads, projection replays and rebuilds, the watchdog's followers, the ledger's
 * scan of pending handoffs, the CLI, the notifier's gap reads. Three shapes:
 *
 * - a RANGE `fromSeq..toSeq` (optionally filtered): one ephemeral, ack-less, in-memory pull
 *   consumer, read until the messages it reported pending at creation are delivered, so a range
 *   is complete or fails loudly, never silently short; its pulls are bounded by bytes at the
 *   server as well as by count (pull.ts). A consumer lost under the read (its node left the
 *   cluster, it was deleted) or messages lost on their way (the connection moved to another
 *   node) are noticed — a pull answered "no consumer", a gap in the consumer's delivery
 *   sequence, pulls nobody answers — and the read goes on from the message after the last one
 *   it yielded, through a new consumer;
 * - a FOLLOW (follow.ts): a consumer of its own that replays from a sequence and keeps delivering,
 *   each pull bounded by a count and by bytes; re-created from the last sequence seen when it is
 *   deleted, lost or skips, so every message arrives once and in order;
 * - POINT reads: one message by sequence, the next or last one on a subject (`STREAM.MSG.GET`).
 *
 * Shared replays (several rebuilds over one read) are `shareReads` (shared-reads.ts) over a range.
 */

/** A stored message as a reader yields it. */
export interface StoredMessage {
  subject: string;
  /** Stream sequence. */
  seq: number;
  data: Uint8Array;
  /** First value of a header, if present. */
  header(name: string): string | undefined;
  /** Every header as `{ name: [values] }`. */
  headers(): Record<string, string[]>;
}

/** The client views a reader needs (a `NatsHandle` has both). */
export interface StreamClients {
  js: JetStreamClient;
  jsm: JetStreamManager;
}

export interface RangeOptions {
  /** First stream sequence to read (inclusive). */
  fromSeq: number;
  /** Last stream sequence to read (inclusive); default: the stream's last sequence when the read starts. */
  toSeq?: number;
  filterSubject?: string;
  /** Messages per pull (default 500). */
  batch?: number;
  /**
   * Most bytes of message data one pull may bring (default {@link RANGE_PULL_BYTES}, 8 MiB; with
   * the pull asked for ahead, twice that in flight): a pull asks for no more messages than fit at
   * the size of the largest message of the previous pull (the server's `max_payload` before the
   * first), so a range over large events holds megabytes, not hundreds of them.
   */
  pullBytes?: number;
}

/** Bytes of message data one pull of a range read may bring unless told otherwise. */
export const RANGE_PULL_BYTES = 8 * 1024 * 1024;

/** How long a range read's pull waits at the server. */
const RANGE_PULL_EXPIRES_MS = 5000;

/** One message as a follower hands it over. */
export interface FollowedMessage {
  subject: string;
  /** Stream sequence. */
  seq: number;
  data: Uint8Array;
  /** First value of a header, if present. */
  header(name: string): string | undefined;
}

export interface FollowOptions {
  /** One subject filter (wildcards allowed; a single filter works on NATS 2.9). */
  filterSubject: string;
  /** First stream sequence to deliver (default 1: the whole history). */
  startSeq?: number;
  /** Called for every message, in order, synchronously. An exception is passed to `onError`; the follower goes on. */
  onMessage(message: FollowedMessage): void;
  onError?(error: unknown, message: FollowedMessage): void;
  /** Messages per pull (default 1000). */
  batch?: number;
  /**
   * Most bytes of messages one pull may bring (default {@link FOLLOW_PULL_BYTES}, 8 MiB; never
   * less than twice the server's `max_payload`): the server ends a pull before the message that
   * would not fit, so a follow over large events holds megabytes, not a thousand of them.
   */
  pullBytes?: number;
  /**
   * How long each pull waits at the server, ms (default {@link FOLLOW_PULL_EXPIRES_MS}, at least
   * 500); idle heartbeats come every half of it, and a consumer silent a second longer than it is
   * re-created.
   */
  pullExpiresMs?: number;
}

export interface StreamFollower {
  /** Resolves once every message stored when the follower started has been handed to `onMessage`. */
  readonly caughtUp: Promise<void>;
  isCaughtUp(): boolean;
  /** Stream sequence of the last message handed over (before the first: the sequence before `startSeq`, 0 from the start). */
  lastSeq(): number;
  /**
   * How many messages of the filter are stored and not handed over yet (waiting on the server, or
   * on their way): one consumer-info round trip. Null when that cannot be known now (the consumer
   * being re-created, the request failed).
   */
  behind(): Promise<number | null>;
  /** Stop delivering and remove the consumer. Safe to call twice. */
  stop(): Promise<void>;
}

export interface StreamBounds {
  firstSeq: number;
  lastSeq: number;
  messages: number;
}

export interface StreamReaderOptions {
  /** Told of every server round trip the reader makes (a point read, a consumer created, a pull): read counters, tests. */
  onRoundTrip?: (kind: 'get' | 'consumer' | 'pull' | 'info') => void;
  /** Told each time a range read re-opens its consumer to go on after `afterSeq` (see {@link StreamReader.range}): logs, tests. */
  onResume?: (resumed: RangeResumed) => void;
}

/** A range read that lost its consumer, or messages on their way, and goes on through a new one. */
export interface RangeResumed {
  stream: string;
  filterSubject: string | null;
  /** The last sequence the read yielded before (the new consumer starts after it). */
  afterSeq: number;
  /** What was noticed. */
  why: string;
}

/**
 * How long a range read keeps trying to open its consumer (a new one after it lost one), ms: a
 * cluster whose node left elects new leaders within seconds, answering late or "temporarily
 * unavailable" meanwhile. Past it the read fails with the server's last answer as its cause.
 */
export const RANGE_RESUME_WITHIN_MS = 30_000;
/** JetStream's "JetStream system temporarily unavailable" (no meta leader, or no stream leader, for now). */
const JS_CLUSTER_NOT_AVAILABLE = 10008;
/** The wait between two of those attempts, ms. */
const RANGE_RESUME_RETRY_MS = 500;
/** Consumers a range read opens in a row, each lost before it brought a message, before it fails. */
export const RANGE_MAX_FRUITLESS_RESUMES = 3;

/** A range's consumer: its name, and the messages it reported pending when made. */
interface RangeConsumer {
  name: string;
  pending: number;
}

const sleepMs = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Reads one stream: ranges, follows and point reads (see the module comment). */
export interface StreamReader {
  readonly stream: string;
  /**
   * The messages `fromSeq..toSeq` (filtered) in order, through one ephemeral pull consumer that
   * acknowledges nothing and is deleted afterwards (it also expires on its own after 30 s idle).
   * The consumer reports how many messages are pending, so the read ends exactly when they are
   * delivered; a pull that brings nothing is retried, and a read that keeps stalling fails loudly
   * ({@link EventStoreError}) instead of returning a truncated history. {@link StreamNotFound}
   * when the stream does not exist.
   */
  range(options: RangeOptions): AsyncGenerator<StoredMessage>;
  /**
   * Follow the stream (filtered) from `startSeq` (follow.ts): replay history, then keep
   * delivering new messages until {@link StreamFollower.stop}, each pull bounded by `batch`
   * messages and `pullBytes` bytes. Pulls wait {@link FOLLOW_PULL_EXPIRES_MS}, with idle heartbeats
   * every half of it: a consumer deleted or lost under the follower is noticed once it has been
   * silent a little longer than a pull, and re-created from the last sequence seen (nothing missed,
   * nothing repeated). Rejects if the stream does not exist.
   */
  follow(options: FollowOptions): Promise<StreamFollower>;
  /** The message stored at `seq`, or null when there is none (never stored, or removed). */
  message(seq: number): Promise<StoredMessage | null>;
  /** The first message on `subject` at or after `fromSeq` (`next_by_subj`), or null. */
  nextOnSubject(subject: string, fromSeq: number): Promise<StoredMessage | null>;
  /** The last message on `subject`, or null when it has none. */
  lastOnSubject(subject: string): Promise<StoredMessage | null>;
  /** The first sequence stored at or after `at`, or the stream's last sequence + 1 when nothing was stored since. */
  firstSeqAtOrAfter(at: Date): Promise<number>;
  /** First and last sequence and message count, now. */
  bounds(): Promise<StreamBounds>;
}

/** What a point read asks `STREAM.MSG.GET` for: a sequence, the next message on a subject from a sequence, or a subject's last. */
type PointQuery = { seq: number } | { seq: number; next_by_subj: string } | { last_by_subj: string };

/** `STREAM.MSG.GET`'s answer: the message (data and header block in base64), or the API error. */
interface PointAnswer {
  message?: { subject: string; seq: number; data?: string; hdrs?: string; time?: string };
  error?: { code?: number; err_code?: number; description?: string };
}

/** How long a point read waits when the client was given no JetStream timeout, ms. */
const DEFAULT_POINT_TIMEOUT_MS = 5000;
const TEXT = new TextDecoder();

/** A message delivered to a pull of the reader's own, as the reader yields it. */
function storedOf(msg: Msg, seq: number): StoredMessage {
  return {
    subject: msg.subject,
    seq,
    data: msg.data,
    // Headers read from the raw header block when the client exposes it (decoded to text once, at
    // the first read): decoding every header of every message (what `msg.headers` does) was a tenth
    // of a replay's reading cost.
    header: headerReader(msg),
    headers: () => headersToRecord(msg.headers),
  };
}

/** The reader of `stream` (see {@link StreamReader}). */
export function streamReader(clients: StreamClients, stream: string, options: StreamReaderOptions = {}): StreamReader {
  const { js, jsm } = clients;
  const tick = options.onRoundTrip ?? (() => undefined);
  const failure = (what: string, err: unknown): Error => {
    if (err instanceof EventStoreError) return err;
    if (jsErrCode(err) === JsErrCode.streamNotFound) return new StreamNotFound(stream, { cause: err });
    // Credentials that may not read the stream (an agent's): typed, so a caller tells it from an outage.
    if (isPermissionsViolation(err)) return new PermissionDenied(pointSubject, { cause: err, why: `${what}: these credentials may not read ${stream}` });
    return new EventStoreError(`${what}: ${(err as Error).message}`, { cause: err });
  };
  const point = pullTarget(js);
  const nc = point.nc;
  /**
   * The connection the read goes over closed for good (the client gave up reconnecting): nothing
   * more can come. Typed `connection_closed`; the client's own error, when there is one, is the cause.
   */
  const readerConnectionClosed = (opts: RangeOptions, last: number, cause?: unknown): EventStoreError =>
    new EventStoreError(`reading ${opts.filterSubject ?? stream}: the NATS connection closed after seq ${last}`, {
      code: EventStoreErrorCode.connectionClosed,
      ...(cause !== undefined ? { cause } : {}),
    });
  const pointSubject = `${point.apiPrefix}.STREAM.MSG.GET.${stream}`;
  const pointTimeout = js.getOptions().timeout ?? DEFAULT_POINT_TIMEOUT_MS;
  // A point read is Baton's own `STREAM.MSG.GET` request: the client's builds an error object (with
  // its stack) for every "no message found" — the answer the ledger gets on each offer and claim
  // for a project with no control state — and decodes the base64 data a character at a time.
  const getMessage = async (query: PointQuery, what: string): Promise<StoredMessage | null> => {
    tick('get');
    let reply: Msg;
    try {
      reply = await point.nc.request(pointSubject, JSON.stringify(query), { timeout: pointTimeout });
    } catch (err) {
      throw failure(what, err);
    }
    let answer: PointAnswer;
    try {
      answer = JSON.parse(TEXT.decode(reply.data)) as PointAnswer;
    } catch (err) {
      throw new EventStoreError(`${what}: the server's answer is not JSON`, { cause: err });
    }
    if (answer.error !== undefined) {
      if (answer.error.err_code === JsErrCode.noMessageFound) return null;
      const error = Object.assign(new Error(answer.error.description ?? `error ${answer.error.code}`), { api_error: answer.error });
      throw failure(what, error);
    }
    const message = answer.message;
    if (message === undefined || typeof message.seq !== 'number') throw new EventStoreError(`${what}: the server's answer holds no message`);
    const data = message.data ? Buffer.from(message.data, 'base64') : new Uint8Array(0);
    const block = message.hdrs ? Buffer.from(message.hdrs, 'base64').toString('utf8') : '';
    return {
      subject: message.subject,
      seq: message.seq,
      data,
      header: (name) => headerInBlock(block, name) || undefined,
      headers: () => headerBlockRecord(block),
    };
  };
  const bounds = async (): Promise<StreamBounds> => {
    tick('info');
    try {
      const { state } = await jsm.streams.info(stream);
      return { firstSeq: state.first_seq, lastSeq: state.last_seq, messages: state.messages };
    } catch (err) {
      throw failure(`cannot read the state of ${stream}`, err);
    }
  };

  /**
   * One range's ephemeral consumer from `fromSeq`. While the answer may change it keeps asking,
   * until {@link RANGE_RESUME_WITHIN_MS}: a leader election after a node left answers late or
   * "temporarily unavailable" for seconds, and while a node of the stream's is down a consumer
   * placed on it is never made (the create times out; the next attempt is placed anew). A first
   * opening retries only those answers (a timeout, "temporarily unavailable"); a re-opening
   * (`resuming`, the last one lost) any answer but a missing stream or a refusal. Each attempt has
   * a name of its own (one whose answer was lost may exist: it expires after 30 s idle).
   */
  const openRange = async (opts: RangeOptions, fromSeq: number, resuming: boolean): Promise<RangeConsumer> => {
    const deadline = Date.now() + RANGE_RESUME_WITHIN_MS;
    for (;;) {
      const name = `rr_${nuid.next()}`;
      tick('consumer');
      try {
        const info = await jsm.consumers.add(stream, {
          name,
          ...(opts.filterSubject ? { filter_subject: opts.filterSubject } : {}),
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: Math.max(1, fromSeq),
          ack_policy: AckPolicy.None,
          max_deliver: 1,
          mem_storage: true,
          num_replicas: 1,
          inactive_threshold: nanos(30_000),
        });
        return { name, pending: info.num_pending };
      } catch (err) {
        const lasting = failure(`cannot open a reader on ${opts.filterSubject ?? stream}`, err);
        const transient = isTimeout(err) || jsErrCode(err) === JS_CLUSTER_NOT_AVAILABLE;
        if ((!resuming && !transient) || lasting instanceof StreamNotFound || lasting instanceof PermissionDenied || Date.now() >= deadline) throw lasting;
        if (nc.isClosed()) throw readerConnectionClosed(opts, fromSeq - 1, err);
        await sleepMs(RANGE_RESUME_RETRY_MS);
      }
    }
  };

  async function* range(opts: RangeOptions): AsyncGenerator<StoredMessage> {
    const toSeq = opts.toSeq ?? (await bounds()).lastSeq;
    if (toSeq < opts.fromSeq) return;
    const what = opts.filterSubject ?? stream;
    let consumer = await openRange(opts, opts.fromSeq, false);
    const target = pullTarget(js);
    const batchSize = Math.max(1, opts.batch ?? 500);
    const pullBytes = Math.max(1, opts.pullBytes ?? RANGE_PULL_BYTES);
    // Each pull is bounded by bytes at the server (never under two of the largest message it
    // takes, so one always fits), and asks for no more messages than fit in `pullBytes` at the
    // size of the largest message since the previous pull was asked for (before the first: the
    // largest the server takes).
    const maxPayload = maxPayloadOf(js);
    const pullsOf = (name: string) => new PullStream(target, stream, name, { maxBytes: Math.max(pullBytes, 2 * maxPayload), expiresMs: RANGE_PULL_EXPIRES_MS });
    let pulls = pullsOf(consumer.name);
    try {
      let largest = maxPayload;
      let largestSinceAsked = 0;
      let asked = 0;
      let remaining = consumer.pending;
      let last = opts.fromSeq - 1;
      let stalls = 0;
      // The consumer's delivery sequence of the last message taken: the next one delivered is one
      // more, unless messages were lost on their way (an ack-less consumer delivers each once).
      let delivered = 0;
      // Re-openings in a row that brought no message: a read that cannot go on fails, never hangs.
      let fruitless = 0;
      // The consumer was lost (its node left, or it was deleted), or messages it delivered were lost
      // with the connection they travelled on (a reconnect to another node): read on from the
      // message after the last one yielded, through a new consumer. Nothing is yielded twice or missed.
      const resume = async (why: string) => {
        if (nc.isClosed()) throw readerConnectionClosed(opts, last);
        if (++fruitless > RANGE_MAX_FRUITLESS_RESUMES) {
          throw new EventStoreError(
            `reading ${what} cannot go on after seq ${last}: ${why}, and ${RANGE_MAX_FRUITLESS_RESUMES} new readers in a row brought nothing`,
          );
        }
        pulls.stop();
        // Best effort, not waited for: the lost consumer may be on a node that is gone (it expires after 30 s idle).
        void jsm.consumers.delete(stream, consumer.name).catch(() => undefined);
        options.onResume?.({ stream, filterSubject: opts.filterSubject ?? null, afterSeq: last, why });
        consumer = await openRange(opts, last + 1, true);
        pulls = pullsOf(consumer.name);
        remaining = consumer.pending;
        delivered = 0;
        asked = 0;
        stalls = 0;
      };
      while (remaining > 0 && last < toSeq) {
        if (nc.isClosed()) throw readerConnectionClosed(opts, last);
        // The next pull is asked for once less than half of the last one is still to come: its
        // messages arrive while the caller works on these, instead of a round trip (and the
        // server's first delivery) after each pull. Both pulls' messages come in stream order
        // (PullStream), whichever pull the server gives each one to.
        const notAsked = remaining - pulls.credit();
        if (notAsked > 0 && pulls.credit() <= Math.floor(asked / 2)) {
          if (largestSinceAsked > 0) largest = largestSinceAsked;
          largestSinceAsked = 0;
          asked = pullCount(Math.min(notAsked, batchSize), pullBytes, largest);
          tick('pull');
          pulls.ask(asked);
        }
        const msg = await pulls.next(RANGE_PULL_EXPIRES_MS + 1000);
        if (msg === null) {
          asked = 0;
          if (nc.isClosed()) throw readerConnectionClosed(opts, last);
          const end = pulls.lastEnd();
          if (consumerGone(end)) await resume(`its consumer is gone (${end?.code} ${end?.description || 'no responders'})`);
          else if (pulls.timedOut()) await resume(`no answer to its pulls for ${RANGE_PULL_EXPIRES_MS + 1000} ms`);
          else if (++stalls >= 6) throw new EventStoreError(`reading ${what} stalled at seq ${last} with ${remaining} messages pending`);
          continue;
        }
        const facts = msg.reply ? ackInfo(msg.reply) : null;
        if (facts === null) throw new EventStoreError(`reading ${what}: a message without its delivery facts (${msg.reply})`);
        if (facts.delivery !== delivered + 1) {
          await resume(`messages ${delivered + 1}..${facts.delivery - 1} of its consumer were lost on their way`);
          continue;
        }
        delivered = facts.delivery;
        const seq = facts.streamSeq;
        stalls = 0;
        fruitless = 0;
        remaining--;
        largestSinceAsked = Math.max(largestSinceAsked, msg.data.length);
        if (seq > toSeq) break;
        last = seq;
        yield storedOf(msg, seq);
      }
    } finally {
      // Pulls still open (the range ended, or the caller stopped) end with the consumer.
      pulls.stop();
      if (!nc.isClosed()) await jsm.consumers.delete(stream, consumer.name).catch(() => undefined);
    }
  }

  return {
    stream,
    range,
    follow: (opts) => followStream({ ...opts, js, stream }),
    message: (seq) => getMessage({ seq }, `cannot read ${stream}#${seq}`),
    // `next_by_subj` is understood by the server from 2.9.
    nextOnSubject: (subject, fromSeq) => getMessage({ seq: fromSeq, next_by_subj: subject }, `cannot read ${subject} from #${fromSeq}`),
    lastOnSubject: (subject) => getMessage({ last_by_subj: subject }, `cannot read the last message of ${subject}`),
    bounds,
    async firstSeqAtOrAfter(at: Date): Promise<number> {
      const state = await bounds();
      if (state.messages === 0) return state.lastSeq + 1;
      tick('consumer');
      const consumer = await js.consumers.get(stream, { deliver_policy: DeliverPolicy.StartTime, opt_start_time: at.toISOString() });
      try {
        const msg = await consumer.next({ expires: 2000 });
        if (!msg) return state.lastSeq + 1;
        // A start time past the stream's last message makes the consumer deliver whatever is stored
        // next, which may be stored before the time asked for: then nothing is at or after it yet.
        if (msg.info.timestampNanos < at.getTime() * 1e6) return Math.max(state.lastSeq, msg.seq) + 1;
        return msg.seq;
      } finally {
        await consumer.delete().catch(() => undefined);
      }
    },
  };
}

/** Options of {@link readStreamRange}: a {@link RangeOptions} on one stream. */
export interface ReadRangeOptions extends RangeOptions, StreamClients {
  stream: string;
}

/** `streamReader({ js, jsm }, stream).range(options)`: see {@link StreamReader.range}. */
export function readStreamRange(options: ReadRangeOptions): AsyncGenerator<StoredMessage> {
  const { js, jsm, stream, ...range } = options;
  return streamReader({ js, jsm }, stream).range(range);
}
