import { Inject, Injectable } from '@nestjs/common';
import { RejectionCode, SessionMessageSchema } from '@baton/contracts';
import { RunErrorCode } from '@baton/domain';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { nowIso } from '../../shared/ids';
import { decodeOrPoison, poison } from '../../shared/inbound';
import { subjectTokens } from '../../shared/subjects';
import { RunCommands, runRef } from '../run-commands';
import { RouterRunErrorCode } from '../router-run.decider';

/** The `agent` a refused customer message is recorded under in `run.result_rejected`. */
export const MESSAGE_REFUSAL_AGENT = 'customer';

/**
 * Use case: a customer turn of a conversation run from `<prefix>.in.<project>.message`
 * (seed 001). Decodes a {@link SessionMessageSchema} (size cap, JSON, schema, the subject's
 * project), then runs `session_message` on the run over its pinned definition: the message is
 * recorded (`run.message_received`) and the active agent's WHEN routes are evaluated before any
 * model runs — a route fires (`run.handoff` + `run.routed`), a child hands back, or the message
 * goes to the active agent (`run.routed`, rule `message`). Bad input and unknown runs are
 * dead-lettered; a refused message (the agent is still working, the run is finished) is recorded
 * as `run.result_rejected` (`result_id` = message id, agent `customer`). Idempotent per
 * `message_id`.
 */
@Injectable()
export class SessionMessageUseCase {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly runs: RunCommands,
  ) {}

  async execute(subject: string, bytes: Uint8Array): Promise<void> {
    const message = decodeOrPoison(bytes, SessionMessageSchema);
    const tokens = subjectTokens(subject);
    if (tokens?.project !== message.project) {
      throw poison({ code: RejectionCode.schemaViolation, message: `the subject names project '${tokens?.project ?? '?'}', the body '${message.project}'` });
    }
    const log = this.runtime.logger.child({ project: message.project, workflow_run_id: message.workflow_run_id, message_id: message.message_id });
    const ref = runRef(message.project, message.workflow_run_id);
    const now = nowIso();
    const actor = message.sent_by ?? MESSAGE_REFUSAL_AGENT;
    const cause = { id: message.message_id, actor, origin: 'human' as const, workflowRunId: message.workflow_run_id, now };
    const outcome = await this.runs.runWithDefinitions(
      ref,
      (definitions) => ({ kind: 'message', message: { message_id: message.message_id, text: message.text }, definitions, metadata: { now, actor } }),
      { ...cause, kind: 'message' },
    );
    if (outcome.ok) {
      log.info(outcome.events.length > 0 ? 'customer message applied' : 'customer message already applied', { events: outcome.events.map((e) => e.type) });
      return;
    }
    const { error } = outcome;
    if (error.code === RunErrorCode.runNotFound) throw poison({ code: RejectionCode.notFound, message: error.message });
    if (error.code === RouterRunErrorCode.definitionMissing) throw poison({ code: RejectionCode.unknownWorkflow, message: error.message });
    const unrecordable = await this.runs.recordRefusal(
      ref,
      { result_id: message.message_id, agent: MESSAGE_REFUSAL_AGENT, code: error.code, message: `customer message ${message.message_id}: ${error.message}` },
      { ...cause, kind: 'message_refused' },
    );
    if (unrecordable !== null) throw poison({ code: unrecordable.code, message: unrecordable.message });
    log.warn('customer message rejected', { code: error.code, reason: error.message });
  }
}
