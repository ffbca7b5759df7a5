import { Inject, Injectable } from '@nestjs/common';
import type { z } from 'zod';
import {
  MAX_JSON_DEPTH,
  type HandoffEvent,
  SERVICE_COMMAND_EXTRA_DEPTH,
  AbandonHandoffCommandSchema,
  ArchiveHandoffCommandSchema,
  ClaimHandoffCommandSchema,
  CompleteFromResultCommandSchema,
  CompleteThenCreatePartsSchema,
  CreateHandoffCommandSchema,
  DecideHandbackCommandSchema,
  ExpireDeadlineCommandSchema,
  GovernanceErrorCode,
  LedgerAccessErrorCode,
  LedgerErrorCode,
  OpenOffersCommandSchema,
  ProjectControlCommandSchemas,
  type OpenOffersReply,
  type ProjectControlReply,
  FailHandoffCommandSchema,
  GiveUpOfferCommandSchema,
  HeartbeatHandoffCommandSchema,
  IdSchema,
  Limits,
  OriginSchema,
  ReleaseHandoffCommandSchema,
  RequeueExpiredCommandSchema,
  ReturnHandoffCommandSchema,
  describeAccess,
  describePrincipal,
  isLedgerCommand,
  mayIssue,
  parseLedgerCommandSubject,
  ledgerCommandSenderOf,
  decodeUtf8,
  parseUntrustedJson,
  rejectionFromZod,
  replyRefusal,
  resolveLedgerCaller,
  onBehalfOfRefusal,
  splitIdentityClaims,
  type HandoffActorKind,
  type HandoffCommandMetadata,
  type HandoffCommandName,
  type LedgerCaller,
  type LedgerCommandAddress,
  type LedgerCommandName,
  type LedgerError,
  type LedgerErrorKind,
  type LedgerReply,
  type CompleteThenCreateReply,
  type Origin,
  type Principal,
  type ProjectControlCommandName,
  type Rejection,
} from '@baton/contracts';
import {
  HandoffErrorCode,
  handoffDecider,
  handoffRun,
  LEDGER_ACTOR,
  OPERATOR_ANSWER_TOOL,
  reactToHandoffEvent,
  runTurnFold,
  toHandoffRecord,
  type HandoffCommand,
  type HandoffState,
  type RunEvent,
  type RunTurn,
} from '@baton/domain';
import {
  ConcurrencyConflict,
  DeadLetterReason,
  EventDecodeError,
  DlqSources,
  hopTrace,
  newUniqueId,
  REFUSED_LETTER_BYTES,
  StorageFull,
  type AggregateRef,
  type DeadLetterInput,
  type HopTrace,
} from '@baton/eventstore';
import { natsAuthenticated, RUNTIME, type JsonLogger, type RefusedLetters, type ServiceRuntime } from '@baton/platform';
import { LEDGER_CONFIG, type LedgerConfig } from '../config';
import { LedgerIds } from '../ids';
import { ProjectDirectory, type ProjectView } from '../projects/project-directory';
import { ProjectControlService } from '../governance/project-control.service';
import { ClaimRateStore, type ClaimAdmission, type ClaimTicket } from '../governance/claim-rate-store';
import { OfferConsumers } from '../offers/offer-consumers';
import { OfferPublisher } from '../offers/offer-publisher';
import { COMMAND_REFUSED_LETTERS } from '../edge/refusal-tokens';

/** Dead-letter source of rejected ledger requests (`<prefix>.dlq.ledger`). */
export const LEDGER_DLQ_SOURCE = DlqSources.ledger;

/** Header a caller may set to tie the events of a command to a wider flow (an Id). */
export const CorrelationHeader = 'Baton-Correlation-Id';

/** One request as it arrived: subject, headers, the original bytes and where to answer. */
export interface LedgerRequest {
  subject: string;
  headers: Record<string, string[]>;
  data: Uint8Array;
  /** The reply subject the requester set (none for a publish without reply). */
  reply?: string;
}

/** A command ready to decide: the handoff it is for and the domain command. */
interface Prepared {
  /** The project the handoff lives in (the target of a cross-project create), when not the subject's. */
  project?: string;
  handoffId: string;
  idempotencyKey: string;
  command: HandoffCommand;
  /** The wire body as parsed (defaults filled, text trimmed): what an outside caller's digest covers. */
  wire: unknown;
  /** A `decide_handback`'s reads while preparing it: the handback, and the work it reviews (null: none). */
  review?: { handback: HandoffState; parent: HandoffState | null };
}

/** Callers whose bodies are digested with their keys: agents and people, not the services. */
function signsBody(kind: HandoffActorKind): boolean {
  return kind === 'agent' || kind === 'operator' || kind === 'human';
}

/**
 * Why a request was refused before deciding: a `RejectionCode` (invalid_utf8, malformed_json,
 * schema_violation, payload_too_large) or a ledger code (`unknown_command`, `project_mismatch`),
 * answered with kind `rejected`; or an access refusal (`identity_mismatch`,
 * `principal_not_allowed`), kind `forbidden`.
 */
interface LedgerRejection {
  code: string;
  message: string;
  issues: Rejection['issues'];
  /** Default `rejected`. */
  kind?: LedgerErrorKind;
}

/** A decoded request: where it came from, who sent it, what it asks. */
interface DecodedRequest {
  project: string;
  principal: Principal;
  name: LedgerCommandName;
  body: Record<string, unknown>;
}

/** A decoded value, or the rejection (a wider code set than `Decoded` from the contracts). */
type Checked<T> = { ok: true; value: T } | { ok: false; rejection: LedgerRejection };
type Refused = { ok: false; rejection: LedgerRejection };

/** What the parts of one request share (see `LedgerCommands.callOf`). */
interface CallContext {
  trace: HopTrace;
  log: JsonLogger;
  metadata: HandoffCommandMetadata;
  /** The project's view, read on first use and shared by the request's parts. */
  view: () => Promise<ProjectView>;
}

