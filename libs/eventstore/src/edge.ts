import {
  headers as natsHeaders,
  DeliverPolicy,
  nuid,
  type ConsumerInfo,
  type JetStreamClient,
  type JetStreamManager,
  type KV,
  type KvOptions,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type OrderedConsumerOptions,
} from 'nats';
import { SubjectTable, type AggregateKind } from '@baton/contracts';
import type { NatsHandle } from './connection';
import { headerRecord } from './pull';

/*
 * The small typed helpers the services, the CLI, the SDK and the tests use instead of the `nats`
 * client: names for the client's types, unique ids, core NATS subscriptions, a definition-event
 * watcher, JetStream KV buckets with compare-and-set, and ordered-consumer start options. ESLint
 * refuses `nats` (and `@nats-io/*`) everywhere but this library and the Nest transport
 * (libs/platform/src/transport), so replacing the client touches those two only.
 */

/** The JetStream client of a {@link NatsHandle}: publish, pull consumers, ordered consumers, KV views. */
export type NatsJetStream = JetStreamClient;
/** The JetStream manager of a {@link NatsHandle}: streams and consumers. */
export type NatsJetStreamManager = JetStreamManager;
/** Message headers as the client holds them (build them with `headersFrom`, read them with `headersToRecord`). */
export type NatsHeaders = MsgHdrs;

/** A unique, URL-safe id (the client's NUID: 22 characters, no coordination needed). */
export function newUniqueId(): string {
  return nuid.next();
}

/**
 * The consumers of `stream`, each with its state. The list the client yields can hold a null
 * entry, whatever its types say: the bench's `waitQuiet` failed on one (`info.config` of null)
 * while range readers were being created and deleted under load — most likely a consumer gone
 * between the server listing it and reading its state. Null entries are left out instead of
 * failing whoever walks the list.
 */
export async function* consumerInfos(jsm: Pick<JetStreamManager, 'consumers'>, stream: string): AsyncGenerator<ConsumerInfo> {
  for await (const info of jsm.consumers.list(stream)) {
    if ((info as ConsumerInfo | null) !== null) yield info;
  }
}

// ---------------------------------------------------------------------------------------------
// Core NATS subscriptions
// ---------------------------------------------------------------------------------------------

/** A message received on a core NATS subscription. */
export interface CoreMessage {
  readonly subject: string;
  readonly data: Uint8Array;
  /** The reply subject of a request; undefined for a plain publish. */
  readonly reply: string | undefined;
  /** Its headers as a record (names as sent, every value), read on first use. */
  readonly headers: Record<string, string[]>;
  /** Answer a request (publish to its reply subject). False when it was no request. */
  respond(data: Uint8Array): boolean;
  /**
   * Answer on `subject` (the caller checked it is one the sender may be answered on) with `data`,
   * `headers` and, when `status` is given, a status line (`NATS/1.0 <code> <description>`: how
   * JetStream says a pull or an acknowledgement was not served).
   */
  answerOn(subject: string, data: Uint8Array, options?: { status?: { code: number; description: string }; headers?: Record<string, string> }): void;
  /**
   * Publish this message again on `subject`, its bytes and headers as received (less those
   * `dropHeader` names), with `reply` as its reply subject (none when undefined): whoever answers
   * it answers `reply` directly.
   */
  relay(subject: string, reply: string | undefined, dropHeader?: (name: string) => boolean): void;
}

/** A running core NATS subscription. */
export interface CoreSubscription {
  readonly subject: string;
  /** Stop receiving after the messages already received are handed over; resolves when done. */
  drain(): Promise<void>;
  /** Stop receiving at once. */
  unsubscribe(): void;
  isClosed(): boolean;
}

export interface CoreSubscribeOptions {
  /** A queue group: each message goes to one subscriber of the group. */
  queue?: string;
  /** Called when the subscription fails (a permissions violation, the connection closing). */
  onError?: (error: Error) => void;
}

