import { readFileSync } from 'node:fs';
import { connect, credsAuthenticator, headers as natsHeaders, type JetStreamClient, type JetStreamManager, type MsgHdrs, type NatsConnection } from 'nats';
import { inboxParts } from '@baton/contracts';
import { decodeJwtClaims, jwtOfCreds } from './auth/jwt';
import { hasNatsCode, natsRefusedCredentials, onConnectionEvent, serverContactOf } from './connection-events';
import { ConnectionClosed, CredentialsRefused, PermissionDenied, type ConnectionCloseReason } from './errors';
import { skipSettledCancelErrors } from './settled-requests';
import { patternWithin } from './subject-patterns';
import { coalesceWrites } from './write-coalescing';

/** How to reach NATS. Everything else about the client stays inside this library. */
export interface NatsConnectOptions {
  /** One URL or several, e.g. `nats://127.0.0.1:4222`. Defaults to `NATS_URL` or that address. */
  servers?: string | string[];
  /** Connection name shown by the server's monitoring (`connz`). */
  name?: string;
  /** Request timeout for JetStream API calls and publish acknowledgements, in ms (default 5000). */
  timeoutMs?: number;
  /**
   * How long the first connection (TCP, TLS, authentication) may take, in ms (default 20000).
   * Separate from `timeoutMs`: a busy server or a loaded machine can take seconds to accept a
   * credentialed connection, which says nothing about how long a request should wait.
   */
  connectTimeoutMs?: number;
  /**
   * How long each reconnect dial may take, ms (default {@link DEFAULT_RECONNECT_DIAL_TIMEOUT_MS};
   * never longer than `connectTimeoutMs`). A dial past it gives way to the next node.
   */
  reconnectDialTimeoutMs?: number;
  /** Reconnect when the connection drops (default true). Tests pass false to fail fast. */
  reconnect?: boolean;
  /**
   * How many times in a row the client dials each server after the connection dropped before it
   * gives up on it (default -1: without limit, the services' and agents' way; else a whole number
   * from 1, `RangeError` before connecting). Once every server is given up on the connection closes
   * for good: `closed` resolves with a {@link ConnectionClosed}, reason `reconnects_exhausted`.
   */
  maxReconnectAttempts?: number;
  user?: string;
  pass?: string;
  token?: string;
  /**
   * A `.creds` file (user JWT + nkey seed, see `baton creds`): the server decides who this
   * connection is and what it may publish and subscribe. Read at connect and again at every
   * reconnect ({@link credsFileReader}): credentials rotated into the same path (`baton creds …
   * --rotate`) are what the connection presents after the server's reload.
   */
  credsFile?: string;
  /**
   * How often the client pings the server, in ms (the client's default: 2 minutes). After two
   * unanswered pings the connection counts as lost and reconnects: a server that stopped answering
   * (frozen, a dead peer behind a NAT) is noticed within about three intervals.
   */
  pingIntervalMs?: number;
  /**
   * Prefix of this connection's reply inboxes (request replies, publish acks, pulled messages).
   * Every principal has its own (`inboxPrefixOf` in @baton/contracts) and may subscribe only
   * there; the default `_INBOX` is granted to no one but the admin.
   */
  inboxPrefix?: string;
  /**
   * Ask the server for the account's JetStream info at connect (default true), failing fast when
   * JetStream is off. Agents pass false: their credentials do not allow `$JS.API.INFO`.
   */
  checkJetStream?: boolean;
  /**
   * Send what the connection writes during one event-loop turn in one socket write (default
   * true; see {@link coalesceWrites}). Off only to measure what it saves.
   */
  coalesceWrites?: boolean;
}

/**
 * A live connection and its JetStream views. Baton code passes this handle (or its `js`/`jsm`)
 * to the event store, the provisioner, the consumer runner and the Nest transport.
 */
export interface NatsHandle {
  readonly connection: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  /** Flush pending publishes and acks, unsubscribe, then close. Safe to call twice. */
  drain(): Promise<void>;
  /** Close at once, dropping anything pending. Safe to call twice. */
  close(): Promise<void>;
  /**
   * Resolves when the connection is closed: with nothing when it was closed or drained on purpose,
   * with a {@link ConnectionClosed} (its `reason` typed) when the client gave up on it — the
   * server revoked or refused its credentials, or no server could be reached any more.
   */
  readonly closed: Promise<void | ConnectionClosed>;
}

