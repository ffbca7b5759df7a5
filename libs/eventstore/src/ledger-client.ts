import type { z } from 'zod';
import {
  ProjectControlReplySchema,
  OpenOffersReplySchema,
  CompleteThenCreateReplySchema,
  LedgerErrorCode,
  Limits,
  RejectionCode,
  LedgerReplySchema,
  RetryableLedgerCodes,
  createEventRegistry,
  describePrincipal,
  parseIgnoringUnknownKeys,
  ledgerCommandSubject,
  type AbandonHandoffCommandSchema,
  type ArchiveHandoffCommandSchema,
  type ClaimHandoffCommandSchema,
  type CompleteFromResultCommandSchema,
  type CompleteThenCreateReply,
  type CreateHandoffCommandSchema,
  type DecideHandbackCommandSchema,
  type FailHandoffCommandSchema,
  type GiveUpOfferCommandSchema,
  type HandoffCommandName,
  type HandoffEvent,
  type HandoffRecord,
  type HeartbeatHandoffCommandSchema,
  type LedgerCommandName,
  type LedgerError,
  type LedgerReply,
  type OpenOffersCommandSchema,
  type OpenOffersReply,
  type OperatorRole,
  type PauseProjectRequestSchema,
  type Principal,
  type ProjectControlReply,
  type ReleaseHandoffCommandSchema,
  type RequeueExpiredCommandSchema,
  type ResumeProjectRequestSchema,
  type ReturnHandoffCommandSchema,
} from '@baton/contracts';
import { handoffDecider, toHandoffRecord, type HandoffState } from '@baton/domain';
import { headersFrom, type NatsHandle } from './connection';
import { hopTraceHeaders, type HopTrace } from './trace-context';
import { JetStreamEventStore } from './store';

/** The body of a `create`: `project` may be left out (the client fills it from the call). */
export type LedgerCreateInput = Omit<z.input<typeof CreateHandoffCommandSchema>, 'project'> & { project?: string };
export type LedgerClaimInput = z.input<typeof ClaimHandoffCommandSchema>;
export type LedgerHeartbeatInput = z.input<typeof HeartbeatHandoffCommandSchema>;
export type LedgerReturnInput = z.input<typeof ReturnHandoffCommandSchema>;
export type LedgerDecideHandbackInput = z.input<typeof DecideHandbackCommandSchema>;
export type LedgerReleaseInput = z.input<typeof ReleaseHandoffCommandSchema>;
export type LedgerAbandonInput = z.input<typeof AbandonHandoffCommandSchema>;
export type LedgerFailInput = z.input<typeof FailHandoffCommandSchema>;
export type LedgerArchiveInput = z.input<typeof ArchiveHandoffCommandSchema>;
export type LedgerRequeueExpiredInput = z.input<typeof RequeueExpiredCommandSchema>;
export type LedgerCompleteFromResultInput = z.input<typeof CompleteFromResultCommandSchema>;
export type LedgerGiveUpOfferInput = z.input<typeof GiveUpOfferCommandSchema>;
/** The body of a `complete_then_create`: the two commands, run in this order. */
export interface LedgerCompleteThenCreateInput {
  complete: LedgerCompleteFromResultInput;
  create: LedgerCreateInput;
}
export type LedgerOpenOffersInput = z.input<typeof OpenOffersCommandSchema>;
/** The body of `pause` / `resume`: who speaks comes from the principal and the call's operator. */
export type LedgerPauseInput = Omit<z.input<typeof PauseProjectRequestSchema>, 'actor' | 'actor_role'>;
export type LedgerResumeInput = Omit<z.input<typeof ResumeProjectRequestSchema>, 'actor' | 'actor_role'>;

/** The person an operator relay (`op.notifier`, `op.admin`) speaks for. */
export interface LedgerOperator {
  /** Sent as the body's `actor` (required for `op.notifier`; `op.admin` defaults to `admin`). */
  name: string;
  /** Sent as the body's `actor_role` (required for `op.notifier`: the token's role). */
  role?: OperatorRole;
}

