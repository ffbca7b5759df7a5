import type { NatsConnection } from 'nats';
import type { NatsHandle } from './connection';
import { ConnectionClosed } from './errors';

/** When each connection last heard from its server (ms since the epoch), kept by `connectNats` (connection.ts). */
const serverContact = new WeakMap<NatsConnection, { at: number }>();

/** The record of `connection`'s last contact with its server that `connectNats` keeps up to date (made, set to now, on first ask). */
export function serverContactOf(connection: NatsConnection): { at: number } {
  let contact = serverContact.get(connection);
  if (contact === undefined) {
    contact = { at: Date.now() };
    serverContact.set(connection, contact);
  }
  return contact;
}

/**
 * When `connection` last received anything from its server — a message, an ack, a PONG, an `+OK`,
 * an INFO — ms since the epoch; undefined for a connection `connectNats` did not open. A server
 * that stops answering without closing the socket (frozen, a dead peer) is noticed only after the
 * client's unanswered pings (20–30 s for a service): how long NATS was gone counts from here, not
 * from that notice.
 */
export function lastHeardFrom(connection: NatsConnection): number | undefined {
  return serverContact.get(connection)?.at;
}

/*
 * What happens to a NATS connection, told once for every consumer: the client's status iterator
 * read by one hub per connection and turned into typed events (dropped, reconnecting, back, the
 * server's errors in its own words, closed for good). The services' connection log lines
 * (libs/platform connection-watch) and the SDK's `agent.connectionEvents()` / `onConnection` are
 * built on it. `connection.ts` re-exports the server-error helpers below.
 */

/**
 * The NATS client's codes for a server that was reached and would not let these credentials in
 * (or a credentials file the client could not use): retrying changes nothing, other credentials do.
 */
const NATS_AUTH_CODES: ReadonlySet<string> = new Set([
  'AUTHORIZATION_VIOLATION',
  'AUTHENTICATION_EXPIRED',
  'ACCOUNT_EXPIRED',
  'BAD_AUTHENTICATION',
  'BAD_CREDS',
]);

/** Whether a connection failure (or what it wraps) is NATS refusing the credentials. */
export function natsRefusedCredentials(error: unknown): boolean {
  return [...NATS_AUTH_CODES].some((code) => hasNatsCode(error, code));
}

/** Whether `error`, or an error it wraps, carries the NATS client's `code`. */
export function hasNatsCode(error: unknown, code: string): boolean {
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { code?: unknown }).code === code) return true;
  }
  return false;
}

/** A client status event as `serverSaid` reads it: the client's code, and what nats.js 2.x adds to a permissions violation. */
export interface ServerErrorStatus {
  data: unknown;
  permissionContext?: { operation?: string; subject?: string; queue?: string };
}

/**
 * What the server said in an `-ERR` ("User Authentication Revoked", "Permissions Violation for
 * Publish to …"): a status event of the client carries only its own code (`NATS_PROTOCOL_ERR`,
 * `PERMISSIONS_VIOLATION`). A permissions violation's subject is on the status; any other error's
 * text is the protocol's last error — an internal field of nats.js 2.x, read when it is this
 * error's (the client sets it just after the status); else the code the status carried.
 */
export function serverSaid(connection: NatsConnection, status: ServerErrorStatus): string {
  const code = String(status.data);
  const context = status.permissionContext;
  if (context?.subject !== undefined) {
    const operation = context.operation === 'subscription' ? 'Subscription' : 'Publish';
    return `Permissions Violation for ${operation} to "${context.subject}"${context.queue !== undefined ? ` using queue "${context.queue}"` : ''}`;
  }
  const last = (connection as unknown as { protocol?: { lastError?: unknown } }).protocol?.lastError;
  return last instanceof Error && (last as { code?: unknown }).code === code ? last.message : code;
}

/** The connection dropped: the client starts reconnecting (told once per outage). */
export interface ConnectionDisconnected {
  readonly kind: 'disconnected';
  /** The server it was connected to (`host:port`). */
  readonly server: string;
  /** When the drop was seen, ms since the epoch. */
  readonly at: number;
}

