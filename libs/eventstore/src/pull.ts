import { createInbox, nanos, type JetStreamClient, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from 'nats';
import { ownValue, setOwn } from '@baton/contracts';
import { headersToRecord } from './dead-letter';
import { connectionOf } from './pull-size';
import { hasNatsCode } from './connection';

/*
 * Pull requests with both bounds. A JetStream pull (`CONSUMER.MSG.NEXT`) may ask for a count of
 * messages and a number of bytes at once: the server ends it before the message that would not
 * fit. The client library takes one or the other, and its byte-bounded pulls wait out their expiry
 * or stop refilling (measured on nats-server 2.9.10), while a count alone lets one pull bring a
 * thousand events near the request cap — more than the server queues for a connection before it
 * drops it as a slow consumer. Baton's readers of ack-less consumers (the stream reader's ranges
 * and follows) therefore send their own requests, built and read here.
 */

/** Where a pull request for `consumer` of `stream` is sent, and what it asks for. */
export interface PullTarget {
  nc: NatsConnection;
  /** The JetStream API prefix (`$JS.API` unless the connection speaks to a domain). */
  apiPrefix: string;
  inboxPrefix?: string;
  /**
   * Where an acknowledgement of a delivered message is published, given its reply subject
   * (`$JS.ACK.…`); the reply subject itself when absent. An agent acknowledges through its edge.
   */
  ackSubject?: (reply: string) => string;
}

export interface PullAsk {
  batch: number;
  maxBytes: number;
  expiresMs: number;
  /** Idle heartbeats while the pull waits (followers use them to notice a lost consumer). */
  heartbeatMs?: number;
}

/** The connection, API prefix and inbox prefix behind a JetStream client. */
export function pullTarget(js: JetStreamClient): PullTarget {
  const nc = connectionOf(js);
  const inboxPrefix = (nc as unknown as { options?: { inboxPrefix?: string } }).options?.inboxPrefix;
  // The client's own prefix (it folds a JetStream domain in), else the one it was given.
  const apiPrefix = (js as unknown as { apiPrefix?: string }).apiPrefix ?? js.getOptions().apiPrefix ?? '$JS.API';
  return { nc, apiPrefix, ...(inboxPrefix ? { inboxPrefix } : {}) };
}

/** Send one pull request for `consumer`, its replies (messages and statuses) to `reply`. */
export function sendPull(target: PullTarget, stream: string, consumer: string, ask: PullAsk, reply: string): void {
  const body: Record<string, number> = { batch: ask.batch, max_bytes: ask.maxBytes, expires: nanos(ask.expiresMs) };
  if (ask.heartbeatMs !== undefined) body['idle_heartbeat'] = nanos(ask.heartbeatMs);
  target.nc.publish(`${target.apiPrefix}.CONSUMER.MSG.NEXT.${stream}.${consumer}`, JSON.stringify(body), { reply });
}

/**
 * A status sent to a pull's reply subject, as its code (100 an idle heartbeat, 404 nothing to
 * deliver, 408 the pull expired, 409 it ended: its bytes reached, the consumer deleted, too many
 * pulls waiting), or null when `msg` is a stored message.
 */
export function pullStatus(msg: Msg): number | null {
  const code = statusCode(msg);
  return msg.reply && code === 0 ? null : code;
}

/**
 * The status code on a message's header line (`NATS/1.0 404 No Messages`), 0 when it has none,
 * read from the raw header block: asking the client for `msg.headers` decoded and checked every
 * header of every delivered message to learn that (4 % of a rebuild's CPU).
 */
function statusCode(msg: Msg): number {
  const block = rawHeaderBlock(msg as unknown as RawMsg['msg']);
  if (block === undefined) return 0;
  if (block === null) return msg.headers?.code ?? 0;
  // "NATS/1.0" alone, or followed by " <code>[ <description>]".
  if (block.charCodeAt(8) !== 32) return 0;
  const code = Number.parseInt(block.slice(9, 12), 10);
  return Number.isInteger(code) ? code : 0;
}

/** What a JetStream reply subject says of a delivery. */
export interface DeliveryInfo {
  stream: string;
  consumer: string;
  /** How many times this message has been delivered to the consumer (1 on first delivery). */
  delivered: number;
  streamSeq: number;
  /** The consumer's delivery sequence. */
  delivery: number;
  /** When the stream stored the message, in ms since the epoch. */
  timestampMs: number;
  /** Messages still pending for the consumer after this one. */
  pending: number;
}

/**
 * The delivery facts in a JetStream reply subject: `$JS.ACK.<stream>.<consumer>.<delivered>.
 * <stream seq>.<delivery seq>.<time ns>.<pending>` (nine tokens), or the eleven-or-more-token form
 * with a domain and an account hash after `ACK`. Null when the subject is neither.
 */
export function ackInfo(reply: string): DeliveryInfo | null {
  // Read token by token from the dots' positions: splitting the subject built a dozen strings per
  // delivered message (2.7 % of a rebuild's CPU, measured).
  if (!reply.startsWith('$JS.ACK.')) return null;
  let dots = 0;
  for (let i = reply.indexOf('.'); i !== -1 && dots < DOTS.length; i = reply.indexOf('.', i + 1)) DOTS[dots++] = i;
  const tokens = dots + 1;
  const base = tokens === 9 ? 2 : tokens >= 11 ? 4 : -1;
  if (base < 0) return null;
  const delivered = digitsOf(reply, base + 2, dots);
  const streamSeq = digitsOf(reply, base + 3, dots);
  const delivery = digitsOf(reply, base + 4, dots);
  const nanos = digitsOf(reply, base + 5, dots);
  const pending = digitsOf(reply, base + 6, dots);
  if (
    !Number.isSafeInteger(delivered) ||
    !Number.isSafeInteger(streamSeq) ||
    !Number.isSafeInteger(delivery) ||
    !Number.isSafeInteger(pending) ||
    !Number.isFinite(nanos)
  )
    return null;
  return {
    stream: tokenOf(reply, base, dots),
    consumer: tokenOf(reply, base + 1, dots),
    delivered,
    streamSeq,
    delivery,
    timestampMs: Math.floor(nanos / 1_000_000),
    pending,
  };
}

/** Positions of the dots of the subject {@link ackInfo} reads (a reply subject has at most a dozen). */
const DOTS = new Int32Array(32);

/** Token `k` of the subject whose first `dots` dots are in {@link DOTS}. */
function tokenOf(subject: string, k: number, dots: number): string {
  return subject.slice(k === 0 ? 0 : (DOTS[k - 1] as number) + 1, k < dots ? DOTS[k] : subject.length);
}

/** Token `k` read as a decimal number (NaN unless it is digits only). */
function digitsOf(subject: string, k: number, dots: number): number {
  const start = k === 0 ? 0 : (DOTS[k - 1] as number) + 1;
  const end = k < dots ? (DOTS[k] as number) : subject.length;
  if (end <= start) return Number.NaN;
  let value = 0;
  for (let i = start; i < end; i++) {
    const digit = subject.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return Number.NaN;
    value = value * 10 + digit;
  }
  return value;
}

/**
 * A message delivered to a pull of a consumer that takes acknowledgements, with them: each is a
 * publish to the message's reply subject, as the server expects (`+ACK`, `-NAK` with an optional
 * delay, `+WPI` for "still working", `+TERM`). The first ack, nak or term settles the message;
 * later ones, and "working" after it, are not sent.
 */
export class DeliveredMessage {
  private settled = false;

  constructor(
    private readonly nc: NatsConnection,
    readonly msg: Msg,
    readonly info: DeliveryInfo,
    private readonly ackSubject: (reply: string) => string = (reply) => reply,
  ) {}

  get subject(): string {
    return this.msg.subject;
  }
  get data(): Uint8Array {
    return this.msg.data;
  }
  get headers(): MsgHdrs | undefined {
    return this.msg.headers;
  }
  /** Stream sequence. */
  get seq(): number {
    return this.info.streamSeq;
  }
  ack(): void {
    this.settle('+ACK');
  }
  /** Ask for redelivery, after `delayMs` when given. */
  nak(delayMs?: number): void {
    this.settle(delayMs !== undefined && delayMs > 0 ? `-NAK ${JSON.stringify({ delay: nanos(delayMs) })}` : '-NAK');
  }
  /** Never redeliver. */
  term(): void {
    this.settle('+TERM');
  }
  /** Reset the ack wait: the handler is still at work. */
  working(): void {
    if (!this.settled) this.send('+WPI');
  }
  private settle(body: string): void {
    if (this.settled) return;
    this.settled = true;
    this.send(body);
  }
  /**
   * A connection closed (or past the end of its drain) sends nothing, and says nothing either — the
   * client would throw from a timer's beat or a handler's end: the server delivers the message again
   * once its ack wait ends, to whoever pulls next.
   */
  private send(body: string): void {
    if (this.nc.isClosed()) return;
    try {
      this.nc.publish(this.ackSubject(this.msg.reply as string), body);
    } catch (error) {
      if (!hasNatsCode(error, 'CONNECTION_CLOSED') && !hasNatsCode(error, 'CONNECTION_DRAINING')) throw error;
    }
  }
}

/** One pull's messages, in order, as they arrive; the iteration ends with the pull. */
export interface OpenPull extends AsyncIterable<Msg> {
  /** Stop listening (messages still on their way are dropped). Safe to call twice. */
  stop(): void;
  /** The status that ended the pull (e.g. 408 expired, 409 "Consumer Deleted", 503 no consumer), or null. */
  endedBy(): { code: number; description: string } | null;
  /**
   * The pull ended without a word from the server past its expiry (no status, and not all it asked
   * for): the request was lost, its consumer is gone (a pull sent to a deleted consumer is not
   * answered), or a 2.9 server expired it unannounced (see {@link PULL_EXPIRY_GRACE_MS}).
   */
  silent(): boolean;
}

/** Whether a pull ended because its consumer is not there (deleted under it, or never was). */
export function consumerGone(end: { code: number; description: string } | null): boolean {
  return end !== null && (end.code === 503 || (end.code === 409 && /consumer (deleted|not found)/i.test(end.description)));
}

/**
 * How long past a pull's expiry its reader waits for the server's word on it (a 408, or the status
 * that ended it) before taking the pull as ended unannounced. nats-server 2.9 expires a pull
 * without a word when a message becomes ready for it at the moment it expires (measured on 2.9.10
 * with a steady flow of messages; later servers send the 408 from that path too): the consumer then
 * waits at most this long. The wait only has to cover the request's trip to the server and the
 * status's trip back; one that takes longer (a busy event loop) only means the next pull overlaps
 * the last: its late messages are still read and its late status is recognised as an earlier
 * pull's and ignored.
 */
export const PULL_EXPIRY_GRACE_MS = 100;

/**
 * Messages in arrival order, taken one at a time, and a wait for the next one that an arrival (or
 * a stop) cuts short. What a pull subscription's callback fills and its reader drains.
 */
class Arrivals {
  private readonly queue: Msg[] = [];
  private head = 0;
  private wake: (() => void) | null = null;

  push(msg: Msg): void {
    this.queue.push(msg);
  }

  take(): Msg | undefined {
    if (this.head >= this.queue.length) return undefined;
    const msg = this.queue[this.head] as Msg;
    this.queue[this.head++] = undefined as unknown as Msg;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    return msg;
  }

  /** End the current {@link wait} now (something arrived, or the reader stops). */
  notify(): void {
    this.wake?.();
  }

  /** Resolve after `ms`, or at the next {@link notify}. */
  wait(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.wake = null;
        resolve();
      }, ms);
      this.wake = () => {
        this.wake = null;
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

/** How one pull of a {@link PullSession} ended. */
interface PullOutcome {
  status: { code: number; description: string } | null;
  unanswered: boolean;
}

/**
 * The pulls of one consumer, asked one after another over one subscription, each replying on a
 * subject of its own (`<inbox>.<n>`). A pull is read until it has brought what it asked for, the
 * server ends it with a status, or {@link PULL_EXPIRY_GRACE_MS} past its expiry without a word.
 * Messages that come after their pull was given up (a request the server took later than it was
 * sent, still delivering) are kept and read, in arrival order, ahead of the next pull's: nothing
 * the server delivered is dropped while the session lives, so giving up on a pull early costs at
 * most one extra pull, never a message left to its ack wait.
 */
export class PullSession {
  private readonly inbox: string;
  private readonly sub: Subscription;
  private readonly arrivals = new Arrivals();
  private serial = 0;
  /** The status that ended the pull being read, by its serial. */
  private ended: { serial: number; code: number; description: string } | null = null;
  private stopped = false;
  private reading = false;

  constructor(
    private readonly target: PullTarget,
    private readonly stream: string,
    private readonly consumer: string,
  ) {
    this.inbox = createInbox(target.inboxPrefix);
    this.sub = target.nc.subscribe(`${this.inbox}.*`, {
      callback: (error, msg) => {
        if (error || this.stopped) return;
        const status = pullStatus(msg);
        if (status === null) this.arrivals.push(msg);
        else if (status !== 100) {
          // A status goes to its own pull's subject: one of an earlier pull's is ignored.
          const serial = Number(msg.subject.slice(this.inbox.length + 1));
          if (serial !== this.serial) return;
          this.ended = { serial, code: status, description: msg.headers?.description ?? '' };
        }
        this.arrivals.notify();
      },
    });
  }

  /**
   * Ask for one pull and read it (see the class). One pull is read at a time: asking for the next
   * before the last one's iteration has ended is a programming error.
   */
  pull(ask: PullAsk): OpenPull {
    if (this.reading) throw new Error(`a pull of ${this.consumer} is still being read`);
    this.reading = true;
    const serial = ++this.serial;
    const outcome: PullOutcome = { status: null, unanswered: false };
    const deadline = Date.now() + ask.expiresMs + PULL_EXPIRY_GRACE_MS;
    if (!this.stopped) sendPull(this.target, this.stream, this.consumer, ask, `${this.inbox}.${serial}`);
    const messages = this.read(serial, ask.batch, deadline, outcome);
    return {
      stop: () => this.stop(),
      endedBy: () => outcome.status,
      silent: () => outcome.unanswered,
      [Symbol.asyncIterator]: () => messages,
    };
  }

  /** The messages of pull `serial`, as they come, until it ends (see the class); `outcome` says how. */
  private async *read(serial: number, batch: number, deadline: number, outcome: PullOutcome): AsyncGenerator<Msg> {
    let left = batch;
    try {
      while (left > 0 && !this.stopped) {
        const msg = this.arrivals.take();
        if (msg) {
          left--;
          yield msg;
          continue;
        }
        const end = this.ended;
        if (end !== null && end.serial === serial) {
          outcome.status = { code: end.code, description: end.description };
          return;
        }
        const wait = deadline - Date.now();
        if (wait <= 0) {
          outcome.unanswered = true;
          return;
        }
        await this.arrivals.wait(wait);
      }
    } finally {
      this.reading = false;
    }
  }

  /** Take every message come and not yet read (e.g. to nak them when the reader stops). */
  drain(): Msg[] {
    const out: Msg[] = [];
    for (let msg = this.arrivals.take(); msg; msg = this.arrivals.take()) out.push(msg);
    return out;
  }

  /** Stop listening: messages still on their way are left to their ack wait. Safe to call twice. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.sub.unsubscribe();
    this.arrivals.notify();
  }
}

/** The client's private view of a message: the raw bytes and where its header block ends (-1: none). */
interface RawMsg {
  msg?: { _msg?: { hdr?: unknown }; _rdata?: unknown };
}

/**
 * The raw header block of a client message as text: undefined when it has no headers, null when
 * this client version does not expose the raw bytes.
 */
function rawHeaderBlock(inner: RawMsg['msg']): string | undefined | null {
  const length = inner?._msg?.hdr;
  const data = inner?._rdata;
  if (typeof length !== 'number' || !(data instanceof Uint8Array)) return null;
  if (length < 0) return undefined;
  return Buffer.from(data.buffer, data.byteOffset, Math.min(length, data.byteLength)).toString('utf8');
}

/**
 * Every header of a message (names as sent, values in order), read from its raw header block when
 * the client exposes it: the client's own decoding checks every value and keeps them in a map,
 * which a consumer then copied into a record for every delivered message.
 */
export function headerRecord(msg: Msg): Record<string, string[]> {
  const block = rawHeaderBlock(msg as unknown as RawMsg['msg']);
  if (block === undefined) return {};
  return block !== null ? headerBlockRecord(block) : headersToRecord(msg.headers);
}

/** One header of a raw NATS header block (`NATS/1.0\r\nName: value\r\n…`): its first value, trimmed, or undefined. */
export function headerInBlock(block: string, name: string): string | undefined {
  const at = block.indexOf(`\r\n${name}:`);
  if (at < 0) return undefined;
  const start = at + name.length + 3;
  const end = block.indexOf('\r\n', start);
  return block.slice(start, end < 0 ? undefined : end).trim();
}

/**
 * Every header of a raw NATS header block, read as the client's own decoder reads it: names as
 * sent, values trimmed, repeated names keeping each value in order; the status line is skipped.
 */
export function headerBlockRecord(block: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  const lines = block.split('\r\n');
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] as string;
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon);
    const value = line.slice(colon + 1).trim();
    // Header names are the sender's: own members only (a `constructor` header is a name like any other).
    const values = ownValue(out, name);
    if (values) values.push(value);
    else setOwn(out, name, [value]);
  }
  return out;
}

