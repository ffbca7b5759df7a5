import { Inject, Injectable } from '@nestjs/common';
import { LedgerErrorCode, Limits, type AgentDefinition, type ExecutionSettings } from '@baton/contracts';
import { HandoffFailureReason, type RunEvent, type RunState, type StartedRunState } from '@baton/domain';
import {
  LruCache,
  PoisonError,
  TransientError,
  reactor,
  type AggregateRef,
  type HopTrace,
  type Reactor,
  type ReactorContext,
  type ReactorEvent,
  type ReactorStates,
  type StoredEvent,
} from '@baton/eventstore';
import { RUNTIME, type JsonLogger, type ServiceRuntime } from '@baton/platform';
import { DefinitionCatalog } from '../definitions/definition-catalog';
import { pinnedForRun } from '../definitions/definition.decider';
import { RunCommands, runRef } from '../runs/run-commands';
import { routerRunDecider } from '../runs/router-run.decider';
import { ROUTER_ACTOR } from '../shared/ids';
import { sayResultRefused } from '../shared/result-refused';
import {
  answerLookup,
  answerScan,
  completeFromResultRequest,
  createHandoffRequest,
  returnableDeadlineAt,
  returnableParent,
  type CompleteFromResultBody,
  type CreateHandoffBody,
  type LookBackEvent,
  type LookBackVerdict,
  type RunResultRecorded,
  type RunRouted,
} from './handoff-request';
import { LEDGER, callLedger, ledgerDone, settleLedgerReply, type RouterLedger } from './ledger';

type RunRoutedEvent = ReactorEvent<Extract<RunEvent, { type: 'run.routed' }>>;
type RunResultRecordedEvent = ReactorEvent<Extract<RunEvent, { type: 'run.result_recorded' }>>;
type RunStoppedEvent = ReactorEvent<Extract<RunEvent, { type: 'run.stopped' }>>;

/** Routed events whose handoff a `complete_then_create` created, kept until their own delivery (bounded; a miss costs one idempotent `create`). */
const CREATED_AHEAD_CAPACITY = 4096;

/** Hops dispatched ahead at once at most (past it a hop waits for its events' deliveries, as before). */
export const MAX_AHEAD = 256;

/** How long the reactor sends separate requests after a ledger answered that it has no `complete_then_create` (an older ledger). */
export const COMBINED_RETRY_AFTER_MS = 60_000;

/** The code on `run.handoff_completed` of a routed handoff not offered because its run stopped (or was held, or finished) before it was created. */
export const HANDOFF_NOT_OFFERED_CODE = 'handoff_not_offered';

/** Stream sequences the first look back for the answer a route carries spans (`lookBack`); each further look spans four times more. */
export const ANSWER_LOOKBACK = 64;

/** Ledger codes that mean "already done": the reactor's effect happened before. */
const CREATE_DONE = new Set(['already_exists']);
const COMPLETE_DONE = new Set(['handoff_not_open']);
/** The handoff already ended (returned, failed by its deadline or retry cap…), or was never created (its create was refused). */
const ABANDON_DONE = new Set(['handoff_not_open', 'not_found']);