export interface LedgerClientOptions {
  /**
   * Who issues the commands, unless a call says otherwise: the principal named in every command
   * subject (`<prefix>.cmd.ledger.<project>.<kind>.<name>.<command>`). The NATS server lets a
   * connection publish only the subjects of its own principal.
   */
  as?: Principal;
  /** For an operator relay: the person it speaks for, unless a call says otherwise. */
  operator?: LedgerOperator;
  /** How long one attempt waits for the ledger's reply, ms (default 5000). */
  timeoutMs?: number;
  /** Attempts per command, the first included (default 3). */
  attempts?: number;
  /** Wait before retry n is `backoffMs * n`, ms (default 100). */
  backoffMs?: number;
}

export interface LedgerCallOptions {
  /** Who issues this command (overrides the client's `as`). */
  as?: Principal;
  /** For an operator relay: the person this command is for (overrides the client's `operator`). */
  operator?: LedgerOperator;
  timeoutMs?: number;
  /** The trace the command continues (sent as `traceparent`): the hop that asks for it. */
  trace?: HopTrace;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function natsErrorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

function failure(code: string, kind: LedgerError['kind'], message: string, details?: Record<string, unknown>): { ok: false; error: LedgerError } {
  return { ok: false, error: details ? { code, kind, message, details } : { code, kind, message } };
}

/**
 * The typed way to drive the handoff ledger (every service, the SDK and the CLI use it): the one
 * policy for calling it (timeouts, retries with the same idempotency key, reply decoding). It
 * lives in the message-edge library, next to the connection it uses, so an agent microservice gets
 * it without the services' NestJS platform; the wire protocol it speaks is in `@baton/contracts`
 * (`ledger-protocol.ts`). Each
 * method sends one command as a core NATS request to
 * `<prefix>.cmd.ledger.<project>.<kind>.<name>.<command>`, the subject naming the client's
 * principal (`as`), and resolves with the ledger's reply: `{ ok: true, handoff, events }` or
 * `{ ok: false, error }` (domain refusals such as `handoff_not_pending`, access refusals such as
 * `principal_not_allowed`, and rejected input, alike). The body never names the caller, except that
 * an operator relay adds the person it speaks for (`actor`, `actor_role`). It never throws for
 * refusals; it throws only when no principal is known for the call, or an `op.notifier` call names
 * no operator. An agent principal speaks only in its own project: a command for another project is
 * answered `principal_not_allowed` without being sent.
 *
 * Retries: when an attempt times out, finds no ledger subscribed, or the ledger answers a
 * retryable error (`conflict`, `unavailable`), the SAME body (hence the same idempotency key) is
 * sent again, up to `attempts` times with a linear backoff. This is safe because every ledger
 * command is idempotent by its key: a retry of a command that was already applied changes nothing
 * and answers the current handoff (see `LedgerReply`). After the last attempt the result is
 * `{ ok: false, error: { code: 'timeout' | 'no_responders' | ..., kind: 'unavailable' } }`. Credentials
 * the server does not let publish to the subject get `permission_denied` (kind `forbidden`) at once.
 */
export class LedgerClient {
  private readonly timeoutMs: number;
  private readonly attempts: number;
  private readonly backoffMs: number;
  private store: JetStreamEventStore | null = null;

  constructor(
    private readonly nats: NatsHandle,
    private readonly prefix: string,
    private readonly options: LedgerClientOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 5000;
    this.attempts = Math.max(1, options.attempts ?? 3);
    this.backoffMs = options.backoffMs ?? 100;
  }

  /** Create a handoff (pending). Refusals: `already_exists`, `not_the_delegator`. */
  create(project: string, command: LedgerCreateInput, call?: LedgerCallOptions): Promise<LedgerReply> {
    return this.send(project, 'create', { ...command, project: command.project ?? project }, call);
  }

