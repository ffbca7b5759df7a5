import { EventEmitter } from 'node:events';
import { Server, type CustomTransportStrategy, type MessageHandler } from '@nestjs/microservices';
import { isObservable, lastValueFrom } from 'rxjs';
import {
  decodeUtf8,
  EventHeader,
  foreignMsgId,
  parseSubject,
  RejectionCodeSchema,
  rejectionFromZod,
  type EventRegistry,
  type Rejection,
} from '@baton/contracts';
import {
  PoisonError,
  DeadLetterReason,
  deadLetter,
  deadLetterLogFields,
  StreamNotFound,
  connectNats,
  connectionEvents,
  ambientTracing,
  contextFromHeaders,
  currentTraceId,
  headerRecord,
  provision,
  reactorEdge,
  runConsumer,
  type ConsumedMessage,
  type ConsumerRunner,
  type ConsumerSpec,
  type DeliverFrom,
  type MessageOutcome,
  type RunConsumerOptions,
  type NatsConnectOptions,
  type NatsHandle,
  type ReactorEdge,
  type ReactorEdgeOptions,
} from '@baton/eventstore';
import { headers as natsHeaders, type Msg, type Subscription } from 'nats';
import type { z } from 'zod';
import { context as otelContext } from '@opentelemetry/api';
import { JetStreamContext, NatsRequestContext } from './jetstream.context';
import { durableNameFor, resolvePattern, subjectMatches } from './subject';

/** Consumer settings; every field has a default. */
export interface JetStreamConsumerSettings {
  /** Ack wait, ms (default 30 s; in-progress heartbeats extend it while a handler runs). */
  ackWaitMs?: number;
  /** Deliveries before a failing message is dead-lettered (default 5). */
  maxDeliver?: number;
  /** Nak delays by delivery count, ms (default [1000, 5000, 15000, 30000]). */
  backoffMs?: number[];
  /** Handlers running at once per consumer (default 1: stream order). */
  concurrency?: number;
  /**
   * With `concurrency` above 1: messages with the same key run one at a time in delivery order,
   * different keys in parallel (see `RunConsumerOptions.orderingKey`). `'subject'` keys by the
   * message subject (one aggregate per subject on the events stream); `{ bodyField }` by a string
   * field of the JSON body within the subject's project (ids are a project's own: two projects'
   * runs of one id never wait for each other; none when the body is not JSON or the field is not a
   * string: such a message is refused by its handler anyway). The body is parsed once, for the key
   * and the handler.
   */
  orderingKey?: 'subject' | { bodyField: string } | ((msg: ConsumedMessage) => string | undefined);
  /** Most messages per pull (default 100). */
  batch?: number;
  /** Pull expiry, ms (default 2000, at least 1000): bounds how long shutdown waits for a pull. */
  pullExpiresMs?: number;
  /** Where a new durable starts (default `all`). */
  deliverFrom?: DeliverFrom;
}

/** Extras for `@EventPattern(pattern, extras)` handled by this transport. */
export interface JetStreamPatternExtras extends JetStreamConsumerSettings {
  /** Durable name (default derived from the service name and pattern). */
  durable?: string;
  /**
   * The readable name the consumer's dead letters carry (`Baton-Dlq-Source`, `<prefix>.dlq.<source>`),
   * e.g. `router-results` (default: the durable name). Independent of the durable, which keeps
   * its name: renaming a durable would create a new consumer that reads its stream again.
   */
  dlqSource?: string;
  /** Stream name (default: the stream whose subjects hold the pattern). */
  stream?: string;
  /**
   * Only stored events of these types (their `Baton-Event-Type` header) reach the handler; any
   * other message is acknowledged untouched, its body never parsed. For a consumer that follows a
   * whole aggregate's subjects for one rare type (the watchdog's escalations).
   */
  eventTypes?: readonly string[];
}

