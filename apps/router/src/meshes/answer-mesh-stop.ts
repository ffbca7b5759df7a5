import type { HopTrace } from '@baton/eventstore';
import { Inject, Injectable } from '@nestjs/common';
import { InboxBodySchemas, RejectionCode } from '@baton/contracts';
import { MeshErrorCode } from '@baton/domain';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { nowIso } from '../shared/ids';
import { decodeForSubject, poison } from '../shared/inbound';
import { MeshCommands, meshRef } from './mesh-commands';
import { meshSubjectTokens } from './mesh-subjects';

/**
 * Use case: apply an operator's answer to a mesh's stop packet from
 * `<prefix>.in.<project>.mesh_answer` (body `MeshAnswerRequestSchema`; `actor_role` is set by
 * the publisher — the notifier — after it authenticated the person).
 *
 * Runs `answer_stop` (idempotent per `answer_id`; the checks are the domain's `decideResume`,
 * exactly as for runs): `raise_cap` continues the mesh with the higher cap (`mesh.stop_answered`,
 * then `mesh.handed_off` to the agent the refused handoff named, which the mesh reactor offers
 * through the ledger); `deny` / `acknowledge` end it (`mesh.terminated`). An answer the mesh
 * refuses (a viewer, a stale or already answered packet, a cap not raised) is recorded on the mesh
 * as `mesh.turn_rejected` (agent `operator`) and acknowledged. Bad input, a subject/body project
 * mismatch and an answer for an unknown mesh (`not_found`) are dead-lettered; store failures are
 * retried.
 */
@Injectable()
export class AnswerMeshStopUseCase {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly meshes: MeshCommands,
  ) {}

  async execute(subject: string, bytes: Uint8Array, trace: HopTrace): Promise<void> {
    const request = decodeForSubject(this.runtime.config.BATON_PREFIX, subject, bytes, InboxBodySchemas.mesh_answer, meshSubjectTokens);
    const answer = request.answer;
    const log = this.runtime.logger.child({
      trace_id: trace.traceId,
      project: request.project,
      mesh_run_id: request.mesh_run_id,
      answer_id: answer.answer_id,
      packet_id: answer.packet_id,
    });
    const now = nowIso();
    const outcome = await this.meshes.run(
      meshRef(request.project, request.mesh_run_id),
      { type: 'answer_stop', data: { answer }, metadata: { now, actor: answer.answered_by, actorRole: request.actor_role } },
      { kind: 'answer', id: answer.answer_id, actor: answer.answered_by, origin: 'operator', meshRunId: request.mesh_run_id, now, trace },
    );
    if (!outcome.ok) {
      const code = outcome.error.code === MeshErrorCode.meshNotFound ? RejectionCode.notFound : outcome.error.code;
      log.warn('mesh answer refused', { code, reason: outcome.error.message });
      throw poison({ code, message: outcome.error.message });
    }
    const types = outcome.events.map((e) => e.type);
    if (types.includes('mesh.turn_rejected')) log.warn('mesh answer rejected', { events: types });
    else log.info(types.length > 0 ? 'mesh stop answered' : 'mesh answer already applied', { events: types });
  }
}