// The server's errors, read from the client's status events (kept with the connection events; named here as before).
export { hasNatsCode, lastHeardFrom, natsRefusedCredentials, serverSaid, type ServerErrorStatus } from './connection-events';

export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';
export const DEFAULT_CONNECT_TIMEOUT_MS = 20_000;
/**
 * How long each reconnect dial may take, ms. The first connection keeps its longer bound (a busy
 * server or a loaded machine accepting a credentialed connection). A reconnect that lands on a node
 * that accepts the socket and never completes the handshake — a node of a cluster in the middle of a
 * configuration reload, a credential rotation's or revocation's — waited out that bound: every
 * service was off NATS for 20 s on a routine reload. Past this one the client dials the next node.
 */
export const DEFAULT_RECONNECT_DIAL_TIMEOUT_MS = 4_000;

/**
 * Refuse, before connecting, credentials that may not subscribe to the reply inbox the client
 * asks for: a client whose project or agent is not its credentials' (the SDK derives the inbox
 * from them). Connected anyway, its publishes are stored while their acks, and every request's
 * reply, are refused on the way back — it would be told "permission denied" for a run start that
 * was in fact stored, and "unavailable" for each ledger command. A user JWT without subscribe
 * permissions (or one that cannot be read here: the server still decides) is not refused.
 */
function checkInboxAllowed(creds: Uint8Array, inboxPrefix: string): void {
  let claims: Record<string, unknown>;
  try {
    claims = decodeJwtClaims(jwtOfCreds(new TextDecoder().decode(creds)));
  } catch {
    return;
  }
  const allow = (claims['nats'] as { sub?: { allow?: unknown } } | undefined)?.sub?.allow;
  if (!Array.isArray(allow) || allow.length === 0) return;
  const inbox = `${inboxPrefix}.>`;
  if (allow.some((pattern) => typeof pattern === 'string' && patternWithin(pattern, inbox))) return;
  const name = typeof claims['name'] === 'string' ? ` (${claims['name']})` : '';
  // The same principal under another deployment prefix: the project and agent are right, the prefix is not.
  const asked = inboxParts(inbox);
  const issued =
    asked === null
      ? undefined
      : allow
          .map((pattern) => (typeof pattern === 'string' ? inboxParts(pattern) : null))
          .find((parts) => parts !== null && parts.prefix !== asked.prefix && patternWithin(parts.principal, asked.principal));
  if (asked !== null && issued) {
    throw new PermissionDenied(inbox, {
      operation: 'subscribe to',
      why: `these credentials${name} were issued for the deployment prefix '${issued.prefix}', and the client asked for '${asked.prefix}': connect with the prefix they were issued for (BATON_PREFIX)`,
    });
  }
  throw new PermissionDenied(inbox, {
    operation: 'subscribe to',
    why: `these credentials${name} are another principal's: connect with the project and agent they were issued for, or with credentials issued for this one`,
  });
}

/** A credentials file's two blocks, as the NATS client reads them (`credsAuthenticator`). */
const CREDS_BLOCK = /\s*(?:(?:[-]{3,}[^\n]*[-]{3,}\n)(.+)(?:\n\s*[-]{3,}[^\n]*[-]{3,}\n))/gi;

/** Does `bytes` hold what the client needs from a credentials file: a JWT block, then a seed block? */
function holdsCreds(bytes: Uint8Array): boolean {
  const text = new TextDecoder().decode(bytes);
  CREDS_BLOCK.lastIndex = 0;
  const jwt = CREDS_BLOCK.exec(text);
  const seed = jwt === null ? null : CREDS_BLOCK.exec(text);
  CREDS_BLOCK.lastIndex = 0;
  return jwt !== null && seed !== null;
}

/**
 * The credentials a connection presents, read from `file` each time the client authenticates (the
 * first connect and every reconnect): a file rewritten at the same path — `baton creds … --rotate`
 * writes the new credentials where the old ones were — is used from the next reconnect on, with no
 * restart. Reading a file of a few hundred bytes once per connection attempt costs nothing. A file
 * that cannot be read, or does not hold a JWT and a seed (caught mid-write, or removed), does not
 * replace the last content that did: the connection keeps presenting that, and the server decides.
 */