/**
 * The headers of a delivered message, one by one, as its first value (trimmed; undefined when
 * absent), read from the raw header block when the client exposes it. The block is decoded to text
 * once, at the first read: a replayed event's headers are read several times (its schema
 * fingerprint, its type, its trace).
 */
export function headerReader(msg: Msg): (name: string) => string | undefined {
  let block: string | undefined | null | false = false;
  return (name) => {
    if (block === false) block = rawHeaderBlock(msg as unknown as RawMsg['msg']);
    if (block === undefined) return undefined;
    return block === null ? msg.headers?.get(name) || undefined : headerInBlock(block, name) || undefined;
  };
}

/**
 * Several pulls of one consumer read as one stream of messages, in the order the server delivers
 * them. nats-server (2.9.10, measured) hands a consumer's messages round-robin to the pulls waiting
 * on it: with two pulls open, the first gets messages 1, 3, 5… and the second 2, 4, 6…, so reading
 * one pull to its end and then the next would yield them out of order. Here every pull replies to
 * one subscription, and messages are read in arrival order,
 * which is the consumer's order. `credit` is what the open pulls may still bring: a message takes
 * one, and a pull the server ends early (its bytes reached, expired) gives back what its status
 * says it left undelivered.
 */
export class PullStream {
  private readonly inbox: string;
  private readonly sub: Subscription;
  private readonly arrivals = new Arrivals();
  private open = 0;
  private stopped = false;
  private ended: { code: number; description: string } | null = null;
  private silent = false;

