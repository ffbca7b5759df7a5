import { type ConsumerMessages, type JetStreamClient, type JsMsg } from 'nats';

/*
 * The watchdog's only direct use of the `nats` client: an ORDERED (ephemeral, in-memory, no-ack)
 * consumer that replays a stream from a sequence and then keeps delivering new messages. The
 * client recreates the consumer from the last sequence it saw if a message goes missing, the
 * connection drops or the consumer is deleted or lost (noticed by missed idle heartbeats, within
 * about 2 × {@link FOLLOW_PULL_EXPIRES_MS}), so the caller sees every message once, in stream order.
 * (@baton/eventstore has durable consumers and point reads only; this could move there as
 * `followStream` if another service needs it.)
 */

/** How long each pull of a follower waits; idle heartbeats come every half of it. */
export const FOLLOW_PULL_EXPIRES_MS = 5000;

/** One message as the follower hands it over. */
export interface FollowedMessage {
  subject: string;
  /** Stream sequence. */
  seq: number;
  data: Uint8Array;
  /** First value of a header, if present. */
  header(name: string): string | undefined;
}

export interface FollowStreamOptions {
  js: JetStreamClient;
  stream: string;
  /** One subject filter (wildcards allowed; a single filter works on NATS 2.9). */
  filterSubject: string;
  /** First stream sequence to deliver (default 1: the whole history). */
  startSeq?: number;
  /** Called for every message, in order, synchronously. An exception is passed to `onError`; the follower goes on. */
  onMessage(message: FollowedMessage): void;
  onError?(error: unknown, message: FollowedMessage): void;
  /** Messages per pull (default 1000). */
  batch?: number;
}

export interface StreamFollower {
  /** Resolves once every message stored when the follower started has been handed to `onMessage`. */
  readonly caughtUp: Promise<void>;
  isCaughtUp(): boolean;
  /** Stream sequence of the last message handed over (0 before the first). */
  lastSeq(): number;
  /** Stop delivering and remove the consumer. Safe to call twice. */
  stop(): Promise<void>;
}

function wrap(msg: JsMsg): FollowedMessage {
  return { subject: msg.subject, seq: msg.seq, data: msg.data, header: (name) => msg.headers?.get(name) || undefined };
}

/**
 * Follow `stream` (filtered) from `startSeq` with an ordered consumer: replay history, then keep
 * delivering new messages until {@link StreamFollower.stop}. Rejects if the stream does not exist.
 */
export async function followStream(opts: FollowStreamOptions): Promise<StreamFollower> {
  // The client starts at `opt_start_seq` (1 when absent) with deliver policy `by_start_sequence`;
  // do not pass `deliver_policy: all` with it, the server refuses that pair.
  const consumer = await opts.js.consumers.get(opts.stream, {
    filterSubjects: opts.filterSubject,
    ...(opts.startSeq !== undefined && opts.startSeq > 1 ? { opt_start_seq: opts.startSeq } : {}),
  });
  let lastSeq = 0;
  let caughtUp = false;
  let markCaughtUp: () => void = () => undefined;
  const caughtUpPromise = new Promise<void>((resolve) => {
    markCaughtUp = () => {
      if (caughtUp) return;
      caughtUp = true;
      resolve();
    };
  });

  const messages: ConsumerMessages = await consumer.consume({
    max_messages: opts.batch ?? 1000,
    // Short pulls mean idle heartbeats every 2.5 s: a consumer deleted or lost under the follower
    // is noticed in seconds (two missed heartbeats) and re-created by the client from the last
    // sequence seen, instead of after the 30 s default pull.
    expires: FOLLOW_PULL_EXPIRES_MS,
    callback: (msg: JsMsg) => {
      lastSeq = msg.seq;
      const message = wrap(msg);
      try {
        opts.onMessage(message);
      } catch (error) {
        opts.onError?.(error, message);
      }
      // `pending` counts the messages matching the filter still to come after this one.
      if (msg.info.pending === 0) markCaughtUp();
    },
  });
  // The consumer's state when it was created: nothing to replay means caught up already.
  const info = await consumer.info(true);
  if (info.num_pending === 0) markCaughtUp();

  let stopping: Promise<void> | null = null;
  return {
    caughtUp: caughtUpPromise,
    isCaughtUp: () => caughtUp,
    lastSeq: () => lastSeq,
    stop: () =>
      (stopping ??= (async () => {
        await messages.close().catch(() => undefined);
        await consumer.delete().catch(() => false);
      })()),
  };
}
