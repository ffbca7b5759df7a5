import { Inject, Injectable } from '@nestjs/common';
import type { AgentDefinition, ExecutionSettings } from '@baton/contracts';
import type { RunEvent, RunState } from '@baton/domain';
import { PoisonError, TransientError, reactor, type HopTrace, type Reactor, type ReactorEvent } from '@baton/eventstore';
import { RUNTIME, type JsonLogger, type ServiceRuntime } from '@baton/platform';
import { DefinitionCatalog } from '../definitions/definition-catalog';
import { pinnedForRun } from '../definitions/definition.decider';
import { RunCommands, runRef } from '../runs/run-commands';
import { routerRunDecider } from '../runs/router-run.decider';
import { ROUTER_ACTOR } from '../shared/ids';
import { completeFromResultRequest, createHandoffRequest, returnableDeadlineAt } from './handoff-request';
import { LEDGER, type LedgerReply, type RouterLedger } from './ledger';

type RunRoutedEvent = ReactorEvent<Extract<RunEvent, { type: 'run.routed' }>>;
type RunResultRecordedEvent = ReactorEvent<Extract<RunEvent, { type: 'run.result_recorded' }>>;

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
  /** The reactor table: run events → ledger calls, with the run as it stood before each event. */
  readonly table: Reactor<RunEvent, RunState> = reactor({
    name: 'dispatch reactor',
    aggregate: 'run',
    decider: routerRunDecider,
    on: {
      'run.routed': (event, state, ctx) => this.createHandoff(event, state.before, ctx.trace),
      'run.result_recorded': (event, state, ctx) => this.completeHandoff(event, state.before, ctx.trace),
    },
  });

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(LEDGER) private readonly ledger: RouterLedger,
    private readonly catalog: DefinitionCatalog,
    private readonly runs: RunCommands,
  ) {}

  private logFor(event: RunRoutedEvent | RunResultRecordedEvent, trace: HopTrace): JsonLogger {
    return this.runtime.logger.child({ trace_id: trace.traceId, project: event.project, workflow_run_id: event.aggregate.id, event_id: event.id });
  }

  private async createHandoff(envelope: RunRoutedEvent, before: RunState, trace: HopTrace): Promise<void> {
    const log = this.logFor(envelope, trace);
    const routed = envelope.payload;
    const workflow = before.status === 'none' ? null : before.workflow;
    let agents: readonly AgentDefinition[] = [];
    let execution: ExecutionSettings | undefined;
    if (workflow !== null) {
      const run = { workflow, definitionDigest: before.status === 'none' ? null : before.definitionDigest };
      const pinned =
        pinnedForRun(await this.catalog.load(envelope.project), run) ?? pinnedForRun(await this.catalog.load(envelope.project, { fresh: true }), run);
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
    const reply = await this.call('create', () => this.ledger.create(envelope.project, body, { trace }));
    if (!reply.ok && !CREATE_DONE.has(reply.error.code) && routed.decision.rule === 'handoff') {
      // A HANDOFF route whose handoff the ledger refused to create: it failed before the child
      // accepted it, so the route's ON_FAILURE runs (seed 001) instead of a dead letter.
      await this.failHandoff(envelope, routed.handoff_id, reply.error.code, reply.error.message, log, trace);
      return;
    }
    this.settle('create', reply, CREATE_DONE, log.child({ handoff_id: routed.handoff_id, to_agent: routed.target.agent }));
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
    log.warn('handoff creation refused; ON_FAILURE applied', { handoff_id: handoffId, code, events: outcome.events.map((e) => e.type) });
  }

  private async completeHandoff(envelope: RunResultRecordedEvent, before: RunState, trace: HopTrace): Promise<void> {
    const log = this.logFor(envelope, trace);
    const handoffId = before.status === 'none' ? null : before.handoffId;
    if (handoffId === null) return;
    const body = completeFromResultRequest(envelope.payload, handoffId, envelope.aggregate.id);
    const reply = await this.call('complete_from_result', () => this.ledger.completeFromResult(envelope.project, body, { trace }));
    if (!reply.ok && reply.error.code === 'not_found') {
      // Its `run.routed` may be held by an instance that died, and is redelivered only after the
      // ack wait (30 s): back off by delivery count (1, 5, 15, 30 s) rather than a fixed second, so
      // the completion outlasts that redelivery instead of reaching the dead-letter cap first.
      throw new TransientError(`handoff ${handoffId} does not exist yet`);
    }
    this.settle('complete_from_result', reply, COMPLETE_DONE, log.child({ handoff_id: handoffId, result_id: envelope.payload.result_id }));
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