/** A part's rejection as the whole request's: its issues' paths under the part's key. */
function within(part: string, rejection: LedgerRejection): LedgerRejection {
  const issues = rejection.issues.map((issue) => ({ ...issue, path: issue.path === '(root)' || issue.path === '' ? part : `${part}.${issue.path}` }));
  return { ...rejection, message: `${part}: ${rejection.message}`, issues: issues.length > 0 ? issues : [{ path: part, message: rejection.message }] };
}

/** Event origin for an actor kind (`system` is Baton acting on its own). */
export function originOf(kind: HandoffActorKind): Origin {
  switch (kind) {
    case 'agent':
      return 'agent';
    case 'operator':
      return 'operator';
    case 'human':
      return 'human';
    case 'watchdog':
      return 'watchdog';
    case 'system':
      return 'engine_fallback';
    default: {
      const never: never = kind;
      throw new Error(`unhandled actor kind ${String(never)}`);
    }
  }
}

/**
 * The origin of a command's events. A handoff the router creates for a run's route takes the
 * route's own (`context.dispatch.origin`: an agent's dispatch, a person's answer, Baton's no-action
 * default), and one for a mesh turn what made it (`context.mesh`: an operator's answer — tool
 * `operator_answer` —, an agent's handoff call, or the start), which only a service principal's
 * create (actor kind `system`) may state; every other event's origin is its actor's kind
 * ({@link originOf}).
 */
export function commandOrigin(command: HandoffCommand, kind: HandoffActorKind): Origin {
  if (kind === 'system' && command.type === 'create') {
    const context = command.data.context as { dispatch?: { origin?: unknown }; mesh?: { from?: unknown; tool?: unknown } } | undefined;
    const routed = OriginSchema.safeParse(context?.dispatch?.origin);
    if (routed.success) return routed.data;
    // A mesh turn's handoff: an operator's answer made it, an agent's handoff call, or the mesh's start.
    const mesh = context?.mesh;
    if (mesh !== undefined) return mesh.tool === OPERATOR_ANSWER_TOOL ? 'human' : typeof mesh.from === 'string' ? 'agent' : 'engine_fallback';
  }
  return originOf(kind);
}

function parseWith<S extends z.ZodType>(schema: S, body: unknown): Checked<z.output<S>> {
  const parsed = schema.safeParse(body);
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, rejection: rejectionFromZod(parsed.error) };
}

function refused(code: string, message: string, path?: string): Refused {
  return { ok: false, rejection: { code, message, issues: path ? [{ path, message }] : [] } };
}

/**
 * The ledger's one use case: answer a command request on
 * `<prefix>.cmd.ledger.<project>.<kind>.<name>.<command>`. The caller is the principal the subject
 * names (the NATS server lets each principal publish only its own subjects): `resolveLedgerCaller`
 * derives the actor, actor kind and role from it, and a body that claims anything else is refused
 * with `identity_mismatch`; `LedgerCommandAccess` then says whether that principal may send the
 * command at all (`principal_not_allowed`). Both are answered with `kind: 'forbidden'` and recorded
 * as dead letters, before anything is decided. Then it decodes the body (size cap, safe JSON,
 * the wire schema of the command named by the subject's last token), fills what the ledger owns
 * (claim id, default lease, handback id, escalation id, the project's roster, lead and the
 * claimer's roles), decides and appends through `store.handleCommand` on the handoff aggregate,
 * and answers a {@link LedgerReply}. Rejected input is answered with `kind: 'rejected'` AND
 * recorded as a dead letter (`<prefix>.dlq.ledger`, reason = the rejection code, the original
 * bytes). Domain refusals are answered (and logged), not dead-lettered: they are normal outcomes
 * (49 of 50 racing claims lose). Idempotent: the events of a request get ids derived from
 * (project, handoff, command, idempotency key), so a retry is recognised by the decider (recent
 * keys) or, within the duplicate window, by the stream.
 */
