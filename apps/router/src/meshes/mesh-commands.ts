import { Inject, Injectable } from '@nestjs/common';
import type { MeshEvent, Origin } from '@baton/contracts';
import { DomainErrorKind, meshDecider, reject, type Decider, type DomainError, type MeshCommand, type MeshState } from '@baton/domain';
import type { AggregateRef, HandleCommandResult, HopTrace } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { derivedEventIds, type EventIds } from '../shared/ids';

/** The mesh aggregate of a mesh run: `<prefix>.ev.<project>.mesh.<mesh_run_id>`. */
export function meshRef(project: string, meshRunId: string): AggregateRef {
  return { project, kind: 'mesh', id: meshRunId };
}

/** Who caused a mesh command: its start (mesh_run_id), a turn (result_id), an operator's answer (answer_id) or a stop from outside (packet_id). */
export interface MeshCause {
  kind: 'start' | 'turn' | 'answer' | 'stop';
  id: string;
  actor: string;
  origin: Origin;
  meshRunId: string;
  now: string;
  /** What the command's event ids derive from when not `id` (a start's: `startEventKey`). */
  eventKey?: string;
  /** The trace of the causing message: the events carry it on. */
  trace: HopTrace;
}

/**
 * Deterministic event ids per cause, scoped by the mesh run
 * (`mev<index>-<s|t|a>-<project>:mesh:<mesh run id>:<cause id>`): a redelivered start or turn
 * re-publishes the same ids (and `Nats-Msg-Id`s), and JetStream stores each event once.
 */
export function meshEventIds(ref: AggregateRef, kind: MeshCause['kind'], causeId: string): EventIds {
  const letter = kind === 'start' ? 's' : kind === 'turn' ? 't' : kind === 'answer' ? 'a' : 'x';
  return derivedEventIds('mev', letter, `${ref.project}:${ref.kind}:${ref.id}:${causeId}`);
}

/** Marks the rejection a turn's refusal becomes when it is returned rather than recorded ({@link MeshCommands.run}). */
const TURN_REFUSAL_RETURNED = 'turn_refusal_returned';

/**
 * The mesh decider, but a turn it would record as refused (a decision of one `mesh.turn_rejected`
 * of a turn) is returned as a rejection with the refusal's code and message, nothing appended:
 * the caller records it under its sender's budget (`RefusalBudget`).
 */
const meshDeciderReturningTurnRefusals: Decider<MeshCommand, MeshEvent, MeshState> = {
  ...meshDecider,
  decide: (command, state) => {
    const decided = meshDecider.decide(command, state);
    if (!decided.ok || decided.events.length !== 1) return decided;
    const [event] = decided.events;
    if (event?.type !== 'mesh.turn_rejected' || event.data.of !== 'turn') return decided;
    return reject(DomainErrorKind.wrongState, event.data.code, event.data.message, { [TURN_REFUSAL_RETURNED]: true });
  },
};

/** True for the rejection of a turn the mesh would record as refused, returned by `run(…, { turnRefusals: 'returned' })`. */
export function isReturnedTurnRefusal(error: DomainError): boolean {
  return error.details?.[TURN_REFUSAL_RETURNED] === true;
}

/**
 * Runs commands against the mesh aggregate through the event store (optimistic concurrency,
 * retried on conflicts; the folded state is rebuilt from the stream after a restart). Store
 * failures are thrown: the transport naks and redelivers the message.
 */
@Injectable()
export class MeshCommands {
  constructor(@Inject(RUNTIME) private readonly runtime: ServiceRuntime) {}

  /**
   * Run `command`. With `turnRefusals: 'returned'`, a turn the mesh refuses is not recorded but
   * returned as a rejection ({@link isReturnedTurnRefusal}), for its caller to record under its
   * sender's budget by running the command again without it.
   */
  run(
    ref: AggregateRef,
    command: MeshCommand,
    cause: MeshCause,
    options: { turnRefusals?: 'recorded' | 'returned' } = {},
  ): Promise<HandleCommandResult<MeshState>> {
    const decider = options.turnRefusals === 'returned' ? meshDeciderReturningTurnRefusals : meshDecider;
    return this.runtime.store.handleCommand<MeshCommand, MeshEvent, MeshState>(ref, decider, command, {
      occurredAt: cause.now,
      actor: cause.actor,
      origin: cause.origin,
      causationId: cause.id,
      correlationId: cause.meshRunId,
      ...meshEventIds(ref, cause.kind, cause.eventKey ?? cause.id),
      trace: cause.trace,
    });
  }
}
