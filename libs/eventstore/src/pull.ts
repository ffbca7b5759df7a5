import { createInbox, nanos, type JetStreamClient, type JetStreamManager, type JsMsg, type Msg, type NatsConnection } from 'nats';
import { connectionOf } from './pull-size';

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
}

export interface PullAsk {
  batch: number;
  maxBytes: number;
  expiresMs: number;
  /** Idle heartbeats while the pull waits (followers use them to notice a lost consumer). */
  heartbeatMs?: number;
}

/** The connection, API prefix and inbox prefix behind a JetStream client and manager. */
export function pullTarget(js: JetStreamClient, jsm: JetStreamManager): PullTarget {
  const nc = connectionOf(js);
  const inboxPrefix = (nc as unknown as { options?: { inboxPrefix?: string } }).options?.inboxPrefix;
  return { nc, apiPrefix: jsm.getOptions().apiPrefix ?? '$JS.API', ...(inboxPrefix ? { inboxPrefix } : {}) };
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
  const code = msg.headers?.code ?? 0;
  return msg.reply && code === 0 ? null : code;
}

/**
 * The delivery facts in a JetStream reply subject: `$JS.ACK.<stream>.<consumer>.<delivered>.
 * <stream seq>.<delivery seq>.<time>.<pending>` (nine tokens), or the eleven-or-more-token form
 * with a domain and an account hash after `ACK`. Null when the subject is neither.
 */
export function ackInfo(reply: string): { consumer: string; streamSeq: number; delivery: number; pending: number } | null {
  const tokens = reply.split('.');
  if (tokens[0] !== '$JS' || tokens[1] !== 'ACK') return null;
  const base = tokens.length === 9 ? 2 : tokens.length >= 11 ? 4 : -1;
  if (base < 0) return null;
  const consumer = tokens[base + 1] as string;
  const streamSeq = Number(tokens[base + 3]);
  const delivery = Number(tokens[base + 4]);
  const pending = Number(tokens[base + 6]);
  return Number.isSafeInteger(streamSeq) && Number.isSafeInteger(delivery) && Number.isSafeInteger(pending) ? { consumer, streamSeq, delivery, pending } : null;
}

/** One pull's messages, in order, as they arrive; the iteration ends with the pull. */
export interface OpenPull extends AsyncIterable<Msg> {
  /** Stop listening (messages still on their way are dropped). Safe to call twice. */
  stop(): void;
}

/**
 * Ask for one pull and read it: the messages come as they arrive, and the iteration ends when
 * `ask.batch` have come, when the server ends the pull (its bytes reached, expired, nothing to
 * deliver), or a second after its expiry if the server said nothing (a lost request).
 */
export function openPull(target: PullTarget, stream: string, consumer: string, ask: PullAsk): OpenPull {
  const inbox = createInbox(target.inboxPrefix);
  const queue: Msg[] = [];
  let head = 0;
  let received = 0;
  let done = false;
  let wake: (() => void) | null = null;
  const finish = () => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    sub.unsubscribe();
    wake?.();
  };
  const sub = target.nc.subscribe(inbox, {
    callback: (error, msg) => {
      if (done) return;
      if (error) return finish();
      const status = pullStatus(msg);
      if (status === 100) return;
      if (status !== null) return finish();
      queue.push(msg);
      if (++received >= ask.batch) finish();
      else wake?.();
    },
  });
  const timer = setTimeout(finish, ask.expiresMs + 1000);
  sendPull(target, stream, consumer, ask, inbox);
  return {
    stop: finish,
    async *[Symbol.asyncIterator]() {
      for (;;) {
        while (head < queue.length) {
          const msg = queue[head] as Msg;
          queue[head++] = undefined as unknown as Msg;
          yield msg;
        }
        if (done) return;
        await new Promise<void>((resolve) => (wake = resolve));
        wake = null;
      }
    },
  };
}

/** The client's private view of a message: the raw bytes and where its header block ends (-1: none). */
interface RawMsg {
  msg?: { _msg?: { hdr?: unknown }; _rdata?: unknown };
}

/**
 * The first value of header `name` (exact name, value trimmed, as `MsgHdrs.get` gives it), read
 * from the message's raw header block; undefined when absent; null when this client version does
 * not expose the raw block (the caller then decodes the headers).
 */
export function rawHeader(msg: JsMsg, name: string): string | undefined | null {
  const inner = (msg as unknown as RawMsg).msg;
  const length = inner?._msg?.hdr;
  const data = inner?._rdata;
  if (typeof length !== 'number' || !(data instanceof Uint8Array)) return null;
  if (length < 0) return undefined;
  const block = Buffer.from(data.buffer, data.byteOffset, Math.min(length, data.byteLength)).toString('utf8');
  const at = block.indexOf(`\r\n${name}:`);
  if (at < 0) return undefined;
  const start = at + name.length + 3;
  const end = block.indexOf('\r\n', start);
  return block.slice(start, end < 0 ? undefined : end).trim();
}

/** One header of a message delivered to a pull of our own: from its raw header block when the client exposes it. */
export function headerOf(msg: Msg, name: string): string | undefined {
  const raw = rawHeader({ msg } as unknown as JsMsg, name);
  return raw === null ? msg.headers?.get(name) || undefined : raw || undefined;
}
