import { headers as natsHeaders, type MsgHdrs } from 'nats';
import { connectNats, mapPublishError, publishUnderOwnId, type NatsConnectOptions, type NatsHandle, type OwnIdAck } from '@baton/eventstore';

export interface PublishOptions {
  /** `Nats-Msg-Id`: a retry with the same id within the stream's duplicate window is stored once. */
  msgId?: string;
  headers?: Record<string, string | string[]>;
  /** Refuse the publish unless the subject's last stored sequence is this (0 = no message yet). */
  expectLastSubjectSequence?: number;
  /** Ack timeout, ms (default the connection's, 5000). */
  timeoutMs?: number;
}

export interface PublishAck {
  stream: string;
  seq: number;
  /** True when the server already held a message with this `msgId`. */
  duplicate: boolean;
}

/** A `@MessagePattern` handler answered with an error (`Baton-Status: error`). */
export class RequestError extends Error {
  constructor(
    readonly subject: string,
    readonly reply: unknown,
  ) {
    super(`request to ${subject} failed: ${JSON.stringify(reply)}`);
    this.name = 'RequestError';
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function encode(data: unknown): Uint8Array {
  return data instanceof Uint8Array ? data : encoder.encode(JSON.stringify(data ?? null));
}

function toHeaders(record: Record<string, string | string[]> | undefined): MsgHdrs | undefined {
  if (!record) return undefined;
  const hdrs = natsHeaders();
  for (const [key, value] of Object.entries(record)) {
    for (const v of Array.isArray(value) ? value : [value]) hdrs.append(key, v);
  }
  return hdrs;
}

/**
 * Publishes to JetStream and waits for the stream's acknowledgement, and sends core NATS
 * requests to `@MessagePattern` handlers. Use it from Nest providers (register it with
 * `{ provide: JetStreamClient, useFactory: () => JetStreamClient.connect(...) }` or
 * `new JetStreamClient(handle)` over a shared connection).
 */
export class JetStreamClient {
  constructor(
    private readonly handle: NatsHandle,
    private readonly ownsConnection = false,
  ) {}

  /** Open a connection of its own (drained by `close`). */
  static async connect(opts: NatsConnectOptions = {}): Promise<JetStreamClient> {
    return new JetStreamClient(await connectNats(opts), true);
  }

  /**
   * Publish `data` (bytes as-is, anything else as JSON) and resolve with the PubAck once the
   * stream stored it. Idempotent with `msgId`. Throws `ConcurrencyConflict` (expectation
   * failed), `StreamNotFound` (no stream holds the subject), `PublishTimeout` (unknown outcome:
   * retry with the same `msgId`).
   */
  async publish(subject: string, data: unknown, opts: PublishOptions = {}): Promise<PublishAck> {
    try {
      const ack = await this.handle.js.publish(subject, encode(data), {
        msgID: opts.msgId,
        headers: toHeaders(opts.headers),
        timeout: opts.timeoutMs,
        expect: opts.expectLastSubjectSequence === undefined ? undefined : { lastSubjectSequence: opts.expectLastSubjectSequence },
      });
      return { stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate };
    } catch (err) {
      throw mapPublishError(err, subject, opts.expectLastSubjectSequence);
    }
  }

  /**
   * Publish a service's message under `msgId` (bytes as-is, anything else as JSON), making sure a
   * "duplicate" answer means the stream holds this publisher's message: an id another publisher
   * took on another subject is not allowed to drop it (`publishUnderOwnId` in @baton/eventstore).
   */
  async publishOwned(subject: string, data: unknown, msgId: string, opts: { headers?: Record<string, string | string[]> } = {}): Promise<OwnIdAck> {
    const headers = toHeaders(opts.headers);
    return publishUnderOwnId(this.handle, subject, encode(data), msgId, headers ? { headers } : {});
  }

  /**
   * Send a JSON request over core NATS and resolve with the parsed JSON reply. Throws
   * {@link RequestError} when the handler answered with an error, and the client's timeout /
   * no-responders error when nobody answered.
   */
  async request<T = unknown>(subject: string, data: unknown, opts: { timeoutMs?: number; headers?: Record<string, string | string[]> } = {}): Promise<T> {
    const msg = await this.handle.connection.request(subject, encode(data), {
      timeout: opts.timeoutMs ?? 5000,
      headers: toHeaders(opts.headers),
    });
    const body: unknown = msg.data.length === 0 ? null : JSON.parse(decoder.decode(msg.data));
    if (msg.headers?.get('Baton-Status') === 'error') throw new RequestError(subject, body);
    return body as T;
  }

  /** The underlying connection handle. */
  unwrap(): NatsHandle {
    return this.handle;
  }

  /** Flush and close the connection if this client opened it. */
  async close(): Promise<void> {
    if (this.ownsConnection) await this.handle.drain();
  }
}
