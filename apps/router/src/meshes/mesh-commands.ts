import { Inject, Injectable } from '@nestjs/common';
import type { MeshEvent, Origin } from '@baton/contracts';
import { meshDecider, type MeshCommand, type MeshState } from '@baton/domain';
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

/**
 * Runs commands against the mesh aggregate through the event store (optimistic concurrency,
 * retried on conflicts; the folded state is rebuilt from the stream after a restart). Store
 * failures are thrown: the transport naks and redelivers the message.
 */
@Injectable()
export class MeshCommands {
  constructor(@Inject(RUNTIME) private readonly runtime: ServiceRuntime) {}

  run(ref: AggregateRef, command: MeshCommand, cause: MeshCause): Promise<HandleCommandResult<MeshState>> {
    return this.runtime.store.handleCommand<MeshCommand, MeshEvent, MeshState>(ref, meshDecider, command, {
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
