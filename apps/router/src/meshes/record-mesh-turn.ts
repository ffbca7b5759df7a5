import type { HopTrace } from '@baton/eventstore';
import { Inject, Injectable } from '@nestjs/common';
import { InboxBodySchemas, RejectionCode } from '@baton/contracts';
import { MeshErrorCode, type MeshCommand } from '@baton/domain';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { HandoffClaims } from '../shared/handoff-claims';
import { nowIso } from '../shared/ids';
import { decodeForSubject, poison } from '../shared/inbound';
import { RefusalBudget, type InboundOrigin } from '../shared/refusal-budget';
import { letteredRefusal } from '../shared/result-refused';
import { isReturnedTurnRefusal, MeshCommands, meshRef, type MeshCause } from './mesh-commands';
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
 * `mesh.turn_rejected` while its sender's budget of refusals lasts (`RefusalBudget`: the subject's
 * `<project>/<agent>`); past it the refusal is only counted in its `refusals_suppressed` letter and
 * the mesh is left alone. Bad input and turns for an unknown mesh are dead-lettered (`not_found`
 * under the sender's budget of letters); a turn for an unknown mesh is said to its agent once its
 * own letter is stored (`sayLetteredResultRefused`, `of: turn`: docs/runs.md rule 3c), nothing of
 * one only counted past the budget. Store failures are retried.
 */
@Injectable()
export class RecordMeshTurnUseCase {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly meshes: MeshCommands,
    private readonly claims: HandoffClaims,
    private readonly budget: RefusalBudget,
  ) {}

  /**
   * @param storedAt when the inbox stored the result (ISO): rule 4b (`checkResultClaim`).
   * @param origin the turn's stream and sequence and the consumer's source: its refusal is recorded under its sender's budget.
   */
  async execute(subject: string, bytes: Uint8Array, trace: HopTrace, storedAt?: string, origin?: InboundOrigin): Promise<void> {
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
    const ref = meshRef(result.project, result.workflow_run_id);
    const command: MeshCommand = {
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
    };
    const cause: MeshCause = { kind: 'turn', id: result.result_id, actor: result.agent, origin: 'agent', meshRunId: result.workflow_run_id, now, trace };
    let outcome = await this.meshes.run(ref, command, cause, { turnRefusals: 'returned' });
    if (!outcome.ok && isReturnedTurnRefusal(outcome.error)) {
      // Each refusal recorded is an event on the mesh, and an agent can have one refused at will: under its budget.
      const refusal = outcome.error;
      const budgeted = await this.budget.record(origin, refusal.code, () => this.meshes.run(ref, command, cause));
      if (budgeted.outcome === 'suppressed') {
        log.warn('mesh turn refused, over its sender`s budget: not recorded on the mesh', { code: refusal.code, reason: refusal.message });
        return;
      }
      outcome = budgeted.value;
    }
    if (!outcome.ok) {
      if (outcome.error.code !== MeshErrorCode.meshNotFound) {
        log.warn('mesh turn refused', { code: outcome.error.code, reason: outcome.error.message });
        throw poison({ code: outcome.error.code, message: outcome.error.message });
      }
      // No mesh to record the refusal on: the turn's letter is its record, and once that letter is
      // stored (under its sender's budget of letters) the agent is told, as of a workflow result
      // naming no run (docs/runs.md rule 3c).
      const code = RejectionCode.notFound;
      const message = outcome.error.message;
      log.warn('mesh turn refused', { code, reason: message });
      throw letteredRefusal(
        this.runtime,
        {
          of: 'turn',
          project: result.project,
          agent: result.agent,
          workflow_run_id: result.workflow_run_id,
          result_id: result.result_id,
          handoff_id: result.handoff_id,
          claim_id: result.claim_id,
        },
        code,
        message,
        now,
        log,
      );
    }
    log.info(outcome.events.length > 0 ? 'mesh turn recorded' : 'mesh turn already recorded', { events: outcome.events.map((e) => e.type) });
  }
}