export function credsFileReader(file: string, initial: Uint8Array): () => Uint8Array {
  let good = initial;
  return () => {
    try {
      const read = readFileSync(file);
      if (holdsCreds(read)) good = read;
    } catch {
      // Keep the last good content: the server refuses it if it no longer holds.
    }
    return good;
  };
}

/** A user a credentials file names: its public key (the JWT's `sub`) and when its JWT expires (`exp`, seconds; null: never). */
interface CredentialsUser {
  user: string;
  expiresAt: number | null;
}

/** The user of credentials as the client presents them, or null when they cannot be read as a user JWT. */
function userOfCreds(bytes: Uint8Array): CredentialsUser | null {
  try {
    const claims = decodeJwtClaims(jwtOfCreds(new TextDecoder().decode(bytes)));
    const user = claims['sub'];
    const exp = claims['exp'];
    return typeof user === 'string' ? { user, expiresAt: typeof exp === 'number' ? exp : null } : null;
  } catch {
    return null;
  }
}

/**
 * What the connection knows about its credentials when the client gives up: what the server said
 * about them before (revoked, or expired: an -ERR on the open connection), the user it presented
 * last, and every user a server accepted on this connection. The server's words reach only a
 * connection open where the revocation is applied; every later connect, on any server that applied
 * it, is refused with the same "Authorization Violation" as unknown credentials. So a user refused
 * after a server accepted it on this connection was revoked, whether or not a server said so (on a
 * cluster revoked node by node, whether it did depends on which node each reconnect lands on).
 */
interface CredentialsNews {
  revoked: boolean;
  expired: boolean;
  said: string | null;
  /** The user the connection presented at its last (re)connect attempt; null without a credentials file. */
  presented: CredentialsUser | null;
  /** The users a server accepted on this connection (its first connect and each reconnect). */
  accepted: Set<string>;
}

/** The typed form of the error the NATS client closed a connection with, or undefined for a close on purpose. */
function closedBy(error: Error | void, news: CredentialsNews, credsFile: string | null): ConnectionClosed | undefined {
  if (!(error instanceof Error)) return undefined;
  const code = (error as { code?: unknown }).code;
  const natsCode = typeof code === 'string' ? code : null;
  const text = `${error.message} ${news.said ?? ''}`;
  const file = credsFile !== null ? `the credentials file ${credsFile}` : 'its credentials';
  const refused = natsRefusedCredentials(error);
  const presented = news.presented;
  // Refused with a user JWT past its `exp`: expired, which the server's refusal does not say.
  const lapsed = refused && presented !== null && presented.expiresAt !== null && presented.expiresAt <= Date.now() / 1000;
  // Refused the very user a server accepted on this connection: the deployment stopped accepting it.
  const cutOff = refused && !lapsed && presented !== null && news.accepted.has(presented.user);
  let reason: ConnectionCloseReason;
  let why: string;
  if (news.revoked || /revoked/i.test(error.message)) {
    reason = 'credentials_revoked';
    why = `the server revoked ${file} (${news.said ?? error.message}) and it holds no credentials the server accepts: issue new ones (baton creds … --rotate writes them to the same path) and restart the process`;
  } else if (cutOff) {
    reason = 'credentials_revoked';
    why = `the server no longer accepts ${file} (user ${presented.user}), which it accepted on this connection before: revoked (${error.message}: a server that applied the revocation before this connection reached it refuses it without saying why) and the file holds no credentials the server accepts: issue new ones (baton creds … --rotate writes them to the same path) and restart the process`;
  } else if (lapsed || hasNatsCode(error, 'AUTHENTICATION_EXPIRED') || hasNatsCode(error, 'ACCOUNT_EXPIRED') || news.expired || /expired/i.test(text)) {
    reason = 'credentials_expired';
    why = `${file} expired (${error.message}): issue new ones (baton creds) and restart the process`;
  } else if (refused) {
    reason = 'credentials_refused';
    why = `the server refused ${file} on reconnect (${error.message}), credentials no server accepted on this connection: unknown to it, or another deployment's`;
  } else if (
    natsCode === 'CONNECTION_REFUSED' ||
    natsCode === 'TIMEOUT' ||
    natsCode === 'DISCONNECT' ||
    /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH/.test(error.message)
  ) {
    reason = 'reconnects_exhausted';
    why = `no server could be reached within the reconnect attempts allowed (${error.message})`;
  } else {
    reason = 'error';
    why = error.message;
  }
  return new ConnectionClosed(reason, natsCode, credsFile, `the NATS client closed the connection and will not reconnect: ${why}`, { cause: error });
}

