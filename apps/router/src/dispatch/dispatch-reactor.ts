import { Inject, Injectable } from '@nestjs/common';
import type { AgentDefinition, EventEnvelope, ExecutionSettings } from '@baton/contracts';
import { evolveRun, initialRunState, type RunEvent, type RunState } from '@baton/domain';
import { LruCache, PoisonError, TransientError } from '@baton/eventstore';
import { RUNTIME, type JsonLogger, type ServiceRuntime } from '@baton/platform';
import { DefinitionCatalog } from '../definitions/definition-catalog';
import { pinnedForRun } from '../definitions/definition.decider';
import { RunCommands, runRef } from '../runs/run-commands';
import { ROUTER_ACTOR } from '../shared/ids';
import { completeFromResultRequest, createHandoffRequest, returnableDeadlineAt, type RunResultRecorded, type RunRouted } from './handoff-request';
import { LEDGER, type LedgerReply, type RouterLedger } from './ledger';

/** Delay before a ledger call that could not reach the ledger is retried (the message is naked). */
export const LEDGER_RETRY_DELAY_MS = 1000;

/** Ledger codes that mean "already done": the reactor's effect happened before. */
const CREATE_DONE = new Set(['already_exists']);
const COMPLETE_DONE = new Set(['handoff_not_open']);

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
 * It publishes no human action notice: `run.notice_emitted` is the notifier's to publish on
 * `<prefix>.notice.<project>` (it owns what a person sees; one publisher, so one message per
 * notice — docs/notices.md).
 *
 * Ledger unreachable (timeout, no responders, `unavailable`) or failing (`internal`) →
 * TransientError (nak with delay, retried, dead-lettered after the delivery cap). Any other ledger
 * refusal → PoisonError (`ledger_refused`): it will not change on a retry and an SRE must look.
 */
