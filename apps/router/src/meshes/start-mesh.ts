import type { HopTrace } from '@baton/eventstore';
import { Inject, Injectable } from '@nestjs/common';
import { InboxBodySchemas, resolveLead } from '@baton/contracts';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { DefinitionCatalog } from '../definitions/definition-catalog';
import { nowIso, startEventKey } from '../shared/ids';
import { decodeForSubject, poison } from '../shared/inbound';
import { startActorOf } from '../shared/subjects';
import { MeshCommands, meshRef } from './mesh-commands';
import { meshSubjectTokens } from './mesh-subjects';

/**
 * Use case: start a mesh run from `<prefix>.in.<project>.mesh_start` (actor `project-client`) or
 * `…mesh_start.<agent>` (actor: that agent; {@link startActorOf}).
 *
 * Decodes a MeshStartRequest (size cap, JSON, schema, the subject's project), finds the mesh in
 * the project's current definition (re-read, so a definition published just before is seen) and
 * runs `start_mesh`: `mesh.started` pins the mesh and names the entry agent's handoff (the mesh
 * reactor asks the ledger for it). The person a stop notifies is `started_by`, else the project's
 * `lead` when it is a person (not an agent); with neither the start is refused
 * (`no_notice_recipient`). Idempotent by `mesh_run_id`. Bad input, an unknown mesh, a mesh that
 * does not build or has nobody to notify is dead-lettered with its reason; store failures are retried.
 */
@Injectable()
export class StartMeshUseCase {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly catalog: DefinitionCatalog,
    private readonly meshes: MeshCommands,
  ) {}

  async execute(subject: string, bytes: Uint8Array, trace: HopTrace): Promise<void> {
    const request = decodeForSubject(this.runtime.config.BATON_PREFIX, subject, bytes, InboxBodySchemas.mesh_start, meshSubjectTokens);
    const log = this.runtime.logger.child({ trace_id: trace.traceId, project: request.project, mesh_run_id: request.mesh_run_id, mesh: request.mesh });
    const definitions = await this.catalog.load(request.project, { fresh: true });
    const current = definitions.published[definitions.published.length - 1]?.definition;
    const mesh = (current?.meshes ?? []).find((candidate) => candidate.name === request.mesh);
    if (current === undefined || mesh === undefined) {
      throw poison({
        code: 'unknown_mesh',
        message:
          current === undefined
            ? `project '${request.project}' has no published definition`
            : `mesh '${request.mesh}' is not defined in project '${request.project}'`,
      });
    }
    const now = nowIso();
    // Identity from the subject, never the body: the agent `…start.<agent>` names, else a client of the project.
    const actor = startActorOf(this.runtime.config.BATON_PREFIX, subject);
    const lead = resolveLead(current);
    const outcome = await this.meshes.run(
      meshRef(request.project, request.mesh_run_id),
      {
        type: 'start_mesh',
        data: {
          mesh_run_id: request.mesh_run_id,
          project: request.project,
          mesh,
          agents: current.agents.map((agent) => agent.name),
          ...(request.input !== undefined ? { input: request.input } : {}),
          ...(request.started_by !== undefined ? { started_by: request.started_by } : {}),
          ...(lead?.kind === 'person' ? { lead: lead.handle } : {}),
          ...(request.variables !== undefined ? { variables: request.variables } : {}),
        },
        metadata: { now, actor },
      },
      {
        kind: 'start',
        id: request.mesh_run_id,
        actor,
        origin: 'agent',
        meshRunId: request.mesh_run_id,
        now,
        trace,
        // What makes it this start (the decider's "same start" test): another start under the id is decided, not completed as this one.
        eventKey: startEventKey(request.mesh_run_id, [request.mesh, request.input, request.started_by]),
      },
    );
    if (!outcome.ok) {
      log.warn('mesh start refused', { code: outcome.error.code, reason: outcome.error.message });
      throw poison({ code: outcome.error.code, message: outcome.error.message });
    }
    log.info(outcome.events.length > 0 ? 'mesh started' : 'mesh already started', { entry: mesh.entry });
  }
}
