import { randomBytes } from 'node:crypto';
import {
  AgentResultSchema,
  ClaimWithdrawnSchema,
  claimWithdrawnSubject,
  edgeAckSubject,
  edgeApiPrefix,
  edgeSubjectOf,
  inboxPrefixOf,
  Limits,
  MsgIds,
  parseUntrustedJson,
  Principals,
  SessionMessageSchema,
  RejectionCode,
  StartRunRequestSchema,
  rejectionFromZod,
  type AgentResult,
  type SessionMessage,
  type StartRunRequest,
} from '@baton/contracts';
import {
  EventStoreError,
  LedgerClient,
  connectNats,
  CredentialsRefused,
  hasNatsCode,
  headersFrom,
  natsRefusedCredentials,
  hopTraceHeaders,
  runConsumer,
  traceHeaders,
  type HopTrace,
  type NatsHandle,
} from '@baton/eventstore';
import { InvalidInputError, LedgerCommandError, OfferTerminatedError } from './errors';
import type { MeshPublisher } from './mesh';
import { createOfferHandler, type HandoffOffer } from './offers';
import { DEFAULT_SENT_IDS, messageIdentity, publishOnce, publishRetryOf, SentMessageIds, type PublishRetry } from './sent-ids';
import { AgentSubjects } from './subjects';
import { ResultClaimCode } from '@baton/domain';

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
  /** How long one ledger request waits for its reply, ms (default 5000; the client retries timeouts twice with the same idempotency key). */
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
   * (`natsCreds` / `NATS_CREDS`), off otherwise (a development server without authentication, or a
   * shared `nats` handle, reaches the streams directly).
   */
  edge?: boolean;
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
   * `finish(result)`, `return(report)`, `release(reason)` or `fail(reason)`. When the handler
   * resolves the offer message is acknowledged; when it throws, the offer is redelivered after a
   * delay (to this or another replica) and terminated after `maxDeliver` attempts (never
   * dead-lettered: agents may not publish dead letters; the handoff stays with the ledger). An offer
   * terminated before any of its deliveries claimed the handoff is given up to the ledger
   * (`give_up_offer`), which counts a retry and offers it again, or escalates it at its retry cap;
   * `onError` then gets an `OfferTerminatedError` saying what the ledger did (`giveUp`). An offer
   * whose handoff is already taken is acknowledged by `tryClaim()` returning null.
   */
  onOffer: (offer: HandoffOffer) => Promise<void> | void;
  /** Offers handled at once by this process (default 1). */
  concurrency?: number;
  /**
   * How long the server waits for this process before giving an offer to another replica (ms,
   * default 60 000, between 1 000 and 3 600 000; the SDK sends progress while the handler runs).
   * Sent to the ledger, which sets it on the agent's offers durable.
   */
  ackWaitMs?: number;
  /** Deliveries before an offer whose handler keeps failing is terminated (default 5). */
  maxDeliver?: number;
  /** Delays between redeliveries of a failed offer, ms (default 1 s, 5 s, 15 s, 30 s). */
  backoffMs?: number[];
  /** Called when pulling fails (connection trouble); the SDK keeps retrying. Default: console.error. */
  onError?: (error: unknown) => void;
}

/** A running offer subscription. */
export interface OfferSubscription {
  /** Stop taking offers, let the handlers in flight finish (and ack), then resolve. */
  stop(): Promise<void>;
  /** Resolves when the subscription has stopped. */
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
   * @throws LedgerCommandError when the ledger refuses or cannot open the durable.
   */
  handoffs(options: HandoffsOptions): Promise<OfferSubscription>;
  /**
   * The publisher `startMesh` and `publishMeshResult` take, speaking as this agent: its connection,
   * its message-id memory, its name (a mesh start records it as the actor; with `publishesAs:
   * 'project'` none, so a start goes to the shared subject) and, with credentials, the agent edge
   * (its credentials allow nothing else).
   */
  meshPublisher(): MeshPublisher;
  /** Stop every offer subscription, then drain the connection if the client opened it. */
  close(): Promise<void>;
}

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

/**
 * Connect (or adopt `options.nats`) and return a {@link BatonAgent} for one agent of one project.
 * Rejects when NATS is unreachable or JetStream is off.
 */
