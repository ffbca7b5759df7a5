import { Inject, Injectable } from '@nestjs/common';
import { RejectionCode } from '@baton/contracts';
import { RunErrorCode } from '@baton/domain';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { RunAnswerRequestSchema } from '@baton/contracts';
import { nowIso } from '../../shared/ids';
import { decodeOrPoison, poison } from '../../shared/inbound';
import { subjectTokens } from '../../shared/subjects';
import { RunCommands, runRef } from '../run-commands';
import { RouterRunErrorCode } from '../router-run.decider';

/** The `agent` a refused operator answer is recorded under in `run.result_rejected`. */
export const ANSWER_REFUSAL_AGENT = 'operator';

/**
 * Use case: apply an operator's answer from `<prefix>.in.<project>.answer` (`resume`).
 *
 * The body is a {@link RunAnswerRequestSchema}: the run, the `RunAnswer` (hold or stop answer)
 * and `actor_role`, which the publisher (the notifier, after authenticating the operator) sets;
 * only `operator` / `admin` may resume. Bad input is dead-lettered; an answer for a run that does
 * not exist is dead-lettered (`not_found`). An answer the run refuses (a viewer answering, a run
 * that is not held / stopped, an already answered or stale stop packet) is recorded on the run as
 * `run.result_rejected` (`result_id` = answer id, `agent` = `operator`) and acknowledged.
 * Idempotent per `answer_id`.
 */
@Injectable()
export class ResumeRunUseCase {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly runs: RunCommands,
  ) {}

  async execute(subject: string, bytes: Uint8Array): Promise<void> {
    const request = decodeOrPoison(bytes, RunAnswerRequestSchema);
    const tokens = subjectTokens(subject);
    if (tokens?.project !== request.project) {
      throw poison({ code: RejectionCode.schemaViolation, message: `the subject names project '${tokens?.project ?? '?'}', the body '${request.project}'` });
    }
    const answer = request.answer;
    const answerId = answer.answer.answer_id;
    const answeredBy = answer.answer.answered_by;
    const log = this.runtime.logger.child({ project: request.project, workflow_run_id: request.workflow_run_id, answer_id: answerId });
    const ref = runRef(request.project, request.workflow_run_id);
    const now = nowIso();
    const cause = { id: answerId, actor: answeredBy, origin: 'operator' as const, workflowRunId: request.workflow_run_id, now };
    const outcome = await this.runs.runWithDefinitions(
      ref,
      (definitions) => ({ kind: 'answer', answer, definitions, metadata: { now, actor: answeredBy, actorRole: request.actor_role } }),
      { ...cause, kind: 'answer' },
    );
    if (outcome.ok) {
      log.info(outcome.events.length > 0 ? 'run resumed' : 'answer already applied', { events: outcome.events.map((e) => e.type) });
      return;
    }
    const { error } = outcome;
    if (error.code === RunErrorCode.runNotFound) throw poison({ code: RejectionCode.notFound, message: error.message });
    if (error.code === RouterRunErrorCode.definitionMissing) throw poison({ code: RejectionCode.unknownWorkflow, message: error.message });

    const unrecordable = await this.runs.recordRefusal(
      ref,
      { result_id: answerId, agent: ANSWER_REFUSAL_AGENT, code: error.code, message: `answer ${answerId} by ${answeredBy}: ${error.message}` },
      { ...cause, kind: 'answer_refused' },
    );
    if (unrecordable !== null) throw poison({ code: unrecordable.code, message: unrecordable.message });
    log.warn('answer rejected', { code: error.code, reason: error.message });
  }
}
