import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import {
  AgentNameSchema,
  AgentResultSchema,
  ClaimWithdrawnSchema,
  claimWithdrawnSubject,
  edgeAckSubject,
  edgeApiPrefix,
  edgeSubjectOf,
  GiveUpOfferCommandSchema,
  inboxParts,
  inboxPrefixOf,
  Limits,
  MsgIds,
  OpenOffersCommandSchema,
  parseUntrustedJson,
  Principals,
  ProjectIdSchema,
  SessionMessageSchema,
  RejectionCode,
  ResultRefusedSchema,
  resultRefusedSubject,
  StartRunRequestSchema,
  rejectionFromZod,
  type AgentResult,
  type ResultRefused,
  type SessionMessage,
  type StartRunRequest,
} from '@baton/contracts';
import {
  ConnectionClosed,
  EventStoreError,
  EventStoreErrorCode,
  LedgerClient,
  connectNats as connectToNats,
  connectionEvents,
  CredentialsRefused,
  decodeJwtClaims,
  hasNatsCode,
  headersFrom,
  isNoResponders,
  isPermissionsViolation,
  isTimeout,
  jwtOfCreds,
  natsRefusedCredentials,
  hopTraceHeaders,
  onConnectionEvent,
  PermissionDenied,
  principalOfCreds,
  PullEndedError,
  runConsumer,
  traceHeaders,
  type ConnectionEvent,
  type ConnectionEventsOptions,
  type ConsumerLostEvent,
  type HopTrace,
  type NatsConnectOptions,
  type NatsHandle,
} from '@baton/eventstore';
import { BatonSdkError, InvalidInputError, LedgerCommandError, OfferPullError, OfferTerminatedError, SdkErrorCode, SubscriptionStoppingError } from './errors';
import type { MeshPublisher } from './mesh';
import { createOfferHandler, type HandoffOffer, type UnfinishedOffer } from './offers';
import { DEFAULT_SENT_IDS, messageIdentity, publishOnce, publishRetryOf, SentMessageIds, type PublishRetry } from './sent-ids';
import { AgentSubjects } from './subjects';
import { decisionSignalOf, ResultClaimCode, type MeshErrorCode, type RunErrorCode } from '@baton/domain';

/** How to reach Baton, and who this client speaks for. */
export interface BatonClientOptions {
  /** NATS server URL(s) (default `NATS_URL` or nats://127.0.0.1:4222). Ignored when `nats` is given. */
  natsUrl?: string | string[];
  /**
   * This agent's NATS credentials file (`baton creds agent --project <p> --agent <name>`; default
   * `NATS_CREDS`). The server decides from it who this client is: it may publish only this agent's
   * results and ledger commands and read only its own offers and replies. Read again at every
   * reconnect: credentials rotated into the same path (`baton creds agent … --rotate`) are used
   * once the server's reload closes the connection. Ignored when `nats` is given.
   */
  natsCreds?: string;
  /** An open connection to share (the caller keeps ownership: `close()` leaves it open). */
  nats?: NatsHandle;
  /** Subject prefix of the Baton deployment (default `BATON_PREFIX` or `baton`). */
  prefix?: string;
  /** The project this agent works in. */
  project: string;
  /** This agent's name, as listed in the project definition. */
  agent: string;
  /**
   * How long one ledger request waits for its reply, ms (default 5000; the client retries timeouts
   * twice with the same idempotency key). A positive finite number (`RangeError` before connecting).
   */
  requestTimeoutMs?: number;
  /**
   * How long one publish (a result, a run start, a message, a mesh start or turn) waits for the
   * stream's acknowledgement, ms (default 5000).
   */
  publishTimeoutMs?: number;
  /**
   * How many times in all a publish is sent when no acknowledgement comes (default 3). Every attempt
   * carries the same `Nats-Msg-Id`, so the stream stores the message once however many reach it; a
   * retry that finds the first attempt stored answers `duplicate: true` with its sequence. Only a
   * timeout is retried, with 200 ms × n between attempts. Attempts × `publishTimeoutMs` (with those
   * waits) may not exceed 60 s, half the stream's duplicate window (`RangeError` before connecting).
   * After the last, `PublishTimeout` (`attempts`, `msgId`): the outcome is unknown, and publishing
   * the same message again is still safe.
   */
  publishAttempts?: number;
  /**
   * How many message ids the client remembers having published (default 10 000; at least what it
   * publishes in 2 minutes). A `duplicate: true` answer for an id it remembers is its own retry; for
   * any other id it is another publisher's message and the publish throws `DuplicateMessageError`.
   */
  sentIdsCapacity?: number;
  /**
   * Where `startRun` and `sendMessage` publish: `agent` (default) on the subjects that name this
   * agent, `<prefix>.in.<project>.start.<agent>` (the run's start records this agent as its actor)
   * and `…message.<agent>` (the message records this agent as `relayed_by`); `project` on the
   * project's shared `…start` (actor `project-client`) and `…message` — for credentials issued before
   * agent-named subjects existed (they allow only the shared ones; `baton creds agent` issues new ones).
   */
  publishesAs?: 'agent' | 'project';
  /**
   * Reach JetStream through the agent edge (`<prefix>.edge.…`, relayed by the ledger): results,
   * starts and messages, and the offers durable's pulls and acknowledgements. Credentials Baton
   * issues allow nothing else — JetStream answers on whatever reply subject a client sets, so an
   * agent may publish nothing it reads. Default: on when this client connects with credentials
   * (`natsCreds` / `NATS_CREDS`), or shares a handle the SDK's {@link connectNats} opened with an
   * agent's credentials; off otherwise (a development server without authentication, or a shared
   * handle opened otherwise, reaches the streams directly).
   */
  edge?: boolean;
  /**
   * Told of every event of this client's connection, from the moment the client exists (see
   * {@link BatonAgent.connectionEvents} for the events): `disconnected`, `reconnecting`,
   * `reconnected`, `server_error`, and last `closed`. Called synchronously as each happens; a
   * listener that throws (or returns a promise that rejects) is reported with `console.error` and
   * breaks nothing — not the connection, not the client, not its own later calls. On a shared
   * handle, `close()` ends the calls (the connection lives on).
   */
  onConnection?: (event: ConnectionEvent) => void | Promise<void>;
  /**
   * Told when the router refused a result or a mesh turn this agent published (`of`: `result` —
   * recorded on the run as `run.result_rejected` — or `turn` — `mesh.turn_rejected`): a late turn
   * after its claim lapsed (`handoff_not_claimed`), a turn after the mesh stopped
   * (`mesh_not_running`), a result under another claim (`claim_mismatch`)… `publishResult`,
   * `offer.finish` and `publishMeshResult` resolve once the inbox stored the message, before the
   * router decides it; this is how the agent hears the decision when it is a refusal (the run and
   * mesh views are not an agent's to read). The router says it on this agent's own
   * `<agent inbox>.refused` (`result-refused.json`), which only this agent's credentials read. A
   * hint, at most once: every process of the agent connected then hears it (`publishedHere` tells
   * this client's own results), none that was not. Nothing is said of a result taken. Called
   * synchronously as each arrives; a listener that throws (or rejects) is reported with
   * `console.error` and breaks nothing. Without it the client does not listen.
   */
  onResultRefused?: (refusal: ResultRefusal) => void | Promise<void>;
}

