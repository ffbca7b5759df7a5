import { Inject, Injectable } from '@nestjs/common';
import { RejectionCode, type Origin, type RefusedKind } from '@baton/contracts';
import { RunErrorCode, type DomainError, type RunState } from '@baton/domain';
import { PoisonError, TransientError, type AggregateRef, type HandleCommandResult, type HopTrace, type StoredEvent } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { DefinitionCatalog } from '../definitions/definition-catalog';
import type { DefinitionState } from '../definitions/definition.decider';
import { eventIdsFor, ROUTER_ACTOR, type CauseKind } from '../shared/ids';
import { poison } from '../shared/inbound';
import { RefusalBudget, type InboundOrigin } from '../shared/refusal-budget';
import { letteredRefusal } from '../shared/result-refused';
import { RouterRunErrorCode, routerRunDecider, type RouterRunCommand } from './router-run.decider';

/** The run aggregate of a workflow run: `<prefix>.ev.<project>.run.<workflow_run_id>`. */
export function runRef(project: string, workflowRunId: string): AggregateRef {
  return { project, kind: 'run', id: workflowRunId };
}

/** Who caused a command and why: becomes the envelope's actor, origin and ids. */
export interface RunCause {
  kind: CauseKind;
  /** The causing message's id (workflow_run_id, result_id or answer_id). */
  id: string;
  actor: string;
  origin: Origin;
  workflowRunId: string;
  now: string;
  /** The trace of the causing message (or event): the events carry it on. */
  trace: HopTrace;
  /** What the command's event ids derive from when not `id` (a start's: {@link startEventKey}). */
  eventKey?: string;
}

/** What the run refused: recorded as `run.result_rejected` (`result_id` is the result, answer or message id; `refused` which). */
export interface RunRefusal {
  result_id: string;
  agent: string;
  code: string;
  message: string;
  refused: RefusedKind;
}

/** What a refusal's cause kind refused. */
const REFUSED_BY_CAUSE: Partial<Record<CauseKind, RefusedKind>> = { answer_refused: 'answer', message_refused: 'message' };

/**
 * What {@link RunCommands.applyInbound} did with an inbound message. A refusal is `recorded` on
 * the run, or not (its sender's budget spent: counted in its `refusals_suppressed` letter).
 */
export type InboundOutcome = { applied: true; events: readonly StoredEvent[] } | { applied: false; code: string; message: string; recorded: boolean };

/** How a refusal of an inbound message is recorded on its run. */
export interface InboundRefusal {
  /** The cause kind the `run.result_rejected` event's id derives from. */
  kind: CauseKind;
  /** The `agent` it is recorded under (the agent, `operator` or `customer`). */
  agent: string;
  /** The recorded message, from the run's refusal message. */
  describe?: (message: string) => string;
  /** The handoff and claim an agent's result named, recorded with its refusal (the loop guards read them). */
  handoff_id?: string;
  claim_id?: string;
  /**
   * An agent's result: most refusals of results of this agent the run records while it waits for
   * another agent (`ROUTER_FOREIGN_REFUSALS_PER_RUN`; absent or 0: no cap). Past it the result is
   * dead-lettered `foreign_refusals_spent` instead of recorded (`decideReject`); the same cap holds
   * this agent's refused results while the run waits for no result, when the run waits for it
   * (`idle_refusals_spent`).
   */
  foreignCap?: number;
  /**
   * Where the refused message came from (its inbox subject, stream and sequence): its refusal is
   * recorded under its sender's budget ({@link RefusalBudget}); absent, it is always recorded.
   */
  origin?: InboundOrigin;
}

/**
 * Runs commands against the run aggregate through the event store (optimistic concurrency,
 * retried on conflicts; deterministic event ids per cause, so a redelivered input appends
 * nothing new). Store failures (timeouts, an unreachable server) are thrown as they are: the
 * transport naks and redelivers the message.
 */