@Injectable()
export class LedgerCommands {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(LEDGER_CONFIG) private readonly config: LedgerConfig,
    @Inject(ProjectDirectory) private readonly projects: ProjectDirectory,
    @Inject(ProjectControlService) private readonly control: ProjectControlService,
    @Inject(ClaimRateStore) private readonly rates: ClaimRateStore,
    @Inject(OfferConsumers) private readonly offerConsumers: OfferConsumers,
    @Inject(OfferPublisher) private readonly offers: OfferPublisher,
    @Inject(COMMAND_REFUSED_LETTERS) private readonly refusedLetters: RefusedLetters,
  ) {}

  /**
   * Decide one request and say what to answer; `null` when it must not be answered at all: a reply
   * subject the ledger may not answer on ({@link replyRefusalOf}: with authentication, one outside
   * the sender's own inbox; in either mode, one under Baton's own subjects) would have the ledger
   * publish for the sender where it may not (an event, an inbox input, another project's answer,
   * another principal's inbox). Such a request is refused unread and recorded (`reply_not_allowed`).
   */
  async handle(request: LedgerRequest): Promise<LedgerReply | ProjectControlReply | OpenOffersReply | CompleteThenCreateReply | null> {
    // The subject is read once: the reply check and the decoding both need whom it names.
    const address = parseLedgerCommandSubject(this.runtime.config.BATON_PREFIX, request.subject);
    if (await this.refusedReply(request, address)) return null;
    const decoded = this.decode(request, address);
    if (!decoded.ok) return this.reject(request, decoded.rejection);
    const { project, principal, name } = decoded.value;

    // Who is asking comes from the subject; the body may only repeat it (identity_mismatch), and
    // the command table says whether that principal may ask this at all (principal_not_allowed).
    const { claims, command: body } = splitIdentityClaims(decoded.value.body);
    const who = resolveLedgerCaller(principal, claims);
    if (!who.ok) {
      return this.reject(request, {
        code: who.code,
        kind: who.code === 'schema_violation' ? 'rejected' : 'forbidden',
        message: who.message,
        issues: [{ path: who.path, message: who.message }],
      });
    }
    const caller = who.caller;
    if (!mayIssue(name, caller)) {
      const role = caller.role !== undefined && principal.kind === 'op' && principal.relay === 'notifier' ? ` with role ${caller.role}` : '';
      return this.reject(request, {
        code: LedgerAccessErrorCode.principalNotAllowed,
        kind: 'forbidden',
        message: `${describePrincipal(principal)}${role} may not send ${name}; it is for ${describeAccess(name)}`,
        issues: [],
      });
    }

    // A person the admin connection names is kept only where its events record it (on_behalf_of).
    const unrecorded = onBehalfOfRefusal(name, caller);
    if (unrecorded !== null && !unrecorded.ok) {
      return this.reject(request, {
        code: unrecorded.code,
        kind: 'forbidden',
        message: unrecorded.message,
        issues: [{ path: unrecorded.path, message: unrecorded.message }],
      });
    }

    if (name === 'pause' || name === 'resume') return this.projectControl(request, project, name, body, caller);
    if (name === 'open_offers') return this.openOffers(request, project, body, caller);
    if (name === 'complete_then_create') return this.completeThenCreate(request, project, body, caller);

    const call = this.callOf(request, project, name, caller);
    let prepared: Checked<Prepared>;
    try {
      prepared = await this.prepare(name, project, body, call.metadata, call.view);
    } catch (error) {
      call.log.error('cannot read the project definition', error instanceof Error ? error : { error: String(error) });
      return this.unavailable(error);
    }
    if (!prepared.ok) return this.reject(request, prepared.rejection);
    if (name === 'decide_handback') return this.decideHandback(request, project, prepared.value, call);
    return this.decide(request, project, name, prepared.value, call);
  }

  /**
   * `decide_handback`, the work it reviews first. A decision moves the returned parent (accept
   * completes it, rework offers it again); an abandon or failure of the parent by a person ends it.
   * Both are writes to the parent, so the decision's move of the parent is stored before the
   * decision itself: the parent's expected-sequence append then orders a decision and an abandon
   * racing on any ledger instances — the later one is decided again on what the earlier stored and
   * refused (the decision `review_withdrawn`, the abandon `handoff_not_open`, or it abandons the
   * work a rework reopened) — instead of both being answered applied and the decision moving
   * nothing. The parent's command is exactly the one the reactor derives from the stored decision
   * (same idempotency key), so the reactor's later run of it is a retry that stores nothing.
   *
   * A decision the handback refuses, or a retry of one already stored, is decided as any command.
   * Should this process stop between the two appends, the parent has moved and the handback is
   * still open: the same decision sent again stores it (the parent's move is then a retry).
   */
  private async decideHandback(request: LedgerRequest, project: string, prepared: Prepared, call: CallContext): Promise<LedgerReply> {
    const command = this.signed(prepared);
    // The handback and the work it reviews as preparing the command just read them.
    const review = prepared.review;
    if (review === undefined) return this.decide(request, project, 'decide_handback', prepared, call);
    const { handback, parent } = review;
    const outcome = handoffDecider.decide(command, handback);
    const decided = outcome.ok ? outcome.events.find((e) => e.type === 'handoff.handback_decided') : undefined;
    // The work it reviews ended (the review withdrawn, or being withdrawn): said as such, and
    // answered now — decided again a moment later, the withdrawal would read as a closed handoff.
    if (!outcome.ok) {
      const withdrawn =
        outcome.error.code === HandoffErrorCode.reviewWithdrawn
          ? outcome.error
          : outcome.error.code === HandoffErrorCode.handoffNotOpen && handback.status === 'abandoned' && parent !== null
            ? reviewMovedFirst(handback.id, parent, false)
            : null;
      if (withdrawn !== null) {
        call.log.info('command refused', { handoff_id: prepared.handoffId, code: withdrawn.code, actor: command.metadata.actor });
        return { ok: false, error: withdrawn };
      }
    }
    if (decided === undefined) return this.decide(request, project, 'decide_handback', prepared, call);

    const commandId = this.commandIdOf(project, 'decide_handback', prepared, command);
    try {
      const projectLead = (await call.view()).roster.project_lead;
      const after = handoffDecider.evolve(handback, decided);
      const reactions = reactToHandoffEvent(decided, { state: after, deriveId: LedgerIds.derive, ...(projectLead !== undefined ? { projectLead } : {}) });
      for (const [index, reaction] of reactions.entries()) {
        const target: AggregateRef = { project, kind: 'handoff', id: reaction.aggregateId };
        const moved = await this.runtime.store.handleCommand(target, handoffDecider, reaction.command, {
          commandId: LedgerIds.reactionId(target, commandId, index),
          occurredAt: reaction.command.metadata.now,
          actor: LEDGER_ACTOR,
          origin: 'engine_fallback',
          causationId: null,
          correlationId: commandId,
          trace: call.trace,
        });
        if (!moved.ok) {
          call.log.info('decision refused: the reviewed work moved first', {
            handoff_id: prepared.handoffId,
            target: reaction.aggregateId,
            code: moved.error.code,
          });
          const now = await this.handoffNow(project, reaction.aggregateId);
          return { ok: false, error: reviewMovedFirst(prepared.handoffId, now, true) ?? moved.error };
        }
      }
    } catch (error) {
      call.log.error('cannot move the reviewed work', error instanceof Error ? error : { error: String(error) });
      return this.unavailable(error);
    }
    return this.decide(request, project, 'decide_handback', prepared, call);
  }

  /**
   * `complete_then_create` (the router's, on a hop's path): both parts are checked first (either
   * one that does not validate refuses the whole request, its issues' paths under `complete.` or
   * `create.`); then the completion is decided, and the creation only when the completion was
   * applied or had been done before (`handoff_not_open`). Each part is decided exactly as its
   * command alone would be ({@link decide}), so its events, refusals and idempotency are the same.
   *
   * One round trip less: once the completion is decided and its event handed to the connection,
   * the creation is decided and published behind it (`onPublished`), and both appends are
   * acknowledged together. Should the completion's append then conflict (another writer moved the
   * handoff between the decision and the append — its fold is checked by that append) and the
   * completion be refused when decided again, the creation stands; the router's `run.routed`
   * delivery would have created it anyway, and the reply says what each part did.
   */
  private async completeThenCreate(
    request: LedgerRequest,
    project: string,
    body: Record<string, unknown>,
    caller: LedgerCaller,
  ): Promise<CompleteThenCreateReply> {
    const parts = parseWith(CompleteThenCreatePartsSchema, body);
    if (!parts.ok) return this.reject(request, parts.rejection);
    const call = this.callOf(request, project, 'complete_then_create', caller);
    let complete: Checked<Prepared>;
    let create: Checked<Prepared>;
    try {
      complete = await this.prepare('complete_from_result', project, parts.value.complete, call.metadata, call.view);
      create = await this.prepare('create', project, parts.value.create, call.metadata, call.view);
    } catch (error) {
      call.log.error('cannot read the project definition', error instanceof Error ? error : { error: String(error) });
      return this.unavailable(error);
    }
    if (!complete.ok) return this.reject(request, within('complete', complete.rejection));
    if (!create.ok) return this.reject(request, within('create', create.rejection));
    // The creation is decided and stored right behind the completion's append, not after its
    // acknowledgement: its publish follows the completion's on the same connection, so the stream
    // still holds the completion first (see the method's comment for the rare conflict).
    let creating: Promise<LedgerReply> | null = null;
    const startCreate = (): Promise<LedgerReply> =>
      (creating ??= this.decide(request, project, 'create', create.value, call).catch((error: unknown) => this.unavailable(error)));
    const completed = await this.decide(request, project, 'complete_from_result', complete.value, call, () => void startCreate());
    if (creating !== null) return { ok: true, complete: completed, create: await creating };
    if (!completed.ok && completed.error.code !== HandoffErrorCode.handoffNotOpen) return { ok: true, complete: completed, create: null };
    return { ok: true, complete: completed, create: await startCreate() };
  }

  /** What every part of one request shares: its time and actor, its trace and log, the project's view (read once, when needed). */
  private callOf(request: LedgerRequest, project: string, name: LedgerCommandName, caller: LedgerCaller): CallContext {
    const trace = hopTrace(request.headers);
    let view: Promise<ProjectView> | null = null;
    return {
      trace,
      log: this.runtime.logger.child({ trace_id: trace.traceId, project, subject: request.subject, command: name, actor: caller.actor }),
      metadata: { now: new Date().toISOString(), actor: caller.actor, actorKind: caller.kind },
      view: () => (view ??= this.projects.view(project)),
    };
  }

  /** Decide one prepared handoff command and store its events: governance on claims, then the handoff decider. */
  private async decide(
    request: LedgerRequest,
    project: string,
    name: HandoffCommandName,
    prepared: Prepared,
    call: CallContext,
    onPublished?: () => void,
  ): Promise<LedgerReply> {
    const { log, metadata, trace } = call;
    const { handoffId } = prepared;
    const home = prepared.project ?? project;
    const command = this.signed(prepared);

    // Governance on claims: the kill switch, then the agent's rate cap. The claim takes its place
    // under the cap (shared by every ledger instance) before it is decided, and gives it back below
    // when it is not granted after all (see ClaimRateStore).
    let ticket: ClaimTicket | null = null;
    if (command.type === 'claim') {
      try {
        if (await this.control.isPaused(project)) {
          log.info('claim refused: project paused', { handoff_id: handoffId, actor: metadata.actor });
          return {
            ok: false,
            error: {
              code: GovernanceErrorCode.projectPaused,
              kind: 'unavailable',
              message: `project ${project} is paused; claims resume when an admin resumes it`,
            },
          };
        }
      } catch (error) {
        return this.unavailable(error);
      }
      let admission: ClaimAdmission;
      try {
        admission = await this.rates.take(project, metadata.actor);
      } catch (error) {
        log.error('cannot count the claim against the rate cap', error instanceof Error ? error : { error: String(error) });
        return this.unavailable(error);
      }
      if (!admission.granted) {
        const refusal = admission.refusal;
        log.info('claim refused: rate cap', { handoff_id: handoffId, actor: metadata.actor, limit: refusal.limit });
        return {
          ok: false,
          error: {
            code: GovernanceErrorCode.rateLimited,
            kind: 'unavailable',
            message: `${metadata.actor} reached its cap of ${refusal.limit} claims per minute; retry in ${refusal.retry_after_ms} ms`,
            details: { retry_after_ms: refusal.retry_after_ms, limit: refusal.limit },
          },
        };
      }
      ticket = admission.ticket;
    }

    const commandId = this.commandIdOf(project, name, prepared, command);
    const correlation = request.headers[CorrelationHeader]?.[0];
    // A create offers what it stored before it answers; the reactor waits for it (OfferPublisher).
    const created = command.type === 'create' ? this.offers.beginCreate(home, handoffId) : null;
    // The offer's pause check runs alongside the append (OfferPublisher.readPause).
    const paused = command.type === 'create' && command.data.to_agent !== undefined ? this.offers.readPause(home) : undefined;
    try {
      const result = await this.runtime.store.handleCommand(
        { project: home, kind: 'handoff', id: handoffId },
        handoffDecider,
        command,
        {
          commandId,
          occurredAt: metadata.now,
          actor: metadata.actor,
          origin: commandOrigin(command, metadata.actorKind),
          causationId: null,
          correlationId: correlation !== undefined && IdSchema.safeParse(correlation).success ? correlation : commandId,
          trace,
        },
        // A create names a fresh handoff id: decide without reading it first (a retry or a clash
        // conflicts on the append, and the store then reads and decides again).
        { assumeNew: command.type === 'create', ...(onPublished ? { onPublished } : {}) },
      );
      if (!result.ok) {
        log.info('command refused', { handoff_id: handoffId, code: result.error.code, actor: metadata.actor });
        if (ticket) await this.rates.refund(ticket);
        return { ok: false, error: result.error };
      }
      // Granted by THIS request only if it stored the claim: a retry of a claim granted before is
      // answered with no events, or with the events stored then, and must not count twice.
      if (ticket && result.appended === 0) await this.rates.refund(ticket);
      const handoff = toHandoffRecord(result.state);
      if (!handoff) return { ok: false, error: { code: 'not_found', kind: 'not_found', message: `handoff ${handoffId} does not exist` } };
      if (result.appended > 0) {
        log.info('command applied', { handoff_id: handoffId, events: result.events.map((e) => e.type), event_id: result.events[0]?.id });
      }
      const stored = created ? result.events.find((e) => e.type === 'handoff.created') : undefined;
      if (stored !== undefined) {
        // Offer the new handoff now rather than when the reactor is delivered its event (which then
        // skips it); a failure here only leaves the offer to the reactor.
        try {
          await this.offers.offerCreated(stored.id, result.state, stored.seq, trace, paused);
        } catch (error) {
          // A full inbox refuses every offer alike: the service's storage watch says so once
          // (`storage full`, then a line a minute; StorageFullWatch), not once per handoff.
          const line = error instanceof StorageFull ? log.debug.bind(log) : log.warn.bind(log);
          line('offer left to the handoff reactor', { handoff_id: handoffId, reason: error instanceof Error ? error.message : String(error) });
        }
      }
      return { ok: true, handoff, events: result.appended };
    } catch (error) {
      // A full account refuses every append alike: said once by the storage watch, not per command.
      if (error instanceof StorageFull) log.debug('command failed', error);
      else log.error('command failed', error instanceof Error ? error : { error: String(error) });
      // A conflict appended nothing; any other failure (a timeout) may have stored the claim, so it keeps its place.
      if (ticket && error instanceof ConcurrencyConflict) await this.rates.refund(ticket);
      return this.unavailable(error);
    } finally {
      created?.();
    }
  }

  /** `pause` / `resume`: parse the body and decide on the project-control aggregate. */
  private async projectControl(
    request: LedgerRequest,
    project: string,
    name: ProjectControlCommandName,
    body: Record<string, unknown>,
    caller: LedgerCaller,
  ): Promise<ProjectControlReply> {
    const parsed = parseWith(ProjectControlCommandSchemas[name], body);
    if (!parsed.ok) return this.reject(request, parsed.rejection);
    // The command table let only admins through; the domain checks the role again.
    const role = caller.role ?? 'viewer';
    try {
      // A pause of a project nobody set up is most likely a misspelt key: refused unless forced,
      // so a typo is never reported as a paused project (a resume of one is refused by the domain).
      // One already paused (forced before) is the domain's to refuse: `project_already_paused`.
      if (
        name === 'pause' &&
        !('force' in parsed.value && parsed.value.force === true) &&
        !(await this.projects.isDefined(project)) &&
        !(await this.control.isPaused(project))
      ) {
        return {
          ok: false,
          error: {
            code: GovernanceErrorCode.projectUnknown,
            kind: 'not_found',
            message: `project ${project} has no published definition; to pause it anyway (before it is set up), send force: true (baton pause --force)`,
            details: { project },
          },
        };
      }
      return await this.control.handle(
        project,
        name,
        parsed.value,
        { actor: caller.actor, role, on_behalf_of: caller.on_behalf_of },
        hopTrace(request.headers),
      );
    } catch (error) {
      this.runtime.logger.error(`project ${name} failed`, error instanceof Error ? error : { error: String(error) });
      return this.unavailable(error);
    }
  }

  /** `open_offers`: provision the calling agent's offers durable, its filter pinned from the subject. */
  private async openOffers(request: LedgerRequest, project: string, body: Record<string, unknown>, caller: LedgerCaller): Promise<OpenOffersReply> {
    const parsed = parseWith(OpenOffersCommandSchema, body);
    if (!parsed.ok) return this.reject(request, parsed.rejection);
    // The command table admits agents only; the principal (not the body) names the agent.
    if (caller.principal.kind !== 'agent')
      return this.reject(request, { code: LedgerAccessErrorCode.principalNotAllowed, kind: 'forbidden', message: 'open_offers is for agents', issues: [] });
    const agent = caller.principal.agent;
    try {
      const opened = await this.offerConsumers.open(project, agent, parsed.value.ack_wait_ms, parsed.value.start_after_seq);
      this.runtime.logger.info('offers durable opened', { project, agent, durable: opened.durable });
      return { ok: true, stream: opened.stream, durable: opened.durable };
    } catch (error) {
      this.runtime.logger.error('cannot open the offers durable', error instanceof Error ? error : { error: String(error) });
      return this.unavailable(error);
    }
  }

  /** Subject (project, principal, command), size, UTF-8 and JSON. Who the caller is comes next, from the principal. */
  private decode(request: LedgerRequest, address: LedgerCommandAddress | null): Checked<DecodedRequest> {
    if (address === null) {
      return refused(LedgerErrorCode.unknownCommand, `${request.subject} is not <prefix>.cmd.ledger.<project>.<agent|svc|op>.<name>.<command>`);
    }
    const { project, principal, command: name } = address;
    if (!isLedgerCommand(name)) return refused(LedgerErrorCode.unknownCommand, `the ledger has no command "${name}"`);
    if (request.data.length > Limits.maxMessageBytes) {
      return refused('payload_too_large', `payload is ${request.data.length} bytes; the cap is ${Limits.maxMessageBytes}`);
    }
    const text = decodeUtf8(request.data);
    if (!text.ok) return text;
    // A service's command carries what an inbox message brought a level or two deeper (the router
    // puts a run's variables, up to the inbox's nesting cap, in a create's context): room for that.
    const maxDepth = principal.kind === 'svc' ? MAX_JSON_DEPTH + SERVICE_COMMAND_EXTRA_DEPTH : MAX_JSON_DEPTH;
    const json = parseUntrustedJson(text.value, Limits.maxMessageBytes, maxDepth);
    if (!json.ok) return json;
    if (typeof json.value !== 'object' || json.value === null || Array.isArray(json.value)) {
      return refused('schema_violation', 'the body must be a JSON object', '(root)');
    }
    return { ok: true, value: { project, principal, name, body: json.value as Record<string, unknown> } };
  }

  /**
   * The command as it is decided: an outside caller's body is remembered with its key, so the same
   * key with another body is refused instead of answered as the first (rule 13); the services' own
   * commands are derived from events and need no digest.
   */
  private signed(prepared: Prepared): HandoffCommand {
    const { metadata } = prepared.command;
    return signsBody(metadata.actorKind)
      ? ({ ...prepared.command, metadata: { ...metadata, digest: LedgerIds.commandDigest(prepared.wire) } } as HandoffCommand)
      : prepared.command;
  }

  /** The id of the events one request's command stores (`<commandId>:<index>`). */
  private commandIdOf(project: string, name: HandoffCommandName, prepared: Prepared, command: HandoffCommand): string {
    const { metadata } = command;
    return LedgerIds.commandId(
      prepared.project ?? project,
      prepared.handoffId,
      name,
      prepared.idempotencyKey,
      metadata.actor,
      metadata.actorKind,
      metadata.digest,
    );
  }

  /** A handoff of `project` as stored now (the fold cache, else a read): what a command about another handoff needs of it. */
  private async handoffNow(project: string, id: string): Promise<HandoffState> {
    return (await this.runtime.store.current<HandoffEvent, HandoffState>({ project, kind: 'handoff', id }, handoffDecider)).state;
  }

  /**
   * The agent result the handoff's workflow run recorded for it, if any: a person's abandon then
   * comes after the router took the result, and is refused (`result_already_recorded`) rather than
   * ending the handoff `abandoned` under a run that goes on with its work. Read only for an open
   * task or consult of a run (a review is decided, not closed by a result): the run's events, newest
   * first. The router's completion closes the handoff within milliseconds; this covers that window.
   */
  private async resultRecordedFor(handoff: HandoffState): Promise<{ workflow_run_id: string; result_id: string; agent: string } | undefined> {
    if (handoff.status !== 'pending' && handoff.status !== 'claimed') return undefined;
    if (handoff.kind === 'completion_handback') return undefined;
    const run = handoffRun(handoff);
    if (run === null) return undefined;
    const { events } = await this.runtime.store.read({ project: run.project, kind: 'run', id: run.workflow_run_id });
    for (let i = events.length - 1; i >= 0; i--) {
      const event = events[i]!;
      if (event.type !== 'run.result_recorded') continue;
      const payload = event.payload as { handoff_id?: string; result_id: string; agent: string };
      if (payload.handoff_id === handoff.id) return { workflow_run_id: run.workflow_run_id, result_id: payload.result_id, agent: payload.agent };
    }
    return undefined;
  }

  /**
   * The run an agent's create names (`workflow_run_id`), as stored now: its status and the agent it
   * waits for (`runTurnFold`, the router's aggregate read here), which the decider checks is the
   * creating agent (`not_in_run`: an agent with no part in a run may not make a handoff of it, whose
   * failures and escalation would act on that run). Read in `project`, the subject's: the run's
   * project, also of a cross-project create (its `source_project`). Nothing for a create naming no
   * run, nor for a service's (the router names the runs it routes).
   */
  private async runTurnOf(project: string, workflowRunId: string | undefined, metadata: HandoffCommandMetadata): Promise<{ run_turn?: RunTurn }> {
    if (workflowRunId === undefined || metadata.actorKind !== 'agent') return {};
    const { state } = await this.runtime.store.current<RunEvent, RunTurn>({ project, kind: 'run', id: workflowRunId }, runTurnFold);
    return { run_turn: state };
  }

  /** Parse the wire command and add what the ledger owns. */
  private async prepare(
    name: HandoffCommandName,
    project: string,
    body: Record<string, unknown>,
    metadata: HandoffCommandMetadata,
    view: () => Promise<ProjectView>,
  ): Promise<Checked<Prepared>> {
    const lease = this.config.LEDGER_LEASE_MS;
    const done = (handoffId: string, idempotencyKey: string, command: HandoffCommand, wire: unknown): Checked<Prepared> => ({
      ok: true,
      value: { handoffId, idempotencyKey, command, wire },
    });
    // A command that may pass the retry cap escalates: to the project's lead, with a consult id of the ledger's.
    const escalating = async <T extends object>(wire: T, escalationHandoffId: string) => {
      const { roster } = await view();
      return { ...wire, ...(roster.project_lead !== undefined ? { project_lead: roster.project_lead } : {}), escalation_handoff_id: escalationHandoffId };
    };
    switch (name) {
      case 'create': {
        const parsed = parseWith(CreateHandoffCommandSchema, body);
        if (!parsed.ok) return parsed;
        const d = parsed.value;
        if (d.project !== project) {
          return refused(LedgerErrorCode.projectMismatch, `the body names project "${d.project}" but was sent to project "${project}"`, 'project');
        }
        // An agent naming a run: the run as stored now (in this project, the source of a
        // cross-project create), which the decider checks waits for it (`not_in_run`).
        const turn = await this.runTurnOf(project, d.workflow_run_id, metadata);
        if (d.target_project !== undefined && d.target_project !== project) {
          // Cross-project: both rosters are resolved here and the domain checks them; the handoff
          // lives in the target project. Nothing is registered in either project.
          const source = await view();
          const target = await this.projects.view(d.target_project);
          return {
            ok: true,
            value: {
              project: d.target_project,
              handoffId: d.handoff_id,
              idempotencyKey: d.idempotency_key,
              command: {
                type: 'create',
                data: {
                  ...d,
                  ...turn,
                  project: d.target_project,
                  cross_project: {
                    source_project: project,
                    source_visible: source.roster.visible_actors,
                    target_visible: target.roster.visible_actors,
                    target_accepts: target.acceptsHandoffsFrom(project),
                  },
                },
                metadata,
              },
              wire: d,
            },
          };
        }
        const { target_project: _same, ...local } = d;
        // The project's roster: an addressee (or escalation target) its definition does not name is refused.
        const { roster } = await view();
        return done(d.handoff_id, d.idempotency_key, { type: 'create', data: { ...local, ...turn, roster: roster.visible_actors }, metadata }, d);
      }
      case 'claim': {
        const parsed = parseWith(ClaimHandoffCommandSchema, body);
        if (!parsed.ok) return parsed;
        const d = parsed.value;
        const roles = (await view()).rolesOf(metadata.actor, metadata.actorKind);
        return done(
          d.handoff_id,
          d.idempotency_key,
          {
            type: 'claim',
            data: {
              handoff_id: d.handoff_id,
              idempotency_key: d.idempotency_key,
              claim_id: LedgerIds.claimId(d.handoff_id, d.idempotency_key),
              lease_ms: d.lease_ms ?? lease,
              claimer_roles: roles,
            },
            metadata,
          },
          d,
        );
      }
      case 'heartbeat': {
        const parsed = parseWith(HeartbeatHandoffCommandSchema, body);
        if (!parsed.ok) return parsed;
        const d = parsed.value;
        // No length named: the claim's own, as it was taken (not the ledger's default: a short lease stays short).
        return done(d.handoff_id, d.idempotency_key, { type: 'heartbeat', data: d, metadata }, d);
      }
      case 'return': {
        const parsed = parseWith(ReturnHandoffCommandSchema, body);
        if (!parsed.ok) return parsed;
        const d = parsed.value;
        const { roster } = await view();
        return done(
          d.handoff_id,
          d.idempotency_key,
          {
            type: 'return',
            data: { ...d, handback_id: LedgerIds.handbackId(d.handoff_id, d.idempotency_key), roster },
            metadata,
          },
          d,
        );
      }
      case 'decide_handback': {
        const parsed = parseWith(DecideHandbackCommandSchema, body);
        if (!parsed.ok) return parsed;
        const d = parsed.value;
        // What the work it reviews is now: ended by a person meanwhile, the decision could move nothing.
        const handback = await this.handoffNow(project, d.handoff_id);
        const parent =
          handback.status !== 'absent' && handback.reply_to_handoff_id !== undefined ? await this.handoffNow(project, handback.reply_to_handoff_id) : null;
        const data = parent !== null && parent.status !== 'absent' ? { ...d, parent_status: parent.status } : d;
        const prepared = done(d.handoff_id, d.idempotency_key, { type: 'decide_handback', data, metadata }, d);
        if (prepared.ok) prepared.value.review = { handback, parent };
        return prepared;
      }
      case 'release': {
        const parsed = parseWith(ReleaseHandoffCommandSchema, body);
        if (!parsed.ok) return parsed;
        return done(parsed.value.handoff_id, parsed.value.idempotency_key, { type: 'release', data: parsed.value, metadata }, parsed.value);
      }
      case 'abandon': {
        const parsed = parseWith(AbandonHandoffCommandSchema, body);
        if (!parsed.ok) return parsed;
        const { target_project: target, ...data } = parsed.value;
        if (target !== undefined && target !== project) {
          // The delegator of a cross-project handoff withdraws it from its own project's subject:
          // the handoff is read where it lives, and the caller is recorded as of this project (the
          // domain lets it reach only what this project delegated). The digest covers the caller's
          // project too, so the key never matches one an agent of the target project used.
          return {
            ok: true,
            value: {
              project: target,
              handoffId: data.handoff_id,
              idempotencyKey: data.idempotency_key,
              command: { type: 'abandon', data, metadata: { ...metadata, actorProject: project } },
              wire: { ...parsed.value, source_project: project },
            },
          };
        }
        // A returned handoff whose review was decided is being moved by that decision: said to the domain.
        const now = await this.handoffNow(project, data.handoff_id);
        const handbackId = now.status === 'returned' ? now.handback_id : undefined;
        const review = handbackId !== undefined ? await this.handoffNow(project, handbackId) : null;
        const decided = review !== null && (review.status === 'completed' || review.status === 'archived');
        const withReview = decided && handbackId !== undefined ? { ...data, review_decided: { handback_id: handbackId } } : data;
        // A run's handoff whose run already took its agent's result is being closed with it (docs/runs.md).
        const recorded = metadata.actorKind !== 'system' ? await this.resultRecordedFor(now) : undefined;
        const withResult = recorded !== undefined ? { ...withReview, result_recorded: recorded } : withReview;
        return done(data.handoff_id, data.idempotency_key, { type: 'abandon', data: withResult, metadata }, parsed.value);
      }
      case 'fail': {
        const parsed = parseWith(FailHandoffCommandSchema, body);
        if (!parsed.ok) return parsed;
        return done(parsed.value.handoff_id, parsed.value.idempotency_key, { type: 'fail', data: parsed.value, metadata }, parsed.value);
      }
      case 'archive': {
        const parsed = parseWith(ArchiveHandoffCommandSchema, body);
        if (!parsed.ok) return parsed;
        return done(parsed.value.handoff_id, parsed.value.idempotency_key, { type: 'archive', data: parsed.value, metadata }, parsed.value);
      }
      case 'requeue_expired': {
        const parsed = parseWith(RequeueExpiredCommandSchema, body);
        if (!parsed.ok) return parsed;
        const d = parsed.value;
        const data = await escalating(d, LedgerIds.escalationId(d.handoff_id, d.claim_id));
        return done(d.handoff_id, d.idempotency_key, { type: 'requeue_expired', data, metadata }, d);
      }
      case 'complete_from_result': {
        const parsed = parseWith(CompleteFromResultCommandSchema, body);
        if (!parsed.ok) return parsed;
        return done(parsed.value.handoff_id, parsed.value.idempotency_key, { type: 'complete_from_result', data: parsed.value, metadata }, parsed.value);
      }
      case 'expire_deadline': {
        const parsed = parseWith(ExpireDeadlineCommandSchema, body);
        if (!parsed.ok) return parsed;
        return done(parsed.value.handoff_id, parsed.value.idempotency_key, { type: 'expire_deadline', data: parsed.value, metadata }, parsed.value);
      }
      case 'give_up_offer': {
        const parsed = parseWith(GiveUpOfferCommandSchema, body);
        if (!parsed.ok) return parsed;
        const d = parsed.value;
        const data = await escalating(d, LedgerIds.giveUpEscalationId(d.handoff_id, metadata.actor, d.idempotency_key));
        return done(d.handoff_id, d.idempotency_key, { type: 'give_up_offer', data, metadata }, d);
      }
      default: {
        const never: never = name;
        return refused(LedgerErrorCode.unknownCommand, `the ledger has no command "${String(never)}"`);
      }
    }
  }

  /**
   * Why a request on a subject naming `address` (null: naming no one) must not be answered on
   * `reply`, or null when it may — `replyRefusal`, the one decision the agent edge takes too: with
   * authentication on (a credentials file or a NATS user), only under the sender's own inbox; in
   * either mode never under Baton's own subjects (`<prefix>.…`), JetStream's (`$…`) or an agent's
   * notice subject. The server's permissions hold the line too (the ledger may publish replies only
   * under `_INBOX_<prefix>.`); this check also keeps one principal from having the answer sent
   * into another's inbox, and, without authentication, the answer off Baton's own subjects.
   */
  replyRefusalOf(address: LedgerCommandAddress | null, reply: string): string | null {
    const sender = address === null ? null : { via: 'ledger' as const, principal: address.principal };
    return replyRefusal(this.runtime.config.BATON_PREFIX, sender, reply, natsAuthenticated(this.runtime.config));
  }

  /** Refuse (true) a request whose reply subject the ledger must not answer on ({@link replyRefusalOf}): recorded (its first bytes) and answered nowhere. */
  private async refusedReply(request: LedgerRequest, address: LedgerCommandAddress | null): Promise<boolean> {
    if (request.reply === undefined || request.reply === '') return false;
    const why = this.replyRefusalOf(address, request.reply);
    if (why === null) return false;
    // Recorded as the edge's refusals are: one letter per reply subject, its first bytes only.
    await this.reject(
      request,
      { code: DeadLetterReason.replyNotAllowed, kind: 'forbidden', message: `reply subject ${request.reply} ${why}`, issues: [] },
      { reply: request.reply },
    );
    return true;
  }

  /**
   * Answer a rejection and record it as a dead letter with the original's first
   * {@link REFUSED_LETTER_BYTES} bytes (its detail says how many of how many were kept) — while its
   * sender (the principal the subject names) has letters left in its budget; past it the rejection
   * is counted for the sender's `refusals_suppressed` letter (`COMMAND_REFUSED_LETTERS`). The answer
   * is the same either way, and a letter is stored before it is sent. Nothing is redriven from such
   * a letter (a core request: `core_request`; its sender has the typed answer, or sends again), so
   * its whole body would only let a flood of refused megabytes push other projects' letters out of
   * the shared DLQ — cut as the agent edge's letters are.
   */
  private async reject(
    request: LedgerRequest,
    rejection: LedgerRejection,
    letter: Pick<DeadLetterInput, 'reply'> = {},
  ): Promise<{ ok: false; error: LedgerError }> {
    const prefix = this.runtime.config.BATON_PREFIX;
    const recorded = this.refusedLetters.refuse(
      ledgerCommandSenderOf(prefix, request.subject),
      {
        prefix,
        source: LEDGER_DLQ_SOURCE,
        reason: rejection.code,
        detail: rejection.message,
        subject: request.subject,
        headers: request.headers,
        data: request.data,
        deliveries: 1,
        // Core NATS request: no stream and no sequence. A unique id keeps each rejection apart.
        stream: `core-${newUniqueId()}`,
        seq: 0,
        consumer: this.runtime.instance,
        keepBytes: REFUSED_LETTER_BYTES,
        ...letter,
      },
      rejection.kind === 'forbidden' ? 'request refused: access' : 'request rejected',
    );
    await recorded.written;
    return {
      ok: false,
      error: {
        code: rejection.code,
        kind: rejection.kind ?? 'rejected',
        message: rejection.message,
        ...(rejection.issues.length > 0 ? { details: { issues: rejection.issues } } : {}),
      },
    };
  }

  private unavailable(error: unknown): { ok: false; error: LedgerError } {
    if (error instanceof EventDecodeError) {
      // A permanent state, not an outage: said as such, and loud in the log (someone must repair it).
      this.runtime.logger.error('a stored event cannot be decoded', { subject: error.subject, seq: error.seq, reason: error.rejection.message });
      return {
        ok: false,
        error: {
          code: LedgerErrorCode.eventUndecodable,
          kind: 'internal',
          message: `the ledger cannot read this handoff: ${error.message}; retrying will not help until it is repaired`,
          details: { subject: error.subject, seq: error.seq },
        },
      };
    }
    if (error instanceof ConcurrencyConflict) {
      return {
        ok: false,
        error: { code: LedgerErrorCode.conflict, kind: 'unavailable', message: 'too much contention on this handoff; retry with the same idempotency key' },
      };
    }
    const message = error instanceof Error ? error.message : String(error);
    return { ok: false, error: { code: LedgerErrorCode.unavailable, kind: 'unavailable', message: `the ledger cannot decide now: ${message}` } };
  }
}

/**
 * Why a decision could not move the work it reviews (`parent`, as read): a person ended that work
 * (`review_withdrawn`), or — after its move was refused (`moveRefused`) — another decision of this
 * review moved it first (`handback_already_decided`); null when neither.
 */
function reviewMovedFirst(handbackId: string, parent: HandoffState, moveRefused: boolean): LedgerError | null {
  if (parent.status === 'absent') return null;
  const details = { handoff_id: handbackId, parent_handoff_id: parent.id, parent_status: parent.status };
  if (parent.status === 'abandoned' || parent.status === 'failed') {
    return {
      code: HandoffErrorCode.reviewWithdrawn,
      kind: 'wrong_state',
      message: `the work handback ${handbackId} reviews (${parent.id}) was ${parent.status}; its review is being withdrawn`,
      details,
    };
  }
  if (moveRefused && !(parent.status === 'returned' && parent.handback_id === handbackId)) {
    return {
      code: HandoffErrorCode.handbackAlreadyDecided,
      kind: 'wrong_state',
      message: `handback ${handbackId} was decided: another decision moved ${parent.id} (now ${parent.status})`,
      details,
    };
  }
  return null;
}