/**
 * The codes a refused result or mesh turn carries (docs/errors.md sections 3.1 and 3.4): the run
 * decider's (`RunErrorCode`: `run_not_running`, `unexpected_agent`, the claim rule's
 * `claim_required`, `stale_handoff`, `handoff_not_claimed`, `claim_mismatch`…), the mesh decider's
 * (`MeshErrorCode`: `mesh_not_running`…) and the router's `unknown_agent`; and those of a result
 * the router dead-letters instead of refusing it on its run (docs/runs.md rules 3b, 3c): `not_found`
 * (it named a run that does not exist), `foreign_refusals_spent`, `idle_refusals_spent` (the run
 * holds its cap of this agent's refusals). As the router sent it: a newer router could send one
 * this union does not list, so keep a `default` branch.
 */
export type ResultRefusalCode =
  | RunErrorCode
  | MeshErrorCode
  | typeof RejectionCode.unknownAgent
  | typeof RejectionCode.notFound
  | 'foreign_refusals_spent'
  | 'idle_refusals_spent';

/** A result or mesh turn of this agent the router refused, as `onResultRefused` is told it. */
export interface ResultRefusal extends Omit<ResultRefused, 'code'> {
  code: ResultRefusalCode;
  /**
   * True when this client published the refused message (it remembers the ids it published, up to
   * `sentIdsCapacity`); false for another replica's, or one it no longer remembers.
   */
  publishedHere: boolean;
}

/** What JetStream answered to a publish. */
export interface PublishReceipt {
  /** The stream sequence the message is stored at (the original one for a duplicate). */
  seq: number;
  /**
   * True when this client's own earlier publish of the message was already stored (a retry):
   * nothing new was written. Another publisher's message under the same id is a `DuplicateMessageError`.
   */
  duplicate: boolean;
  stream: string;
}

/** An agent result as the SDK takes it: `project`, `agent` and `produced_at` default to the client's. */
export type AgentResultInput = Omit<AgentResult, 'project' | 'agent' | 'produced_at'> & Partial<Pick<AgentResult, 'project' | 'agent' | 'produced_at'>>;

/** A run start as the SDK takes it: `project` defaults to the client's. */
export type StartRunInput = Omit<StartRunRequest, 'project'> & Partial<Pick<StartRunRequest, 'project'>>;

/** A customer message as the SDK takes it: `project` defaults to the client's. */
export type SessionMessageInput = Omit<SessionMessage, 'project'> & Partial<Pick<SessionMessage, 'project'>>;

export interface HandoffsOptions {
  /**
   * Called for each offered handoff. Claim it (`offer.claim()`), do the work, and end with
   * `finish(result)`, `return(report)`, `release(reason)` or `fail(reason)` — or decline it without
   * claiming: `offer.giveUp(reason)`. When the handler resolves having settled the offer (claimed
   * it, given it up, or had `tryClaim()` resolve null: the handoff is not this agent's to take) the
   * offer message is acknowledged. A handler that resolves without settling it (returns before any
   * claim) is a failed delivery, like a throw — `onError` hears an `OfferUnsettledError`
   * (`offer_unsettled`) once per offer — since an acknowledged offer nobody claimed would leave its
   * handoff pending for nobody (docs/handoffs.md rule 5a). When it throws, the offer is redelivered after a
   * delay (to this or another replica) and terminated after `maxDeliver` attempts (never
   * dead-lettered: agents may not publish dead letters; the handoff stays with the ledger). An offer
   * terminated before any of its deliveries claimed the handoff is given up to the ledger
   * (`give_up_offer`), which counts a retry and offers it again, or escalates it at its retry cap;
   * `onError` then gets an `OfferTerminatedError` saying what the ledger did (`giveUp`). An offer
   * whose handoff is already taken is acknowledged by `tryClaim()` returning null.
   */
  onOffer: (offer: HandoffOffer) => Promise<void> | void;
  /** Offers handled at once by this process (default 1; a whole number from 1, else `InvalidInputError`). */
  concurrency?: number;
  /**
   * How long the server waits for this process before giving an offer to another replica (ms,
   * default 60 000, between 1 000 and 3 600 000; the SDK sends progress while the handler runs).
   * Sent to the ledger, which sets it on the agent's offers durable.
   */
  ackWaitMs?: number;
  /** Deliveries before an offer whose handler keeps failing is terminated (default 5; a whole number from 1 to 1 000). */
  maxDeliver?: number;
  /** Delays between redeliveries of a failed offer, ms (default 1 s, 5 s, 15 s, 30 s; at least one, each a whole number from 0). */
  backoffMs?: number[];
  /**
   * Told what goes wrong outside a handler, always an error with a stable `code`: `OfferPullError`
   * (`offer_pull_failed`: pulling failed for now, the SDK keeps retrying; every failure of the pull
   * loop, the server's and the event store's included, with its cause), `LedgerCommandError`
   * (the ledger refused to open the durable again), `OfferTerminatedError` (`offer_terminated`),
   * `OfferUnsettledError` (`offer_unsettled`: a handler returned without settling its offer,
   * once per offer), and once, as the subscription ends, the
   * `ConnectionClosed` (`connection_closed`) of a connection the NATS client gave up on for good
   * (credentials revoked, expired, refused on reconnect). Default: console.error.
   */
  onError?: (error: unknown) => void;
  /**
   * Told once each time this subscription finds the agent's offers durable gone (deleted through
   * the JetStream API, lost with a server's state), with an `OfferPullError` (`code`
   * `offer_pull_failed`, `reason` `consumer_lost`, `durable`; `natsCode` `409` and the server's
   * `PullEndedError` as `cause` when an open pull was ended by the deletion — the same error
   * `onError` gets —, else `natsCode` null). The SDK has the ledger open the durable again from
   * where this agent's acknowledgements got to (`open_offers`, `start_after_seq`): nothing
   * acknowledged is delivered again, nothing after it is skipped, and offers flow on by themselves.
   * The loss is told as soon as it is seen (the pull's end, or the first attempt to open the durable
   * again), once however many attempts that takes (a refusal of one goes to `onError`); a later
   * deletion is told again. Called synchronously; a listener that throws (or returns a promise that
   * rejects) is reported with `console.error` and breaks nothing. Default: a `console.warn` of the
   * error's message (the SDK has no logger of its own).
   */
  onConsumerLost?: (error: OfferPullError) => void | Promise<void>;
}

