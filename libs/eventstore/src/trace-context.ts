import { AsyncLocalStorage } from 'node:async_hooks';
import { randomFillSync } from 'node:crypto';
import {
  ROOT_CONTEXT,
  TraceFlags,
  context as otelContext,
  isSpanContextValid,
  propagation,
  trace,
  type Context,
  type ContextManager,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
} from '@opentelemetry/api';

/**
 * W3C Trace Context over NATS headers, with the OpenTelemetry API only (no SDK is installed).
 *
 * Baton carries one trace from an agent result to the inbox item it leads to: the SDK publishes
 * the result with a `traceparent` header; every service runs each consumed message (and each
 * core NATS request it serves) inside the context extracted from the message's headers, with a
 * fresh span id; every publish and request made meanwhile carries the context on (see
 * `instrumentNats`). Stored events keep the header, so a projection can read the trace id of the
 * event it applies (deterministically: a replay reads the same header).
 */

/** The W3C header (lower case, as the spec writes it). */
export const TRACEPARENT_HEADER = 'traceparent';
export const TRACESTATE_HEADER = 'tracestate';

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/** Parse a `traceparent` value; null when it is absent or not a valid W3C value (version ff, all-zero ids). */
export function parseTraceparent(value: string | undefined | null): SpanContext | null {
  if (!value) return null;
  const match = TRACEPARENT.exec(value.trim());
  if (!match) return null;
  const [, version, traceId, spanId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return null;
  return { traceId, spanId, traceFlags: parseInt(flags, 16) & TraceFlags.SAMPLED, isRemote: true };
}

/** Format a span context as a version-00 `traceparent`. */
export function formatTraceparent(span: Pick<SpanContext, 'traceId' | 'spanId' | 'traceFlags'>): string {
  return `00-${span.traceId}-${span.spanId}-${(span.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

// Ids come from a pool of random bytes filled 4 KiB at a time: one `randomFillSync` per 512 span
// ids instead of one per id (a call each was about 1 % of a service's CPU under load).
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let poolOffset = POOL_BYTES;

/** `bytes` fresh random bytes as lowercase hex. */
function randomHex(bytes: number): string {
  if (poolOffset + bytes > POOL_BYTES) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const hex = pool.toString('hex', poolOffset, poolOffset + bytes);
  poolOffset += bytes;
  return hex;
}

/** A random 16-hex-digit span id (never all zeros). */
export function newSpanId(): string {
  let id = ZERO_SPAN;
  while (id === ZERO_SPAN) id = randomHex(8);
  return id;
}

/** A random 32-hex-digit trace id (never all zeros). */
export function newTraceId(): string {
  let id = ZERO_TRACE;
  while (id === ZERO_TRACE) id = randomHex(16);
  return id;
}

/** A `traceparent` for a new trace (sampled). */
export function newTraceparent(): string {
  return formatTraceparent({ traceId: newTraceId(), spanId: newSpanId(), traceFlags: TraceFlags.SAMPLED });
}

/** Header carriers Baton meets: a plain record of arrays (consumed messages) or of single values. */
export type HeaderRecord = Record<string, string | string[] | undefined>;

function headerValue(headers: HeaderRecord | undefined, name: string): string | undefined {
  if (!headers) return undefined;
  const exact = headers[name];
  if (exact !== undefined) return Array.isArray(exact) ? exact[0] : exact;
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== wanted || value === undefined) continue;
    return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}

/** The trace id a message's headers carry (from `traceparent`), or null. Pure: reads the headers only. */
export function traceIdFromHeaders(headers: HeaderRecord | undefined): string | null {
  return parseTraceparent(headerValue(headers, TRACEPARENT_HEADER))?.traceId ?? null;
}

const recordSetter: TextMapSetter<HeaderRecord> = {
  set: (carrier, key, value) => {
    carrier[key] = value;
  },
};

/**
 * The W3C Trace Context propagator (`traceparent` and `tracestate`), as
 * `@opentelemetry/core`'s W3CTraceContextPropagator does it, for the API alone. Injects nothing
 * when the context holds no valid span context.
 */
export class W3CTraceparentPropagator implements TextMapPropagator {
  inject(ctx: Context, carrier: unknown, setter: TextMapSetter): void {
    const span = trace.getSpanContext(ctx);
    if (!span || !isSpanContextValid(span)) return;
    setter.set(carrier, TRACEPARENT_HEADER, formatTraceparent(span));
    const state = span.traceState?.serialize();
    if (state) setter.set(carrier, TRACESTATE_HEADER, state);
  }

  extract(ctx: Context, carrier: unknown, getter: TextMapGetter): Context {
    const raw = getter.get(carrier, TRACEPARENT_HEADER);
    const span = parseTraceparent(Array.isArray(raw) ? raw[0] : raw);
    return span ? trace.setSpanContext(ctx, span) : ctx;
  }

  fields(): string[] {
    return [TRACEPARENT_HEADER, TRACESTATE_HEADER];
  }
}

/**
 * An OpenTelemetry context manager on AsyncLocalStorage (what `@opentelemetry/context-async-hooks`
 * provides): the context set by `with` follows every await and callback started inside it.
 */
export class AsyncLocalContextManager implements ContextManager {
  private storage = new AsyncLocalStorage<Context>();

  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    return this.storage.run(ctx, () => fn.apply(thisArg, args));
  }

  bind<T>(ctx: Context, target: T): T {
    if (typeof target !== 'function') return target;
    const run = (...args: unknown[]) => this.with(ctx, () => (target as (...a: unknown[]) => unknown)(...args));
    return run as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.storage.disable();
    this.storage = new AsyncLocalStorage<Context>();
    return this;
  }
}

/** The propagator Baton's helpers use, whatever is registered globally. */
const w3c = new W3CTraceparentPropagator();

let installed: boolean | null = null;

export interface InstallTracingOptions {
  /**
   * Also register an AsyncLocalStorage context manager, so code running inside a handler can read
   * the trace ambiently (`currentTraceId()`, `traceHeaders()`, an OpenTelemetry instrumentation's
   * spans). Off by default in Baton's services: on Node 20 an AsyncLocalStorage installs a promise
   * hook that every promise of the process pays for — 10–15 % of a service's CPU per hop,
   * measured — while Baton itself passes each message's {@link HopTrace} explicitly.
   */
  ambientContext?: boolean;
}

/**
 * Register the W3C propagator as the OpenTelemetry global (and, when asked, the AsyncLocalStorage
 * context manager), once per process. When an OpenTelemetry SDK registered its own first, it is
 * kept (the API refuses a second registration) and Baton's ambient helpers use it. Returns whether
 * an ambient context manager works in this process; Baton's own propagation (explicit
 * {@link HopTrace}s) works either way.
 */
export function installTracing(options: InstallTracingOptions = {}): boolean {
  if (installed === true || (installed === false && !options.ambientContext)) return installed;
  if (options.ambientContext) otelContext.setGlobalContextManager(new AsyncLocalContextManager());
  propagation.setGlobalPropagator(new W3CTraceparentPropagator());
  // Probe: is a working context manager in place (ours or an SDK's)?
  const probe = trace.setSpanContext(ROOT_CONTEXT, { traceId: newTraceId(), spanId: newSpanId(), traceFlags: TraceFlags.SAMPLED });
  installed = otelContext.with(probe, () => trace.getSpanContext(otelContext.active())?.traceId === trace.getSpanContext(probe)?.traceId);
  return installed;
}

/** Whether an ambient context manager works in this process (see {@link installTracing}). */
export function ambientTracing(): boolean {
  return installed === true;
}

/**
 * The trace context of one hop — one consumed message or served request — which everything its
 * handler publishes carries on: the message's trace id, a span id of this hop's own (so what it
 * publishes names this hop as the parent) and the message's `tracestate`. Baton passes it
 * explicitly (a handler's context, a command's metadata, a ledger call's options) instead of
 * through an ambient async context.
 */
export interface HopTrace {
  readonly traceId: string;
  /** The `traceparent` what this hop publishes carries. */
  readonly traceparent: string;
  readonly tracestate?: string;
}

/**
 * The {@link HopTrace} of a message with these headers: its `traceparent`'s trace with a fresh
 * span id, or a new trace when it carries none (or an invalid one) and `startIfMissing` (default
 * true; otherwise undefined).
 */
export function hopTrace(headers: HeaderRecord | undefined, startIfMissing?: true): HopTrace;
export function hopTrace(headers: HeaderRecord | undefined, startIfMissing: boolean): HopTrace | undefined;
export function hopTrace(headers: HeaderRecord | undefined, startIfMissing = true): HopTrace | undefined {
  const span = hopSpan(headers, startIfMissing);
  if (!span) return undefined;
  const traceparent = formatTraceparent(span);
  return span.tracestate ? { traceId: span.traceId, traceparent, tracestate: span.tracestate } : { traceId: span.traceId, traceparent };
}

/**
 * A {@link HopTrace} continuing a trace known only by its id (e.g. the trace id a projection kept
 * of an event): a fresh span id, sampled.
 */
export function continueTrace(traceId: string): HopTrace {
  return { traceId, traceparent: formatTraceparent({ traceId, spanId: newSpanId(), traceFlags: TraceFlags.SAMPLED }) };
}

/** The headers that carry a {@link HopTrace} on (`{}` for none). */
export function hopTraceHeaders(hop: HopTrace | undefined): Record<string, string> {
  if (!hop) return {};
  return hop.tracestate ? { [TRACEPARENT_HEADER]: hop.traceparent, [TRACESTATE_HEADER]: hop.tracestate } : { [TRACEPARENT_HEADER]: hop.traceparent };
}

/** Longest `tracestate` carried on (W3C Trace Context asks at least 512 characters be kept). */
export const MAX_TRACESTATE_LENGTH = 512;
/** One `tracestate` list member: `key=value` in the W3C grammar (simple or multi-tenant key). */
const TRACESTATE_MEMBER =
  /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/**
 * A message's `tracestate` as Baton carries it on to every later hop, or undefined: a value that
 * is not W3C `tracestate` (more than 32 members, a member outside the grammar) or is longer than
 * {@link MAX_TRACESTATE_LENGTH} is dropped — it is the sender's, and each event, request and
 * offer of the run would otherwise copy it for good.
 */
export function validTracestate(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  if (!trimmed || trimmed.length > MAX_TRACESTATE_LENGTH) return undefined;
  const members = trimmed
    .split(',')
    .map((member) => member.trim())
    .filter((member) => member !== '');
  if (members.length === 0 || members.length > 32 || !members.every((member) => TRACESTATE_MEMBER.test(member))) return undefined;
  return members.join(',');
}

/**
 * The span of one hop, the one rule behind {@link hopTrace} and {@link contextFromHeaders}: the
 * `traceparent`'s trace and flags with a fresh span id (and the message's `tracestate`), or a new
 * sampled trace when it carries none (or an invalid one) and `startIfMissing`.
 */
function hopSpan(
  headers: HeaderRecord | undefined,
  startIfMissing: boolean,
): { traceId: string; spanId: string; traceFlags: number; tracestate?: string } | undefined {
  const parent = parseTraceparent(headerValue(headers, TRACEPARENT_HEADER));
  if (parent) {
    const tracestate = validTracestate(headerValue(headers, TRACESTATE_HEADER));
    return { traceId: parent.traceId, spanId: newSpanId(), traceFlags: parent.traceFlags, ...(tracestate ? { tracestate } : {}) };
  }
  return startIfMissing ? { traceId: newTraceId(), spanId: newSpanId(), traceFlags: TraceFlags.SAMPLED } : undefined;
}

/**
 * The context a consumed message (or served request) runs in with an ambient context manager:
 * its hop's span (see {@link hopTrace}; `startIfMissing` defaults to true) as the active span.
 */
export function contextFromHeaders(headers: HeaderRecord | undefined, startIfMissing = true): Context {
  const span = hopSpan(headers, startIfMissing);
  return span ? trace.setSpanContext(ROOT_CONTEXT, { traceId: span.traceId, spanId: span.spanId, traceFlags: span.traceFlags }) : ROOT_CONTEXT;
}

/** Run `fn` inside the trace context of a message's headers (see {@link contextFromHeaders}). */
export function withTraceFromHeaders<T>(headers: HeaderRecord | undefined, fn: () => T): T {
  return otelContext.with(contextFromHeaders(headers), fn);
}

/** The trace id of the active context, or undefined outside a trace. */
export function currentTraceId(): string | undefined {
  const span = trace.getSpanContext(otelContext.active());
  return span && isSpanContextValid(span) ? span.traceId : undefined;
}

/**
 * The propagation headers of the active context (`{ traceparent }`), or `{}` outside a trace.
 * With `startIfMissing`, a new trace's `traceparent` when there is none: what the SDK adds to an
 * agent result so every result starts (or continues) a trace.
 */
export function traceHeaders(options: { startIfMissing?: boolean } = {}): Record<string, string> {
  const carrier: HeaderRecord = {};
  w3c.inject(otelContext.active(), carrier, recordSetter);
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(carrier)) if (typeof value === 'string') out[key] = value;
  if (out[TRACEPARENT_HEADER] === undefined && options.startIfMissing) out[TRACEPARENT_HEADER] = newTraceparent();
  return out;
}
