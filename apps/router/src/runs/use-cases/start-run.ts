import type { HopTrace } from '@baton/eventstore';
import { Inject, Injectable } from '@nestjs/common';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { InboxBodySchemas } from '@baton/contracts';
import { DefinitionCatalog } from '../../definitions/definition-catalog';
import { digestOf, workflowForStart } from '../../definitions/definition.decider';
import { nowIso, startEventKey } from '../../shared/ids';
import { decodeForSubject, poison } from '../../shared/inbound';
import { startActorOf } from '../../shared/subjects';
import { RunCommands, runRef } from '../run-commands';

/**
 * Use case: start a workflow run from `<prefix>.in.<project>.start` (actor `project-client`) or
 * `<prefix>.in.<project>.start.<agent>` (actor: that agent; {@link startActorOf}).
 *
 * Decodes a `StartRunRequestSchema` body (size cap, JSON, schema, the subject's project),
 * resolves the workflow from the project's current definition (re-read, so a definition
 * published just before the start is seen; `workflow_version` pins an older one), and runs
 * `start_run` on the run aggregate (id = workflow_run_id): `run.started` then `run.routed` to the
 * entry step's agent. Idempotent: a start delivered twice starts one run. Bad input, an unknown
 * workflow or a refused start throws a PoisonError (dead letter with the reason and the original
 * bytes); store failures propagate (nak, redelivery).
 */
@Injectable()
export class StartRunUseCase {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly catalog: DefinitionCatalog,
    private readonly runs: RunCommands,
  ) {}

  async execute(subject: string, bytes: Uint8Array, trace: HopTrace): Promise<void> {
    const request = decodeForSubject(this.runtime.config.BATON_PREFIX, subject, bytes, InboxBodySchemas.start);
    const log = this.runtime.logger.child({ trace_id: trace.traceId, project: request.project, workflow_run_id: request.workflow_run_id });
    const definitions = await this.catalog.load(request.project, { fresh: true });
    const pinned = workflowForStart(definitions, request.workflow, request.workflow_version);
    if (pinned === undefined) {
      const version = request.workflow_version === undefined ? '' : ` v${request.workflow_version}`;
      throw poison({
        code: 'unknown_workflow',
        message:
          definitions.published.length === 0
            ? `project '${request.project}' has no published definition`
            : `workflow '${request.workflow}'${version} is not defined in project '${request.project}'`,
      });
    }
    const now = nowIso();
    // Identity from the subject, never the body: the agent `…start.<agent>` names, else a client of the project.
    const actor = startActorOf(this.runtime.config.BATON_PREFIX, subject);
    const variables = { ...(request.variables ?? {}), ...(request.input !== undefined ? { input: request.input } : {}) };
    const outcome = await this.runs.run(
      runRef(request.project, request.workflow_run_id),
      {
        kind: 'start',
        command: {
          type: 'start_run',
          data: {
            workflow_run_id: request.workflow_run_id,
            project: request.project,
            workflow: pinned.workflow,
            people: {
              started_by: request.started_by ?? null,
              issue_author: request.issue_author ?? null,
              trigger_author: request.trigger_author ?? null,
            },
            variables,
            // Conversation runs (seed 001): the input is the first customer message, routed by
            // the entry agent's WHEN routes; the run is pinned to this exact definition.
            agents: pinned.agents,
            ...(request.input !== undefined ? { input: request.input } : {}),
            ...(digestOf(definitions, pinned) !== undefined ? { definition_digest: digestOf(definitions, pinned) } : {}),
          },
          metadata: { now, actor },
        },
      },
      {
        kind: 'start',
        id: request.workflow_run_id,
        actor,
        origin: 'agent',
        workflowRunId: request.workflow_run_id,
        now,
        trace,
        // What makes it this start (the decider's own test of "the same start again"): another start under the id is decided, not completed as this one.
        eventKey: startEventKey(request.workflow_run_id, [pinned.workflow.name, request.started_by, request.issue_author, request.trigger_author]),
      },
    );
    if (!outcome.ok) {
      log.warn('run start refused', { code: outcome.error.code, reason: outcome.error.message });
      throw poison({ code: outcome.error.code, message: outcome.error.message });
    }
    log.info(outcome.events.length > 0 ? 'run started' : 'run already started', {
      workflow: `${pinned.workflow.name}@${pinned.workflow.version}`,
      event_ids: outcome.events.map((e) => e.id),
    });
  }
}