  constructor(
    private readonly target: PullTarget,
    private readonly stream: string,
    private readonly consumer: string,
    private readonly bounds: { maxBytes: number; expiresMs: number },
  ) {
    this.inbox = createInbox(target.inboxPrefix);
    // One subject for every pull's replies (and statuses): they arrive in the consumer's order.
    this.sub = target.nc.subscribe(this.inbox, {
      callback: (error, msg) => {
        if (error || this.stopped) return;
        const status = pullStatus(msg);
        if (status === null) {
          this.arrivals.push(msg);
          this.open = Math.max(0, this.open - 1);
        } else if (status !== 100) {
          this.ended = { code: status, description: msg.headers?.description ?? '' };
          const left = Number(msg.headers?.get('Nats-Pending-Messages') ?? NaN);
          // A pull ended without saying what it left: count nothing as coming any more.
          this.open = Number.isSafeInteger(left) ? Math.max(0, this.open - left) : 0;
        }
        this.arrivals.notify();
      },
    });
  }

  /** Messages asked for and not yet come (nor given up by their pull). */
  credit(): number {
    return this.open;
  }

  /** The status that ended the last pull the server ended early (see {@link OpenPull.endedBy}), or null. */
  lastEnd(): { code: number; description: string } | null {
    return this.ended;
  }

  /** Ask for `count` more messages (one pull). */
  ask(count: number): void {
    if (this.stopped || count <= 0) return;
    this.open += count;
    sendPull(this.target, this.stream, this.consumer, { batch: count, maxBytes: this.bounds.maxBytes, expiresMs: this.bounds.expiresMs }, this.inbox);
  }

  /** Whether a {@link next} gave up waiting while pulls were open (see {@link OpenPull.silent}). */
  timedOut(): boolean {
    return this.silent;
  }

  /**
   * The next message delivered; null when no pull is open and nothing is left to take, or when none
   * came within `timeoutMs` (the open pulls are then taken as lost).
   */
  async next(timeoutMs: number): Promise<Msg | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const msg = this.arrivals.take();
      if (msg) return msg;
      if (this.stopped || this.open === 0) return null;
      const wait = deadline - Date.now();
      if (wait <= 0) {
        this.open = 0;
        this.silent = true;
        return null;
      }
      await this.arrivals.wait(wait);
    }
  }

  /** Stop listening. Safe to call twice. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.sub.unsubscribe();
    this.arrivals.notify();
  }
}
