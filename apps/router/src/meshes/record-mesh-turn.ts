import type { HopTrace } from '@baton/eventstore';
import { Inject, Injectable } from '@nestjs/common';
import { InboxBodySchemas, RejectionCode } from '@baton/contracts';
import { MeshErrorCode } from '@baton/domain';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { HandoffClaims } from '../shared/handoff-claims';
import { nowIso } from '../shared/ids';
import { decodeForSubject, poison } from '../shared/inbound';
import { MeshCommands, meshRef } from './mesh-commands';
import { meshSubjectTokens } from './mesh-subjects';

/**
 * Use case: record an agent's mesh turn from `<prefix>.in.<project>.mesh_result.<agent>`.
 *
 * The body is an AgentResult whose `workflow_run_id` is the mesh run and whose
 * `handoff_tool_calls` are the turn's calls; the subject's project and agent must match the
 * body's. Runs `record_turn` (idempotent per `result_id`): the decider routes on the last valid
 * handoff call, records ignored calls, completes the mesh on a turn without one and stops it
 * (why `thrash`) at the iteration cap. Every turn is offered as a handoff, so the claim rule applies
 * (docs/runs.md): the turn must name the current turn's `handoff_id` and the `claim_id` the speaker
 * holds on it now, read from the ledger's stream just before deciding. A turn the mesh refuses
 * (wrong speaker, outside the current claim, mesh ended) is recorded on the mesh as
 * `mesh.turn_rejected`. Bad input and turns for an unknown
 * mesh are dead-lettered; store failures are retried.
 */
@Injectable()
export class RecordMeshTurnUseCase {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly meshes: MeshCommands,
    private readonly claims: HandoffClaims,
  ) {}

  /** @param storedAt when the inbox stored the result (ISO): rule 4b (`checkResultClaim`). */
  async execute(subject: string, bytes: Uint8Array, trace: HopTrace, storedAt?: string): Promise<void> {
    const result = decodeForSubject(this.runtime.config.BATON_PREFIX, subject, bytes, InboxBodySchemas.mesh_result, meshSubjectTokens);
    const log = this.runtime.logger.child({
      trace_id: trace.traceId,
      project: result.project,
      mesh_run_id: result.workflow_run_id,
      result_id: result.result_id,
      agent: result.agent,
    });
    const handoff = result.handoff_id !== undefined ? await this.claims.view(result.project, result.handoff_id) : null;
    const now = nowIso();
    const outcome = await this.meshes.run(
      meshRef(result.project, result.workflow_run_id),
      {
        type: 'record_turn',
        data: {
          result_id: result.result_id,
          run_id: result.run_id,
          agent: result.agent,
          text: result.body ?? result.deliverable ?? '',
          handoff_tool_calls: result.handoff_tool_calls ?? [],
          ...(result.evidence !== undefined ? { evidence: result.evidence } : {}),
          ...(result.handoff_id !== undefined ? { handoff_id: result.handoff_id } : {}),
          ...(result.claim_id !== undefined ? { claim_id: result.claim_id } : {}),
          handoff,
          ...(storedAt !== undefined ? { stored_at: storedAt } : {}),
          // An agent's stop signal stops the mesh for a person, with its packet (docs/meshes.md).
          ...(result.stop !== undefined ? { stop: result.stop } : {}),
          ...(result.tried !== undefined ? { tried: result.tried } : {}),
          ...(result.pending_tool_call != null ? { pending_tool_call: result.pending_tool_call } : {}),
          trace_id: trace.traceId,
        },
        metadata: { now, actor: result.agent },
      },
      { kind: 'turn', id: result.result_id, actor: result.agent, origin: 'agent', meshRunId: result.workflow_run_id, now, trace },
    );
    if (!outcome.ok) {
      const code = outcome.error.code === MeshErrorCode.meshNotFound ? RejectionCode.notFound : outcome.error.code;
      log.warn('mesh turn refused', { code, reason: outcome.error.message });
      throw poison({ code, message: outcome.error.message });
    }
    log.info(outcome.events.length > 0 ? 'mesh turn recorded' : 'mesh turn already recorded', { events: outcome.events.map((e) => e.type) });
  }
}
