import type { Rejection } from '@baton/contracts';

/**
 * JetStream API error codes Baton reacts to. They are mapped to Baton errors in one place,
 * {@link mapNatsError}; nothing else in the code base looks at server codes.
 */
export const JsErrCode = {
  /** `Nats-Expected-Last-Subject-Sequence` (or `-Last-Sequence`) did not match: another writer appended first. */
  wrongLastSequence: 10071,
  streamNotFound: 10059,
  consumerNotFound: 10014,
  noMessageFound: 10037,
  streamNameInUse: 10058,
  /**
   * A stream's subjects overlap another stream's. Also what nats-server 2.9.10 answers to a create
   * that races another create of the SAME stream (two instances provisioning at once): the other's
   * subjects are registered before its name. Reading the stream again tells the two apart.
   */
  streamSubjectOverlap: 10065,
  consumerNameExists: 10013,
  consumerAlreadyExists: 10105,
  /**
   * The server could not create a stream's store. Seen on nats-server 2.9.10 as a race: the last
   * file-backed stream of an account deleted while another is created removes the account's
   * storage directory under the new one ("could not create storage directory … no such file or
   * directory" in its log). A retry succeeds.
   */
  streamStoreFailed: 10049,
  /**
   * A publish the stream could not store: with `description` "maximum bytes exceeded" (or
   * "maximum messages exceeded"), a `discard: new` stream at its limit ({@link StorageFull}).
   */
  publishNotStored: 10077,
  /** A publish refused because the account's JetStream storage limit is reached ({@link StorageFull}). */
  accountResourcesExceeded: 10002,
} as const;

/**
 * The stable codes of {@link EventStoreError}s: what a caller branches on (never the message).
 * `store_error` is any other failure of the store or the server.
 */
export const EventStoreErrorCode = {
  storeError: 'store_error',
  concurrencyConflict: 'concurrency_conflict',
  streamNotFound: 'stream_not_found',
  publishTimeout: 'publish_timeout',
  permissionDenied: 'permission_denied',
  eventInvalid: 'event_invalid',
  eventUndecodable: 'event_undecodable',
  provisionFailed: 'provision_failed',
  unauthenticated: 'unauthenticated',
  connectionClosed: 'connection_closed',
  storageFull: 'storage_full',
} as const;
export type EventStoreErrorCode = (typeof EventStoreErrorCode)[keyof typeof EventStoreErrorCode];

/** Base class of every error this library raises. `cause` carries the client or server error; `code` says which failure it is. */
export class EventStoreError extends Error {
  readonly code: EventStoreErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: EventStoreErrorCode }) {
    super(message, options);
    this.name = 'EventStoreError';
    this.code = options?.code ?? EventStoreErrorCode.storeError;
  }
}

/**
 * Another writer appended to the aggregate after the state this writer decided on. The append was
 * refused by the server, nothing was written; re-read, re-decide and retry.
 */
export class ConcurrencyConflict extends EventStoreError {
  declare readonly code: typeof EventStoreErrorCode.concurrencyConflict;
  constructor(
    readonly subject: string,
    readonly expectedSeq: number,
    options?: { cause?: unknown },
  ) {
    super(`concurrency conflict on ${subject}: expected last subject sequence ${expectedSeq}`, { ...options, code: EventStoreErrorCode.concurrencyConflict });
    this.name = 'ConcurrencyConflict';
  }
}

/** No stream holds the subject or name asked for (not provisioned, or deleted). */
export class StreamNotFound extends EventStoreError {
  declare readonly code: typeof EventStoreErrorCode.streamNotFound;
  constructor(
    readonly stream: string,
    options?: { cause?: unknown },
  ) {
    super(`stream not found: ${stream}`, { ...options, code: EventStoreErrorCode.streamNotFound });
    this.name = 'StreamNotFound';
  }
}

/**
 * The server did not acknowledge a publish in time. The message may or may not be stored: retry
 * with the same `Nats-Msg-Id` (within the duplicate window) to find out without duplicating it.
 */
export class PublishTimeout extends EventStoreError {
  declare readonly code: typeof EventStoreErrorCode.publishTimeout;
  /** How many attempts went unanswered, each under the same message id (1 unless the publisher retried). */
  readonly attempts: number;
  /** The message id every attempt was sent under, when the publisher set one: publish again with it. */
  readonly msgId: string | undefined;
  constructor(
    readonly subject: string,
    options?: { cause?: unknown; attempts?: number; msgId?: string },
  ) {
    const attempts = options?.attempts ?? 1;
    const tried = attempts > 1 ? ` after ${attempts} attempts under message id ${options?.msgId ?? '(none)'}` : '';
    super(`no publish acknowledgement for ${subject}${tried}`, { cause: options?.cause, code: EventStoreErrorCode.publishTimeout });
    this.name = 'PublishTimeout';
    this.attempts = attempts;
    this.msgId = options?.msgId;
  }
}