  /** Claim a pending handoff (optimistic: of concurrent claimers one wins, the rest get `handoff_not_pending`). The reply's `handoff.claim_id` is the claim. */
  claim(project: string, command: LedgerClaimInput, call?: LedgerCallOptions): Promise<LedgerReply> {
    return this.send(project, 'claim', command, call);
  }

  /** Extend the lease of the claim the caller holds. */
  heartbeat(project: string, command: LedgerHeartbeatInput, call?: LedgerCallOptions): Promise<LedgerReply> {
    return this.send(project, 'heartbeat', command, call);
  }

  /** Return claimed work with a completion report; the ledger then creates the completion handback. */
  return(project: string, command: LedgerReturnInput, call?: LedgerCallOptions): Promise<LedgerReply> {
    return this.send(project, 'return', command, call);
  }

  /** Accept or rework a completion handback; the ledger then completes or requeues the parent. */
  decideHandback(project: string, command: LedgerDecideHandbackInput, call?: LedgerCallOptions): Promise<LedgerReply> {
    return this.send(project, 'decide_handback', command, call);
  }

  /** The claimer declines the work (→ released). */
  release(project: string, command: LedgerReleaseInput, call?: LedgerCallOptions): Promise<LedgerReply> {
    return this.send(project, 'release', command, call);
  }

  /** The delegator or an operator withdraws unfinished work (→ abandoned). */
  abandon(project: string, command: LedgerAbandonInput, call?: LedgerCallOptions): Promise<LedgerReply> {
    return this.send(project, 'abandon', command, call);
  }

  /** The work failed (→ failed). */
  fail(project: string, command: LedgerFailInput, call?: LedgerCallOptions): Promise<LedgerReply> {
    return this.send(project, 'fail', command, call);
  }

  /** Archive a terminal handoff. */
  archive(project: string, command: LedgerArchiveInput, call?: LedgerCallOptions): Promise<LedgerReply> {
    return this.send(project, 'archive', command, call);
  }

  /** Watchdog: requeue (or escalate) a claim whose lease expired; exactly once per claim. */
  requeueExpired(project: string, command: LedgerRequeueExpiredInput, call?: LedgerCallOptions): Promise<LedgerReply> {
    return this.send(project, 'requeue_expired', command, call);
  }

  /**
   * The addressed agent only: it gave up on the offer of a pending handoff without claiming it. The
   * ledger counts it as a retry and offers the handoff again, or escalates it at the retry cap
   * (refusals: `handoff_not_pending`, `not_the_addressee`, `stale_offer`).
   */
  giveUpOffer(project: string, command: LedgerGiveUpOfferInput, call?: LedgerCallOptions): Promise<LedgerReply> {
    return this.send(project, 'give_up_offer', command, call);
  }

  /** Router (`svc.router`) only: close a pending / claimed handoff with the agent result its run recorded. */
  completeFromResult(project: string, command: LedgerCompleteFromResultInput, call?: LedgerCallOptions): Promise<LedgerReply> {
    return this.send(project, 'complete_from_result', command, call);
  }

  /**
   * Router (`svc.router`) only: `complete_from_result`, then — when the completion was applied or
   * had been done before (`handoff_not_open`) — `create`, in one request. The reply carries each
   * part's own reply (`create: null` when the completion was refused). Retried like every command
   * when the request as a whole is not answered or answered with a retryable error; a part's
   * retryable error is left to the caller (the other part may have been decided).
   */
  completeThenCreate(project: string, command: LedgerCompleteThenCreateInput, call?: LedgerCallOptions): Promise<CompleteThenCreateReply> {
    const body = { complete: command.complete, create: { ...command.create, project: command.create.project ?? project } };
    return this.request(
      project,
      'complete_then_create',
      body,
      call,
      (subject, raw) => this.decodeWith(CompleteThenCreateReplySchema, subject, raw) as CompleteThenCreateReply,
    );
  }

