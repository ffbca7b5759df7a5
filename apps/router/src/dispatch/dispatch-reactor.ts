import { Inject, Injectable } from '@nestjs/common';
import { LedgerErrorCode, Limits, type AgentDefinition, type ExecutionSettings } from '@baton/contracts';
import type { RunEvent, RunState } from '@baton/domain';
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
import {
  completeFromResultRequest,
  createHandoffRequest,
  returnableDeadlineAt,
  returnableParent,
  type CompleteFromResultBody,
  type CreateHandoffBody,
  type RunRouted,
} from './handoff-request';
import { LEDGER, type LedgerReply, type RouterLedger } from './ledger';

type RunRoutedEvent = ReactorEvent<Extract<RunEvent, { type: 'run.routed' }>>;
type RunResultRecordedEvent = ReactorEvent<Extract<RunEvent, { type: 'run.result_recorded' }>>;
type RunStoppedEvent = ReactorEvent<Extract<RunEvent, { type: 'run.stopped' }>>;

/** Delay before a ledger call that could not reach the ledger is retried (the message is naked). */
export const LEDGER_RETRY_DELAY_MS = 1000;

/** Routed events whose handoff a `complete_then_create` created, kept until their own delivery (bounded; a miss costs one idempotent `create`). */
const CREATED_AHEAD_CAPACITY = 4096;

/** Hops dispatched ahead at once at most (past it a hop waits for its events' deliveries, as before). */
export const MAX_AHEAD = 256;

/** How long the reactor sends separate requests after a ledger answered that it has no `complete_then_create` (an older ledger). */
export const COMBINED_RETRY_AFTER_MS = 60_000;

/** Ledger codes that mean "already done": the reactor's effect happened before. */
const CREATE_DONE = new Set(['already_exists']);
const COMPLETE_DONE = new Set(['handoff_not_open']);
/** The handoff already ended (returned, failed by its deadline or retry cap…), or was never created (its create was refused). */
const ABANDON_DONE = new Set(['handoff_not_open', 'not_found']);

/** Applied now, or refused with a code that means it was done before. */
function isDone(reply: LedgerReply, done: ReadonlySet<string>): boolean {
  return reply.ok || done.has(reply.error.code);
}

