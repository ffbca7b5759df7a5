import { Inject, Injectable } from '@nestjs/common';
import { RejectionCode, type Origin, type RefusedKind } from '@baton/contracts';
import { RunErrorCode, type DomainError, type RunState } from '@baton/domain';
import { TransientError, type AggregateRef, type HandleCommandResult, type HopTrace, type StoredEvent } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { DefinitionCatalog } from '../definitions/definition-catalog';
import type { DefinitionState } from '../definitions/definition.decider';
import { eventIdsFor, ROUTER_ACTOR, type CauseKind } from '../shared/ids';
import { poison } from '../shared/inbound';
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

/** What {@link RunCommands.applyInbound} did with an inbound message. */
export type InboundOutcome = { applied: true; events: readonly StoredEvent[] } | { applied: false; code: string; message: string };

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
  private async recordRefusal(ref: AggregateRef, refusal: RunRefusal, cause: RunCause): Promise<DomainError | null> {
    const recorded = await this.run(
      ref,
      { kind: 'reject', command: { type: 'reject_result', data: refusal, metadata: { now: cause.now, actor: ROUTER_ACTOR } } },
      cause,
    );
    return recorded.ok ? null : recorded.error;
  }

  /**
   * Apply the command an inbound message (agent result, operator answer, customer message) asks
   * for, over the run's pinned workflow, and settle its refusal the same way for every entry
   * point: a run that does not exist (`not_found`) or a definition that cannot be found
   * (`unknown_workflow`) is poison (dead-lettered with the bytes); any other refusal is recorded
   * on the run as `run.result_rejected` (idempotent on the message id) and the message is
   * acknowledged. Store failures are thrown as they are, so the transport redelivers.
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
    if (error.code === RunErrorCode.runNotFound) {
      // A message sent right after its run's start may come first (they are read by separate
      // consumers): given a few seconds for the start, then dead-lettered `not_found`.
      if (options.waitForStart) throw new TransientError(`${error.message}; waiting for its start`);
      throw poison({ code: RejectionCode.notFound, message: error.message });
    }
    if (error.code === RouterRunErrorCode.definitionMissing) throw poison({ code: RejectionCode.unknownWorkflow, message: error.message });
    const message = refusal.describe ? refusal.describe(error.message) : error.message;
    const unrecordable = await this.recordRefusal(
      ref,
      {
        result_id: cause.id,
        agent: refusal.agent,
        code: error.code,
        message,
        refused: REFUSED_BY_CAUSE[refusal.kind] ?? 'result',
        ...(refusal.handoff_id !== undefined ? { handoff_id: refusal.handoff_id } : {}),
        ...(refusal.claim_id !== undefined ? { claim_id: refusal.claim_id } : {}),
      },
      { ...cause, kind: refusal.kind },
    );
    if (unrecordable !== null) throw poison({ code: unrecordable.code, message: unrecordable.message });
    return { applied: false, code: error.code, message: error.message };
  }
}
