import { AckPolicy, DeliverPolicy, nanos, nuid, type JetStreamClient, type JetStreamManager, type MsgHdrs } from 'nats';
import { EventStoreError } from './errors';

/** A stored message as a range reader yields it. */
export interface StoredMessage {
  subject: string;
  seq: number;
  data: Uint8Array;
  headers: MsgHdrs | undefined;
}

export interface ReadRangeOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  /** First stream sequence to read (inclusive). */
  fromSeq: number;
  /** Last stream sequence to read (inclusive); default: the stream's last sequence when the read starts. */
  toSeq?: number;
  filterSubject?: string;
  /** Messages per pull (default 500). */
  batch?: number;
}

/**
 * Read a stream from `fromSeq` to `toSeq` in order, through one ephemeral pull consumer that
 * acknowledges nothing and is deleted afterwards (it also expires on its own after 30 s idle).
 * The consumer reports how many messages are pending, so the read ends exactly when they are
 * delivered; a pull that brings nothing is retried, and a read that keeps stalling fails loudly
 * instead of returning a truncated history.
 */
export async function* readStreamRange(options: ReadRangeOptions): AsyncGenerator<StoredMessage> {
  const { js, jsm, stream } = options;
  const toSeq = options.toSeq ?? (await jsm.streams.info(stream)).state.last_seq;
  if (toSeq < options.fromSeq) return;
  const name = `rr_${nuid.next()}`;
  const info = await jsm.consumers.add(stream, {
    name,
    ...(options.filterSubject ? { filter_subject: options.filterSubject } : {}),
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: Math.max(1, options.fromSeq),
    ack_policy: AckPolicy.None,
    max_deliver: 1,
    mem_storage: true,
    num_replicas: 1,
    inactive_threshold: nanos(30_000),
  });
  try {
    const consumer = await js.consumers.get(stream, name);
    let remaining = info.num_pending;
    let last = options.fromSeq - 1;
    let stalls = 0;
    while (remaining > 0 && last < toSeq) {
      const batch = await consumer.fetch({ max_messages: Math.min(remaining, options.batch ?? 500), expires: 5000 });
      let got = 0;
      for await (const msg of batch) {
        got++;
        remaining--;
        if (msg.seq > toSeq) {
          remaining = 0;
          continue;
        }
        last = msg.seq;
        yield { subject: msg.subject, seq: msg.seq, data: msg.data, headers: msg.headers };
      }
      if (got > 0) stalls = 0;
      else if (++stalls >= 6) throw new EventStoreError(`reading ${stream} stalled at seq ${last} with ${remaining} messages pending`);
    }
  } finally {
    await jsm.consumers.delete(stream, name).catch(() => undefined);
  }
}