/** How long `subscription.stop()` / `agent.close()` waits for the handlers in flight, by default (ms). */
export const DEFAULT_STOP_TIMEOUT_MS = 20_000;

export interface StopOptions {
  /**
   * How long to wait for the handlers in flight (and the give-ups being told to the ledger), ms
   * (default {@link DEFAULT_STOP_TIMEOUT_MS}, 20 s; 0 or more, `Infinity` for no bound; anything
   * else is a `RangeError`). Past it the stop resolves anyway, naming what it left unfinished.
   */
  timeoutMs?: number;
}

/** What a stop left behind. */
export interface StopOutcome {
  /**
   * The offers whose handler was still running when the stop's bound passed (empty when every
   * handler ended in time). The SDK no longer heartbeats their claims, so each lapses at its lease's
   * end and its handoff is offered again; their offer messages are not acknowledged by the stop
   * (one whose handler still ends while the connection is open is acknowledged then).
   */
  unfinished: UnfinishedOffer[];
}

/** A running offer subscription. */
export interface OfferSubscription {
  /**
   * Stop taking offers, abort the `signal` of every offer still in its handler (reason: a
   * `SubscriptionStoppingError`, code `subscription_stopping`), wait for the handlers in flight to
   * end (and their offers to be acknowledged) for at most `timeoutMs`, then resolve with what was
   * left unfinished. Calling it again returns the same outcome.
   */
  stop(options?: StopOptions): Promise<StopOutcome>;
  /**
   * Resolves when the subscription has stopped: its stop resolved, or the connection was closed
   * (for good, or by its owner) and the stop that follows resolved.
   */
  readonly done: Promise<void>;
}

/**
 * The client an agent microservice uses to talk to Baton. Build it with {@link createBatonClient}.
 * Every call is safe to retry: results are deduplicated by `result_id`, run starts by
 * `workflow_run_id`, ledger commands by their idempotency keys.
 */
export interface BatonAgent {
  readonly prefix: string;
  readonly project: string;
  readonly agent: string;
  /**
   * The ledger commands (request/reply, idempotent by key), issued as this agent: every subject is
   * `<prefix>.cmd.ledger.<project>.agent.<agent>.<command>` and the ledger records this agent as
   * the actor (kind `agent`), whatever a body says. For agents that manage handoffs themselves:
   * delegating work (`create`), archiving.
   */
  readonly ledger: LedgerClient;
  /**
   * Validate `result` against `AgentResultSchema` (after filling `project`, `agent` and
   * `produced_at` from the client), then publish it to `<prefix>.in.<project>.result.<agent>`
   * with `Nats-Msg-Id = result:<project>:<workflow_run_id>/<result_id>` (`MsgIds.result`) and wait for the stream's
   * ack. Publishing the same result again from this client within the stream's duplicate window
   * (2 minutes) stores nothing new and returns the original sequence with `duplicate: true`, so
   * retrying after a timeout is safe. A duplicate of an id this client never published is another
   * publisher's message: nothing was stored, and the call throws `DuplicateMessageError`.
   * @throws InvalidInputError (nothing sent) when the result breaks the contract or names another project/agent;
   *   `DuplicateMessageError` (see above); `PublishTimeout` (retry with the same result) or
   *   `StreamNotFound` (Baton not provisioned).
   */
  publishResult(result: AgentResultInput): Promise<PublishReceipt>;
  /**
   * Validate and publish a run start to `<prefix>.in.<project>.start.<agent>` (the run's start records
   * this agent as its actor; `publishesAs: 'project'`: the shared `<prefix>.in.<project>.start`, actor
   * `project-client`) with `Nats-Msg-Id = start:<project>:<workflow_run_id>`; the router starts the
   * run (once, however often this client sends it).
   * @throws InvalidInputError when the request breaks `StartRunRequestSchema`; `DuplicateMessageError`
   *   when the stream holds a start of this run that this client did not send.
   */
  startRun(request: StartRunInput): Promise<PublishReceipt>;
  /**
   * Validate and publish a customer's message to a conversation run (seed 001 sessions) on
   * `<prefix>.in.<project>.message.<agent>` (recorded as relayed by this agent; `publishesAs:
   * 'project'`: the shared `<prefix>.in.<project>.message`) with `Nats-Msg-Id = message:<project>:<workflow_run_id>/<message_id>`; the router
   * records it once and evaluates the active agent's routes before any model runs. For the chat
   * front end that carries the customer's side of a conversation.
   * @throws InvalidInputError when the message breaks `SessionMessageSchema`; `DuplicateMessageError`
   *   when the stream holds a message with this id that this client did not send.
   */
  sendMessage(message: SessionMessageInput): Promise<PublishReceipt>;
  /**
   * Receive the handoffs offered to this agent: a durable pull consumer named for the project and
   * agent (`offers-<n>-<project>-<agent>`) on `<prefix>.in.<project>.offer.<agent>`, shared by every
   * replica of the agent, so each offer goes to one replica at a time. The ledger provisions the
   * durable (the `open_offers` command, idempotent; its filter is pinned to this agent's offers);
   * the SDK then only pulls and acknowledges, and calls `onOffer` for each offer (see
   * {@link HandoffsOptions}).
   * @throws InvalidInputError (`schema_violation`, `.rejection.issues` naming the option; nothing
   *   sent) for a numeric option out of its range (`concurrency` 0, `ackWaitMs` below 1 000…);
   *   LedgerCommandError when the ledger refuses or cannot open the durable; the closed-connection
   *   error (`connection_closed`) once the client is closed.
   */
  handoffs(options: HandoffsOptions): Promise<OfferSubscription>;
  /**
   * The publisher `startMesh` and `publishMeshResult` take, speaking as this agent: its connection,
   * its message-id memory, its name (a mesh start records it as the actor; with `publishesAs:
   * 'project'` none, so a start goes to the shared subject) and, with credentials, the agent edge
   * (its credentials allow nothing else).
   */
  meshPublisher(): MeshPublisher;
  /**
   * Resolves once this client's connection is closed: with the typed `ConnectionClosed`
   * (`connection_closed`, `.reason` `credentials_revoked`, `credentials_expired`,
   * `credentials_refused`, `reconnects_exhausted`, `error`; a revoked agent's is always
   * `credentials_revoked`, whichever server refused it: see the README's "Revoked credentials")
   * when the NATS client gave up on it for good — everything on it fails from then on and the
   * client is of no further use: exit, or make a new one with good credentials —, with `undefined`
   * for a close on purpose (`close()`, or the owner of a shared handle). Its offer subscriptions
   * stop by themselves then.
   */
  readonly closed: Promise<ConnectionClosed | undefined>;
  /**
   * What happens to this client's connection from now on, as an async iterator of its own (each
   * call is another, so several consumers each read every event): `{ kind: 'disconnected', server,
   * at }` when it drops (the client reconnects by itself), `{ kind: 'reconnecting', server, attempt,
   * downMs, at }` at each attempt (about every 2 s), `{ kind: 'reconnected', server, downMs,
   * attempts, at }` when it is back, `{ kind: 'server_error', natsCode, said, about, at }` for an
   * `-ERR` of the server in its own words (`about`: `credentials_ended` — revoked or expired, the
   * client reconnects with the credentials file as it is now; `credentials_refused` — a reconnect
   * was refused them; `other`, e.g. a permissions violation), and last `{ kind: 'closed', error?,
   * at }` — `error` the typed `ConnectionClosed` as {@link closed} gives it, absent for a close on
   * purpose. The iterator ends after `closed`, on `break`, when `options.signal` aborts, or once
   * `close()` resolved on a shared handle (whose connection lives on). Every `at` is ms since the
   * epoch; every event is frozen. Called once the connection is closed: yields `closed` and ends.
   */
  connectionEvents(options?: ConnectionEventsOptions): AsyncIterableIterator<ConnectionEvent>;
  /**
   * Stop every offer subscription (as `subscription.stop(options)`: their signals aborted, waiting
   * at most `timeoutMs` for the handlers in flight), then drain the connection if the client
   * opened it. Resolves with every offer left unfinished. From then on (once the subscriptions have
   * stopped) every publish of the client (`publishResult`, `offer.finish`, `startRun`,
   * `sendMessage`, the mesh publisher's) and `handoffs()` throw the closed-connection error at once,
   * nothing sent: an `EventStoreError` with code `connection_closed` (the `ConnectionClosed` itself
   * when the connection was closed for good), never a `store_error`.
   */
  close(options?: StopOptions): Promise<StopOutcome>;
}

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