/** One durable consumer feeding several patterns (dispatched by subject, first match wins). */
export interface JetStreamConsumerBinding extends JetStreamConsumerSettings {
  durable: string;
  /** The readable name its dead letters carry (default: the durable name; see {@link JetStreamPatternExtras.dlqSource}). */
  dlqSource?: string;
  stream: string;
  /** Consumer filter subject (`{prefix}` allowed); default: none (the whole stream). */
  filterSubject?: string;
  /** The `@EventPattern` strings this consumer serves, exactly as written in the decorators. */
  patterns: string[];
}

export interface JetStreamServerOptions {
  /** Service name: the queue group for request/reply and the stem of derived durable names. */
  name: string;
  /** Subject prefix, substituted for `{prefix}` in patterns. */
  prefix: string;
  /** A shared connection (left open on close). Without it the server connects with `connect`. */
  connection?: NatsHandle;
  connect?: NatsConnectOptions;
  /** Defaults for every consumer. */
  consumer?: JetStreamConsumerSettings;
  /** Consumers that serve several patterns at once; other event patterns get one consumer each. */
  consumers?: JetStreamConsumerBinding[];
  /** Where the letters of messages given up on go, for every consumer (`runConsumer`'s `letterGate`; default: written as they come). */
  letterGate?: RunConsumerOptions['letterGate'];
  /** Create or update durable consumers on listen (default true). */
  provision?: boolean;
  /** Queue group for `@MessagePattern` subscriptions (default `name`). */
  queue?: string;
  /** This process's instance name: the `Baton-Dlq-Consumer` of a request it dead-letters (default `name`). */
  instance?: string;
  /** Observe what happened to each event message (metrics, logs, tests). */
  onOutcome?: (outcome: MessageOutcome) => void;
  /**
   * What reactor tables need (`ctx.react(table)` in an `@EventPattern` handler): the event
   * registry and the event store whose fold cache serves the state around each event.
   */
  events?: { registry: EventRegistry; store: ReactorEdgeOptions['store'] };
}

/** Status events: `on('disconnect' | 'reconnect' | 'error', callback)`. */
export type JetStreamServerEvents = {
  disconnect: (server: string) => void;
  reconnect: (server: string) => void;
  error: (error: unknown) => void;
};

export const JETSTREAM_TRANSPORT = Symbol('JETSTREAM_TRANSPORT');

/** What `'error'` listeners receive when the server sent an `-ERR` on the transport's own connection: the client's code and the server's words. */
export class NatsServerError extends Error {
  override name = 'NatsServerError';
  constructor(
    readonly natsCode: string,
    readonly said: string,
  ) {
    super(`NATS server error (${natsCode}): ${said}`);
  }
}