/**
 * The router's dispatch reactor: a durable consumer of the run events (`<prefix>.ev.*.run.*`)
 * that carries each committed routing decision out to the world. Because it starts from the
 * stored event (not from the code that appended it), a crash between the append and the ledger
 * call only delays the call: the event is redelivered until the ledger answered.
 *
 * - `run.routed` → ledger `create` (a `task` handoff to the target agent; idempotency key = the
 *   event id; `already_exists` counts as done). A route that gives control back to a caller
 *   (`answerLookup`) carries the callee's answer (`context.returned`), from the callee's
 *   `run.result_recorded`: the route's cause, stored by the same command before it, or the result
 *   of the child whose return let the parent wait for the message this route brings it.
 * - `run.result_recorded` → ledger `complete_from_result` for the handoff the agent was dispatched
 *   with (the run's handoff just before this event; idempotency key = the result id;
 *   `handoff_not_open` — already completed or otherwise closed — counts as done, `not_found` is
 *   retried: the create may still be on its way).
 *
 * On a hop both come from one command of the router (the result's): `run.result_recorded` and
 * right after it `run.routed`. When the store's fold cache holds that next event, the reactor asks
 * the ledger for both in one request (`complete_then_create`: the completion, then the creation,
 * in order) and remembers the routed event, whose own delivery then has nothing left to ask. Any
 * other answer than "both done" falls back to the separate requests below, so refusals, retries
 * and ON_FAILURE stay on one path; a forgotten routed event costs one `create`, which the ledger
 * answers as already applied (same idempotency key).
 *
 * **Ahead of the deliveries.** The command that records a result and routes the run is the
 * router's own (`RecordResultUseCase`), so it need not wait for its events to come back through
 * the consumer: {@link dispatchAhead} sends the same `complete_then_create` as soon as both events
 * are stored, and remembers what the ledger did. The deliveries stay the guarantee — a
 * `run.result_recorded` (or `run.routed`) delivered while its hop is being dispatched ahead waits
 * for it, then asks only for what was not done; a router that crashed in between, another
 * instance, or a hop dispatched ahead that met anything but "done" goes through the deliveries'
 * path exactly as before (the ledger answers a repeated request as already applied).
 *
 * - `run.result_rejected` of an agent's result → told to that agent on its own
 *   `<agent inbox>.refused` (`result-refused.json`, a hint: docs/runs.md rule 3c). Nothing else.
 *
 * It publishes no human action notice: `run.notice_emitted` is the notifier's to publish on
 * `<prefix>.notice.<project>` (it owns what a person sees; one publisher, so one message per
 * notice — docs/notices.md).
 *
 * Ledger unreachable (timeout, no responders, `unavailable`) or failing (`internal`) →
 * TransientError (nak with delay, retried, dead-lettered after the delivery cap). A refused create
 * → the run's `handoff_failed` (ON_FAILURE for a HANDOFF route's child, else a hold for a person).
 * Any other ledger refusal → PoisonError (`ledger_refused`): it will not change on a retry and an
 * SRE must look.
 */
@Injectable()
export class DispatchReactor {
  /** The reactor table: run events → ledger calls, with the run as it stood before each event. */
  readonly table: Reactor<RunEvent, RunState> = reactor({
    name: 'dispatch reactor',
    aggregate: 'run',
    decider: routerRunDecider,
    on: {
      'run.routed': (event, state, ctx) => this.createHandoff(event, state.before, ctx),
      'run.result_recorded': (event, state, ctx) => this.completeHandoff(event, state, ctx),
      'run.stopped': (event, state, ctx) => this.abandonStopped(event, state.before, ctx.trace),
      'run.result_rejected': (event, _state, ctx) =>
        sayResultRefused(
          this.runtime,
          { ...event, runId: event.aggregate.id, seq: ctx.seq },
          this.runtime.logger.child({ trace_id: ctx.trace.traceId, project: event.project, workflow_run_id: event.aggregate.id, event_id: event.id }),
        ),
    },
  });

