import {
  createInbox,
  DeliverPolicy,
  type ConsumerConfig,
  type ConsumerInfo,
  type Msg,
  type NatsConnection,
  type StreamConfig,
  type StreamInfo,
  type StreamState,
} from 'nats';
import type { NatsHandle } from './connection';

/*
 * JetStream's own stream snapshot and restore, as nats-server 2.9 serves them (nats.js has no API
 * for either). Written from the server's side of the protocol (server/jetstream_api.go,
 * jsStreamSnapshotRequest / streamSnapshot and jsStreamRestoreRequest / processStreamRestore):
 *
 * Snapshot: the client subscribes a deliver subject of its own, then asks
 * `$JS.API.STREAM.SNAPSHOT.<stream>` with `{ deliver_subject, no_consumers, chunk_size, jsck }`.
 * The server answers with the stream's config and the state the snapshot holds, then sends the
 * snapshot (an s2-compressed tar of the stream's files, its consumers' too unless `no_consumers`)
 * to the deliver subject in chunks, each but the last with a reply subject the client acknowledges
 * with an empty message (the server holds back past a window of unacknowledged bytes). A message
 * with an empty body ends it (a later server adds a status header saying EOF). The answer and the
 * chunks leave the server on two queues, so chunks may arrive before the answer: the subscription
 * is made first and keeps them in order.
 *
 * Restore: the client asks `$JS.API.STREAM.RESTORE.<stream>` with `{ config, state }`; the server
 * refuses a stream that exists (10130) and answers with a deliver subject. The client sends each
 * chunk there with a reply subject and waits for its empty acknowledgement (anything else is the
 * server's failure); an empty message ends it, and its reply is the stream's info (or the error).
 * The server gives up on a restore that sends nothing for 5 s.
 */

/** Why a snapshot or a restore failed (`code`), with JetStream's own error code when it answered one. */
export const StreamSnapshotErrorCode = {
  /** The server refused or broke off a snapshot (a memory stream: it has none; no such stream; a timeout). */
  snapshotFailed: 'snapshot_failed',
  /** The server refused or broke off a restore (the bytes are not a snapshot of this stream, no room, a timeout). */
  restoreFailed: 'restore_failed',
  /** The restore was refused because a stream of that name exists (JetStream 10130): nothing was changed. */
  streamExists: 'stream_exists',
} as const;
export type StreamSnapshotErrorCode = (typeof StreamSnapshotErrorCode)[keyof typeof StreamSnapshotErrorCode];

export class StreamSnapshotError extends Error {
  constructor(
    readonly code: StreamSnapshotErrorCode,
    readonly stream: string,
    message: string,
    /** JetStream's `err_code` when the server answered an API error. */
    readonly jsErrCode: number | null = null,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StreamSnapshotError';
  }
}

/** JetStream's error code for "stream name already in use, cannot restore". */
const JS_STREAM_NAME_EXIST_RESTORE_FAILED = 10130;

/** What the server said a snapshot holds: the stream's config and state at the snapshot. */
export interface StreamSnapshotInfo {
  config: StreamConfig;
  state: StreamState;
  /** Bytes received (what `onChunk` was given in all). */
  bytes: number;
  chunks: number;
}

export interface SnapshotStreamOptions {
  /** Called with each chunk, in order; the next is not given before the promise settles. */
  onChunk: (chunk: Uint8Array) => void | Promise<void>;
  /** Leave the consumers out (default: in, so that durable consumers' positions survive a restore). */
  noConsumers?: boolean;
  /** The server's chunk size (default: the server's, 128 KiB). */
  chunkSize?: number;
  /** Have the server check every message's checksum before the snapshot (`jsck`). */
  checkMessages?: boolean;
  /** How long to wait for the API's answer, and for each next chunk (default 30 s). */
  timeoutMs?: number;
}

interface ApiError {
  code?: number;
  err_code?: number;
  description?: string;
}

function apiErrorOf(data: Uint8Array): ApiError | null {
  if (data.length === 0) return null;
  try {
    const parsed = JSON.parse(new TextDecoder().decode(data)) as { error?: ApiError };
    return parsed.error ?? null;
  } catch {
    return { description: new TextDecoder().decode(data).slice(0, 200) };
  }
}

