import { lastHeardFrom, onConnectionEvent, type ConnectionClosed, type ConnectionEventSource } from '@baton/eventstore';

/** The logger calls the watch makes (a {@link JsonLogger} in a service). */
export interface ConnectionLog {
  info(message: string, fields: Record<string, unknown>): void;
  warn(message: string, fields: Record<string, unknown>): void;
  error(message: string, fields: Record<string, unknown>): void;
}

export interface ConnectionWatchOptions {
  /** True once the process stops on purpose: a close then is its own drain, not a loss. */
  stopping: () => boolean;
  /** Called once, after the error line, when the client gives up on the connection for good. */
  onClosed: (error: ConnectionClosed) => void;
  /** While the connection stays down, a warn line every this many ms (default 30 000). */
  stillDownEveryMs?: number;
  /** At most this many lost / back lines per minute (default 10); the next one says how many were left out. */
  linesPerMinute?: number;
  now?: () => number;
}

/** How often a service says that NATS is still unreachable, ms. */
export const STILL_DOWN_EVERY_MS = 30_000;
/** How many lost / back lines a service writes a minute at most (a flapping link cannot flood the log). */
export const CONNECTION_LINES_PER_MINUTE = 10;

/**
 * Say what happens to a service's NATS connection, from the client's status events: a warn when it
 * is lost (`NATS connection lost`, with the server, and `silent_ms`: how long the server had said
 * nothing when the loss was noticed) and the client starts reconnecting, a warn every
 * `stillDownEveryMs` while it stays down (with the attempts so far), an info when it is back (with
 * `down_ms`). `down_ms` counts from the last thing the client heard from the server
 * ({@link lastHeardFrom}: a message, an ack, a PONG), not from when the loss was noticed: a frozen
 * server is noticed only after two unanswered pings (20–30 s), a closed socket at once (then the
 * two are the same). For a connection {@link lastHeardFrom} knows nothing of, from the notice; a warn when the server ends the credentials (revoked or expired: a rotation's
 * reload) or refuses them on a reconnect, an error for any other `-ERR` it sends (a permissions
 * violation), with the server's words. A link that flaps writes at most `linesPerMinute` of these a minute; the next
 * line written carries `suppressed` (how many were left out). When the client gives up for good
 * (credentials revoked or refused on reconnect, or no reconnect allowed) and the process is not
 * stopping, an error line names the typed reason and `onClosed` runs: a service exits then, so its
 * supervisor starts it again — a process whose connection is closed can do nothing. Built on the
 * connection's events ({@link onConnectionEvent}, libs/eventstore/src/connection-events.ts): the
 * same events an agent reads from the SDK.
 */
export function watchConnection(handle: ConnectionEventSource, log: ConnectionLog, opts: ConnectionWatchOptions): void {
  const now = opts.now ?? Date.now;
  const stillDownEveryMs = opts.stillDownEveryMs ?? STILL_DOWN_EVERY_MS;
  const perMinute = opts.linesPerMinute ?? CONNECTION_LINES_PER_MINUTE;
  let windowStart = now();
  let written = 0;
  let suppressed = 0;
  /** Write a lost / back line unless this minute's budget is spent. */
  const limited = (level: 'info' | 'warn' | 'error', message: string, fields: Record<string, unknown>) => {
    const at = now();
    if (at - windowStart >= 60_000) {
      windowStart = at;
      written = 0;
    }
    if (written >= perMinute) {
      suppressed++;
      return;
    }
    written++;
    const extra = suppressed > 0 ? { suppressed } : {};
    suppressed = 0;
    log[level](message, { ...fields, ...extra });
  };

  // The outage as this watch's clock (`now`) sees it: when the still-down lines are due.
  let lastStillDown = 0;
  // When the server was last heard from before the loss (the events' clock, Date.now): what down_ms counts from.
  let silentSince: number | null = null;
  const downMs = (event: { at: number; downMs: number }) => (silentSince === null ? event.downMs : Math.max(event.downMs, event.at - silentSince));
  onConnectionEvent(
    handle,
    (event) => {
      switch (event.kind) {
        case 'disconnected': {
          lastStillDown = now();
          const heard = lastHeardFrom(handle.connection);
          silentSince = heard === undefined ? null : Math.min(heard, event.at);
          const silent = silentSince === null ? {} : { silent_ms: event.at - silentSince };
          if (!opts.stopping()) limited('warn', 'NATS connection lost; reconnecting', { server: event.server, ...silent });
          return;
        }
        case 'reconnecting': {
          const at = now();
          if (at - lastStillDown >= stillDownEveryMs && !opts.stopping()) {
            lastStillDown = at;
            // Not rate-limited: at most one a `stillDownEveryMs`.
            log.warn('NATS still unreachable; reconnecting', { down_ms: downMs(event), attempts: event.attempt, server: event.server });
          }
          return;
        }
        case 'server_error': {
          // The server's -ERR on an open connection, with its words (the status has only the client's code).
          const fields = { nats_code: event.natsCode, said: event.said };
          if (event.about === 'credentials_ended') {
            // A rotation's reload revokes the old key: the client reconnects with the file as it is now.
            if (!opts.stopping()) limited('warn', 'NATS server ended these credentials; reconnecting with the credentials file as it is now', fields);
          } else if (event.about === 'credentials_refused') {
            // A reconnect refused: the client tries again, and gives up after two (the closed line says why).
            if (!opts.stopping()) limited('warn', 'NATS server refused these credentials on reconnect', fields);
          } else limited('error', `NATS server error: ${event.said}`, fields);
          return;
        }
        case 'reconnected': {
          const down = downMs(event);
          silentSince = null;
          limited('info', 'NATS connection back', { server: event.server, down_ms: down, attempts: event.attempts });
          return;
        }
        case 'closed': {
          const error = event.error;
          if (error === undefined || opts.stopping()) return;
          log.error(`NATS connection closed for good (${error.reason}): ${error.message}`, {
            reason: error.reason,
            nats_code: error.natsCode,
            ...(error.credsFile !== null ? { creds_file: error.credsFile } : {}),
          });
          opts.onClosed(error);
          return;
        }
      }
    },
    {
      // A throw of `stopping` or `onClosed` is said, never an unhandled rejection.
      onListenerError: (error, event) =>
        log.error(`NATS connection watch failed on a ${event.kind} event: ${(error as Error)?.message ?? String(error)}`, { event: event.kind }),
    },
  );
}