/**
 * The router's dispatch reactor: a durable consumer of the run events (`<prefix>.ev.*.run.*`)
 * that carries each committed routing decision out to the world. Because it starts from the
 * stored event (not from the code that appended it), a crash between the append and the ledger
 * call only delays the call: the event is redelivered until the ledger answered.
 *
 * - `run.routed` → ledger `create` (a `task` handoff to the target agent; idempotency key = the
 *   event id; `already_exists` counts as done).
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
      'run.routed': (event, state, ctx) => this.createHandoff(event, state.before, ctx.trace),
      'run.result_recorded': (event, state, ctx) => this.completeHandoff(event, state, ctx),
      'run.stopped': (event, state, ctx) => this.abandonStopped(event, state.before, ctx.trace),
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
    const complete = completeFromResultRequest(recorded.payload, handoffId, ref.id);
    const create = await this.createBody(ref.project, ref.id, next.id, next.payload, state.after);
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
    if (!isDone(reply.complete, COMPLETE_DONE)) return false;
    this.settle('complete_from_result', reply.complete, COMPLETE_DONE, completeLog);
    if (reply.create !== null && isDone(reply.create, CREATE_DONE)) {
      this.createdAhead.set(next.id, true);
      this.settle('create', reply.create, CREATE_DONE, log.child({ handoff_id: next.payload.handoff_id, to_agent: next.payload.target.agent }));
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

  private async createHandoff(envelope: RunRoutedEvent, before: RunState, trace: HopTrace): Promise<void> {
    const log = this.logFor(envelope, trace);
    const routed = envelope.payload;
    if (await this.doneAhead(envelope.id, this.createdAhead)) {
      log.debug('ledger create done with the completion before it', { handoff_id: routed.handoff_id });
      return;
    }
    const body = await this.createBody(envelope.project, envelope.aggregate.id, envelope.id, routed, before);
    const reply = await this.call('create', () => this.ledger.create(envelope.project, body, { trace }));
    if (!reply.ok && !CREATE_DONE.has(reply.error.code)) {
      // The ledger refused to create the routed handoff; a retry would be refused alike. A HANDOFF
      // route's child failed before it accepted: the route's ON_FAILURE runs (seed 001). Any other
      // route's agent will never get it (it left the roster after the run pinned its definition,
      // say): the run holds for a person, who continues, reroutes or terminates it — never a run
      // left `running` with no handoff and only a dead letter to say why.
      await this.failHandoff(envelope, routed.handoff_id, reply.error.code, reply.error.message, log, trace);
      return;
    }
    this.settle('create', reply, CREATE_DONE, log.child({ handoff_id: routed.handoff_id, to_agent: routed.target.agent }));
  }

  /** The ledger `create` for a routed event, with the run as it stood just before it. */
  private async createBody(project: string, workflowRunId: string, eventId: string, routed: RunRouted, before: RunState): Promise<CreateHandoffBody> {
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
      eventId,
      routed,
      workflow,
      agents,
      variables: before.status === 'none' ? {} : before.variables,
      // A returnable child handoff carries a deadline: past it the watchdog expires it and the
      // handoff-deadline reactor times the child out (ON_FAILURE). Delegation is never lost.
      deadlineAt: returnableDeadlineAt(routed, before.status === 'none' ? null : before.pendingHandoff, agents, execution),
      // Its parent is its caller and return address ("Your Team", seed 000 §7).
      returnableParent: returnableParent(routed, before.status === 'none' ? null : before.pendingHandoff),
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
    const routed = next !== null && next.type === 'run.routed' && Date.now() >= this.separateUntil ? (next.payload as RunRouted) : null;
    const create = next && routed ? await this.createBody(envelope.project, envelope.aggregate.id, next.id, routed, state.after).catch(() => null) : null;
    // Anything short of a completion done (refused or not yet possible, the ledger unreachable):
    // the separate requests below give it the one treatment every completion gets.
    if (
      next &&
      routed &&
      create &&
      (await this.sendCombined(envelope.project, { complete: body, create }, { id: next.id, payload: routed }, trace, log, completeLog))
    )
      return;
    const reply = await this.call('complete_from_result', () => this.ledger.completeFromResult(envelope.project, body, { trace }));
    if (!reply.ok && reply.error.code === 'not_found') {
      // Its `run.routed` may be held by an instance that died (redelivered only after the 30 s ack
      // wait), or still be waiting out a ledger outage: back off by delivery count (1, 5, 15, 30 s)
      // for as long as it takes. A completion only follows a claim, so the handoff is coming; and
      // after an outage the delivery count is already past the cap, where a bounded retry would
      // dead-letter the completion at its first "not yet".
      throw new TransientError(`handoff ${handoffId} does not exist yet`, { unbounded: true });
    }
    this.settle('complete_from_result', reply, COMPLETE_DONE, completeLog);
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
    const reply = await this.call('abandon', () =>
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
    this.settle('abandon', reply, ABANDON_DONE, log);
  }

  private async call(command: string, send: () => Promise<LedgerReply>): Promise<LedgerReply> {
    let reply: LedgerReply;
    try {
      reply = await send();
    } catch (error) {
      // No ledger answered (a restart, an outage): the event's work is owed whatever the outage's
      // length, and an event's letter cannot be redriven — retry until a ledger answers.
      throw new TransientError(`ledger ${command} failed: ${String(error)}`, { cause: error, unbounded: true });
    }
    // `unavailable` (timeout, no responders, store down) is retried until it passes; `internal` (a
    // ledger fault) a few times. Refusals (`wrong_state`, `invalid`, `forbidden`, `rejected`) will not pass.
    if (!reply.ok && reply.error.kind === 'unavailable') {
      throw new TransientError(`ledger ${command}: ${reply.error.code}: ${reply.error.message}`, { unbounded: true });
    }
    if (!reply.ok && reply.error.kind === 'internal') {
      throw new TransientError(`ledger ${command}: ${reply.error.code}: ${reply.error.message}`, { delayMs: LEDGER_RETRY_DELAY_MS });
    }
    return reply;
  }

  private settle(command: string, reply: LedgerReply, done: ReadonlySet<string>, log: JsonLogger): void {
    if (reply.ok) {
      log.info(`ledger ${command} ${reply.events > 0 ? 'applied' : 'already applied'}`, { status: reply.handoff.status });
      return;
    }
    if (isDone(reply, done)) {
      log.info(`ledger ${command} already done`, { code: reply.error.code });
      return;
    }
    log.error(`ledger refused ${command}`, { code: reply.error.code, reason: reply.error.message });
    throw new PoisonError(`ledger refused ${command}: ${reply.error.code}: ${reply.error.message}`, 'ledger_refused');
  }
}
