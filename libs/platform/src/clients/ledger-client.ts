import type { z } from 'zod';
import {
  Subjects,
  createEventRegistry,
  type AbandonHandoffCommandSchema,
  type ArchiveHandoffCommandSchema,
  type ClaimHandoffCommandSchema,
  type CompleteFromResultCommandSchema,
  type CreateHandoffCommandSchema,
  type DecideHandbackCommandSchema,
  type FailHandoffCommandSchema,
  type HandoffCommandName,
  type HandoffEvent,
  type HandoffRecord,
  type HeartbeatHandoffCommandSchema,
  type ReleaseHandoffCommandSchema,
  type RequeueExpiredCommandSchema,
  type ReturnHandoffCommandSchema,
} from '@baton/contracts';
import { handoffDecider, toHandoffRecord, type HandoffState } from '@baton/domain';
import { JetStreamEventStore, type NatsHandle } from '@baton/eventstore';
import {
  LedgerErrorCode,
  LedgerReplySchema,
  RetryableLedgerCodes,
  type LedgerActor,
  type LedgerError,
  type LedgerReply,
} from './ledger-protocol';

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

export interface LedgerClientOptions {
  /** Who issues the commands, unless a call says otherwise. */
  as?: LedgerActor;
  /** How long one attempt waits for the ledger's reply, ms (default 5000). */
  timeoutMs?: number;
  /** Attempts per command, the first included (default 3). */
  attempts?: number;
  /** Wait before retry n is `backoffMs * n`, ms (default 100). */
  backoffMs?: number;
}

export interface LedgerCallOptions {
  /** Who issues this command (overrides the client's `as`). */
  as?: LedgerActor;
  timeoutMs?: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function natsErrorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

function failure(code: string, kind: LedgerError['kind'], message: string, details?: Record<string, unknown>): LedgerReply {
  return { ok: false, error: details ? { code, kind, message, details } : { code, kind, message } };
}

/**
 * The typed way to drive the handoff ledger (every service, the SDK and the CLI use it). Each
 * method sends one command as a core NATS request to `<prefix>.cmd.ledger.<project>.<command>` and
 * resolves with the ledger's reply: `{ ok: true, handoff, events }` or `{ ok: false, error }`
 * (domain refusals such as `handoff_not_pending`, and rejected input, alike). It never throws for
 * those; it throws only when no actor is known for the call.
 *
 * Retries: when an attempt times out, finds no ledger subscribed, or the ledger answers a
 * retryable error (`conflict`, `unavailable`), the SAME body (hence the same idempotency key) is
 * sent again, up to `attempts` times with a linear backoff. This is safe because every ledger
 * command is idempotent by its key: a retry of a command that was already applied changes nothing
 * and answers the current handoff (see `LedgerReply`). After the last attempt the result is
 * `{ ok: false, error: { code: 'timeout' | 'no_responders' | ..., kind: 'unavailable' } }`.
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

  /** Router (actor kind `system`): close a pending / claimed handoff with the agent result its run recorded. */
  completeFromResult(project: string, command: LedgerCompleteFromResultInput, call?: LedgerCallOptions): Promise<LedgerReply> {
    return this.send(project, 'complete_from_result', command, call);
  }

  /**
   * Send any ledger command by name (the typed methods call this). Retries as described on the
   * class; the body is sent unchanged on every attempt.
   */
  async send(project: string, command: HandoffCommandName, body: object, call: LedgerCallOptions = {}): Promise<LedgerReply> {
    const as = call.as ?? this.options.as;
    if (!as) throw new Error(`LedgerClient.${command}: no actor; pass { as: { actor, actor_kind } } to the client or the call`);
    const subject = Subjects.ledgerCommand(this.prefix, project, command);
    const data = encoder.encode(JSON.stringify({ ...body, actor: as.actor, actor_kind: as.actor_kind }));
    const timeout = call.timeoutMs ?? this.timeoutMs;
    let last: LedgerReply = failure(LedgerErrorCode.timeout, 'unavailable', `no reply from the ledger on ${subject}`);
    for (let attempt = 1; attempt <= this.attempts; attempt++) {
      if (attempt > 1) await sleep(this.backoffMs * (attempt - 1));
      let raw: Uint8Array;
      try {
        const msg = await this.nats.connection.request(subject, data, { timeout });
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
        return failure(LedgerErrorCode.unavailable, 'unavailable', `request to ${subject} failed: ${(err as Error).message}`);
      }
      const reply = this.decodeReply(subject, raw);
      if (!reply.ok && RetryableLedgerCodes.includes(reply.error.code)) {
        last = reply;
        continue;
      }
      return reply;
    }
    return last;
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

  private decodeReply(subject: string, raw: Uint8Array): LedgerReply {
    let json: unknown;
    try {
      json = JSON.parse(decoder.decode(raw));
    } catch {
      return failure(LedgerErrorCode.badReply, 'internal', `the reply on ${subject} is not JSON`);
    }
    const parsed = LedgerReplySchema.safeParse(json);
    if (!parsed.success) return failure(LedgerErrorCode.badReply, 'internal', `the reply on ${subject} is not a ledger reply: ${parsed.error.message}`);
    return parsed.data;
  }
}
