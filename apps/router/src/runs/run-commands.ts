import { Inject, Injectable } from '@nestjs/common';
import type { Origin } from '@baton/contracts';
import type { DomainError, RunState } from '@baton/domain';
import type { AggregateRef, HandleCommandResult } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { DefinitionCatalog } from '../definitions/definition-catalog';
import type { DefinitionState } from '../definitions/definition.decider';
import { eventIdsFor, ROUTER_ACTOR, type CauseKind } from '../shared/ids';
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
}

/** What the run refused: recorded as `run.result_rejected` (`result_id` is the result or answer id). */
export interface RunRefusal {
  result_id: string;
  agent: string;
  code: string;
  message: string;
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
      eventId: eventIdsFor(cause.kind, cause.id),
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
  async recordRefusal(ref: AggregateRef, refusal: RunRefusal, cause: RunCause): Promise<DomainError | null> {
    const recorded = await this.run(
      ref,
      { kind: 'reject', command: { type: 'reject_result', data: refusal, metadata: { now: cause.now, actor: ROUTER_ACTOR } } },
      cause,
    );
    return recorded.ok ? null : recorded.error;
  }
}