/**
 * Why a client could not connect with the credentials it has ({@link CredentialsRefused}):
 * `refused` — the server would not let them in (unknown to it, expired, revoked, another
 * deployment's); `invalid` — the file is no NATS credentials file the client can use;
 * `unreadable` — the file could not be read; `missing` — none were given to a server that requires
 * them.
 */
export type CredentialsProblem = 'refused' | 'invalid' | 'unreadable' | 'missing';

/**
 * The client cannot connect with its credentials (`reason` says why; `credsFile` is the file it
 * presented, null for none). Retrying does not help; other credentials do.
 */
export class CredentialsRefused extends EventStoreError {
  declare readonly code: typeof EventStoreErrorCode.unauthenticated;
  constructor(
    readonly reason: CredentialsProblem,
    readonly credsFile: string | null,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, { ...options, code: EventStoreErrorCode.unauthenticated });
    this.name = 'CredentialsRefused';
  }
}

/**
 * Why the NATS client gave up on a connection for good ({@link ConnectionClosed}):
 * `credentials_revoked` — the server revoked the credentials it was using and the file held no
 * others: it said so ("User Authentication Revoked"), or it refuses ("Authorization Violation") the
 * very user key a server accepted on this connection before — a server that applied the revocation
 * while the client was elsewhere says nothing more, so on a cluster the words depend on the node,
 * the reason does not; `credentials_expired` — the user JWT (or its account) expired, a refused JWT
 * past its own `exp` included; `credentials_refused` — the server refused on every reconnect
 * credentials no server accepted on this connection (the file rewritten with credentials unknown
 * to it, another deployment's);
 * `reconnects_exhausted` — no server could be reached within the reconnect attempts allowed;
 * `error` — any other error the client closed on.
 */
export type ConnectionCloseReason = 'credentials_revoked' | 'credentials_expired' | 'credentials_refused' | 'reconnects_exhausted' | 'error';

/**
 * A NATS connection the client closed on its own and will not reconnect (what `NatsHandle.closed`
 * resolves with). Everything on it has failed; a process holding it must open a new one — a
 * service exits so that its supervisor starts it again. `natsCode` is the client's code for the
 * last error, `credsFile` the credentials file the connection read (null for none).
 */
export class ConnectionClosed extends EventStoreError {
  declare readonly code: typeof EventStoreErrorCode.connectionClosed;
  constructor(
    readonly reason: ConnectionCloseReason,
    readonly natsCode: string | null,
    readonly credsFile: string | null,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, { ...options, code: EventStoreErrorCode.connectionClosed });
    this.name = 'ConnectionClosed';
  }
}

/**
 * The server refused the connection's credentials this subject (a NATS permissions violation), and
 * a retry gets the same answer. `operation` says what was refused: `publish to` — nothing was
 * stored (an agent publishing to another agent's or another project's subject); `subscribe to` —
 * the reply inbox (`subject`): credentials issued for another principal than the one the client
 * was made for. Refused at connect when the credentials show it; found on a publish instead, its
 * ack could not come back and the message may be stored.
 */
export class PermissionDenied extends EventStoreError {
  declare readonly code: typeof EventStoreErrorCode.permissionDenied;
  readonly operation: 'publish to' | 'subscribe to';

  constructor(
    readonly subject: string,
    options?: { cause?: unknown; operation?: 'publish to' | 'subscribe to'; why?: string },
  ) {
    const operation = options?.operation ?? 'publish to';
    super(`the connection's credentials may not ${operation} ${subject}${options?.why ? `: ${options.why}` : ''}`, {
      ...(options?.cause !== undefined ? { cause: options.cause } : {}),
      code: EventStoreErrorCode.permissionDenied,
    });
    this.name = 'PermissionDenied';
    this.operation = operation;
  }
}

/**
 * A consumer's pull the server ended with a status that says the consumer cannot be reached through
 * it (`status`, the server's own): `503` — nothing answered the pull (JetStream is not there, or,
 * through a relay such as Baton's agent edge, nothing relays it); `409` with "consumer deleted" —
 * the consumer was deleted under the pull. `code` is `store_error`; the runner tells its `onError`
 * and pulls again (looking the consumer up again first).
 */