function coreMessage(nc: NatsConnection, msg: Msg): CoreMessage {
  let headers: Record<string, string[]> | undefined;
  return {
    subject: msg.subject,
    data: msg.data,
    reply: msg.reply || undefined,
    get headers() {
      headers ??= headerRecord(msg);
      return headers;
    },
    respond: (data) => msg.respond(data),
    answerOn: (subject, data, options = {}) => {
      const { status, headers: values } = options;
      let kept: MsgHdrs | undefined;
      if (status !== undefined || (values !== undefined && Object.keys(values).length > 0)) {
        kept = status !== undefined ? natsHeaders(status.code, status.description) : natsHeaders();
        for (const [name, value] of Object.entries(values ?? {})) kept.set(name, value);
      }
      nc.publish(subject, data, kept ? { headers: kept } : {});
    },
    relay: (subject, reply, dropHeader) => {
      // Rebuilt from the raw header block, never through the client's own decoding: it throws on a
      // header key it finds invalid (a space, a colon), which a publisher may send.
      const record = headerRecord(msg);
      let kept: MsgHdrs | undefined;
      try {
        for (const [name, values] of Object.entries(record)) {
          if (dropHeader?.(name) === true) continue;
          kept ??= natsHeaders();
          for (const value of values) kept.append(name, value);
        }
      } catch (error) {
        throw new UnreadableHeadersError(error instanceof Error ? error.message : String(error));
      }
      nc.publish(subject, msg.data, { ...(reply !== undefined ? { reply } : {}), ...(kept ? { headers: kept } : {}) });
    },
  };
}

/** A message whose headers NATS cannot carry on (a key with a space or a colon): {@link CoreMessage.relay} refuses it. */
export class UnreadableHeadersError extends Error {
  override name = 'UnreadableHeadersError';
}

/**
 * Subscribe to `subject` (a pattern may hold wildcards) with core NATS and call `onMessage` for
 * every message, synchronously in the order received. A handler that publishes on the message's
 * behalf carries its trace on explicitly (`hopTrace(message.headers)`); on an instrumented handle
 * with an ambient context manager (`installTracing({ ambientContext: true })`) each call also runs
 * in the message's trace context.
 */
export function subscribeCore(
  handle: Pick<NatsHandle, 'connection'>,
  subject: string,
  onMessage: (message: CoreMessage) => void,
  options: CoreSubscribeOptions = {},
): CoreSubscription {
  const subscription = handle.connection.subscribe(subject, {
    ...(options.queue !== undefined ? { queue: options.queue } : {}),
    callback: (err, msg) => {
      if (err) {
        options.onError?.(err);
        return;
      }
      // Nothing a handler throws may reach the client's read loop: it stops reading the socket
      // (every subscription of the connection goes quiet) until the connection is found stale.
      try {
        onMessage(coreMessage(handle.connection, msg));
      } catch (error) {
        options.onError?.(error instanceof Error ? error : new Error(String(error)));
      }
    },
  });
  return {
    subject,
    drain: () => subscription.drain(),
    unsubscribe: () => subscription.unsubscribe(),
    isClosed: () => subscription.isClosed(),
  };
}

/** One event seen by {@link watchEvents}: the aggregate whose subject it was published on. */
export interface WatchedEvent {
  project: string;
  kind: AggregateKind;
  id: string;
}

/**
 * Hear every event appended to aggregates of one kind (`<prefix>.ev.*.<kind>.*`) as it is stored:
 * a core NATS subscription (JetStream publishes reach plain subscribers too, so every instance of
 * a service hears every append). Subjects are read with the subject table; anything else on the
 * subject space is ignored. No replay and no guarantee of delivery: for cache invalidation, where a
 * missed message costs a stale read the caller repairs, never for state.
 */
export function watchEvents(
  handle: Pick<NatsHandle, 'connection'>,
  prefix: string,
  kind: AggregateKind,
  onEvent: (event: WatchedEvent) => void,
): CoreSubscription {
  return subscribeCore(handle, SubjectTable.event.format(prefix, { kind }), (message) => {
    const event = SubjectTable.event.parse(prefix, message.subject);
    if (event !== null && event.kind === kind) onEvent(event);
  });
}

// ---------------------------------------------------------------------------------------------
// JetStream key-value buckets
// ---------------------------------------------------------------------------------------------

/** A key's latest entry: its value (null when the key was deleted or purged) and its revision. */
export interface KvEntry {
  value: Uint8Array | null;
  revision: number;
}