/** The client is trying a server again (one event per attempt, about every 2 s while it is down). */
export interface ConnectionReconnecting {
  readonly kind: 'reconnecting';
  /** The server it is dialling (`host:port`). */
  readonly server: string;
  /** This attempt's number since the drop: 1, 2, … */
  readonly attempt: number;
  /**
   * How long the connection has been down, ms: since the client last heard from its server
   * (`lastHeardFrom`; a frozen server is noticed only after unanswered pings), else since the drop.
   */
  readonly downMs: number;
  readonly at: number;
}

/** The connection is back; subscriptions are restored by the client. */
export interface ConnectionReconnected {
  readonly kind: 'reconnected';
  readonly server: string;
  /** How long it was down, ms: from when the client last heard from its server (as `reconnecting`'s). */
  readonly downMs: number;
  /** The attempts it took. */
  readonly attempts: number;
  readonly at: number;
}

/**
 * What an `-ERR` of the server on an open connection is about: `credentials_ended` — the server
 * revoked these credentials or they expired (a rotation's reload: the client reconnects with the
 * credentials file as it is now); `credentials_refused` — a reconnect was refused them (the client
 * tries again and gives up after two: `closed` follows); `other` — any other error, such as a
 * permissions violation (the connection stays).
 */
export type ServerErrorAbout = 'credentials_ended' | 'credentials_refused' | 'other';

/** The server said something went wrong, in its own words. */
export interface ConnectionServerError {
  readonly kind: 'server_error';
  /** The NATS client's code (`PERMISSIONS_VIOLATION`, `NATS_PROTOCOL_ERR`, `AUTHORIZATION_VIOLATION`…). */
  readonly natsCode: string;
  /** The server's words ({@link serverSaid}): `User Authentication Revoked`, `Permissions Violation for Publish to "…"`. */
  readonly said: string;
  readonly about: ServerErrorAbout;
  readonly at: number;
}

/**
 * The connection is closed and will not come back; always the last event. `error` is the typed
 * {@link ConnectionClosed} when the client gave up on it (credentials revoked, expired or refused on
 * reconnect, reconnects exhausted), absent for a close or drain on purpose.
 */
export interface ConnectionEnded {
  readonly kind: 'closed';
  readonly error?: ConnectionClosed;
  readonly at: number;
}

/**
 * What happens to a NATS connection, as {@link connectionEvents} and {@link onConnectionEvent} tell
 * it. The `kind` strings are stable: `disconnected`, `reconnecting`, `reconnected`,
 * `server_error`, `closed`. Every event is frozen (several consumers see the same object).
 */
export type ConnectionEvent = ConnectionDisconnected | ConnectionReconnecting | ConnectionReconnected | ConnectionServerError | ConnectionEnded;
export type ConnectionEventKind = ConnectionEvent['kind'];

/** A connection as the events are read from: its client and the `closed` promise {@link connectNats} gives. */
export type ConnectionEventSource = Pick<NatsHandle, 'connection' | 'closed'>;

export interface ConnectionEventsOptions {
  /** Ends the iteration when aborted (as `break` in a `for await` does). */
  signal?: AbortSignal;
}

export interface ConnectionListenerOptions {
  /**
   * Told when the listener throws (or the promise it returns rejects); the connection and every
   * other listener carry on. Default: `console.error`.
   */
  onListenerError?: (error: unknown, event: ConnectionEvent) => void;
}

/**
 * What {@link ConnectionClosed} a close is. `closed` resolves with one (or with nothing for a close
 * on purpose); anything else is read as a close on purpose.
 */
function typedClose(closed: unknown): ConnectionClosed | undefined {
  return closed instanceof ConnectionClosed ? closed : undefined;
}

/** What an `-ERR` the server sent is about (see {@link ServerErrorAbout}). */
export function serverErrorAbout(natsCode: string, said: string): ServerErrorAbout {
  if (/revoked|expired/i.test(said)) return 'credentials_ended';
  if (natsRefusedCredentials({ code: natsCode })) return 'credentials_refused';
  return 'other';
}

