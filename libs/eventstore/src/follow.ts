import { AckPolicy, createInbox, DeliverPolicy, nanos, nuid, type JetStreamClient, type Msg, type Subscription } from 'nats';
import { ackInfo, consumerGone, headerReader, PULL_EXPIRY_GRACE_MS, pullStatus, pullTarget, sendPull } from './pull';
import { onConnectionEvent } from './connection-events';
import { maxPayloadOf } from './pull-size';
import type { FollowedMessage, FollowOptions, StreamFollower } from './stream-reader';

/*
 * A follow of a stream: replay from a sequence, then keep delivering, every message once and in
 * order, within a bound on the bytes in flight.
 *
 * The client library's ordered consumer asks for a count of messages per pull. A count bounds
 * nothing when messages are large: a thousand-message pull over events near the request cap is
 * 240 MB the server queues for one connection, and past its per-connection limit (64 MiB by
 * default) the server drops the whole connection as a slow consumer; the ordered consumer then
 * starts the same pull again. (A watchdog started beside 300 handoffs of 240 KB never caught up,
 * measured.) The library takes a pull's count or its bytes, never both, and its byte-bounded pulls
 * wait out their expiry or stop refilling (both measured on nats-server 2.9.10). So a follower
 * sends its own pull requests, each with a count AND a byte bound (`batch`, `max_bytes`: the
 * server ends the pull before the message that would not fit), one at a time, on an ack-less,
 * in-memory consumer of its own, and does what the ordered consumer did:
 *
 * - a delivery sequence that skips (a message lost), missing heartbeats (a consumer deleted or
 *   lost, a pull dropped) or a reconnection re-creates the consumer from the last stream sequence
 *   handed over: nothing missed, nothing repeated;
 * - messages of an earlier consumer are told apart by the consumer named in their reply subject,
 *   statuses of an earlier pull by the serial in the subject the pull asked replies on, and ignored;
 * - a pull neither filled nor ended by a status {@link PULL_EXPIRY_GRACE_MS} after its expiry is
 *   followed by the next one (nats-server 2.9 may expire a pull without a word: pull.ts); the
 *   consumer is re-created only when nothing at all, not even a heartbeat, has come for a while.
 */

/** How long each pull of a follower waits; idle heartbeats come every half of it. */
export const FOLLOW_PULL_EXPIRES_MS = 5000;

/** Bytes of messages one pull of a follower may bring unless told otherwise (never less than two of the largest message the server takes). */
export const FOLLOW_PULL_BYTES = 8 * 1024 * 1024;

/** After a failed consumer creation, wait this long before the next try (the stream may be gone for a moment). */
const RETRY_MS = 1000;