  /** Routed event ids whose handoff was created with the completion before them. */
  private readonly createdAhead = new LruCache<string, true>(CREATED_AHEAD_CAPACITY);
  /** Result events whose handoff was completed ahead of their delivery ({@link dispatchAhead}). */
  private readonly completedAhead = new LruCache<string, true>(CREATED_AHEAD_CAPACITY);
  /** Hops being dispatched ahead, under the ids of both their events: a delivery of either waits. */
  private readonly aheadRunning = new Map<string, Promise<void>>();
  /** Until when (ms) the ledger is taken not to know `complete_then_create`. */
  private separateUntil = 0;

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(LEDGER) private readonly ledger: RouterLedger,
    private readonly catalog: DefinitionCatalog,
    private readonly runs: RunCommands,
  ) {}

  /**
   * Dispatch a hop from the command that stored it, without waiting for its events' deliveries:
   * when `events` (what one command appended to run `ref`, in order) hold a `run.result_recorded`
   * followed by the `run.routed` it caused, the finished handoff's completion and the next one's
   * creation go to the ledger now, as one `complete_then_create`. Never throws and never waits:
   * whatever goes wrong is left to the deliveries (see the class).
   */
  dispatchAhead(ref: AggregateRef, events: readonly StoredEvent[], trace: HopTrace): void {
    const at = events.findIndex((e) => e.type === 'run.result_recorded');
    const recorded = events[at];
    const next = events[at + 1];
    if (recorded === undefined || next === undefined || next.type !== 'run.routed') return;
    if (Date.now() < this.separateUntil || this.aheadRunning.size >= 2 * MAX_AHEAD || this.aheadRunning.has(recorded.id)) return;
    const running = this.ahead(ref, recorded as unknown as RunResultRecordedEvent, next as unknown as RunRoutedEvent, trace)
      .catch((error: unknown) => {
        this.runtime.logger.debug('hop left to the deliveries', { project: ref.project, workflow_run_id: ref.id, reason: String(error) });
      })
      .finally(() => {
        this.aheadRunning.delete(recorded.id);
        this.aheadRunning.delete(next.id);
      });
    this.aheadRunning.set(recorded.id, running);
    this.aheadRunning.set(next.id, running);
  }

  private async ahead(ref: AggregateRef, recorded: RunResultRecordedEvent, next: RunRoutedEvent, trace: HopTrace): Promise<void> {
    const state = await this.runtime.store.eventStates(ref, routerRunDecider, recorded.seq);
    const handoffId = state.before.status === 'none' ? null : state.before.handoffId;
    if (handoffId === null) return;
    // A stop stored since (the watchdog's circuit at this very hop: the router appends it, so this
    // process's fold cache holds it; never a read here, on the hot path): the deliveries decide.
    if (this.runtime.store.cachedNext(ref, next.seq) !== null && (await this.runMovedOn(ref.project, ref.id, next.payload.handoff_id)) !== null) return;
    const complete = completeFromResultRequest(recorded.payload, handoffId, ref.id);
    const create = await this.createBody(ref, { id: next.id, seq: next.seq, payload: next.payload }, state.after, recorded.payload);
    const log = this.logFor(recorded, trace);
    const completeLog = log.child({ handoff_id: handoffId, result_id: recorded.payload.result_id });
    if (await this.sendCombined(ref.project, { complete, create }, next, trace, log, completeLog)) this.completedAhead.set(recorded.id, true);
  }

  /**
   * Send one `complete_then_create`. True when the completion was applied or done before: it is
   * settled, and so is the creation when that is done too (remembered for the routed event's own
   * delivery). False leaves both to the separate requests; an `unknown_command` (an older ledger)
   * also switches to them for {@link COMBINED_RETRY_AFTER_MS}.
   */
  private async sendCombined(
    project: string,
    body: { complete: CompleteFromResultBody; create: CreateHandoffBody },
    next: { id: string; payload: RunRouted },
    trace: HopTrace,
    log: JsonLogger,
    completeLog: JsonLogger,
  ): Promise<boolean> {
    const reply = await this.ledger.completeThenCreate(project, body, { trace });
    if (!reply.ok) {
      if (reply.error.code === LedgerErrorCode.unknownCommand) {
        log.warn('the ledger has no complete_then_create; sending the two requests apart for a while', { retry_after_ms: COMBINED_RETRY_AFTER_MS });
        this.separateUntil = Date.now() + COMBINED_RETRY_AFTER_MS;
      }
      return false;
    }
    if (!ledgerDone(reply.complete, COMPLETE_DONE)) return false;
    settleLedgerReply('complete_from_result', reply.complete, COMPLETE_DONE, completeLog);
    if (reply.create !== null && ledgerDone(reply.create, CREATE_DONE)) {
      this.createdAhead.set(next.id, true);
      settleLedgerReply('create', reply.create, CREATE_DONE, log.child({ handoff_id: next.payload.handoff_id, to_agent: next.payload.target.agent }));
    }
    // Otherwise the routed event's own delivery asks again, and handles a refusal (ON_FAILURE).
    return true;
  }

  /** Wait for a hop being dispatched ahead that includes `eventId`; then true (once) when `done` holds the event. */
  private async doneAhead(eventId: string, done: LruCache<string, true>): Promise<boolean> {
    const running = this.aheadRunning.get(eventId);
    if (running !== undefined) await running;
    if (done.get(eventId) === undefined) return false;
    done.delete(eventId);
    return true;
  }

  private logFor(event: RunRoutedEvent | RunResultRecordedEvent, trace: HopTrace): JsonLogger {
    return this.runtime.logger.child({ trace_id: trace.traceId, project: event.project, workflow_run_id: event.aggregate.id, event_id: event.id });
  }

  private async createHandoff(envelope: RunRoutedEvent, before: RunState, ctx: ReactorContext): Promise<void> {
    const trace = ctx.trace;
    const log = this.logFor(envelope, trace);
    const routed = envelope.payload;
    if (await this.doneAhead(envelope.id, this.createdAhead)) {
      log.debug('ledger create done with the completion before it', { handoff_id: routed.handoff_id });
      return;
    }
    const moved = (await ctx.superseded()) ? await this.runMovedOn(envelope.project, envelope.aggregate.id, routed.handoff_id) : null;
    if (moved !== null) {
      await this.notOffered(envelope, moved, log, trace);
      return;
    }
    const body = await this.createBody(ctx.ref, { id: envelope.id, seq: ctx.seq, payload: routed }, before, null, log);
    const reply = await callLedger('create', () => this.ledger.create(envelope.project, body, { trace }));
    if (!reply.ok && !CREATE_DONE.has(reply.error.code)) {
      // The ledger refused to create the routed handoff; a retry would be refused alike. A HANDOFF
      // route's child failed before it accepted: the route's ON_FAILURE runs (seed 001). Any other
      // route's agent will never get it (it left the roster after the run pinned its definition,
      // say): the run holds for a person, who continues, reroutes or terminates it — never a run
      // left `running` with no handoff and only a dead letter to say why.
      await this.failHandoff(envelope, routed.handoff_id, reply.error.code, reply.error.message, log, trace);
      return;
    }
    settleLedgerReply('create', reply, CREATE_DONE, log.child({ handoff_id: routed.handoff_id, to_agent: routed.target.agent }));
  }

  /**
   * The callee's result whose answer the route at `routed.seq` carries back to its caller
   * (`context.returned`), found as {@link answerLookup} says; null when the route gives control back
   * to no caller, or the result cannot be found. `known` is a result at hand (the one the same
   * command stored just before the route): taken when it is the route's cause, without a read.
   */
  private async answerFor(
    ref: AggregateRef,
    routed: { seq: number; payload: RunRouted },
    agents: readonly AgentDefinition[],
    known: RunResultRecorded | null,
    log: JsonLogger | null,
  ): Promise<RunResultRecorded | null> {
    const lookup = answerLookup(routed.payload, agents);
    if (lookup === null) return null;
    if (lookup.kind === 'cause' && known !== null && known.result_id === lookup.resultId) return known;
    const answer = await this.lookBack(ref, routed.seq, answerScan(lookup));
    if (answer === null && lookup.kind === 'cause')
      (log ?? this.runtime.logger).warn("a route back to the caller without its callee's result: no context.returned", {
        project: ref.project,
        workflow_run_id: ref.id,
        result_id: lookup.resultId,
      });
    return answer;
  }

  /**
   * Read the run's events before the route at `routedSeq`, newest first, until `scan` finds the
   * answer or says there is none: in windows of stream sequences ({@link ANSWER_LOOKBACK}, then
   * four times more each time: other aggregates' events may lie between), as far as the stream's
   * start at worst. Null when none is found.
   */
  private async lookBack(ref: AggregateRef, routedSeq: number, scan: (event: LookBackEvent) => LookBackVerdict): Promise<RunResultRecorded | null> {
    let until = routedSeq - 1;
    for (let span = ANSWER_LOOKBACK; until > 0; span *= 4) {
      const after = Math.max(0, until - span);
      const { events } = await this.runtime.store.read(ref, { afterSeq: after, untilSeq: until });
      for (let i = events.length - 1; i >= 0; i--) {
        const verdict = scan(events[i]!);
        if (verdict === 'none') return null;
        if (verdict !== 'older') return verdict.found;
      }
      until = after;
    }
    return null;
  }

  /**
   * The ledger `create` for the routed event `routed` (its id, stream sequence and payload), with the
   * run as it stood just before it, and the callee's answer when the route gives control back to a
   * caller ({@link answerFor}; `known`: the result at hand, see there).
   */
  private async createBody(
    ref: AggregateRef,
    routed: { id: string; seq: number; payload: RunRouted },
    before: RunState,
    known: RunResultRecorded | null,
    log: JsonLogger | null = null,
  ): Promise<CreateHandoffBody> {
    const { project, id: workflowRunId } = ref;
    const workflow = before.status === 'none' ? null : before.workflow;
    let agents: readonly AgentDefinition[] = [];
    let execution: ExecutionSettings | undefined;
    if (workflow !== null) {
      const run = { workflow, definitionDigest: before.status === 'none' ? null : before.definitionDigest };
      const pinned = pinnedForRun(await this.catalog.load(project), run) ?? pinnedForRun(await this.catalog.load(project, { fresh: true }), run);
      agents = pinned?.agents ?? [];
      execution = pinned?.definition.execution;
    }
    return createHandoffRequest({
      project,
      workflowRunId,
      eventId: routed.id,
      routed: routed.payload,
      workflow,
      agents,
      variables: before.status === 'none' ? {} : before.variables,
      // A returnable child handoff carries a deadline: past it the watchdog expires it and the
      // handoff-deadline reactor times the child out (ON_FAILURE). Delegation is never lost.
      deadlineAt: returnableDeadlineAt(routed.payload, before.status === 'none' ? null : before.pendingHandoff, agents, execution),
      // Its parent is its caller and return address ("Your Team", seed 000 §7).
      returnableParent: returnableParent(routed.payload, before.status === 'none' ? null : before.pendingHandoff),
      // Control comes back to a caller: it re-enters with the callee's answer (seed 000 §5).
      answer: await this.answerFor(ref, routed, agents, known, log),
    });
  }

  /**
   * The run as it stands now when it is no longer running on the routed handoff `handoffId` —
   * stopped (the watchdog's circuit, say, stops a run at the very hop that routed it), held or
   * finished with no later route — else null (the handoff is to be offered). Decided by event
   * order: the run's fold through its last stored event (callers read it only when the run has
   * events after the route); never by the clock.
   */
  private async runMovedOn(project: string, workflowRunId: string, handoffId: string): Promise<StartedRunState | null> {
    const { state } = await this.runtime.store.current(runRef(project, workflowRunId), routerRunDecider);
    if (state.status === 'none' || state.status === 'running' || state.handoffId !== handoffId) return null;
    return state;
  }

  /**
   * A routed handoff whose run stopped (or was held, or finished) before the handoff was offered is
   * not created: no agent starts work that the stop's abandon would take away milliseconds later
   * (the stop's abandon then finds nothing: `not_found`, done). The run still learns the handoff
   * ended — `handoff_failed` (reason `ended`, code {@link HANDOFF_NOT_OFFERED_CODE}): a pending
   * returnable child's end is recorded (`run.handoff_completed`, outcome `error`) and the run stays
   * as it is until a person answers (its ON_FAILURE does not run over a stop); for any other handoff
   * it is a no-op. Event ids derive from the routed event's id, so a redelivery records it once.
   */
  private async notOffered(envelope: RunRoutedEvent, run: StartedRunState, log: JsonLogger, trace: HopTrace): Promise<void> {
    const handoffId = envelope.payload.handoff_id;
    const why = run.status === 'stopped' ? ` (${run.openStop.why}, packet ${run.openStop.packet_id})` : '';
    const message = `not offered: run ${run.workflowRunId} was ${run.status}${why} before its handoff was created`.slice(0, Limits.maxShortText);
    // The stop's time (the child's end), else the route's: the same on every redelivery.
    const now = run.status === 'stopped' ? run.openStop.created_at : envelope.occurredAt;
    const outcome = await this.runs.runWithDefinitions(
      runRef(envelope.project, envelope.aggregate.id),
      (definitions) => ({
        kind: 'handoff_failed',
        failure: { handoff_id: handoffId, code: HANDOFF_NOT_OFFERED_CODE, message, reason: HandoffFailureReason.ended },
        definitions,
        metadata: { now, actor: ROUTER_ACTOR },
      }),
      { kind: 'handoff_failed', id: envelope.id, actor: ROUTER_ACTOR, origin: 'engine_fallback', workflowRunId: envelope.aggregate.id, now, trace },
    );
    if (!outcome.ok) {
      log.warn('a routed handoff of a run that is no longer running was not offered; the run did not take its end', {
        handoff_id: handoffId,
        code: outcome.error.code,
      });
      return;
    }
    log.info('a routed handoff of a run that is no longer running was not offered', {
      handoff_id: handoffId,
      status: run.status,
      events: outcome.events.map((e) => e.type),
    });
  }

  private async failHandoff(envelope: RunRoutedEvent, handoffId: string, code: string, message: string, log: JsonLogger, trace: HopTrace): Promise<void> {
    const now = new Date().toISOString();
    const outcome = await this.runs.runWithDefinitions(
      runRef(envelope.project, envelope.aggregate.id),
      (definitions) => ({ kind: 'handoff_failed', failure: { handoff_id: handoffId, code, message }, definitions, metadata: { now, actor: ROUTER_ACTOR } }),
      { kind: 'handoff_failed', id: handoffId, actor: ROUTER_ACTOR, origin: 'engine_fallback', workflowRunId: envelope.aggregate.id, now, trace },
    );
    if (!outcome.ok)
      throw new PoisonError(
        `handoff ${handoffId} failed (${code}) and ON_FAILURE could not run: ${outcome.error.code}: ${outcome.error.message}`,
        'ledger_refused',
      );
    log.warn('handoff creation refused; the run was told (ON_FAILURE, or a hold)', { handoff_id: handoffId, code, events: outcome.events.map((e) => e.type) });
  }

  private async completeHandoff(envelope: RunResultRecordedEvent, state: ReactorStates<RunState>, ctx: ReactorContext): Promise<void> {
    const { before } = state;
    const trace = ctx.trace;
    const log = this.logFor(envelope, trace);
    const handoffId = before.status === 'none' ? null : before.handoffId;
    if (handoffId === null) return;
    if (await this.doneAhead(envelope.id, this.completedAhead)) {
      log.debug('ledger complete_from_result done ahead of the delivery', { handoff_id: handoffId });
      return;
    }
    const body = completeFromResultRequest(envelope.payload, handoffId, envelope.aggregate.id);
    const completeLog = log.child({ handoff_id: handoffId, result_id: envelope.payload.result_id });
    const next = ctx.next();
    // The run's next event is the routed one this result caused (the router appended both):
    // complete this handoff and create the next in one request, in that order. Its body needs the
    // project's definitions; when they cannot be read now, the completion does not wait for them.
    let routed = next !== null && next.type === 'run.routed' && Date.now() >= this.separateUntil ? (next.payload as RunRouted) : null;
    // The run stopped (or was held, or finished) after that route: complete this handoff only; the
    // routed event's own delivery does not create the next one (see createHandoff).
    if (
      next !== null &&
      routed !== null &&
      (await this.runtime.store.hasEventsAfter(ctx.ref, next.seq)) &&
      (await this.runMovedOn(envelope.project, envelope.aggregate.id, routed.handoff_id)) !== null
    )
      routed = null;
    const create =
      next && routed ? await this.createBody(ctx.ref, { id: next.id, seq: next.seq, payload: routed }, state.after, envelope.payload).catch(() => null) : null;
    // Anything short of a completion done (refused or not yet possible, the ledger unreachable):
    // the separate requests below give it the one treatment every completion gets.
    if (
      next &&
      routed &&
      create &&
      (await this.sendCombined(envelope.project, { complete: body, create }, { id: next.id, payload: routed }, trace, log, completeLog))
    )
      return;
    const reply = await callLedger('complete_from_result', () => this.ledger.completeFromResult(envelope.project, body, { trace }));
    if (!reply.ok && reply.error.code === 'not_found') {
      // Its `run.routed` may be held by an instance that died (redelivered only after the 30 s ack
      // wait), or still be waiting out a ledger outage: back off by delivery count (1, 5, 15, 30 s)
      // for as long as it takes. A completion only follows a claim, so the handoff is coming; and
      // after an outage the delivery count is already past the cap, where a bounded retry would
      // dead-letter the completion at its first "not yet".
      throw new TransientError(`handoff ${handoffId} does not exist yet`, { unbounded: true });
    }
    settleLedgerReply('complete_from_result', reply, COMPLETE_DONE, completeLog);
  }

  /**
   * A running run stopped from outside (the watchdog: thrash, hop budget, an open circuit, a
   * failed guard) waits for a person, and whatever an operator answers routes it on with a new
   * handoff: the handoff its agent was working on is dead. Abandoned here (`abandon` as the
   * router, key `stop:<packet id>`), so that it is not worked, its lease does not lapse into a
   * requeue and a fresh offer, and the agent's result is not refused again and again (each refusal
   * and each lapse would count against the agent's circuit). A stop the agent or the router made
   * came with a result, which closed the handoff already; a held run has none open.
   */
  private async abandonStopped(envelope: RunStoppedEvent, before: RunState, trace: HopTrace): Promise<void> {
    const stopped = envelope.payload;
    if (stopped.source !== 'external' || before.status !== 'running' || before.handoffId === null) return;
    const handoffId = before.handoffId;
    const log = this.runtime.logger.child({
      trace_id: trace.traceId,
      project: envelope.project,
      workflow_run_id: envelope.aggregate.id,
      handoff_id: handoffId,
    });
    const reply = await callLedger('abandon', () =>
      this.ledger.abandon(
        envelope.project,
        {
          handoff_id: handoffId,
          reason: `run ${envelope.aggregate.id} stopped (${stopped.packet.why}, packet ${stopped.packet.packet_id}): waiting for a person`.slice(
            0,
            Limits.maxShortText,
          ),
          idempotency_key: `stop:${stopped.packet.packet_id}`,
        },
        { trace },
      ),
    );
    settleLedgerReply('abandon', reply, ABANDON_DONE, log);
  }
}