/** Hand `event` to one listener: whatever it does, the others are told too (the public listeners catch their own errors). */
function tell(listener: (event: ConnectionEvent) => void, event: ConnectionEvent): void {
  try {
    listener(event);
  } catch {
    // Not reached: onConnectionEvent reports its listener's errors itself.
  }
}

/**
 * One reader of a connection's status iterator, turning the client's statuses into
 * {@link ConnectionEvent}s and handing each to every listener: however many consumers, the client
 * is read once, and the outage's state (since when, how many attempts) is kept in one place.
 */
class ConnectionEventHub {
  private readonly listeners = new Set<(event: ConnectionEvent) => void>();
  /** The `closed` event once the connection is closed: later listeners get it at once. */
  private final: ConnectionEnded | null = null;
  private downSince: number | null = null;
  private attempts = 0;

  constructor(source: ConnectionEventSource) {
    void this.run(source);
  }

  /** Listen from now on; returns how to stop. A listener added after the close is given `closed` alone, in a microtask. */
  listen(listener: (event: ConnectionEvent) => void): () => void {
    const final = this.final;
    if (final !== null) {
      queueMicrotask(() => tell(listener, final));
      return () => undefined;
    }
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(event: ConnectionEvent): void {
    Object.freeze(event);
    for (const listener of [...this.listeners]) tell(listener, event);
  }

  private async run({ connection, closed }: ConnectionEventSource): Promise<void> {
    // A client already closed gives no more statuses.
    const statuses = connection.isClosed() ? null : connection.status();
    const reading = (async () => {
      if (statuses === null) return;
      try {
        for await (const status of statuses) this.status(connection, status);
      } catch {
        // The iterator failed: nothing more to read from it.
      }
    })();
    const error = typedClose(await Promise.resolve(closed).catch(() => undefined));
    // nats.js 2.x does not end a connection's status iterators when it closes (only its protocol's,
    // which feeds them): the statuses given before the close are read (a turn later), then this
    // one is stopped, so that `closed` is the last event.
    await new Promise((resolve) => setImmediate(resolve));
    const stop = (statuses as { stop?: () => void } | null)?.stop;
    if (typeof stop === 'function') {
      stop.call(statuses);
      await reading;
    }
    const final: ConnectionEnded = error !== undefined ? { kind: 'closed', error, at: Date.now() } : { kind: 'closed', at: Date.now() };
    this.final = final;
    const listeners = [...this.listeners];
    this.listeners.clear();
    Object.freeze(final);
    for (const listener of listeners) tell(listener, final);
  }

  private status(
    connection: NatsConnection,
    status: { type: string; data: unknown; permissionContext?: { operation?: string; subject?: string; queue?: string } },
  ): void {
    const at = Date.now();
    switch (status.type) {
      case 'disconnect': {
        // A dial that fails after its socket opened may report the drop again: one outage, one event.
        if (this.downSince !== null) return;
        // Counted from the server's last word: a server that froze is noticed only after its pings go unanswered.
        this.downSince = Math.min(at, lastHeardFrom(connection) ?? at);
        this.attempts = 0;
        this.emit({ kind: 'disconnected', server: String(status.data), at });
        return;
      }
      case 'reconnecting': {
        // Dials before the first connect are the connect's own, not an outage's.
        if (this.downSince === null) return;
        this.attempts++;
        this.emit({ kind: 'reconnecting', server: String(status.data), attempt: this.attempts, downMs: at - this.downSince, at });
        return;
      }
      case 'reconnect': {
        if (this.downSince === null) return;
        const downMs = at - this.downSince;
        const attempts = this.attempts;
        this.downSince = null;
        this.attempts = 0;
        this.emit({ kind: 'reconnected', server: String(status.data), downMs, attempts, at });
        return;
      }
      case 'error': {
        // Read after the client took the -ERR in (the iterator runs a turn later): `serverSaid` finds its words.
        const said = serverSaid(connection, status);
        const natsCode = String(status.data);
        this.emit({ kind: 'server_error', natsCode, said, about: serverErrorAbout(natsCode, said), at });
        return;
      }
      default:
        // `update` (cluster membership), `ldm`, `pingTimer`, `staleConnection` (a disconnect follows): not told.
        return;
    }
  }
}

/**
 * One hub per client connection: made at connect ({@link connectNats} listens at once, for the
 * credentials news of its `closed`), so a listener that comes later still knows an outage begun
 * before it; for a connection opened otherwise, at the first call.
 */
const hubs = new WeakMap<NatsConnection, ConnectionEventHub>();

function hubOf(source: ConnectionEventSource): ConnectionEventHub {
  let hub = hubs.get(source.connection);
  if (hub === undefined) {
    hub = new ConnectionEventHub(source);
    hubs.set(source.connection, hub);
  }
  return hub;
}

/**
 * Call `listener` for every event of the connection from now on (see {@link ConnectionEvent}), the
 * last being `closed`; given a connection already closed, it is called with `closed` alone. A
 * listener that throws, or returns a promise that rejects, is reported to `onListenerError` and
 * breaks nothing: not the connection, not the other listeners, not its own later calls. Returns a
 * function that stops the calls.
 */
export function onConnectionEvent(
  source: ConnectionEventSource,
  listener: (event: ConnectionEvent) => unknown,
  options: ConnectionListenerOptions = {},
): () => void {
  const report =
    options.onListenerError ?? ((error: unknown) => console.error(`[baton] a connection event listener threw: ${String((error as Error)?.message ?? error)}`));
  const reported = (error: unknown, event: ConnectionEvent) => {
    try {
      report(error, event);
    } catch {
      // The report itself failed: nothing more to tell.
    }
  };
  return hubOf(source).listen((event) => {
    try {
      const result = listener(event);
      if (result !== null && typeof result === 'object' && typeof (result as { then?: unknown }).then === 'function') {
        (result as PromiseLike<unknown>).then(undefined, (error: unknown) => reported(error, event));
      }
    } catch (error) {
      reported(error, event);
    }
  });
}

/**
 * The connection's events from now on, as an async iterator of its own: several consumers each get
 * every event. It ends after `closed` (given a connection already closed it yields `closed` and
 * ends), when the loop breaks, or when `options.signal` aborts. Events wait for a consumer that
 * reads slowly; they are few (about one every 2 s during an outage).
 */
export function connectionEvents(source: ConnectionEventSource, options: ConnectionEventsOptions = {}): AsyncIterableIterator<ConnectionEvent> {
  const queue: ConnectionEvent[] = [];
  /** The `next()` calls waiting for an event. */
  let waiting: Array<() => void> = [];
  const wake = () => {
    const woken = waiting;
    waiting = [];
    for (const resolve of woken) resolve();
  };
  /** No more events are taken: after `closed`, a `break`, or an abort. */
  let ended = false;
  const signal = options.signal;
  let stopListening: () => void = () => undefined;
  const stop = () => {
    ended = true;
    stopListening();
    signal?.removeEventListener('abort', abandon);
    wake();
  };
  /** A `break` or an abort: what is queued is dropped, the iteration ends now. */
  const abandon = () => {
    queue.length = 0;
    if (!ended) stop();
  };
  stopListening = hubOf(source).listen((event) => {
    if (ended) return;
    queue.push(event);
    if (event.kind === 'closed') stop();
    else wake();
  });
  if (signal?.aborted === true) abandon();
  else signal?.addEventListener('abort', abandon, { once: true });

  const iterator: AsyncIterableIterator<ConnectionEvent> = {
    async next(): Promise<IteratorResult<ConnectionEvent>> {
      while (queue.length === 0 && !ended) await new Promise<void>((resolve) => waiting.push(resolve));
      const event = queue.shift();
      return event !== undefined ? { value: event, done: false } : { value: undefined, done: true };
    },
    async return(): Promise<IteratorResult<ConnectionEvent>> {
      abandon();
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}