/** An agent's identity as its credentials carry it: the inbox its subscribe permission names. */
interface AgentCredentials {
  prefix: string;
  project: string;
  agent: string;
  inboxPrefix: string;
}

/** The handles {@link connectNats} opened with an agent's credentials, and whose they are. */
const agentHandles = new WeakMap<NatsHandle, AgentCredentials>();

/**
 * The agent a credentials file was issued to (`baton creds agent`), read from its user JWT: its
 * name (`agent:<project>:<agent>`) and the one reply inbox it may subscribe to
 * (`_INBOX_<prefix>.agent.<project>.<agent>.>`). Null for anything else (a service's, the admin's,
 * a file this deployment did not write, or one that cannot be read: the connect says why).
 */
function agentOfCreds(file: string): AgentCredentials | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  const principal = principalOfCreds(text);
  if (principal?.kind !== 'agent') return null;
  let allow: unknown;
  try {
    allow = (decodeJwtClaims(jwtOfCreds(text))['nats'] as { sub?: { allow?: unknown } } | undefined)?.sub?.allow;
  } catch {
    return null;
  }
  if (!Array.isArray(allow)) return null;
  const own = `.agent.${principal.project}.${principal.agent}.>`;
  const inboxes = allow.filter((pattern): pattern is string => typeof pattern === 'string' && pattern.startsWith('_INBOX_') && pattern.endsWith(own));
  const parts = inboxes.length === 1 ? inboxParts(inboxes[0] as string) : null;
  if (parts === null) return null;
  return { prefix: parts.prefix, project: principal.project, agent: principal.agent, inboxPrefix: (inboxes[0] as string).slice(0, -2) };
}

/**
 * The typed error a failed connect is: credentials of another principal are PermissionDenied, a
 * file that cannot be read CredentialsRefused (both thrown typed by the event store's connect);
 * credentials the server refused, or none given to a server that wants them, CredentialsRefused
 * with its reason; a JetStream check the credentials may not make PermissionDenied; any other
 * failure to connect (refused connection, unreachable, JetStream off) is store_error.
 */
function connectFailure(error: unknown, servers: string | string[] | undefined, credsFile: string | undefined): EventStoreError {
  if (error instanceof EventStoreError) return error;
  const at = servers ?? 'the default server';
  const said = (error as Error).message;
  if (natsRefusedCredentials(error)) {
    const file = credsFile === undefined || credsFile === '' ? null : credsFile;
    if (file === null) {
      return new CredentialsRefused(
        'missing',
        null,
        `cannot connect to NATS at ${at}: ${said} (the server wants credentials: pass natsCreds, or set NATS_CREDS to the file \`baton creds agent\` wrote)`,
        { cause: error },
      );
    }
    if (hasNatsCode(error, 'BAD_CREDS')) {
      return new CredentialsRefused('invalid', file, `cannot connect to NATS at ${at}: ${file} is not a NATS credentials file the client can use (${said})`, {
        cause: error,
      });
    }
    return new CredentialsRefused(
      'refused',
      file,
      `cannot connect to NATS at ${at}: the server refused the credentials in ${file} (${said}: unknown to this server, expired, revoked, or another deployment's); retrying does not help, credentials this deployment issued do (\`baton creds agent\`)`,
      { cause: error },
    );
  }
  const cause = (error as { cause?: unknown }).cause;
  if (isPermissionsViolation(cause)) {
    return new PermissionDenied('$JS.API.INFO', {
      cause: error,
      why: 'these credentials may not ask for the account-wide JetStream information (an agent never may): connect with checkJetStream: false',
    });
  }
  return new EventStoreError(`cannot connect to NATS at ${String(at)}: ${said}`, { cause: error });
}

/**
 * Open a NATS connection to share between clients (`createBatonClient({ nats, project, agent })`).
 * With an agent's credentials file (`credsFile`, from `baton creds agent`) it connects as that
 * agent: replies arrive on the agent's own inbox (`inboxPrefix` defaults to the one its credentials
 * allow), it never asks for the account-wide JetStream information its credentials refuse
 * (`checkJetStream` defaults to false), and a client sharing the handle goes through the agent edge
 * by default. Rejects with a typed error: `CredentialsRefused`, `PermissionDenied`, or
 * `EventStoreError` (`store_error`) when the server cannot be reached.
 */
export async function connectNats(options: NatsConnectOptions = {}): Promise<NatsHandle> {
  const agent = options.credsFile !== undefined ? agentOfCreds(options.credsFile) : null;
  let handle: NatsHandle;
  try {
    handle = await connectToNats({
      ...options,
      ...(agent !== null ? { inboxPrefix: options.inboxPrefix ?? agent.inboxPrefix, checkJetStream: options.checkJetStream ?? false } : {}),
    });
  } catch (error) {
    throw connectFailure(error, options.servers ?? process.env['NATS_URL'], options.credsFile);
  }
  if (agent !== null && (options.inboxPrefix ?? agent.inboxPrefix) === agent.inboxPrefix) agentHandles.set(handle, agent);
  return handle;
}