export class PullEndedError extends EventStoreError {
  declare readonly code: typeof EventStoreErrorCode.storeError;
  constructor(
    readonly stream: string,
    readonly durable: string,
    readonly status: { readonly code: number; readonly description: string },
  ) {
    super(`pulling ${durable} on ${stream}: ${status.code} ${status.description}`);
    this.name = 'PullEndedError';
  }
}

/** An event a writer tried to append does not match its registered schema. Nothing was written. */
export class EventValidationError extends EventStoreError {
  declare readonly code: typeof EventStoreErrorCode.eventInvalid;
  constructor(
    readonly eventType: string,
    readonly rejection: Rejection,
    options?: { cause?: unknown },
  ) {
    super(`event ${eventType} rejected: ${rejection.message}`, { ...options, code: EventStoreErrorCode.eventInvalid });
    this.name = 'EventValidationError';
  }
}

/** A stored event could not be decoded (bad JSON, unknown type, failed upcast or schema). */
export class EventDecodeError extends EventStoreError {
  declare readonly code: typeof EventStoreErrorCode.eventUndecodable;
  constructor(
    readonly subject: string,
    readonly seq: number,
    readonly rejection: Rejection,
    options?: { cause?: unknown },
  ) {
    super(`event at ${subject}#${seq} cannot be decoded: ${rejection.message}`, { ...options, code: EventStoreErrorCode.eventUndecodable });
    this.name = 'EventDecodeError';
  }
}

/** Which storage limit refused a publish: the stream's bytes or messages (discard new), or the account's JetStream storage. */
export type StorageLimit = 'stream_bytes' | 'stream_messages' | 'account_storage';

/**
 * The server refused to store a message because a storage limit is reached: the stream's
 * `max_bytes` or `max_msgs` (a `discard: new` stream: `<PREFIX>_INBOX` with `BATON_INBOX_MAX_BYTES`;
 * JetStream's "maximum bytes exceeded") or the account's JetStream storage (`baton nats-config
 * --max-store`; "resource limits exceeded for account"). Nothing was stored, and nothing stored
 * before was dropped to make room. Publishing again succeeds once room is made (messages age out,
 * an SRE raises the limit: docs/sre.md, "Capacity"); until then it is refused alike.
 */
export class StorageFull extends EventStoreError {
  declare readonly code: typeof EventStoreErrorCode.storageFull;
  constructor(
    readonly subject: string,
    readonly limit: StorageLimit,
    options?: { cause?: unknown },
  ) {
    const what =
      limit === 'account_storage' ? "the account's JetStream storage is full" : `its stream is full (${limit === 'stream_bytes' ? 'max_bytes' : 'max_msgs'})`;
    super(`publish to ${subject} refused: ${what}; nothing was stored — publish it again once room is made (docs/sre.md, Capacity)`, {
      ...options,
      code: EventStoreErrorCode.storageFull,
    });
    this.name = 'StorageFull';
  }
}

/** The storage limit a JetStream publish error names, or null when it is not a full stream or account. */
export function storageLimitOf(err: unknown): StorageLimit | null {
  const api = jsApiError(err);
  if (api === undefined) return null;
  if (api.err_code === JsErrCode.accountResourcesExceeded) return 'account_storage';
  if (api.err_code !== JsErrCode.publishNotStored) return null;
  const description = api.description ?? '';
  if (description === 'maximum bytes exceeded') return 'stream_bytes';
  if (description === 'maximum messages exceeded' || description === 'maximum messages per subject exceeded') return 'stream_messages';
  return null;
}

/** A stream or consumer could not be made to match its spec (for example an immutable field differs). */
export class ProvisionError extends EventStoreError {
  declare readonly code: typeof EventStoreErrorCode.provisionFailed;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { ...options, code: EventStoreErrorCode.provisionFailed });
    this.name = 'ProvisionError';
  }
}

/**
 * Thrown by a message handler when the failure may go away (a dependency is down, a lock is held).
 * The consumer runner naks the message with a delay taken from its backoff list (or `delayMs`),
 * and dead-letters it once the delivery count reaches `maxDeliver` — unless `unbounded`: a failure
 * that is the infrastructure's or a limit's, never the message's (the ledger not answering, a rate
 * limit, a paused project), is retried until it goes away, with the backoff list's last delay at
 * most, and never dead-lettered. An event consumer's letter cannot be redriven (an aggregate has one
 * writer), so giving up on such a failure after a few seconds of outage would lose the event.
 */