function inboxOf(nc: NatsConnection): string {
  const prefix = (nc as unknown as { options?: { inboxPrefix?: string } }).options?.inboxPrefix;
  return createInbox(prefix);
}

/** The status a message's headers carry (`NATS/1.0 <code> <description>`), or null. */
function statusOf(msg: Msg): { code: number; description: string } | null {
  const headers = msg.headers;
  if (headers === undefined) return null;
  return { code: headers.code, description: headers.description };
}

/**
 * Snapshot `stream` with JetStream's own API and hand its bytes, as the server sends them, to
 * `options.onChunk`. Resolves with the config and state the snapshot holds once the server has
 * sent the end; rejects with a {@link StreamSnapshotError} (`snapshot_failed`) when the server
 * refuses (`jsErrCode`), or sends nothing for `timeoutMs`.
 */
export async function snapshotStream(handle: Pick<NatsHandle, 'connection'>, stream: string, options: SnapshotStreamOptions): Promise<StreamSnapshotInfo> {
  const nc = handle.connection;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const deliver = inboxOf(nc);
  const queue: Msg[] = [];
  let wake: (() => void) | null = null;
  let failed: Error | null = null;
  const sub = nc.subscribe(deliver, {
    callback: (err, msg) => {
      if (err) failed = err;
      else queue.push(msg);
      wake?.();
    },
  });
  const next = async (): Promise<Msg> => {
    for (;;) {
      if (failed !== null) throw failed;
      const msg = queue.shift();
      if (msg !== undefined) return msg;
      let timer: NodeJS.Timeout | undefined;
      const arrived = await new Promise<boolean>((resolve) => {
        wake = () => resolve(true);
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
      clearTimeout(timer);
      wake = null;
      if (!arrived && queue.length === 0 && failed === null)
        throw new StreamSnapshotError(StreamSnapshotErrorCode.snapshotFailed, stream, `snapshot of ${stream}: the server sent nothing for ${timeoutMs} ms`);
    }
  };
  try {
    const request = {
      deliver_subject: deliver,
      ...(options.noConsumers ? { no_consumers: true } : {}),
      ...(options.chunkSize !== undefined ? { chunk_size: options.chunkSize } : {}),
      ...(options.checkMessages ? { jsck: true } : {}),
    };
    let answer: Msg;
    try {
      answer = await nc.request(`$JS.API.STREAM.SNAPSHOT.${stream}`, new TextEncoder().encode(JSON.stringify(request)), { timeout: timeoutMs });
    } catch (error) {
      throw new StreamSnapshotError(StreamSnapshotErrorCode.snapshotFailed, stream, `snapshot of ${stream}: ${(error as Error).message}`, null, {
        cause: error,
      });
    }
    const reply = JSON.parse(new TextDecoder().decode(answer.data)) as { error?: ApiError; config?: StreamConfig; state?: StreamState };
    if (reply.error !== undefined || reply.config === undefined || reply.state === undefined) {
      const e = reply.error ?? {};
      throw new StreamSnapshotError(
        StreamSnapshotErrorCode.snapshotFailed,
        stream,
        `snapshot of ${stream} refused: ${e.description ?? 'no config or state in the answer'}`,
        e.err_code ?? null,
      );
    }
    let bytes = 0;
    let chunks = 0;
    for (;;) {
      const msg = await next();
      const status = statusOf(msg);
      if (msg.data.length === 0) {
        // The end: an empty body (2.9), with a status header saying EOF on later servers. Any other status is a failure.
        if (status !== null && status.code >= 400 && !/eof/i.test(status.description))
          throw new StreamSnapshotError(
            StreamSnapshotErrorCode.snapshotFailed,
            stream,
            `snapshot of ${stream} broke off: ${status.code} ${status.description}`,
          );
        break;
      }
      await options.onChunk(msg.data);
      bytes += msg.data.length;
      chunks++;
      if (msg.reply) nc.publish(msg.reply);
    }
    return { config: reply.config, state: reply.state, bytes, chunks };
  } finally {
    sub.unsubscribe();
  }
}

export interface RestoreStreamOptions {
  /** How long to wait for the API's answer and for each chunk's acknowledgement (default 30 s). */
  timeoutMs?: number;
  /** How long to wait for the server to load the restored stream once every chunk was sent (default 5 min). */
  finishTimeoutMs?: number;
  /** The largest message sent (default 128 KiB; chunks given larger are cut). */
  maxChunkBytes?: number;
  /** Called after each chunk is acknowledged, with the bytes sent so far. */
  onProgress?: (bytesSent: number) => void;
}

/**
 * Restore `stream` from a snapshot's bytes (`chunks`, in order) with JetStream's own API; `config`
 * (the snapshot's) names the stream. Resolves with the restored stream's info. Rejects with a
 * {@link StreamSnapshotError}: `stream_exists` when a stream of that name exists (nothing changed),
 * `restore_failed` when the server refused or broke off the restore (it then holds no such stream).
 */
export async function restoreStream(
  handle: Pick<NatsHandle, 'connection'>,
  stream: string,
  snapshot: { config: StreamConfig; state: StreamState },
  chunks: AsyncIterable<Uint8Array>,
  options: RestoreStreamOptions = {},
): Promise<StreamInfo> {
  const nc = handle.connection;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const max = options.maxChunkBytes ?? 128 * 1024;
  const fail = (message: string, jsErrCode: number | null = null, cause?: unknown) =>
    new StreamSnapshotError(
      jsErrCode === JS_STREAM_NAME_EXIST_RESTORE_FAILED ? StreamSnapshotErrorCode.streamExists : StreamSnapshotErrorCode.restoreFailed,
      stream,
      `restore of ${stream}: ${message}`,
      jsErrCode,
      cause !== undefined ? { cause } : undefined,
    );
  const ask = async (subject: string, data: Uint8Array, timeout: number): Promise<Msg> => {
    try {
      return await nc.request(subject, data, { timeout });
    } catch (error) {
      throw fail((error as Error).message, null, error);
    }
  };
  const answer = await ask(
    `$JS.API.STREAM.RESTORE.${stream}`,
    new TextEncoder().encode(JSON.stringify({ config: snapshot.config, state: snapshot.state })),
    timeoutMs,
  );
  const reply = JSON.parse(new TextDecoder().decode(answer.data)) as { error?: ApiError; deliver_subject?: string };
  if (reply.error !== undefined || !reply.deliver_subject) {
    throw fail(`refused: ${reply.error?.description ?? 'no deliver subject in the answer'}`, reply.error?.err_code ?? null);
  }
  const deliver = reply.deliver_subject;
  let sent = 0;
  for await (const chunk of chunks) {
    for (let at = 0; at < chunk.length; at += max) {
      const part = chunk.subarray(at, Math.min(at + max, chunk.length));
      if (part.length === 0) continue;
      const ack = await ask(deliver, part, timeoutMs);
      // An empty message acknowledges the chunk; anything else is the server's failure (its final answer, or `-ERR …`).
      const error = apiErrorOf(ack.data);
      if (error !== null) throw fail(`broken off: ${error.description ?? 'the server refused a chunk'}`, error.err_code ?? null);
      sent += part.length;
      options.onProgress?.(sent);
    }
  }
  const done = await ask(deliver, new Uint8Array(0), options.finishTimeoutMs ?? 300_000);
  const final = JSON.parse(new TextDecoder().decode(done.data)) as { error?: ApiError } & Partial<StreamInfo>;
  if (final.error !== undefined) throw fail(final.error.description ?? 'the server refused the snapshot', final.error.err_code ?? null);
  if (final.config === undefined || final.state === undefined) throw fail('the server answered no stream info');
  return final as StreamInfo;
}

/** A restored durable that was ahead of its restored stream, and where it starts now. */
export interface RealignedConsumer {
  consumer: string;
  /** The stream sequence the restored consumer said it had delivered. */
  delivered: number;
  /** The stream sequence it said every message up to was acknowledged. */
  ack_floor: number;
  /** The restored stream's last sequence. */
  stream_last_seq: number;
  /** The first sequence the consumer, made again, delivers. */
  start_seq: number;
  /**
   * Why it was made again: `ahead` (it had delivered past the restored stream's end), `rewound` (it
   * had acknowledged past what it had acknowledged when the backup began, so what it derived from
   * those messages into streams taken before this one may be missing from the backup).
   */
  reason: 'ahead' | 'rewound';
}

/**
 * Where a durable stands, as a stream sequence every message up to which it has acknowledged: its
 * ack floor, or what it delivered when nothing is awaiting an acknowledgement (nats-server 2.9 leaves
 * a filtered consumer's ack floor behind, at 0 when it never acknowledged anything, while it moves
 * its delivered sequence past every message it skips).
 */
export function acknowledgedThrough(info: {
  delivered: { stream_seq: number };
  ack_floor: { stream_seq: number };
  num_ack_pending: number;
  config?: { deliver_policy?: string; opt_start_seq?: number };
}): number {
  // A durable made from a start sequence (one realigned by a restore) reports an ack floor of 0 until its first acknowledgement.
  const floor = Math.max(
    info.ack_floor.stream_seq,
    info.config?.deliver_policy === DeliverPolicy.StartSequence ? Math.max((info.config.opt_start_seq ?? 1) - 1, 0) : 0,
  );
  return info.num_ack_pending === 0 ? Math.max(info.delivered.stream_seq, floor) : floor;
}

/**
 * Make again, from the first sequence it may not have, each durable of a freshly restored `stream`
 * that is ahead of it. A snapshot's consumers are taken after its messages, while the stream goes on
 * being written and read (nats-server 2.9: nothing is deleted during a snapshot, but appends and
 * acknowledgements go on), so a consumer in it may have delivered past the stream's last restored
 * message. Left so, it would skip the messages the restored stream is given next — they get the
 * sequences it believes delivered — and lose them. Made again (same config; `by_start_sequence`
 * from its ack floor + 1, or the stream's last + 1 when the floor is past it), it delivers each of
 * them; what it had acknowledged past its floor and before the stream's end comes again (readers are
 * idempotent). Given where each durable stood when the backup began (`acknowledgedAtStart`), each
 * that acknowledged more since is made again from there too (`rewound`). Run before anything reads
 * the stream (a restore precedes the services' start).
 */
export async function realignRestoredConsumers(
  handle: Pick<NatsHandle, 'jsm'>,
  stream: string,
  /**
   * Per durable, the sequence it had acknowledged through when the backup began (before the streams
   * taken ahead of this one): what it acknowledged past that while the backup ran may have had its
   * effects (an offer, a command published into the inbox) after those streams were taken, so it is
   * made again from there and reads those messages again. Absent: only the consumers ahead are.
   */
  acknowledgedAtStart?: ReadonlyMap<string, number>,
): Promise<RealignedConsumer[]> {
  const jsm = handle.jsm;
  const last = (await jsm.streams.info(stream)).state.last_seq;
  const realigned: RealignedConsumer[] = [];
  const remake: Array<{ info: ConsumerInfo; start: number; reason: RealignedConsumer['reason'] }> = [];
  for await (const info of jsm.consumers.list(stream)) {
    const through = Math.min(acknowledgedThrough(info), last);
    const ahead = info.delivered.stream_seq > last;
    const atStart = acknowledgedAtStart?.get(info.name);
    const rewind = atStart !== undefined && atStart < through;
    if (!ahead && !rewind) continue;
    // Rewound: from where it stood (below what it has acknowledged since); ahead: from what it has acknowledged.
    const start = (rewind ? atStart : through) + 1;
    remake.push({ info, start, reason: rewind ? 'rewound' : 'ahead' });
  }
  for (const { info, start, reason } of remake) {
    const { deliver_policy: _policy, opt_start_seq: _seq, opt_start_time: _time, ...kept } = info.config;
    const config: Partial<ConsumerConfig> = { ...kept, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: start };
    await jsm.consumers.delete(stream, info.name);
    await jsm.consumers.add(stream, config);
    realigned.push({
      consumer: info.name,
      delivered: info.delivered.stream_seq,
      ack_floor: info.ack_floor.stream_seq,
      stream_last_seq: last,
      start_seq: start,
      reason,
    });
  }
  return realigned;
}