/** The NATS client's protocol handler, as far as {@link watchServerContact} and {@link dropAbandonedDials} reach into it (nats.js 2.x). */
interface ProtocolInternals {
  push?: (op: unknown) => void;
  prepare?: () => unknown;
  transport?: AbandonableTransport;
}

/** A dial's transport (nats.js 2.x `NodeTransport`): `connected` once it read the server's INFO; `done` once closed. */
interface AbandonableTransport {
  connected?: boolean;
  done?: boolean;
  socket?: { destroy(): void };
}

/**
 * Note the time of every protocol operation the client parses from its server (nats.js hands each one
 * to its protocol handler's `push`, whichever socket it came on): one `Date.now()` per operation.
 * Nothing when the client has no such handler.
 */
function watchServerContact(connection: NatsConnection): void {
  const protocol = (connection as unknown as { protocol?: ProtocolInternals }).protocol;
  if (protocol === undefined || typeof protocol.push !== 'function') return;
  const contact = serverContactOf(connection);
  const push = protocol.push.bind(protocol);
  protocol.push = (op: unknown) => {
    contact.at = Date.now();
    push(op);
  };
}

/**
 * Close the socket of a reconnect dial the client gave up on, and keep it from ever speaking for the
 * connection. nats.js 2.x bounds a dial (`timeout`) but leaves its socket open when the bound passes
 * before the server's INFO came: a frozen nats-server's kernel completes the TCP handshake of every
 * dial while the process answers none. When the server comes back it sends INFO on each of those
 * sockets, the abandoned dial completes behind the client's back, never sends CONNECT, and the
 * server closes it after its authentication timeout (`authorization { timeout }`: 10 s in Baton's
 * server configuration) — and the client reads that close as the loss of its live connection: every
 * service dropped and reconnected again about 10 s after a freeze ended. So when the client prepares
 * its next dial, the previous transport, if it is not closed (a lost connection's is, by then), is a
 * dial given up on: it is marked closed (its close is never told) and its socket destroyed. Nothing
 * when the client has no such handler.
 */
function dropAbandonedDials(connection: NatsConnection): void {
  const protocol = (connection as unknown as { protocol?: ProtocolInternals }).protocol;
  if (protocol === undefined || typeof protocol.prepare !== 'function') return;
  const prepare = protocol.prepare.bind(protocol);
  protocol.prepare = () => {
    const previous = protocol.transport;
    // The transport of a connection that was lost is closed (`done`) before the client dials again; one
    // still open is a dial given up on: still waiting for INFO, or connected after the client gave up on it.
    if (previous !== undefined && previous.done !== true) {
      previous.done = true;
      try {
        previous.socket?.destroy();
      } catch {
        // already gone
      }
    }
    return prepare();
  };
}

/**
 * Connect to NATS and open JetStream. Fails (rejects) if the server is unreachable on the first
 * attempt or JetStream is not enabled on it; afterwards the client reconnects on its own.
 */
