import { context as otelContext } from '@opentelemetry/api';
import { headers as natsHeaders, type JetStreamClient, type Msg, type MsgHdrs, type NatsConnection } from 'nats';
import type { NatsHandle } from './connection';
import { headerRecord } from './pull';
import { TRACEPARENT_HEADER, ambientTracing, contextFromHeaders, traceHeaders } from './trace-context';

/** A JetStream publish the stream acknowledged, as {@link InstrumentNatsOptions.onJetStreamPublish} sees it. */
export interface JetStreamPublished {
  subject: string;
  /** A header of the published message (its first value; undefined when absent or empty). */
  header(name: string): string | undefined;
  /** The stream that stored it, at which sequence; `duplicate` when it held the message id already. */
  stream: string;
  seq: number;
  duplicate: boolean;
}

export interface InstrumentNatsOptions {
  /** Called after every JetStream publish the stream acknowledged (metrics: dead letters). */
  onJetStreamPublish?: (published: JetStreamPublished) => void;
  /** Called with every JetStream publish that failed, before its error is thrown on (metrics, health: a full stream or account). */
  onJetStreamPublishError?: (subject: string, error: unknown) => void;
}

type Fn = (...args: unknown[]) => unknown;

/**
 * Add the ambient trace context to a message's headers unless they already carry a `traceparent`
 * (Baton's own publishes carry their hop's trace explicitly; this serves code that relies on an
 * ambient context manager, see `installTracing`).
 */
function withTrace(existing: MsgHdrs | undefined): MsgHdrs | undefined {
  if (!ambientTracing()) return existing;
  const trace = traceHeaders();
  if (Object.keys(trace).length === 0) return existing;
  if (existing && existing.has(TRACEPARENT_HEADER)) return existing;
  const hdrs = existing ?? natsHeaders();
  for (const [key, value] of Object.entries(trace)) hdrs.set(key, value);
  return hdrs;
}

/** A proxy of `target` whose `overrides` replace some methods; other methods are bound to `target`. */
function proxy<T extends object>(target: T, overrides: Partial<Record<keyof T, Fn>>): T {
  return new Proxy(target, {
    get(obj, prop) {
      const override = (overrides as Record<PropertyKey, Fn | undefined>)[prop];
      if (override) return override;
      const value: unknown = Reflect.get(obj, prop, obj);
      return typeof value === 'function' ? (value as Fn).bind(obj) : value;
    },
  });
}

/**
 * Wrap a {@link NatsHandle} so an ambient trace context (only where `installTracing` put an
 * ambient context manager in place; Baton's services pass each hop's trace explicitly) flows
 * through NATS without touching the code that uses it:
 * - `js.publish`, `connection.publish` and `connection.request` add the active context's
 *   `traceparent` header (unless the message already has one);
 * - `connection.subscribe(subject, { callback })` runs each callback inside the context of the
 *   message's `traceparent` (a new trace when it has none), so a request handler's appends and
 *   publishes continue the caller's trace.
 * `jsm`, `drain`, `close` and everything else are the original handle's. The wrapper adds no
 * retries and changes no error.
 */
export function instrumentNats(handle: NatsHandle, options: InstrumentNatsOptions = {}): NatsHandle {
  const js = handle.js;
  const connection = handle.connection;
  const jsPublish = js.publish.bind(js);
  const tracedJs = proxy<JetStreamClient>(js, {
    publish: (async (subject: string, payload?: Uint8Array, opts?: Parameters<JetStreamClient['publish']>[2]) => {
      const hdrs = withTrace(opts?.headers);
      let ack: Awaited<ReturnType<JetStreamClient['publish']>>;
      try {
        ack = await jsPublish(subject, payload, hdrs ? { ...opts, headers: hdrs } : opts);
      } catch (error) {
        options.onJetStreamPublishError?.(subject, error);
        throw error;
      }
      if (options.onJetStreamPublish) {
        const header = (name: string) => (hdrs?.has(name) ? hdrs.get(name) || undefined : undefined);
        options.onJetStreamPublish({ subject, header, stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate });
      }
      return ack;
    }) as Fn,
  });
  const tracedConnection = proxy<NatsConnection>(connection, {
    publish: ((subject: string, payload?: Uint8Array, opts?: Parameters<NatsConnection['publish']>[2]) => {
      const hdrs = withTrace(opts?.headers);
      connection.publish(subject, payload, hdrs ? { ...opts, headers: hdrs } : opts);
    }) as Fn,
    request: ((subject: string, payload?: Uint8Array, opts?: Parameters<NatsConnection['request']>[2]) => {
      const hdrs = withTrace(opts?.headers);
      return connection.request(subject, payload, hdrs ? { timeout: 1000, ...opts, headers: hdrs } : opts);
    }) as Fn,
    subscribe: ((subject: string, opts?: Parameters<NatsConnection['subscribe']>[1]) => {
      const callback = opts?.callback;
      if (!callback) return connection.subscribe(subject, opts);
      return connection.subscribe(subject, {
        ...opts,
        callback: (err, msg: Msg) =>
          ambientTracing() ? otelContext.with(contextFromHeaders(msg ? headerRecord(msg) : undefined), () => callback(err, msg)) : callback(err, msg),
      });
    }) as Fn,
  });
  return {
    connection: tracedConnection,
    js: tracedJs,
    jsm: handle.jsm,
    closed: handle.closed,
    drain: () => handle.drain(),
    close: () => handle.close(),
  };
}
