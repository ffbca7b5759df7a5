import type { HopTrace } from '@baton/eventstore';
import { Inject, Injectable } from '@nestjs/common';
import { ADMIN_ACTOR, InboxBodySchemas, RejectionCode, ServiceActors } from '@baton/contracts';
import { RunErrorCode } from '@baton/domain';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { MeshCommands, meshRef } from '../../meshes/mesh-commands';
import { nowIso } from '../../shared/ids';
import { decodeForSubject, poison } from '../../shared/inbound';
import { RunCommands, runRef } from '../run-commands';

/**
 * Use case: stop a run from outside, from `<prefix>.in.<project>.stop` (the watchdog asks when a
 * handoff of the run hit its retry cap with nobody to escalate to, or a loop guard fired).
 *
 * Runs the run aggregate's `stop` command: `run.stopped` with a packet built by `buildStop`, and
 * one human action notice; a stop asked for an escalated handoff records that handoff (`escalation`). Idempotent by `packet_id`: a redelivered request stops the run once.
 * A run that already finished or is already stopped refuses; that is expected (the request came
 * late) and is logged, not retried. A request whose id names no run but a mesh run (a mesh turn's
 * handoff escalated: its workflow_run_id is the mesh run) stops the mesh (`stop_mesh`). Bad input,
 * and ids that name neither, are dead-lettered.
 */
@Injectable()
export class StopRunUseCase {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly runs: RunCommands,
    private readonly meshes: MeshCommands,
  ) {}

  async execute(subject: string, bytes: Uint8Array, trace: HopTrace): Promise<void> {
    const request = decodeForSubject(this.runtime.config.BATON_PREFIX, subject, bytes, InboxBodySchemas.stop);
    const log = this.runtime.logger.child({
      trace_id: trace.traceId,
      project: request.project,
      workflow_run_id: request.workflow_run_id,
      packet_id: request.packet_id,
    });
    const now = nowIso();
    // The watchdog's request names the escalated handoff it stops the run for (only the watchdog
    // may publish on this subject): recorded on the stop, so the inbox can close its escalation item.
    const cause = request.cause;
    const escalation =
      cause?.kind === 'handoff_escalated'
        ? {
            project: cause.project ?? request.project,
            handoff_id: cause.handoff_id,
            ...(cause.consult_handoff_id !== undefined ? { consult_handoff_id: cause.consult_handoff_id } : {}),
          }
        : undefined;
    // Who sent it is decided by the subject, never by the body: only the watchdog and the admin may
    // publish here (docs/identity.md, enforced by nats-server), so the actor is one of those two. A
    // request naming the watchdog is the watchdog's (baton-watchdog, origin watchdog: only the
    // admin, who may write any event, could name it falsely); any other is the admin connection's
    // (actor `admin`, origin operator), and the person it names is a claim, `on_behalf_of`, never
    // the actor. `requested_by` is an actor name (StopRunRequestSchema).
    const { actor, origin, on_behalf_of } = stopSender(request.requested_by);
    // What the packet is built from, for a run or (below) a mesh. The packet links the trace the
    // request came in (the event that tripped the watchdog's guard or escalation continues in it).
    const facts = {
      packet_id: request.packet_id,
      why: request.why,
      tried: request.tried,
      trace_ids: [trace.traceId],
      ...(request.detail !== undefined ? { detail: request.detail } : {}),
      ...(request.cap !== undefined ? { cap: request.cap } : {}),
      ...(on_behalf_of !== undefined ? { on_behalf_of } : {}),
    };
    // A circuit's stop is about the agent whose circuit opened: the packet names it, not the agent
    // the run happens to wait for (docs/governance.md, circuit per agent).
    const agent = cause?.kind === 'loop_guard' ? cause.agent : undefined;
    const outcome = await this.runs.run(
      runRef(request.project, request.workflow_run_id),
      {
        kind: 'stop',
        command: {
          type: 'stop',
          data: { ...facts, ...(escalation !== undefined ? { escalation } : {}), ...(agent !== undefined ? { agent } : {}) },
          metadata: { now, actor },
        },
      },
      { kind: 'stop', id: request.packet_id, actor, origin, workflowRunId: request.workflow_run_id, now, trace },
    );
    if (outcome.ok) {
      log.info(outcome.events.length > 0 ? 'run stopped' : 'stop already applied', { why: request.why });
      return;
    }
    if (outcome.error.code === RunErrorCode.runNotFound) {
      // The watchdog stops what a handoff belongs to by its workflow_run_id, which for a mesh turn's
      // handoff is the mesh run: a turn escalated with nobody to take it stops the mesh.
      const mesh = await this.meshes.run(
        meshRef(request.project, request.workflow_run_id),
        {
          type: 'stop_mesh',
          data: { ...facts, ...(agent !== undefined ? { agent } : {}) },
          metadata: { now, actor },
        },
        { kind: 'stop', id: request.packet_id, actor, origin, meshRunId: request.workflow_run_id, now, trace },
      );
      if (mesh.ok) {
        log.info(mesh.events.length > 0 ? 'mesh stopped' : 'mesh stop already applied or not needed', { why: request.why });
        return;
      }
      throw poison({ code: RejectionCode.notFound, message: `${outcome.error.message}; no mesh run of that id either` });
    }
    log.warn('stop request refused', { code: outcome.error.code, reason: outcome.error.message });
  }
}

/**
 * Who sent a stop request, from what may publish `<prefix>.in.<project>.stop` (the watchdog and the
 * admin) and the body's `requested_by`: the watchdog when it names the watchdog, else the admin
 * connection, the name it gives (other than `admin`) kept as `on_behalf_of`, a claim.
 */
export function stopSender(requestedBy: string): { actor: string; origin: 'watchdog' | 'operator'; on_behalf_of?: string } {
  if (requestedBy === ServiceActors.watchdog.actor) return { actor: ServiceActors.watchdog.actor, origin: 'watchdog' };
  return { actor: ADMIN_ACTOR, origin: 'operator', ...(requestedBy !== ADMIN_ACTOR ? { on_behalf_of: requestedBy } : {}) };
}