@Injectable()
export class RunCommands {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly catalog: DefinitionCatalog,
    private readonly budget: RefusalBudget,
  ) {}

  /** Run a command that needs no definitions (a start, a recorded refusal). */
  run(ref: AggregateRef, command: RouterRunCommand, cause: RunCause): Promise<HandleCommandResult<RunState>> {
    return this.runtime.store.handleCommand(ref, routerRunDecider, command, {
      occurredAt: cause.now,
      actor: cause.actor,
      origin: cause.origin,
      causationId: cause.id,
      correlationId: cause.workflowRunId,
      ...eventIdsFor(ref, cause.kind, cause.eventKey ?? cause.id),
      trace: cause.trace,
    });
  }

  /**
   * Run a command that routes over the run's pinned workflow. The project's definitions come from
   * the cache; when the pinned version is not there (`definition_missing`: a definition another
   * router instance published and this one has not heard of yet) they are re-read once.
   */
  async runWithDefinitions(
    ref: AggregateRef,
    build: (definitions: DefinitionState) => RouterRunCommand,
    cause: RunCause,
  ): Promise<HandleCommandResult<RunState>> {
    const first = await this.run(ref, build(await this.catalog.load(ref.project)), cause);
    if (first.ok || first.error.code !== RouterRunErrorCode.definitionMissing) return first;
    return this.run(ref, build(await this.catalog.load(ref.project, { fresh: true })), cause);
  }

  /**
   * Record a refused result or answer on its run (`run.result_rejected`, idempotent on
   * `result_id`). Returns the store's refusal when even that is impossible (the run vanished).
   */
  private async recordRefusal(ref: AggregateRef, refusal: RunRefusal, cause: RunCause, foreignCap?: number): Promise<DomainError | null> {
    const recorded = await this.run(
      ref,
      {
        kind: 'reject',
        command: { type: 'reject_result', data: refusal, metadata: { now: cause.now, actor: ROUTER_ACTOR } },
        ...(foreignCap !== undefined ? { foreignCap } : {}),
      },
      cause,
    );
    return recorded.ok ? null : recorded.error;
  }

  /**
   * Apply the command an inbound message (agent result, operator answer, customer message) asks
   * for, over the run's pinned workflow, and settle its refusal the same way for every entry
   * point: a run that does not exist (`not_found`) or a definition that cannot be found
   * (`unknown_workflow`) is poison (dead-lettered with the bytes); any other refusal is recorded
   * on the run as `run.result_rejected` (idempotent on the message id) while its sender's budget
   * lasts (`refusal.origin`, {@link RefusalBudget}; past it only counted) and the message is
   * acknowledged — but an agent's result refused while the run waits for another agent, once the
   * run holds `refusal.foreignCap` of that agent's, is poison `foreign_refusals_spent` (its letter,
   * under the sender's budget, is its record); so is the run's own agent's, past the same cap while
   * the run waits for no result, `idle_refusals_spent`. An agent's result dead-lettered so (any
   * of those but `unknown_workflow`, the router's own failure to find the run's definition, whose
   * letter waits for a redrive) is said to the agent once its letter is stored
   * (`sayLetteredResultRefused`, docs/runs.md rule 3c): under the sender's budget of letters, as
   * its letter is. Store failures are thrown as they are, so the transport redelivers.
   */
  async applyInbound(
    ref: AggregateRef,
    build: (definitions: DefinitionState) => RouterRunCommand,
    cause: RunCause,
    refusal: InboundRefusal,
    options: { waitForStart?: boolean } = {},
  ): Promise<InboundOutcome> {
    const outcome = await this.runWithDefinitions(ref, build, cause);
    if (outcome.ok) return { applied: true, events: outcome.events };
    const { error } = outcome;
    const refused = REFUSED_BY_CAUSE[refusal.kind] ?? 'result';
    // An agent's result refused into a letter, not on its run: once its letter is stored (not when its
    // sender's budget only counted it), the agent is told, as of a refusal recorded on the run.
    const letterOf = (code: string, message: string): PoisonError =>
      refused !== 'result'
        ? poison({ code, message })
        : letteredRefusal(
            this.runtime,
            {
              project: ref.project,
              agent: refusal.agent,
              workflow_run_id: cause.workflowRunId,
              result_id: cause.id,
              handoff_id: refusal.handoff_id,
              claim_id: refusal.claim_id,
            },
            code,
            message,
            cause.now,
            this.runtime.logger,
          );
    if (error.code === RunErrorCode.runNotFound) {
      // A message sent right after its run's start may come first (they are read by separate
      // consumers): given a few seconds for the start, then dead-lettered `not_found`.
      if (options.waitForStart) throw new TransientError(`${error.message}; waiting for its start`);
      throw letterOf(RejectionCode.notFound, error.message);
    }
    if (error.code === RouterRunErrorCode.definitionMissing) throw poison({ code: RejectionCode.unknownWorkflow, message: error.message });
    const message = refusal.describe ? refusal.describe(error.message) : error.message;
    // Each refusal recorded is an event on the run, and a sender can have one refused at will: under its budget.
    const budgeted = await this.budget.record(refusal.origin, error.code, () =>
      this.recordRefusal(
        ref,
        {
          result_id: cause.id,
          agent: refusal.agent,
          code: error.code,
          message,
          refused,
          ...(refusal.handoff_id !== undefined ? { handoff_id: refusal.handoff_id } : {}),
          ...(refusal.claim_id !== undefined ? { claim_id: refusal.claim_id } : {}),
        },
        { ...cause, kind: refusal.kind },
        refusal.foreignCap,
      ),
    );
    // Past the cap of an agent's refused results on a run it is not the agent of, or of its own
    // agent's while the run waits for no result, the refusal is `foreign_refusals_spent` or
    // `idle_refusals_spent`: dead-lettered under its sender's letter budget, never on the run.
    if (budgeted.outcome === 'recorded' && budgeted.value !== null) throw letterOf(budgeted.value.code, budgeted.value.message);
    return { applied: false, code: error.code, message: error.message, recorded: budgeted.outcome === 'recorded' };
  }
}