/** `timeoutMs` of a stop, checked: 0 or more (Infinity: no bound). */
function stopBound(timeoutMs: number | undefined): number {
  if (timeoutMs === undefined) return DEFAULT_STOP_TIMEOUT_MS;
  if (typeof timeoutMs !== 'number' || Number.isNaN(timeoutMs) || timeoutMs < 0) {
    throw new RangeError(`a stop's timeoutMs must be 0 or more ms, or Infinity (got ${String(timeoutMs)})`);
  }
  return timeoutMs;
}

/** Whether `work` settles within `ms` (Infinity: wait for it). */
async function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  if (!Number.isFinite(ms)) {
    await work;
    return true;
  }
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([work.then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A failure of the pull loop, typed: an {@link OfferPullError} (its cause kept) for the NATS
 * client's own errors, a pull the server ended (503: nothing relays or serves it; 409: the durable
 * was deleted under it) and any other `store_error` of the event store; the SDK's own errors (the
 * ledger's refusal to open the durable again) and the event store's typed ones as they are.
 */
function typedPullError(durable: string, error: unknown): unknown {
  if (error instanceof PullEndedError) {
    const reason = error.status.code === 503 ? 'unavailable' : 'consumer_lost';
    return new OfferPullError(durable, { cause: error, reason, natsCode: String(error.status.code) });
  }
  if (error instanceof BatonSdkError) return error;
  if (error instanceof EventStoreError && error.code !== EventStoreErrorCode.storeError) return error;
  // An event store's store_error says what the client raised in its cause.
  const raw = error instanceof EventStoreError ? error.cause : error;
  const code = (raw as { code?: unknown } | null | undefined)?.code;
  const natsCode = typeof code === 'string' || typeof code === 'number' ? String(code) : null;
  const reason = isNoResponders(raw) ? 'unavailable' : isTimeout(raw) ? 'timeout' : 'error';
  return new OfferPullError(durable, { cause: error, reason, natsCode });
}

/**
 * How a subscription tells a lost offers durable: the agent's `onConsumerLost` (what it throws or
 * rejects with reported, never thrown into the pull loop), or a warning.
 */
function consumerLostListener(listener: HandoffsOptions['onConsumerLost']): (error: OfferPullError) => void {
  if (listener === undefined) return (error) => console.warn(`[baton sdk] ${error.message}`);
  const threw = (error: unknown): void => console.error(`[baton sdk] onConsumerLost threw: ${(error as Error)?.message ?? String(error)}`);
  return (error) => {
    try {
      void Promise.resolve(listener(error)).catch(threw);
    } catch (thrown) {
      threw(thrown);
    }
  };
}

/** A client's options checked before it connects: ids a subject can carry, a request timeout that means something. */
const ClientIdentitySchema = z.object({ project: ProjectIdSchema, agent: AgentNameSchema });

/**
 * The numbers `handoffs()` takes, checked before anything is sent (a `concurrency` of 0 would
 * otherwise run one handler as if nothing was said): `ackWaitMs` within the ledger's bounds for
 * `open_offers`, `maxDeliver` within those of the give-up a termination sends (`deliveries`).
 */
const HandoffsNumbersSchema = z.object({
  concurrency: z.number().int().min(1).optional(),
  ackWaitMs: OpenOffersCommandSchema.shape.ack_wait_ms,
  maxDeliver: GiveUpOfferCommandSchema.shape.deliveries.optional(),
  backoffMs: z.array(z.number().int().min(0)).min(1).optional(),
});

/**
 * Connect (or adopt `options.nats`) and return a {@link BatonAgent} for one agent of one project.
 * Rejects when NATS is unreachable or JetStream is off.
 * @throws InvalidInputError (`schema_violation`, the field named in `.rejection.issues`) for a
 *   `project` or `agent` that is not a Baton id, and RangeError for a bad number option — both before connecting.
 */
export async function createBatonClient(options: BatonClientOptions): Promise<BatonAgent> {
  // Options are checked before connecting: a refusal leaves no connection open behind it.
  const identity = ClientIdentitySchema.safeParse({ project: options.project, agent: options.agent });
  if (!identity.success) throw new InvalidInputError('client options', rejectionFromZod(identity.error));
  const requestTimeoutMs = options.requestTimeoutMs;
  if (requestTimeoutMs !== undefined && (typeof requestTimeoutMs !== 'number' || !Number.isFinite(requestTimeoutMs) || requestTimeoutMs <= 0)) {
    throw new RangeError(`requestTimeoutMs must be a positive number of ms (got ${String(requestTimeoutMs)})`);
  }
  const sent = new SentMessageIds(options.sentIdsCapacity ?? DEFAULT_SENT_IDS);
  const retry = publishRetryOf({
    ...(options.publishAttempts !== undefined ? { attempts: options.publishAttempts } : {}),
    ...(options.publishTimeoutMs !== undefined ? { timeoutMs: options.publishTimeoutMs } : {}),
  });
  const owns = options.nats === undefined;
  const credsFile = options.natsCreds ?? process.env['NATS_CREDS'];
  const prefix = options.prefix ?? process.env['BATON_PREFIX'] ?? 'baton';
  let nats = options.nats;
  const shared = nats !== undefined ? agentHandles.get(nats) : undefined;
  if (shared !== undefined) {
    // A handle opened with an agent's credentials: its inbox is that agent's, and only that agent's
    // replies arrive there (as the owned connection's check, before anything is sent).
    const wanted = inboxPrefixOf(prefix, { kind: 'agent', project: options.project, agent: options.agent });
    if (wanted !== shared.inboxPrefix) {
      throw new PermissionDenied(`${wanted}.>`, {
        operation: 'subscribe to',
        why:
          shared.prefix !== prefix
            ? `the shared connection's credentials were issued for the deployment prefix '${shared.prefix}', and the client asked for '${prefix}': use the prefix they were issued for (BATON_PREFIX)`
            : `the shared connection's credentials are ${shared.project}/${shared.agent}'s: make the client for that agent, or share a connection opened with this one's credentials`,
      });
    }
  }
  if (nats === undefined) {
    try {
      nats = await connectToNats({
        servers: options.natsUrl,
        name: `baton-sdk-${options.project}-${options.agent}`,
        ...(credsFile !== undefined && credsFile !== '' ? { credsFile } : {}),
        // Replies, publish acks and pulled offers arrive on this agent's own inbox prefix (the only
        // one its credentials may subscribe to); an agent may not ask for account-wide JetStream info.
        inboxPrefix: inboxPrefixOf(prefix, { kind: 'agent', project: options.project, agent: options.agent }),
        checkJetStream: false,
      });
    } catch (error) {
      throw connectFailure(error, options.natsUrl, credsFile);
    }
  }
  const edge = options.edge ?? (owns ? credsFile !== undefined && credsFile !== '' : shared !== undefined);
  return new NatsBatonAgent(nats, owns, options, sent, edge, retry);
}

/** What the client keeps of a running subscription, to end it when the connection goes. */
interface LiveSubscription {
  /** The connection is closed: tell `onError` once (a typed ConnectionClosed; nothing for a close on purpose) and stop. */
  connectionEnded(closed: ConnectionClosed | undefined): void;
}

class NatsBatonAgent implements BatonAgent {
  readonly prefix: string;
  readonly project: string;
  readonly agent: string;
  readonly ledger: LedgerClient;
  readonly closed: Promise<ConnectionClosed | undefined>;
  private readonly publishesAs: 'agent' | 'project';
  /** The running subscriptions, and how each is told its connection is gone. */
  private readonly subscriptions = new Map<OfferSubscription, LiveSubscription>();
  /** Set once the connection is closed (`closed`: the typed error, undefined for a close on purpose). */
  private ended: { closed: ConnectionClosed | undefined } | null = null;
  /** The message ids this client published (see {@link SentMessageIds}). */
  private readonly sent: SentMessageIds;
  /** The iterators `connectionEvents()` gave out and not yet ended: a shared handle's client ends them at `close()`. */
  private readonly connectionReaders = new Set<AsyncIterableIterator<ConnectionEvent>>();
  /** Ends the `onConnection` calls. */
  private readonly stopConnectionListener: () => void;
  /** Set once `close()` let go of a shared handle: the client reads no more of its events. */
  private detached = false;
  /** This agent's refused-result notices (`onResultRefused`), null when nobody listens. */
  private readonly refusals: { unsubscribe(): void } | null;
  /** Set by `close()` once its subscriptions have stopped: the client takes no more calls. */
  private shut = false;

  /** Tells this client's claims from another replica's of the same agent (see the claim key in `offers.ts`). */
  private readonly instance = randomBytes(6).toString('hex');

  /** Through the agent edge: publishes go to `edgeSubjectOf`, the offers durable is read with {@link offersJs}. */
  private readonly edge: boolean;
  /** The JetStream client of the offers durable: through the edge, its API calls go to the agent's edge prefix. */
  private readonly offersJs: NatsHandle['js'];

  constructor(
    private readonly nats: NatsHandle,
    private readonly ownsConnection: boolean,
    options: BatonClientOptions,
    sent: SentMessageIds,
    edge: boolean,
    private readonly retry: PublishRetry,
  ) {
    this.prefix = options.prefix ?? process.env['BATON_PREFIX'] ?? 'baton';
    this.project = options.project;
    this.agent = options.agent;
    this.publishesAs = options.publishesAs ?? 'agent';
    this.sent = sent;
    this.ledger = new LedgerClient(nats, this.prefix, { as: Principals.agent(options.project, options.agent), timeoutMs: options.requestTimeoutMs ?? 5000 });
    this.edge = edge;
    this.offersJs = edge ? nats.connection.jetstream({ apiPrefix: edgeApiPrefix(this.prefix, this.project, this.agent) }) : nats.js;
    this.closed = Promise.resolve(nats.closed).then(
      (error) => (error instanceof ConnectionClosed ? error : undefined),
      () => undefined,
    );
    void this.closed.then((closed) => {
      this.ended = { closed };
      for (const live of [...this.subscriptions.values()]) live.connectionEnded(closed);
    });
    const onConnection = options.onConnection;
    this.stopConnectionListener =
      onConnection === undefined
        ? () => undefined
        : onConnectionEvent(nats, onConnection, {
            onListenerError: (error, event) =>
              console.error(`[baton sdk] onConnection threw on a ${event.kind} event: ${(error as Error)?.message ?? String(error)}`),
          });
    this.refusals = options.onResultRefused === undefined ? null : this.listenForRefusals(options.onResultRefused);
  }

  /**
   * Hear the router's refusals of this agent's results and mesh turns on its own
   * `<agent inbox>.refused` (a core subscription: only this agent's credentials may read it). A
   * notice that does not parse, or names another project or agent, is ignored.
   */
  private listenForRefusals(listener: (refusal: ResultRefusal) => void | Promise<void>): { unsubscribe(): void } {
    const told = (error: unknown): void => console.error(`[baton sdk] onResultRefused threw: ${(error as Error)?.message ?? String(error)}`);
    return this.nats.connection.subscribe(resultRefusedSubject(this.prefix, this.project, this.agent), {
      callback: (error, msg) => {
        if (error !== null) return;
        const parsed = parseUntrustedJson(textDecoder.decode(msg.data), Limits.maxMessageBytes);
        const notice = parsed.ok ? ResultRefusedSchema.safeParse(parsed.value) : null;
        if (notice?.success !== true || notice.data.project !== this.project || notice.data.agent !== this.agent) return;
        const n = notice.data;
        const msgId = n.of === 'turn' ? MsgIds.meshResult(n.project, n.workflow_run_id, n.result_id) : MsgIds.result(n.project, n.workflow_run_id, n.result_id);
        const refusal: ResultRefusal = { ...n, code: n.code as ResultRefusalCode, publishedHere: this.sent.has(msgId) };
        try {
          void Promise.resolve(listener(refusal)).catch(told);
        } catch (thrown) {
          told(thrown);
        }
      },
    });
  }

  connectionEvents(options: ConnectionEventsOptions = {}): AsyncIterableIterator<ConnectionEvent> {
    const inner = connectionEvents(this.nats, this.detached ? { signal: AbortSignal.abort() } : options);
    const readers = this.connectionReaders;
    if (!this.detached) readers.add(inner);
    const outer: AsyncIterableIterator<ConnectionEvent> = {
      async next() {
        const step = await inner.next();
        if (step.done === true) readers.delete(inner);
        return step;
      },
      async return() {
        readers.delete(inner);
        return inner.return?.() ?? { value: undefined, done: true };
      },
      [Symbol.asyncIterator]() {
        return outer;
      },
    };
    return outer;
  }

  async publishResult(input: AgentResultInput, trace?: HopTrace): Promise<PublishReceipt> {
    const candidate = {
      ...input,
      project: input.project ?? this.project,
      agent: input.agent ?? this.agent,
      produced_at: input.produced_at ?? new Date().toISOString(),
    };
    const parsed = AgentResultSchema.safeParse(candidate);
    if (!parsed.success) throw new InvalidInputError('agent result', rejectionFromZod(parsed.error));
    const result = parsed.data;
    if (result.project !== this.project || result.agent !== this.agent) {
      // The codes the router would dead-letter it with: identity comes from the subject.
      const project = result.project !== this.project;
      throw new InvalidInputError('agent result', {
        code: project ? RejectionCode.projectMismatch : RejectionCode.identityMismatch,
        message: `this client publishes for ${this.project}/${this.agent}, not ${result.project}/${result.agent}`,
        issues: [{ path: project ? 'project' : 'agent', message: 'does not match the client' }],
      });
    }
    // The claim rule (docs/runs.md): a run takes a result only for its current handoff, under the
    // claim on it. One naming neither can never be taken — stored, it would be refused
    // `claim_required`, told to operators and counted toward this agent's circuit: refused here.
    const unnamed = (['handoff_id', 'claim_id'] as const).filter((field) => result[field] === undefined);
    if (unnamed.length > 0) {
      throw new InvalidInputError('agent result', {
        code: RejectionCode.schemaViolation,
        message: `names no ${unnamed.join(' and ')}: a run takes a result only for its current handoff, under the claim this agent holds on it (claim the offer and finish it, or send the claim's handoff_id and claim_id)`,
        issues: unnamed.map((path) => ({ path, message: 'required: the claim this result answers under', code: ResultClaimCode.claimRequired })),
      });
    }
    // No self re-entry (docs/routing.md rule 7): the router ignores a call of the agent itself, so
    // the agent's decision would silently be something else — refused here, where the SDK knows
    // who is publishing. The decision as the router reads it: the typed one, else the body's sentinel.
    const signal = decisionSignalOf(result);
    if (signal.kind === 'config' && signal.config.function_call?.agent_name === this.agent) {
      const path = signal.source === 'typed' ? 'decision.function_call.agent_name' : 'body';
      throw new InvalidInputError('agent result', {
        code: RejectionCode.schemaViolation,
        message: `${path}: the decision calls ${this.agent}, the agent publishing it; the router ignores a call of the agent itself (no self re-entry) — to run it again, decide loop; to go on, advance or call another agent`,
        issues: [{ path, message: `calls the publishing agent itself ('${this.agent}')`, code: SdkErrorCode.selfCall }],
      });
    }
    return this.publish(
      AgentSubjects.result(this.prefix, this.project, this.agent),
      result,
      MsgIds.result(result.project, result.workflow_run_id, result.result_id),
      trace,
    );
  }

  async startRun(input: StartRunInput): Promise<PublishReceipt> {
    const parsed = StartRunRequestSchema.safeParse({ ...input, project: input.project ?? this.project });
    if (!parsed.success) throw new InvalidInputError('run start', rejectionFromZod(parsed.error));
    const request = parsed.data;
    const subject =
      this.publishesAs === 'agent'
        ? AgentSubjects.agentRunStart(this.prefix, request.project, this.agent)
        : AgentSubjects.runStart(this.prefix, request.project);
    return this.publish(subject, request, MsgIds.start(request.project, request.workflow_run_id));
  }

  async sendMessage(input: SessionMessageInput): Promise<PublishReceipt> {
    const parsed = SessionMessageSchema.safeParse({ ...input, project: input.project ?? this.project });
    if (!parsed.success) throw new InvalidInputError('customer message', rejectionFromZod(parsed.error));
    const message = parsed.data;
    return this.publish(
      this.publishesAs === 'agent' ? AgentSubjects.agentMessage(this.prefix, message.project, this.agent) : AgentSubjects.message(this.prefix, message.project),
      message,
      MsgIds.message(message.project, message.workflow_run_id, message.message_id),
    );
  }

  async handoffs(options: HandoffsOptions): Promise<OfferSubscription> {
    const numbers = HandoffsNumbersSchema.safeParse({
      concurrency: options.concurrency,
      ackWaitMs: options.ackWaitMs,
      maxDeliver: options.maxDeliver,
      backoffMs: options.backoffMs,
    });
    if (!numbers.success) throw new InvalidInputError('offer subscription options', rejectionFromZod(numbers.error));
    // The ledger provisions the durable (agents may not create consumers), then this process only
    // pulls from it and acknowledges.
    const ackWait = options.ackWaitMs !== undefined ? { ack_wait_ms: options.ackWaitMs } : {};
    const closed = this.closedError('an offer subscription');
    if (closed !== null) throw closed;
    const opened = await this.ledger.openOffers(this.project, ackWait);
    if (!opened.ok) throw new LedgerCommandError('open_offers', '', opened.error);
    const { stream, durable } = opened;
    const report = options.onError ?? ((e: unknown) => console.error(`[baton sdk] ${(e as Error).message}`));
    const consumerLost = consumerLostListener(options.onConsumerLost);
    /** The connection is gone: its close is told once, typed, never the client's CONNECTION_CLOSED of each pull after it. */
    let gone = false;
    /** A loss of the durable was told and the runner has not yet had it opened again: its attempts tell nothing more. */
    let lossTold = false;
    const pullFailed = (error: unknown): void => {
      if (gone || this.nats.connection.isClosed() || hasNatsCode(error, 'CONNECTION_CLOSED')) return;
      const typed = typedPullError(durable, error);
      report(typed);
      if (typed instanceof OfferPullError && typed.reason === 'consumer_lost') {
        // Every pull ended by the durable's deletion is a loss (another replica may have had it
        // opened again before this one looked: this runner then never re-opens it itself).
        lossTold = true;
        consumerLost(typed);
      }
    };
    /** The runner found the durable missing and had the ledger open it again (`recreated`), or failed to (`failed`, retried). */
    const durableLost = (event: ConsumerLostEvent): void => {
      if (gone) return;
      if (!lossTold) {
        const said =
          event.outcome === 'failed'
            ? event.error
            : new Error(`the offers durable ${durable} was not found on ${stream}; the ledger opened it again after stream sequence ${event.ackFloor}`);
        consumerLost(new OfferPullError(durable, { cause: said, reason: 'consumer_lost', natsCode: null }));
      }
      lossTold = event.outcome === 'failed';
    };
    /** Give-ups still being told to the ledger: `stop` waits for them. */
    const givingUp = new Set<Promise<void>>();
    const handler = createOfferHandler({
      project: this.project,
      agent: this.agent,
      instance: this.instance,
      ledger: this.ledger,
      publishResult: (result, trace) => this.publishResult(result, trace),
      onOffer: options.onOffer,
      warn: report,
    });
    // The ledger says at once when a claim of this agent is taken away (a core message under this
    // agent's inbox, which only it reads): the offer working under it confirms with a heartbeat.
    const withdrawals = this.nats.connection.subscribe(claimWithdrawnSubject(this.prefix, this.project, this.agent), {
      callback: (error, msg) => {
        if (error !== null) return;
        const parsed = parseUntrustedJson(textDecoder.decode(msg.data), Limits.maxMessageBytes);
        const notice = parsed.ok ? ClaimWithdrawnSchema.safeParse(parsed.value) : null;
        if (notice?.success === true && notice.data.project === this.project && notice.data.agent === this.agent) handler.withdrawn(notice.data);
      },
    });
    const runner = runConsumer({
      js: this.offersJs,
      ...(this.edge ? { ackVia: (reply: string) => edgeAckSubject(this.prefix, this.project, this.agent, reply) } : {}),
      stream,
      durable,
      prefix: this.prefix,
      source: durable,
      handler,
      concurrency: options.concurrency ?? 1,
      maxDeliver: options.maxDeliver ?? 5,
      ...(options.backoffMs ? { backoffMs: options.backoffMs } : {}),
      pullExpiresMs: 1000,
      onError: pullFailed,
      onOutcome: (outcome) => {
        if (outcome.kind !== 'terminated') return;
        // An offer given up on before any claim is told to the ledger, which offers its handoff
        // again or escalates it (docs/handoffs.md, "An offer given up on"); then the agent is told.
        const { msg, error: cause } = outcome;
        const told = handler
          .terminated(msg, cause)
          .then(({ handoffId, giveUp }) => {
            report(new OfferTerminatedError(msg.subject, msg.seq, msg.deliveryCount, { cause, handoffId, ...(giveUp ? { giveUp } : {}) }));
          })
          .catch(() => undefined);
        givingUp.add(told);
        void told.finally(() => givingUp.delete(told));
      },
      // An agent may neither create consumers nor publish dead letters: a lost durable is opened
      // again by the ledger from the reader's ack floor, and an offer given up on is terminated
      // (its handoff stays with the ledger: a give-up it is told of, or the lease, decides).
      deadLetters: false,
      onConsumerLost: durableLost,
      recreateConsumer: async (afterSeq) => {
        const again = await this.ledger.openOffers(this.project, { ...ackWait, start_after_seq: afterSeq });
        if (!again.ok) throw new LedgerCommandError('open_offers', '', again.error);
      },
    });
    let markDone: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (markDone = resolve));
    void runner.done.then(() => markDone());
    let outcome: Promise<StopOutcome> | null = null;
    const stop = (timeoutMs: number, reason: unknown): Promise<StopOutcome> => {
      outcome ??= (async () => {
        try {
          withdrawals.unsubscribe();
        } catch {
          // A closed connection has no subscription left to end.
        }
        handler.stopping(reason);
        const ended = Promise.all([runner.stop(), Promise.allSettled([...givingUp])]);
        const inTime = await within(ended, timeoutMs);
        const unfinished = inTime ? [] : handler.unfinished();
        if (!inTime) handler.letGo();
        this.subscriptions.delete(subscription);
        markDone();
        return { unfinished };
      })();
      return outcome;
    };
    const subscription: OfferSubscription = {
      done,
      stop: async (stopOptions?: StopOptions) => {
        const timeoutMs = stopBound(stopOptions?.timeoutMs);
        return stop(timeoutMs, new SubscriptionStoppingError(timeoutMs));
      },
    };
    this.subscriptions.set(subscription, {
      connectionEnded: (closed) => {
        if (gone) return;
        gone = true;
        if (closed !== undefined) report(closed);
        void stop(DEFAULT_STOP_TIMEOUT_MS, closed ?? new SubscriptionStoppingError(DEFAULT_STOP_TIMEOUT_MS));
      },
    });
    // Closed while the durable was being opened: stop at once.
    if (this.ended !== null) this.subscriptions.get(subscription)?.connectionEnded(this.ended.closed);
    return subscription;
  }

  meshPublisher(): MeshPublisher {
    // Like startRun: on the agent's subject unless the client publishes as the project (credentials
    // issued before the agent-named subjects allow only the shared one).
    const js = this.nats.js;
    return {
      // Through the client's closed check, as its own publishes.
      js: {
        publish: (subject, data, opts) => {
          const closed = this.closedError(`the message for ${subject}`);
          return closed !== null ? Promise.reject(closed) : js.publish(subject, data, opts);
        },
      },
      prefix: this.prefix,
      sent: this.sent,
      ...(this.publishesAs === 'agent' ? { agent: this.agent } : {}),
      edge: this.edge,
      retry: this.retry,
    };
  }

  async close(options?: StopOptions): Promise<StopOutcome> {
    const timeoutMs = stopBound(options?.timeoutMs);
    try {
      this.refusals?.unsubscribe();
    } catch {
      // A closed connection has no subscription left to end.
    }
    const live = [...this.subscriptions];
    const outcomes = await Promise.all(live.map(([subscription]) => subscription.stop({ timeoutMs })));
    // The handlers in flight had their chance to finish: from here on the client takes no calls.
    this.shut = true;
    // Handlers the stop gave up on settle nothing once the connection is drained (DeliveredMessage).
    // Its own connection's readers hear `closed` and end; a shared one's stop reading it here.
    if (this.ownsConnection) await this.nats.drain();
    else {
      this.detached = true;
      this.stopConnectionListener();
      for (const reader of [...this.connectionReaders]) void reader.return?.();
      this.connectionReaders.clear();
    }
    return { unfinished: outcomes.flatMap((outcome) => outcome.unfinished) };
  }

  /**
   * The one check of a closed client: null while it is open, else the error a call made now fails
   * with, `what` (nothing sent) — the `ConnectionClosed` of a connection the NATS client gave up on
   * for good, or an `EventStoreError` `connection_closed` once `close()` stopped this client (or the
   * owner of its shared handle closed it). Never the `store_error` the NATS client's own
   * CONNECTION_CLOSED would become.
   */
  private closedError(what: string): EventStoreError | null {
    if (this.ended?.closed !== undefined) return this.ended.closed;
    if (!this.shut && this.ended === null && !this.nats.connection.isClosed()) return null;
    return new EventStoreError(`this client is closed (agent.close(), or its shared connection was closed): ${what} was not sent; make a new client to go on`, {
      code: EventStoreErrorCode.connectionClosed,
    });
  }

  private async publish(subject: string, body: object, msgId: string, trace?: HopTrace): Promise<PublishReceipt> {
    const closed = this.closedError(`the message for ${subject}`);
    if (closed !== null) throw closed;
    // Carry the trace the call continues (an offer's finish: the run's), else the caller's (or
    // start one), so the run can be followed from this result to the operator's inbox item across
    // every service.
    const headers = headersFrom(trace !== undefined ? hopTraceHeaders(trace) : traceHeaders({ startIfMissing: true }));
    const to = this.edge ? edgeSubjectOf(this.prefix, subject) : subject;
    try {
      return await publishOnce(
        this.nats.js,
        this.sent,
        to,
        textEncoder.encode(JSON.stringify(body)),
        msgId,
        headers,
        messageIdentity(body),
        this.retry,
        this.edge,
      );
    } catch (error) {
      // Closed while it was being sent: said as a closed client, not as a failure of the server.
      throw this.closedError(`the message for ${subject}`) ?? error;
    }
  }
}