export async function followStream(opts: FollowOptions & { js: JetStreamClient; stream: string }): Promise<StreamFollower> {
  const { js, stream } = opts;
  // Without the account check (a request a client with narrow permissions may not make).
  const jsm = await js.jetstreamManager(false);
  const target = pullTarget(js);
  const { nc } = target;
  const batch = Math.max(1, opts.batch ?? 1000);
  const expiresMs = Math.max(500, opts.pullExpiresMs ?? FOLLOW_PULL_EXPIRES_MS);
  // A follower whose consumer has been silent this long while pulls are open re-creates it.
  const silenceMs = expiresMs + 1000;
  const maxBytes = Math.max(opts.pullBytes ?? FOLLOW_PULL_BYTES, 2 * maxPayloadOf(js));
  const namePrefix = `follow_${nuid.next()}`;
  const inbox = createInbox(target.inboxPrefix);

  let serial = 0;
  /** Pulls asked so far: each replies on `<inbox>.<n>`, and only the last one's statuses count. */
  let pulls = 0;
  let pullReply = '';
  let pullTimer: NodeJS.Timeout | null = null;
  let consumer: string | null = null;
  /** Stream sequence a re-created consumer starts at. */
  let resumeAt = opts.startSeq !== undefined && opts.startSeq > 1 ? opts.startSeq : 1;
  // Before the first message: the one before where it starts (the folds of a caller starting
  // after a snapshot hold everything through it already).
  let lastSeq = resumeAt - 1;
  let expectedDelivery = 1;
  /** Messages the open pull may still bring; 0 when no pull is open. */
  let open = 0;
  let lastHeard = Date.now();
  let stopped = false;
  let resetting: Promise<void> | null = null;

  let caughtUp = false;
  let markCaughtUp: () => void = () => undefined;
  const caughtUpPromise = new Promise<void>((resolve) => {
    markCaughtUp = () => {
      if (caughtUp) return;
      caughtUp = true;
      resolve();
    };
  });

  const clearPullTimer = () => {
    if (pullTimer !== null) clearTimeout(pullTimer);
    pullTimer = null;
  };
  const pull = () => {
    clearPullTimer();
    if (stopped || consumer === null) return;
    open = batch;
    const reply = `${inbox}.${++pulls}`;
    pullReply = reply;
    // Neither filled nor ended by a status past its expiry: the next pull (see the header).
    pullTimer = setTimeout(() => {
      pullTimer = null;
      if (!stopped && resetting === null && pullReply === reply) pull();
    }, expiresMs + PULL_EXPIRY_GRACE_MS);
    pullTimer.unref?.();
    sendPull(target, stream, consumer, { batch, maxBytes, expiresMs, heartbeatMs: expiresMs / 2 }, reply);
  };

  /**
   * The filter the follower's consumers are made with: none when `opts.filterSubject` is the
   * stream's only subject (the watchdog's `<prefix>.ev.>` on the events stream). The same messages
   * either way, but nats-server 2.9 makes a filtered consumer by matching the filter against every
   * subject of every block of the stream (`FilteredState`: 150–540 ms of its CPU on a stream of a
   * million events over a hundred thousand subjects), and a follower re-creates its consumer after
   * every stall; an unfiltered one costs nothing of the kind.
   */
  let filter: Promise<string | undefined> | null = null;
  const consumerFilter = (): Promise<string | undefined> =>
    (filter ??= (async () => {
      if (opts.filterSubject === undefined) return undefined;
      const subjects = await jsm.streams
        .info(stream)
        .then((info) => info.config.subjects ?? [])
        .catch(() => [] as string[]);
      return subjects.length === 1 && subjects[0] === opts.filterSubject ? undefined : opts.filterSubject;
    })());

  /** A consumer of our own from `resumeAt`, replacing the one before (whose replies are then ignored). */
  const recreate = (): Promise<void> =>
    (resetting ??= (async () => {
      const previous = consumer;
      consumer = null;
      open = 0;
      clearPullTimer();
      if (previous !== null) void jsm.consumers.delete(stream, previous).catch(() => false);
      const filterSubject = await consumerFilter();
      while (!stopped) {
        serial++;
        const name = `${namePrefix}_${serial}`;
        try {
          const info = await jsm.consumers.add(stream, {
            name,
            ack_policy: AckPolicy.None,
            deliver_policy: DeliverPolicy.StartSequence,
            opt_start_seq: resumeAt,
            ...(filterSubject !== undefined ? { filter_subject: filterSubject } : {}),
            mem_storage: true,
            num_replicas: 1,
            inactive_threshold: nanos(5 * 60 * 1000),
          });
          if (stopped) {
            await jsm.consumers.delete(stream, name).catch(() => false);
            return;
          }
          consumer = name;
          expectedDelivery = 1;
          lastHeard = Date.now();
          if (info.num_pending === 0) markCaughtUp();
          pull();
          return;
        } catch (error) {
          if (serial === 1) throw error;
          await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
        }
      }
    })().finally(() => (resetting = null)));

  const reset = () => void recreate().catch(() => undefined);

  const onReply = (msg: Msg) => {
    if (stopped || resetting !== null || consumer === null) return;
    const code = pullStatus(msg);
    if (code !== null) {
      // A status, sent to the pull's own reply subject: 100 a heartbeat, 408 the pull expired, 409
      // it ended (its bytes reached; or the consumer deleted, or at its limit of waiting pulls),
      // 404 nothing to deliver. One of an earlier pull's is ignored.
      if (msg.subject !== pullReply) return;
      lastHeard = Date.now();
      if (code === 100) return;
      if (consumerGone({ code, description: msg.headers?.description ?? '' })) return reset();
      if (code === 408 || code === 409 || code === 404) return pull();
      return reset();
    }
    // A message, under its own subject: its reply subject names the consumer and the sequences.
    const info = ackInfo(msg.reply as string);
    if (info === null || info.consumer !== consumer) return;
    lastHeard = Date.now();
    if (info.delivery !== expectedDelivery) return reset();
    expectedDelivery++;
    lastSeq = info.streamSeq;
    resumeAt = info.streamSeq + 1;
    const message: FollowedMessage = { subject: msg.subject, seq: info.streamSeq, data: msg.data, header: headerReader(msg) };
    try {
      opts.onMessage(message);
    } catch (error) {
      opts.onError?.(error, message);
    }
    if (info.pending === 0) markCaughtUp();
    if (--open === 0) pull();
  };

  const sub: Subscription = nc.subscribe(`${inbox}.*`, { callback: (error, msg) => (error ? undefined : onReply(msg)) });
  const quiet = setInterval(() => {
    if (!stopped && resetting === null && consumer !== null && Date.now() - lastHeard > silenceMs) reset();
  }, expiresMs / 2);
  quiet.unref?.();
  // A reconnection loses the open pull (and a server restart an in-memory consumer): start again.
  // Told by the connection's one event hub, which stops telling once the connection is closed
  // (a loop over a `status()` iterator of its own would never end: nats.js 2.x leaves them open).
  // (A connection of `connectNats` has its hub already; another's close is only a close here.)
  const stopEvents = onConnectionEvent({ connection: nc, closed: nc.closed().then(() => undefined) }, (event) => {
    if (!stopped && event.kind === 'reconnected') reset();
  });
  const stopListening = () => {
    stopped = true;
    clearInterval(quiet);
    clearPullTimer();
    sub.unsubscribe();
    stopEvents();
  };

  try {
    await recreate();
  } catch (error) {
    stopListening();
    throw error;
  }

  let stopping: Promise<void> | null = null;
  return {
    caughtUp: caughtUpPromise,
    isCaughtUp: () => caughtUp,
    lastSeq: () => lastSeq,
    async behind() {
      const name = consumer;
      if (stopped || resetting !== null || name === null) return null;
      try {
        const info = await jsm.consumers.info(stream, name);
        // The consumer moved on meanwhile: its counts are not this follower's.
        if (consumer !== name) return null;
        // Deliveries sent and not handed over yet (in the socket, or parsed behind this call).
        const inTransit = Math.max(0, info.delivered.consumer_seq - (expectedDelivery - 1));
        return info.num_pending + inTransit;
      } catch {
        return null;
      }
    },
    stop: () =>
      (stopping ??= (async () => {
        stopListening();
        await resetting?.catch(() => undefined);
        if (consumer !== null) await jsm.consumers.delete(stream, consumer).catch(() => false);
        consumer = null;
      })()),
  };
}