export async function connectNats(opts: NatsConnectOptions = {}): Promise<NatsHandle> {
  const servers = opts.servers ?? process.env['NATS_URL'] ?? DEFAULT_NATS_URL;
  const attempts = opts.maxReconnectAttempts;
  if (attempts !== undefined && attempts !== -1 && !(Number.isInteger(attempts) && attempts >= 1)) {
    throw new RangeError(`maxReconnectAttempts must be -1 (without limit) or a whole number from 1 (got ${String(attempts)})`);
  }
  const timeout = opts.timeoutMs ?? 5000;
  const news: CredentialsNews = { revoked: false, expired: false, said: null, presented: null, accepted: new Set() };
  let authenticator: ReturnType<typeof credsAuthenticator> | undefined;
  if (opts.credsFile !== undefined) {
    const file = opts.credsFile;
    let creds: Uint8Array;
    try {
      creds = readFileSync(opts.credsFile);
    } catch (err) {
      throw new CredentialsRefused('unreadable', opts.credsFile, `cannot read the NATS credentials file ${opts.credsFile}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    if (opts.inboxPrefix !== undefined) checkInboxAllowed(creds, opts.inboxPrefix);
    const read = credsFileReader(file, creds);
    // Which user each (re)connect presents: a refusal of one a server accepted before is a revocation (closedBy).
    authenticator = credsAuthenticator(() => {
      const presented = read();
      news.presented = userOfCreds(presented);
      return presented;
    });
  }
  const connection = await connect({
    servers,
    name: opts.name,
    timeout: opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    reconnect: opts.reconnect ?? true,
    maxReconnectAttempts: opts.maxReconnectAttempts ?? -1,
    ...(opts.pingIntervalMs !== undefined ? { pingInterval: opts.pingIntervalMs, maxPingOut: 2 } : {}),
    // Without this the client captures a stack trace (an Error and a timeout NatsError) for every
    // request and acked publish: about a tenth of a service's CPU under load. Errors keep their
    // message and code; only the caller's async stack is missing from them.
    noAsyncTraces: true,
    user: opts.user,
    pass: opts.pass,
    token: opts.token,
    ...(authenticator ? { authenticator } : {}),
    ...(opts.inboxPrefix !== undefined ? { inboxPrefix: opts.inboxPrefix } : {}),
  });
  // What the server says about the credentials before a close (an -ERR on the open connection),
  // which the error the client finally closes with ("Authorization Violation" on a reconnect) no
  // longer tells. The status only carries the client's code (NATS_PROTOCOL_ERR for "User
  // Authentication Revoked"); the server's text is the protocol's last error, read when there is
  // one (an internal field of nats.js 2.x). A reconnect that succeeds forgets it; a refusal of a
  // user a server accepted on this connection is a revocation all the same (closedBy), so the
  // close's reason does not depend on whether this connection heard the server's words. Read from
  // the connection's events, which are read from now on: an outage that begins before anyone
  // listens is still known to a listener that comes later.
  // From now on every dial is a reconnect's: the client reads its dial bound from the options it
  // was given (nats.js 2.x keeps that object: `timeout` bounds each dial, and nothing else).
  const dialTimeout = Math.min(opts.reconnectDialTimeoutMs ?? DEFAULT_RECONNECT_DIAL_TIMEOUT_MS, opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS);
  const options = (connection as unknown as { options?: { timeout?: number } }).options;
  if (options !== undefined) options.timeout = dialTimeout;
  // The user the first connect presented was accepted (each reconnect's is, once `reconnected` says so).
  if (news.presented !== null) news.accepted.add(news.presented.user);
  const closed = connection.closed().then((error) => closedBy(error, news, opts.credsFile ?? null));
  onConnectionEvent({ connection, closed }, (event) => {
    if (event.kind === 'server_error') {
      if (/revoked/i.test(event.said)) Object.assign(news, { revoked: true, said: event.said });
      else if (/expired/i.test(event.said)) Object.assign(news, { expired: true, said: event.said });
    } else if (event.kind === 'reconnected') {
      Object.assign(news, { revoked: false, expired: false, said: null });
      if (news.presented !== null) news.accepted.add(news.presented.user);
    }
  });
  watchServerContact(connection);
  dropAbandonedDials(connection);
  if (opts.coalesceWrites ?? true) coalesceWrites(connection);
  skipSettledCancelErrors();
  let jsm: JetStreamManager;
  try {
    jsm = await connection.jetstreamManager({ timeout, checkAPI: opts.checkJetStream ?? true });
  } catch (err) {
    await connection.close();
    throw new Error(`JetStream is not available on ${String(servers)}: ${(err as Error).message}`, { cause: err });
  }
  const js = connection.jetstream({ timeout });
  return {
    connection,
    js,
    jsm,
    closed,
    async drain() {
      if (connection.isClosed()) return;
      if (connection.isDraining()) {
        await connection.closed();
        return;
      }
      await connection.drain();
    },
    async close() {
      if (connection.isClosed()) return;
      await connection.close();
    },
  };
}

/** NATS message headers from a plain record (so callers need not import the client). */
export function headersFrom(record: Record<string, string>): MsgHdrs {
  const result = natsHeaders();
  for (const [name, value] of Object.entries(record)) result.set(name, value);
  return result;
}