export class TransientError extends Error {
  readonly delayMs: number | undefined;
  readonly unbounded: boolean;
  constructor(message: string, options?: { cause?: unknown; delayMs?: number; unbounded?: boolean }) {
    super(message, options);
    this.name = 'TransientError';
    this.delayMs = options?.delayMs;
    this.unbounded = options?.unbounded === true;
  }
}

/**
 * Thrown by a message handler when the message can never succeed (malformed, violates its
 * schema, refers to something that cannot exist). The runner dead-letters it with `reason` and
 * terminates it at once: it is never retried. `lettered`, when given, is called once the message's
 * own letter is stored — not when its sender's budget only counted it for a summary
 * (`letterGate`: `suppressed`), nor when the letter could not be written (the message comes
 * again) — with the stream and sequence of the message: what the handler says past the letter
 * goes under the letter's budget (the router's refused-result notice). It must not throw.
 */
export class PoisonError extends Error {
  readonly lettered: ((message: { stream: string; seq: number }) => void) | undefined;
  constructor(
    message: string,
    readonly reason: string = 'poison',
    options?: { cause?: unknown; lettered?: (message: { stream: string; seq: number }) => void },
  ) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'PoisonError';
    this.lettered = options?.lettered;
  }
}

interface ApiErrorShape {
  err_code?: number;
  code?: number;
  description?: string;
}

/** The JetStream API error attached to a client error, if any. */
export function jsApiError(err: unknown): ApiErrorShape | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const api = (err as { api_error?: unknown }).api_error;
  return typeof api === 'object' && api !== null ? (api as ApiErrorShape) : undefined;
}

/** The JetStream `err_code` of a client error, or undefined when it is not a JetStream API error. */
export function jsErrCode(err: unknown): number | undefined {
  return jsApiError(err)?.err_code;
}

/**
 * True when `err` says the infrastructure did not answer — a publish without acknowledgement, a
 * request that timed out or found no responder, a connection closing or closed, Redis not
 * answering (`RedisUnavailableError`, by name: it lives in the projections) — rather than that
 * anything is wrong with the message: what an `unbounded` {@link TransientError} is for.
 */
export function isUnavailable(err: unknown): boolean {
  if (err instanceof PublishTimeout || err instanceof StorageFull) return true;
  if (storageLimitOf(err) !== null) return true;
  if (isTimeout(err) || isNoResponders(err)) return true;
  if (typeof err !== 'object' || err === null) return false;
  const { code, name } = err as { code?: unknown; name?: unknown };
  return code === 'CONNECTION_CLOSED' || code === 'CONNECTION_DRAINING' || name === 'RedisUnavailableError';
}

/** True when the client error is a request timeout (no responder answered in time). */
export function isTimeout(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = (err as { code?: unknown }).code;
  return code === 'TIMEOUT' || code === '408';
}

/** True when the client error is the server's permissions violation (the credentials may not publish or subscribe there). */
export function isPermissionsViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'PERMISSIONS_VIOLATION';
}

/** True when the client error says no one answered the request (e.g. JetStream off, or no stream). */
export function isNoResponders(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  return (err as { code?: unknown }).code === '503';
}

/**
 * Map a client or server error raised while publishing to `subject` with an expected last subject
 * sequence into a Baton error. The one place server codes are interpreted for appends.
 */
export function mapPublishError(err: unknown, subject: string, expectedSeq: number | undefined): Error {
  if (err instanceof EventStoreError) return err;
  const code = jsErrCode(err);
  if (code === JsErrCode.wrongLastSequence && expectedSeq !== undefined) {
    return new ConcurrencyConflict(subject, expectedSeq, { cause: err });
  }
  // Before "no responders": nats.js gives a stream's 503 answer the same client code.
  const full = storageLimitOf(err);
  if (full !== null) return new StorageFull(subject, full, { cause: err });
  if (code === JsErrCode.streamNotFound || isNoResponders(err)) return new StreamNotFound(subject, { cause: err });
  if (isPermissionsViolation(err)) {
    // The server may have refused the reply inbox the ack comes back on, not the publish: then the
    // message may be stored, and the subject to name is the inbox.
    const inbox = /Subscription to "([^"]+)"/.exec(err instanceof Error ? err.message : String(err))?.[1];
    if (inbox !== undefined)
      return new PermissionDenied(inbox, {
        cause: err,
        operation: 'subscribe to',
        why: `the reply inbox of a publish to ${subject}, which may have been stored`,
      });
    return new PermissionDenied(subject, { cause: err });
  }
  if (isTimeout(err)) return new PublishTimeout(subject, { cause: err });
  const message = err instanceof Error ? err.message : String(err);
  return new EventStoreError(`publish to ${subject} failed: ${message}`, { cause: err });
}