/** What `'error'` listeners receive when a consumer's pull failed (the runner retries with backoff). */
export class JetStreamPullError extends Error {
  override name = 'JetStreamPullError';
  constructor(
    readonly durable: string,
    cause: unknown,
  ) {
    super(`${durable}: pull failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/**
 * The error body a `@MessagePattern` reply carries when the request never reached its handler (bytes
 * that do not decode) or the handler failed: the `{ ok: false, error: { code, kind, message, issues } }`
 * shape every Baton request/reply refusal has (`kind` `rejection` for input, `internal` for a failure).
 */
export interface RequestErrorReply {
  ok: false;
  error: (Rejection & { kind: 'rejection' }) | { code: 'internal_error'; kind: 'internal'; message: string; issues: [] };
}

interface ResolvedBinding {
  spec: ConsumerSpec;
  /** Dead-letter source of the consumer. */
  dlqSource: string;
  settings: JetStreamConsumerSettings;
  /** [subject pattern, handler, the event types it takes (null: every message)] in registration order. */
  routes: Array<[string, MessageHandler, ReadonlySet<string> | null]>;
}

/** The `eventTypes` of a handler's `@EventPattern` extras, as a set; null when it takes every message. */
function eventTypesOf(handler: MessageHandler): ReadonlySet<string> | null {
  const types = (handler.extras as JetStreamPatternExtras | undefined)?.eventTypes;
  return types === undefined ? null : new Set(types);
}

const encoder = new TextEncoder();

function isZodError(error: unknown): error is z.ZodError {
  // Not `instanceof`: zod 4 errors built with `new ZodError()` are not Error instances.
  return (
    typeof error === 'object' && error !== null && (error as { name?: unknown }).name === 'ZodError' && Array.isArray((error as { issues?: unknown }).issues)
  );
}

/**
 * Parse a JSON body. Bytes that are not UTF-8 are poison `invalid_utf8` (never decoded with
 * replacement characters, which would hand the handler text the sender never wrote), bad JSON is
 * poison `malformed_json`: neither changes on a redelivery.
 */
/** A consumed message's body as parsed once (see {@link bodyOf}): the value, or why it is not JSON. */
type ParsedBody = { ok: true; value: unknown } | { ok: false; error: unknown };
const parsedBodies = new WeakMap<ConsumedMessage, ParsedBody>();

/**
 * A consumed message's JSON body, parsed at most once per message: an ordering key by a body
 * field parses it first and keeps it (`keep`) for the handler, which takes it (and forgets it);
 * a message no key read is parsed by the handler alone, nothing kept. Throws the
 * {@link PoisonError} of {@link parseBody}.
 */
function bodyOf(msg: ConsumedMessage, keep: boolean): unknown {
  let parsed = parsedBodies.get(msg);
  if (parsed === undefined) {
    try {
      parsed = { ok: true, value: parseBody(msg.data) };
    } catch (error) {
      parsed = { ok: false, error };
    }
    if (keep) parsedBodies.set(msg, parsed);
  } else if (!keep) {
    parsedBodies.delete(msg);
  }
  if (!parsed.ok) throw parsed.error;
  return parsed.value;
}

/** The ordering key function a consumer's `orderingKey` setting stands for (exported for its tests). */
export function orderingKeyOf(setting: JetStreamConsumerSettings['orderingKey'], prefix: string): ((msg: ConsumedMessage) => string | undefined) | undefined {
  if (setting === 'subject') return (msg) => msg.subject;
  if (setting === undefined || typeof setting === 'function') return setting;
  const { bodyField } = setting;
  return (msg) => {
    let body: unknown;
    try {
      body = bodyOf(msg, true);
    } catch {
      return undefined;
    }
    const value = body !== null && typeof body === 'object' ? (body as Record<string, unknown>)[bodyField] : undefined;
    if (typeof value !== 'string') return undefined;
    const parsed = parseSubject(prefix, msg.subject);
    const project = parsed !== null && 'project' in parsed ? String(parsed.project) : '';
    return `${project}/${value}`;
  };
}

function parseBody(data: Uint8Array): unknown {
  if (data.length === 0) return undefined;
  const text = decodeUtf8(data);
  if (!text.ok) throw new PoisonError(`body ${text.rejection.message}`, text.rejection.code);
  try {
    return JSON.parse(text.value);
  } catch (err) {
    throw new PoisonError(`body is not JSON: ${(err as Error).message}`, 'malformed_json', { cause: err });
  }
}

async function settle(result: unknown): Promise<unknown> {
  const value = await result;
  return isObservable(value) ? lastValueFrom(value, { defaultValue: undefined }) : value;
}

/**
 * A NestJS transport for NATS JetStream.
 *
 * - `@EventPattern(subjectPattern, extras?)` handlers are bound to durable pull consumers with
 *   explicit ack (one per pattern, or shared through `options.consumers`), run by the Baton
 *   consumer runner: a handler that resolves acks the message; a thrown `TransientError` (or any
 *   unclassified error) naks it with a backoff delay; a `PoisonError`, `ZodError` or bad JSON
 *   dead-letters it with the reason and terms it. Handlers receive the parsed JSON body and a
 *   {@link JetStreamContext}. Install {@link JetStreamExceptionFilter} so Nest hands the original
 *   errors through. A handler of stored events hands them to a reactor table with
 *   `ctx.react(table)` (needs `options.events`): decoding, the subject/envelope identity check and
 *   the state around the event happen there, once; the table's handlers get typed events.
 * - `@MessagePattern(subject)` handlers answer core NATS requests (queue group = service name):
 *   JSON in, the handler's return value as JSON out; failures answer `{ error: { code, message } }`.
 * - `close()` stops pulling, lets in-flight handlers finish and ack, drains request
 *   subscriptions, then drains the connection if the server opened it.
 */
export class JetStreamServer extends Server<JetStreamServerEvents> implements CustomTransportStrategy {
  override readonly transportId = JETSTREAM_TRANSPORT;
  private handle: NatsHandle | null = null;
  /** Calls reactor tables for `ctx.react` (when `options.events` is given). */
  private edge: ReactorEdge | null = null;
  private ownsConnection = false;
  private runners: ConsumerRunner[] = [];
  private subscriptions: Subscription[] = [];
  private readonly inFlightRequests = new Set<Promise<void>>();
  private readonly emitter = new EventEmitter();
  private closing: Promise<void> | null = null;

  constructor(private readonly options: JetStreamServerOptions) {
    super();
    // An 'error' with no listener would throw out of the emitter and end the process.
    this.emitter.on('error', (error: unknown) =>
      this.logger.error(
        error instanceof JetStreamPullError || error instanceof NatsServerError ? error.message : `JetStream transport error: ${String(error)}`,
      ),
    );
  }

  /** Connect, provision and bind consumers and subscriptions, then call `callback` (with the error on failure). */
  async listen(callback: (...optionalParams: unknown[]) => void): Promise<void> {
    try {
      await this.start();
      callback();
    } catch (err) {
      callback(err);
    }
  }

  private async start(): Promise<void> {
    if (this.options.connection) {
      this.handle = this.options.connection;
    } else {
      this.handle = await connectNats({ name: this.options.name, ...this.options.connect });
      this.ownsConnection = true;
    }
    void this.watchStatus(this.handle);
    if (this.options.events) {
      this.edge = reactorEdge({ prefix: this.options.prefix, registry: this.options.events.registry, store: this.options.events.store, js: this.handle.js });
    }
    const bindings = await this.resolveBindings(this.handle);
    if (this.options.provision ?? true) {
      await provision(
        this.handle.jsm,
        { consumers: bindings.map((b) => b.spec) },
        { onRetry: (what, err, attempt) => this.logger.warn?.(`${what}: ${String(err)}; asking again (attempt ${attempt + 1})`) },
      );
    }
    for (const binding of bindings) this.runners.push(this.startRunner(this.handle, binding));
    this.bindRequestHandlers(this.handle);
    // Make sure the server knows the subscriptions before we report ready.
    await this.handle.connection.flush();
  }

  private async resolveBindings(handle: NatsHandle): Promise<ResolvedBinding[]> {
    const { prefix, name } = this.options;
    const defaults = this.options.consumer ?? {};
    const events = [...this.messageHandlers.entries()].filter(([, handler]) => handler.isEventHandler);
    const claimed = new Set<string>();
    const bindings: ResolvedBinding[] = [];

    for (const binding of this.options.consumers ?? []) {
      const routes: ResolvedBinding['routes'] = [];
      for (const pattern of binding.patterns) {
        const handler = this.messageHandlers.get(pattern);
        if (!handler?.isEventHandler) throw new Error(`consumer ${binding.durable} lists pattern "${pattern}" but no @EventPattern uses it`);
        routes.push([resolvePattern(pattern, prefix), handler, eventTypesOf(handler)]);
        claimed.add(pattern);
      }
      const settings = { ...defaults, ...binding };
      const filterSubject = binding.filterSubject === undefined ? undefined : resolvePattern(binding.filterSubject, prefix);
      bindings.push({
        spec: this.consumerSpec(binding.stream, binding.durable, filterSubject, settings),
        dlqSource: binding.dlqSource ?? binding.durable,
        settings,
        routes,
      });
    }

    for (const [pattern, handler] of events) {
      if (claimed.has(pattern)) continue;
      const extras = (handler.extras ?? {}) as JetStreamPatternExtras;
      const subject = resolvePattern(pattern, prefix);
      const stream = extras.stream ?? (await this.findStream(handle, subject));
      const durable = extras.durable ?? durableNameFor(name, pattern);
      const settings = { ...defaults, ...extras };
      bindings.push({
        spec: this.consumerSpec(stream, durable, subject, settings),
        dlqSource: extras.dlqSource ?? durable,
        settings,
        routes: [[subject, handler, eventTypesOf(handler)]],
      });
    }
    return bindings;
  }

  private consumerSpec(stream: string, durable: string, filterSubject: string | undefined, settings: JetStreamConsumerSettings): ConsumerSpec {
    const spec: ConsumerSpec = {
      stream,
      durable,
      ackWaitMs: settings.ackWaitMs ?? 30_000,
      deliverFrom: settings.deliverFrom ?? 'all',
      description: `${this.options.name}: ${filterSubject ?? 'whole stream'}`,
    };
    if (filterSubject !== undefined) spec.filterSubject = filterSubject;
    return spec;
  }

  private async findStream(handle: NatsHandle, subject: string): Promise<string> {
    try {
      return await handle.jsm.streams.find(subject);
    } catch (err) {
      throw new StreamNotFound(`(no stream holds ${subject}; provision the topology or set extras.stream)`, { cause: err });
    }
  }

  private startRunner(handle: NatsHandle, binding: ResolvedBinding): ConsumerRunner {
    const { settings } = binding;
    return runConsumer({
      js: handle.js,
      stream: binding.spec.stream,
      durable: binding.spec.durable,
      prefix: this.options.prefix,
      source: binding.dlqSource,
      maxDeliver: settings.maxDeliver,
      backoffMs: settings.backoffMs,
      concurrency: settings.concurrency,
      orderingKey: orderingKeyOf(settings.orderingKey, this.options.prefix),
      batch: settings.batch,
      pullExpiresMs: settings.pullExpiresMs,
      ...(this.options.letterGate !== undefined ? { letterGate: this.options.letterGate } : {}),
      onOutcome: (outcome) => {
        if (outcome.kind === 'dead_lettered' || outcome.kind === 'dead_letter_failed') this.logDeadLetter(binding, outcome);
        this.options.onOutcome?.(outcome);
      },
      // Logged by the default 'error' listener (and handed to any other listener).
      onError: (error) => this.emitStatus('error', new JetStreamPullError(binding.spec.durable, error)),
      onConsumerLost: (event) => {
        if (event.outcome === 'failed') this.logger.error(`${binding.spec.durable}: consumer lost and not re-created yet (retrying): ${String(event.error)}`);
        else if (event.outcome === 'recreated')
          this.logger.warn?.(`${binding.spec.durable}: consumer lost; re-created from stream sequence ${event.startSeq} (after ack floor ${event.ackFloor})`);
        else this.logger.warn?.(`${binding.spec.durable}: consumer lost; another instance re-created it`);
      },
      handler: (msg) => this.dispatchEvent(binding, msg),
    });
  }

  /**
   * The one log line of a message given up on: a fixed `msg` and the fields an SRE finds it by —
   * `source` (the readable name `baton dlq list` and `baton_dead_letters_total` use), `durable`,
   * `reason`, `detail`, `subject`, `stream_seq`, `project`, `trace_id` (of the message's
   * `traceparent`) and the ids its body names (`deadLetterLogFields`). A letter that could not be
   * written is logged with the write's error, and the message is delivered again.
   */
  private logDeadLetter(
    binding: ResolvedBinding,
    outcome: Extract<MessageOutcome, { kind: 'dead_lettered' }> | Extract<MessageOutcome, { kind: 'dead_letter_failed' }>,
  ): void {
    const { msg } = outcome;
    const fields = deadLetterLogFields({
      prefix: this.options.prefix,
      source: binding.dlqSource,
      durable: binding.spec.durable,
      ...(outcome.kind === 'dead_lettered' ? { reason: outcome.reason } : {}),
      error: outcome.error,
      subject: msg.subject,
      seq: msg.seq,
      headers: msg.headers,
      data: msg.data,
    });
    if (outcome.kind === 'dead_lettered') {
      // A letter the gate took was logged there (with its sender), or counted for its sender's
      // summary: one line per letter, and none per refusal past the budget.
      if (!outcome.gated) this.logger.warn?.('message dead-lettered', fields);
      return;
    }
    // Here the error is the failed write's, not the handler's.
    const { detail, ...rest } = fields;
    this.logger.warn?.('dead letter not written; the message is delivered again', { ...rest, error: detail, retry_in_ms: outcome.delayMs });
  }

  private async dispatchEvent(binding: ResolvedBinding, msg: ConsumedMessage): Promise<void> {
    // Identity comes from the subject, the message id too: an inbox message under another
    // project's (or kind's) id was published to take that id first. Refused and recorded, so the
    // attempt is seen and the subject names who made it.
    const foreign = foreignMsgId(this.options.prefix, msg.subject, msg.headers['Nats-Msg-Id']?.[0]);
    if (foreign !== null) throw new PoisonError(foreign, DeadLetterReason.msgIdMismatch);
    const route = binding.routes.find(([pattern]) => subjectMatches(pattern, msg.subject));
    if (!route) throw new PoisonError(`no @EventPattern of ${binding.spec.durable} matches ${msg.subject}`, 'no_handler');
    const types = route[2];
    if (types !== null && !types.has(msg.headers[EventHeader.type]?.[0] ?? '')) return;
    const data = bodyOf(msg, false);
    const ctx = new JetStreamContext([msg], this.edge ? { edge: this.edge, body: data } : null);
    // Nest chains several handlers of one pattern through `next`; all must succeed before the ack.
    for (let handler: MessageHandler | undefined = route[1]; handler; handler = handler.next as MessageHandler | undefined) {
      await settle(handler(data, ctx));
    }
  }

  private bindRequestHandlers(handle: NatsHandle): void {
    const queue = this.options.queue ?? this.options.name;
    for (const [pattern, handler] of this.messageHandlers.entries()) {
      if (handler.isEventHandler) continue;
      const subject = resolvePattern(pattern, this.options.prefix);
      const sub = handle.connection.subscribe(subject, {
        queue,
        callback: (err, msg) => {
          if (err) {
            this.logger.error(`request subscription ${subject} failed: ${err.message}`);
            return;
          }
          const answer = () => this.answer(handler, msg);
          const run = !ambientTracing() || currentTraceId() ? answer() : otelContext.with(contextFromHeaders(headerRecord(msg)), answer);
          const task = run.finally(() => this.inFlightRequests.delete(task));
          this.inFlightRequests.add(task);
        },
      });
      this.subscriptions.push(sub);
    }
  }

  private async answer(handler: MessageHandler, msg: Msg): Promise<void> {
    let reply: unknown;
    let failed = false;
    let data: unknown;
    let decoded = false;
    try {
      data = parseBody(msg.data);
      decoded = true;
      const ctx = new NatsRequestContext([msg.subject, headerRecord(msg)]);
      reply = await settle(handler(data, ctx));
    } catch (error) {
      failed = true;
      reply = this.errorReply(error);
      if (!decoded) await this.deadLetterUndecodable(handler, msg, error);
    }
    if (!msg.reply) return;
    try {
      msg.respond(encoder.encode(JSON.stringify(reply ?? null)), failed ? { headers: this.errorHeaders() } : undefined);
    } catch (err) {
      this.logger.error(`cannot answer ${msg.subject}: ${String(err)}`);
    }
  }

  /**
   * A request whose bytes do not decode (not UTF-8, not JSON) never reaches its handler, so the
   * handler cannot record it: when the `@MessagePattern` names a dead-letter source
   * (`{ dlqSource }` extras), the transport dead-letters it there (stream `core`), with the
   * reason. Never throws (the caller still gets its typed error reply).
   */
  private async deadLetterUndecodable(handler: MessageHandler, msg: Msg, error: unknown): Promise<void> {
    const source = (handler.extras as JetStreamPatternExtras | undefined)?.dlqSource;
    if (source === undefined || !this.handle || !(error instanceof PoisonError)) return;
    try {
      await deadLetter(this.handle.js, {
        prefix: this.options.prefix,
        source,
        reason: error.reason,
        detail: error.message,
        subject: msg.subject,
        headers: headerRecord(msg),
        data: msg.data,
        deliveries: 1,
        stream: 'core',
        seq: 0,
        consumer: this.options.instance ?? this.options.name,
      });
    } catch (err) {
      this.logger.error(`cannot dead-letter an undecodable request on ${msg.subject}: ${String(err)}`);
    }
  }

  private errorHeaders() {
    const hdrs = natsHeaders();
    hdrs.set('Baton-Status', 'error');
    return hdrs;
  }

  private errorReply(error: unknown): RequestErrorReply {
    if (isZodError(error)) return { ok: false, error: { ...rejectionFromZod(error), kind: 'rejection' } };
    if (error instanceof PoisonError) {
      // The poison's own reason when it is a rejection code (the dead letter keeps the same), else the schema's.
      const code = RejectionCodeSchema.safeParse(error.reason).data ?? 'schema_violation';
      return { ok: false, error: { code, kind: 'rejection', message: error.message, issues: [] } };
    }
    this.logger.error(`request handler failed: ${error instanceof Error ? (error.stack ?? error.message) : JSON.stringify(error)}`);
    return { ok: false, error: { code: 'internal_error', kind: 'internal', message: 'the handler failed; see the service log', issues: [] } };
  }

  /**
   * The connection's drops, returns and (on a connection of its own) the server's errors, as status
   * events, read from the connection's one event hub (`connectionEvents`, libs/eventstore): the
   * loop ends with the connection's `closed` event. nats.js 2.x never ends a `status()` iterator
   * when the connection closes, so a loop over one of its own would wait for ever.
   */
  private async watchStatus(handle: NatsHandle): Promise<void> {
    for await (const event of connectionEvents(handle)) {
      if (event.kind === 'disconnected') this.emitStatus('disconnect', event.server);
      else if (event.kind === 'reconnected') this.emitStatus('reconnect', event.server);
      // A connection the service shares is watched by its runtime (`watchConnection`), which logs
      // the server's errors with their words; this one's own connection has no one else to.
      else if (event.kind === 'server_error' && this.ownsConnection) this.emitStatus('error', new NatsServerError(event.natsCode, event.said));
    }
  }

  /**
   * Shut down in order: stop pulling and let in-flight handlers finish (ack / nak / dead-letter),
   * drain request subscriptions and wait for in-flight replies, then drain the connection if
   * this server opened it. Idempotent.
   */
  async close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.all(this.runners.map((runner) => runner.stop()));
      this.runners = [];
      await Promise.all(this.subscriptions.map((sub) => sub.drain().catch(() => undefined)));
      this.subscriptions = [];
      await Promise.allSettled([...this.inFlightRequests]);
      if (this.handle && this.ownsConnection) await this.handle.drain();
      // Later events (a shared connection outlives the server) are logged by emitStatus.
      this.emitter.removeAllListeners();
      this.handle = null;
    })();
    return this.closing;
  }

  /**
   * Emit a status event. An `'error'` nobody listens for is only logged: an EventEmitter throws an
   * unheard `'error'`, and a pull failure (a consumer deleted under the service) must never take
   * the process down. The listener registered in the constructor logs it too.
   */
  private emitStatus(event: keyof JetStreamServerEvents, value: unknown): void {
    if (event === 'error' && this.emitter.listenerCount('error') === 0) {
      this.logger.error(`JetStream transport error: ${String(value)}`);
      return;
    }
    this.emitter.emit(event, value);
  }

  /** Register a status listener. */
  on<
    EventKey extends keyof JetStreamServerEvents = keyof JetStreamServerEvents,
    EventCallback extends JetStreamServerEvents[EventKey] = JetStreamServerEvents[EventKey],
  >(event: EventKey, callback: EventCallback): void {
    this.emitter.on(event, callback);
  }

  /** The underlying {@link NatsHandle} (connection, js, jsm). */
  unwrap<T = NatsHandle>(): T {
    if (!this.handle) throw new Error('JetStreamServer is not listening; call listen() first');
    return this.handle as T;
  }
}