/** A JetStream KV bucket, reduced to what compare-and-set needs. */
export interface KvBucket {
  readonly name: string;
  /** The key's latest entry, or null when it was never written (or expired). */
  get(key: string): Promise<KvEntry | null>;
  /** Write a key that does not exist; throws an error {@link isKvRevisionConflict} recognises when it does. Resolves with the revision. */
  create(key: string, value: Uint8Array): Promise<number>;
  /** Write a key whose latest revision is still `revision`; throws a conflict otherwise. Resolves with the new revision. */
  update(key: string, value: Uint8Array, revision: number): Promise<number>;
}

export interface KvBucketOptions {
  description?: string;
  /** Values kept per key (default 1). */
  history?: number;
  /** How long a value lives, ms (0 = forever). */
  ttlMs?: number;
  replicas?: number;
  /**
   * Serve reads from any replica (direct get). False reads from the stream leader, so a read is
   * never staler than the revision a write is checked against.
   */
  allowDirect?: boolean;
  /** Timeout of each request to the bucket, ms (default the connection's). */
  timeoutMs?: number;
}

/** `wrong last sequence`: the key changed since it was read (another writer wrote it). */
const WRONG_LAST_SEQUENCE = 10071;

/** True when a KV write failed because the key's revision was not the expected one (compare-and-set lost). */
export function isKvRevisionConflict(error: unknown): boolean {
  return (error as { api_error?: { err_code?: number } } | null)?.api_error?.err_code === WRONG_LAST_SEQUENCE;
}

/**
 * Open the KV bucket `name`, creating it with `options` when it does not exist (creating it from
 * several processes at once is fine: the same configuration is accepted twice). Only features of
 * nats-server 2.9 are used.
 */
export async function openKvBucket(handle: Pick<NatsHandle, 'connection'>, name: string, options: KvBucketOptions = {}): Promise<KvBucket> {
  const js = options.timeoutMs !== undefined ? handle.connection.jetstream({ timeout: options.timeoutMs }) : handle.connection.jetstream();
  const config: Partial<KvOptions> = {
    ...(options.description !== undefined ? { description: options.description } : {}),
    history: options.history ?? 1,
    ...(options.ttlMs !== undefined ? { ttl: options.ttlMs } : {}),
    ...(options.replicas !== undefined ? { replicas: options.replicas } : {}),
    ...(options.allowDirect !== undefined ? { allow_direct: options.allowDirect } : {}),
  };
  const kv: KV = await js.views.kv(name, config);
  return {
    name,
    async get(key) {
      const entry = await kv.get(key);
      if (!entry) return null;
      return { value: entry.operation === 'PUT' ? entry.value : null, revision: entry.revision };
    },
    create: (key, value) => kv.create(key, value),
    update: (key, value, revision) => kv.update(key, value, revision),
  };
}

// ---------------------------------------------------------------------------------------------
// Ordered consumers
// ---------------------------------------------------------------------------------------------

/** Where an ordered (ephemeral, in-order, no-ack) read of a stream starts. */
export type OrderedStart = { from: 'all' } | { from: 'new' } | { from: 'seq'; seq: number } | { from: 'time'; time: Date };

/**
 * The options of an ordered consumer (`js.consumers.get(stream, options)`) that starts at `start`,
 * optionally filtered to one subject pattern. As nats-server 2.9 and the client want them: one
 * filter subject as a string (2.9 knows no `filter_subjects`), no `deliver_policy` for a read from
 * the start (the client starts an ordered consumer at sequence 1 itself and refuses `all` with a
 * start sequence).
 */
export function orderedConsumerOptions(start: OrderedStart, filterSubject?: string): Partial<OrderedConsumerOptions> {
  const filter = filterSubject !== undefined ? { filterSubjects: filterSubject } : {};
  switch (start.from) {
    case 'all':
      return { ...filter };
    case 'new':
      return { ...filter, deliver_policy: DeliverPolicy.New };
    case 'seq':
      return { ...filter, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: Math.max(1, start.seq) };
    case 'time':
      return { ...filter, deliver_policy: DeliverPolicy.StartTime, opt_start_time: start.time.toISOString() };
  }
}