@Injectable()
export class DispatchReactor {
  /** Per run, the fold up to the last event this instance handled (see {@link stateBefore}). */
  private readonly folded = new LruCache<string, { state: RunState; lastSeq: number }>(10_000);

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(LEDGER) private readonly ledger: RouterLedger,
    private readonly catalog: DefinitionCatalog,
    private readonly runs: RunCommands,
  ) {}

  /** Handle one stored run event (`seq` = its stream sequence). */
  async handle(raw: unknown, seq: number): Promise<void> {
    const decoded = this.runtime.registry.decode(raw);
    if (!decoded.ok) throw new PoisonError(`run event cannot be decoded: ${decoded.rejection.message}`, decoded.rejection.code);
    const envelope = decoded.value;
    const log = this.runtime.logger.child({ project: envelope.project, workflow_run_id: envelope.aggregate.id, event_id: envelope.id });
    switch (envelope.type) {
      case 'run.routed':
        return this.createHandoff(envelope as EventEnvelope<RunRouted>, seq, log);
      case 'run.result_recorded':
        return this.completeHandoff(envelope as EventEnvelope<RunResultRecorded>, seq, log);
      default:
        return;
    }
  }

  private async createHandoff(envelope: EventEnvelope<RunRouted>, seq: number, log: JsonLogger): Promise<void> {
    const routed = envelope.payload;
    const before = await this.stateBefore(envelope, seq);
    const workflow = before.status === 'none' ? null : before.workflow;
    let agents: readonly AgentDefinition[] = [];
    let execution: ExecutionSettings | undefined;
    if (workflow !== null) {
      const run = { workflow, definitionDigest: before.status === 'none' ? null : before.definitionDigest };
      const pinned = pinnedForRun(await this.catalog.load(envelope.project), run) ?? pinnedForRun(await this.catalog.load(envelope.project, { fresh: true }), run);
      agents = pinned?.agents ?? [];
      execution = pinned?.definition.execution;
    }
    const body = createHandoffRequest({
      project: envelope.project,
      workflowRunId: envelope.aggregate.id,
      eventId: envelope.id,
      routed,
      workflow,
      agents,
      variables: before.status === 'none' ? {} : before.variables,
      // A returnable child handoff carries a deadline: past it the watchdog expires it and the
      // handoff-deadline reactor times the child out (ON_FAILURE). Delegation is never lost.
      deadlineAt: returnableDeadlineAt(routed, before.status === 'none' ? null : before.pendingHandoff, agents, execution),
    });
    const reply = await this.call('create', () => this.ledger.create(envelope.project, body));
    if (!reply.ok && !CREATE_DONE.has(reply.error.code) && routed.decision.rule === 'handoff') {
      // A HANDOFF route whose handoff the ledger refused to create: it failed before the child
      // accepted it, so the route's ON_FAILURE runs (seed 001) instead of a dead letter.
      await this.failHandoff(envelope, routed.handoff_id, reply.error.code, reply.error.message, log);
      return;
    }
    this.settle('create', reply, CREATE_DONE, log.child({ handoff_id: routed.handoff_id, to_agent: routed.target.agent }));
  }

  private async failHandoff(envelope: EventEnvelope<RunRouted>, handoffId: string, code: string, message: string, log: JsonLogger): Promise<void> {
    const now = new Date().toISOString();
    const outcome = await this.runs.runWithDefinitions(
      runRef(envelope.project, envelope.aggregate.id),
      (definitions) => ({ kind: 'handoff_failed', failure: { handoff_id: handoffId, code, message }, definitions, metadata: { now, actor: ROUTER_ACTOR } }),
      { kind: 'handoff_failed', id: handoffId, actor: ROUTER_ACTOR, origin: 'engine_fallback', workflowRunId: envelope.aggregate.id, now },
    );
    if (!outcome.ok) throw new PoisonError(`handoff ${handoffId} failed (${code}) and ON_FAILURE could not run: ${outcome.error.code}: ${outcome.error.message}`, 'ledger_refused');
    log.warn('handoff creation refused; ON_FAILURE applied', { handoff_id: handoffId, code, events: outcome.events.map((e) => e.type) });
  }

  private async completeHandoff(envelope: EventEnvelope<RunResultRecorded>, seq: number, log: JsonLogger): Promise<void> {
    const before = await this.stateBefore(envelope, seq);
    const handoffId = before.status === 'none' ? null : before.handoffId;
    if (handoffId === null) return;
    const body = completeFromResultRequest(envelope.payload, handoffId, envelope.aggregate.id);
    const reply = await this.call('complete_from_result', () => this.ledger.completeFromResult(envelope.project, body));
    if (!reply.ok && reply.error.code === 'not_found') {
      // Its `run.routed` may be held by an instance that died, and is redelivered only after the
      // ack wait (30 s): back off by delivery count (1, 5, 15, 30 s) rather than a fixed second, so
      // the completion outlasts that redelivery instead of reaching the dead-letter cap first.
      throw new TransientError(`handoff ${handoffId} does not exist yet`);
    }
    this.settle('complete_from_result', reply, COMPLETE_DONE, log.child({ handoff_id: handoffId, result_id: envelope.payload.result_id }));
  }

  /**
   * The run as it stood just before the event at `seq` (its own stream, folded). The fold after
   * each handled event is cached per run, so the next event of the run only reads what lies between
   * (usually just itself: one round trip) instead of the whole history; an event older than the
   * cached point (a redelivery) folds from the start.
   */
  private async stateBefore(envelope: EventEnvelope, seq: number): Promise<RunState> {
    const ref = runRef(envelope.project, envelope.aggregate.id);
    const key = `${ref.project}/${ref.id}`;
    const cached = this.folded.get(key);
    const base = cached && cached.lastSeq < seq ? cached : { state: initialRunState(), lastSeq: 0 };
    const { events } = await this.runtime.store.read(ref, { afterSeq: base.lastSeq, untilSeq: seq - 1 });
    let state = base.state;
    for (const event of events) state = evolveRun(state, { type: event.type, data: event.payload } as RunEvent);
    try {
      this.folded.set(key, { state: evolveRun(state, { type: envelope.type, data: envelope.payload } as RunEvent), lastSeq: seq });
    } catch {
      this.folded.delete(key); // a history the fold refuses: never cache it
    }
    return state;
  }

  private async call(command: string, send: () => Promise<LedgerReply>): Promise<LedgerReply> {
    let reply: LedgerReply;
    try {
      reply = await send();
    } catch (error) {
      throw new TransientError(`ledger ${command} failed: ${String(error)}`, { cause: error, delayMs: LEDGER_RETRY_DELAY_MS });
    }
    // `unavailable` (timeout, no responders, store down) and `internal` (a ledger fault) may pass;
    // retry them. Refusals (`wrong_state`, `invalid`, `forbidden`, `rejected`) will not.
    if (!reply.ok && (reply.error.kind === 'unavailable' || reply.error.kind === 'internal')) {
      throw new TransientError(`ledger ${command}: ${reply.error.code}: ${reply.error.message}`, { delayMs: LEDGER_RETRY_DELAY_MS });
    }
    return reply;
  }

  private settle(command: string, reply: LedgerReply, done: ReadonlySet<string>, log: JsonLogger): void {
    if (reply.ok) {
      log.info(`ledger ${command} ${reply.events > 0 ? 'applied' : 'already applied'}`, { status: reply.handoff.status });
      return;
    }
    if (done.has(reply.error.code)) {
      log.info(`ledger ${command} already done`, { code: reply.error.code });
      return;
    }
    log.error(`ledger refused ${command}`, { code: reply.error.code, reason: reply.error.message });
    throw new PoisonError(`ledger refused ${command}: ${reply.error.code}: ${reply.error.message}`, 'ledger_refused');
  }
}