export async function createBatonClient(options: BatonClientOptions): Promise<BatonAgent> {
  // Options are checked before connecting: a refusal leaves no connection open behind it.
  const sent = new SentMessageIds(options.sentIdsCapacity ?? DEFAULT_SENT_IDS);
  const retry = publishRetryOf({
    ...(options.publishAttempts !== undefined ? { attempts: options.publishAttempts } : {}),
    ...(options.publishTimeoutMs !== undefined ? { timeoutMs: options.publishTimeoutMs } : {}),
  });
  const owns = options.nats === undefined;
  const credsFile = options.natsCreds ?? process.env['NATS_CREDS'];
  const prefix = options.prefix ?? process.env['BATON_PREFIX'] ?? 'baton';
  let nats = options.nats;
  if (nats === undefined) {
    try {
      nats = await connectNats({
        servers: options.natsUrl,
        name: `baton-sdk-${options.project}-${options.agent}`,
        ...(credsFile !== undefined && credsFile !== '' ? { credsFile } : {}),
        // Replies, publish acks and pulled offers arrive on this agent's own inbox prefix (the only
        // one its credentials may subscribe to); an agent may not ask for account-wide JetStream info.
        inboxPrefix: inboxPrefixOf(prefix, { kind: 'agent', project: options.project, agent: options.agent }),
        checkJetStream: false,
      });
    } catch (error) {
      // Typed as the errors table says: credentials of another principal are PermissionDenied, a
      // file that cannot be read CredentialsRefused (both thrown typed by connectNats); credentials
      // the server refused, or none given to a server that wants them, CredentialsRefused with its
      // reason; any other failure to connect (refused connection, unreachable) is store_error.
      if (error instanceof EventStoreError) throw error;
      const at = options.natsUrl ?? 'the default server';
      const said = (error as Error).message;
      if (natsRefusedCredentials(error)) {
        const file = credsFile === undefined || credsFile === '' ? null : credsFile;
        if (file === null) {
          throw new CredentialsRefused(
            'missing',
            null,
            `cannot connect to NATS at ${at}: ${said} (the server wants credentials: pass natsCreds, or set NATS_CREDS to the file \`baton creds agent\` wrote)`,
            { cause: error },
          );
        }
        if (hasNatsCode(error, 'BAD_CREDS')) {
          throw new CredentialsRefused(
            'invalid',
            file,
            `cannot connect to NATS at ${at}: ${file} is not a NATS credentials file the client can use (${said})`,
            {
              cause: error,
            },
          );
        }
        throw new CredentialsRefused(
          'refused',
          file,
          `cannot connect to NATS at ${at}: the server refused the credentials in ${file} (${said}: unknown to this server, expired, revoked, or another deployment's); retrying does not help, credentials this deployment issued do (\`baton creds agent\`)`,
          { cause: error },
        );
      }
      throw new EventStoreError(`cannot connect to NATS at ${at}: ${said}`, { cause: error });
    }
  }
  const edge = options.edge ?? (owns && credsFile !== undefined && credsFile !== '');
  return new NatsBatonAgent(nats, owns, options, sent, edge, retry);
}

class NatsBatonAgent implements BatonAgent {
  readonly prefix: string;
  readonly project: string;
  readonly agent: string;
  readonly ledger: LedgerClient;
  private readonly publishesAs: 'agent' | 'project';
  private readonly subscriptions = new Set<OfferSubscription>();
  /** The message ids this client published (see {@link SentMessageIds}). */
  private readonly sent: SentMessageIds;

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
    // The ledger provisions the durable (agents may not create consumers), then this process only
    // pulls from it and acknowledges.
    const ackWait = options.ackWaitMs !== undefined ? { ack_wait_ms: options.ackWaitMs } : {};
    const opened = await this.ledger.openOffers(this.project, ackWait);
    if (!opened.ok) throw new LedgerCommandError('open_offers', '', opened.error);
    const { stream, durable } = opened;
    /** Give-ups still being told to the ledger: `stop` waits for them. */
    const givingUp = new Set<Promise<void>>();
    const handler = createOfferHandler({
      project: this.project,
      agent: this.agent,
      instance: this.instance,
      ledger: this.ledger,
      publishResult: (result, trace) => this.publishResult(result, trace),
      onOffer: options.onOffer,
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
      ...(options.onError ? { onError: options.onError } : {}),
      onOutcome: (outcome) => {
        if (outcome.kind !== 'terminated') return;
        // An offer given up on before any claim is told to the ledger, which offers its handoff
        // again or escalates it (docs/handoffs.md, "An offer given up on"); then the agent is told.
        const { msg, error: cause } = outcome;
        const report = handler
          .terminated(msg, cause)
          .then(({ handoffId, giveUp }) => {
            const error = new OfferTerminatedError(msg.subject, msg.seq, msg.deliveryCount, { cause, handoffId, ...(giveUp ? { giveUp } : {}) });
            (options.onError ?? ((e: unknown) => console.error(`[baton sdk] ${(e as Error).message}`)))(error);
          })
          .catch(() => undefined);
        givingUp.add(report);
        void report.finally(() => givingUp.delete(report));
      },
      // An agent may neither create consumers nor publish dead letters: a lost durable is opened
      // again by the ledger from the reader's ack floor, and an offer given up on is terminated
      // (its handoff stays with the ledger: a give-up it is told of, or the lease, decides).
      deadLetters: false,
      recreateConsumer: async (afterSeq) => {
        const again = await this.ledger.openOffers(this.project, { ...ackWait, start_after_seq: afterSeq });
        if (!again.ok) throw new LedgerCommandError('open_offers', '', again.error);
      },
    });
    const subscription: OfferSubscription = {
      done: runner.done,
      stop: async () => {
        withdrawals.unsubscribe();
        await runner.stop();
        await Promise.allSettled([...givingUp]);
        this.subscriptions.delete(subscription);
      },
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  meshPublisher(): MeshPublisher {
    // Like startRun: on the agent's subject unless the client publishes as the project (credentials
    // issued before the agent-named subjects allow only the shared one).
    return {
      js: this.nats.js,
      prefix: this.prefix,
      sent: this.sent,
      ...(this.publishesAs === 'agent' ? { agent: this.agent } : {}),
      edge: this.edge,
      retry: this.retry,
    };
  }

  async close(): Promise<void> {
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    if (this.ownsConnection) await this.nats.drain();
  }

  private async publish(subject: string, body: object, msgId: string, trace?: HopTrace): Promise<PublishReceipt> {
    // Carry the trace the call continues (an offer's finish: the run's), else the caller's (or
    // start one), so the run can be followed from this result to the operator's inbox item across
    // every service.
    const headers = headersFrom(trace !== undefined ? hopTraceHeaders(trace) : traceHeaders({ startIfMissing: true }));
    const to = this.edge ? edgeSubjectOf(this.prefix, subject) : subject;
    return publishOnce(this.nats.js, this.sent, to, textEncoder.encode(JSON.stringify(body)), msgId, headers, messageIdentity(body), this.retry, this.edge);
  }
}