  /**
   * Agents only: have the ledger provision this agent's offers durable (`offers-<n>-<project>-<agent>`
   * on the inbox stream, filtered to its own offers). Idempotent; the reply names the stream and
   * the durable to pull from.
   */
  openOffers(project: string, command: LedgerOpenOffersInput = {}, call?: LedgerCallOptions): Promise<OpenOffersReply> {
    return this.request(project, 'open_offers', command, call, (subject, raw) => this.decodeWith(OpenOffersReplySchema, subject, raw) as OpenOffersReply);
  }

  /** The kill switch (admins only: `op.admin`, or `op.notifier` for an admin token). */
  pause(project: string, command: LedgerPauseInput, call?: LedgerCallOptions): Promise<ProjectControlReply> {
    return this.request(project, 'pause', command, call, (subject, raw) => this.decodeWith(ProjectControlReplySchema, subject, raw) as ProjectControlReply);
  }

  /** Lift the kill switch; pending handoffs are offered again (admins only). */
  resume(project: string, command: LedgerResumeInput, call?: LedgerCallOptions): Promise<ProjectControlReply> {
    return this.request(project, 'resume', command, call, (subject, raw) => this.decodeWith(ProjectControlReplySchema, subject, raw) as ProjectControlReply);
  }

  /**
   * Send any handoff command by name (the typed methods call this). Retries as described on the
   * class; the body is sent unchanged on every attempt.
   */
  send(project: string, command: HandoffCommandName, body: object, call: LedgerCallOptions = {}): Promise<LedgerReply> {
    return this.request(project, command, body, call, (subject, raw) => this.decodeWith(LedgerReplySchema, subject, raw) as LedgerReply);
  }

  private async request<R extends { ok: true } | Refusal>(
    project: string,
    command: LedgerCommandName,
    body: object,
    call: LedgerCallOptions = {},
    decode: (subject: string, raw: Uint8Array) => R,
  ): Promise<R> {
    const as = call.as ?? this.options.as;
    if (!as) throw new Error(`LedgerClient.${command}: no principal; pass { as: Principals.… } to the client or the call`);
    if (as.kind === 'agent' && as.project !== project) {
      return failure(LedgerErrorCode.principalNotAllowed, 'forbidden', `${describePrincipal(as)} speaks only in project ${as.project}, not ${project}`) as R;
    }
    const subject = ledgerCommandSubject(this.prefix, project, as, command);
    const data = encoder.encode(JSON.stringify({ ...body, ...this.speaksFor(as, call, command) }));
    // What the ledger refuses by its size is refused here, nothing sent: past the server's payload
    // limit (1 MiB by default) the client could not even send it, and that is no outage to retry.
    if (data.length > Limits.maxMessageBytes) {
      return failure(RejectionCode.payloadTooLarge, 'rejected', `the ${command} command is ${data.length} bytes; the cap is ${Limits.maxMessageBytes}`) as R;
    }
    const timeout = call.timeoutMs ?? this.timeoutMs;
    const traceHeaders = call.trace ? headersFrom(hopTraceHeaders(call.trace)) : undefined;
    let last: R | Refusal = failure(LedgerErrorCode.timeout, 'unavailable', `no reply from the ledger on ${subject}`);
    // What the last refusal asked to wait (an `overloaded` ledger's retry_after_ms, at most 5 s),
    // stretched by up to as much again at random: callers refused together do not come back together.
    let askedWaitMs = 0;
    for (let attempt = 1; attempt <= this.attempts; attempt++) {
      if (attempt > 1) await sleep(Math.max(this.backoffMs * (attempt - 1), askedWaitMs));
      let raw: Uint8Array;
      try {
        const msg = await this.nats.connection.request(subject, data, traceHeaders ? { timeout, headers: traceHeaders } : { timeout });
        raw = msg.data;
      } catch (err) {
        const code = natsErrorCode(err);
        if (code === '503') {
          last = failure(LedgerErrorCode.noResponders, 'unavailable', `no ledger is listening on ${subject}`);
          continue;
        }
        if (code === 'TIMEOUT' || code === '408') {
          last = failure(LedgerErrorCode.timeout, 'unavailable', `no reply from the ledger on ${subject} within ${timeout} ms`);
          continue;
        }
        // Not retried: the server refuses every attempt alike.
        if (code === 'MAX_PAYLOAD_EXCEEDED')
          return failure(RejectionCode.payloadTooLarge, 'rejected', `the ${command} command is ${data.length} bytes, over the NATS server's max_payload`) as R;
        if (code === 'PERMISSIONS_VIOLATION')
          return failure(LedgerErrorCode.permissionDenied, 'forbidden', `these credentials may not publish to ${subject}`) as R;
        return failure(LedgerErrorCode.unavailable, 'unavailable', `request to ${subject} failed: ${(err as Error).message}`) as R;
      }
      const reply = decode(subject, raw);
      if (!reply.ok && RetryableLedgerCodes.includes(reply.error.code)) {
        last = reply;
        const asked = reply.error.details?.['retry_after_ms'];
        askedWaitMs = typeof asked === 'number' && Number.isFinite(asked) ? Math.min(Math.max(asked, 0), 5_000) * (1 + Math.random()) : 0;
        continue;
      }
      return reply;
    }
    // Every failure shape is a refusal any of the replies admits.
    return last as R;
  }

  /** What an operator relay adds to the body: the person it speaks for. Nothing for agents and services. */
  private speaksFor(as: Principal, call: LedgerCallOptions, command: LedgerCommandName): Record<string, string> {
    if (as.kind !== 'op') return {};
    const operator = call.operator ?? this.options.operator;
    if (!operator) {
      if (as.relay === 'notifier') throw new Error(`LedgerClient.${command}: op.notifier names the operator it relays; pass { operator: { name, role } }`);
      return {};
    }
    return { actor: operator.name, ...(operator.role !== undefined ? { actor_role: operator.role } : {}) };
  }

  /**
   * Read one handoff as it stands: folds its events from the event store (read-only; any service
   * may read). Resolves null when the handoff does not exist. Never goes through the ledger.
   */
  async get(project: string, id: string): Promise<HandoffRecord | null> {
    this.store ??= new JetStreamEventStore({ js: this.nats.js, jsm: this.nats.jsm, prefix: this.prefix, registry: createEventRegistry() });
    const { events } = await this.store.read({ project, kind: 'handoff', id });
    const state = events.reduce<HandoffState>(
      (s, e) => handoffDecider.evolve(s, { type: e.type, data: e.payload } as HandoffEvent),
      handoffDecider.initialState(),
    );
    return toHandoffRecord(state);
  }

  private decodeWith(schema: z.ZodType, subject: string, raw: Uint8Array): unknown {
    let json: unknown;
    try {
      json = JSON.parse(decoder.decode(raw));
    } catch {
      return failure(LedgerErrorCode.badReply, 'internal', `the reply on ${subject} is not JSON`);
    }
    // A newer ledger's reply may carry fields this client does not know (an optional field added
    // since): they are left out, as every reader does with what Baton wrote (tolerant.ts).
    const parsed = parseIgnoringUnknownKeys(schema, json);
    if (parsed.success) return parsed.data;
    // Refusals come in the ledger's reply shape whatever the command.
    const refusal = parseIgnoringUnknownKeys(LedgerReplySchema, json);
    if (refusal.success && !refusal.data.ok) return refusal.data;
    return failure(LedgerErrorCode.badReply, 'internal', `the reply on ${subject} is not a ledger reply: ${parsed.error.message}`);
  }
}

/** A refusal as every ledger reply shape admits it (pause / resume replies type `kind` as a plain string). */
type Refusal = { ok: false; error: { code: string; kind: string; message: string; details?: Record<string, unknown> } };
