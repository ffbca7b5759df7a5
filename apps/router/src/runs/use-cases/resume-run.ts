import type { HopTrace } from '@baton/eventstore';
import { Inject, Injectable } from '@nestjs/common';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { InboxBodySchemas } from '@baton/contracts';
import { nowIso } from '../../shared/ids';
import { decodeForSubject } from '../../shared/inbound';
import { RunCommands, runRef } from '../run-commands';

/** The `agent` a refused operator answer is recorded under in `run.result_rejected`. */
export const ANSWER_REFUSAL_AGENT = 'operator';

/**
 * Use case: apply an operator's answer from `<prefix>.in.<project>.answer` (`resume`).
 *
 * The body is a `RunAnswerRequestSchema`: the run, the `RunAnswer` (hold or stop answer)
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

  async execute(subject: string, bytes: Uint8Array, trace: HopTrace): Promise<void> {
    const request = decodeForSubject(this.runtime.config.BATON_PREFIX, subject, bytes, InboxBodySchemas.answer);
    const answer = request.answer;
    const answerId = answer.answer.answer_id;
    const answeredBy = answer.answer.answered_by;
    const log = this.runtime.logger.child({ trace_id: trace.traceId, project: request.project, workflow_run_id: request.workflow_run_id, answer_id: answerId });
    const now = nowIso();
    const outcome = await this.runs.applyInbound(
      runRef(request.project, request.workflow_run_id),
      (definitions) => ({ kind: 'answer', answer, definitions, metadata: { now, actor: answeredBy, actorRole: request.actor_role } }),
      { kind: 'answer', id: answerId, actor: answeredBy, origin: 'operator', workflowRunId: request.workflow_run_id, now, trace },
      { kind: 'answer_refused', agent: ANSWER_REFUSAL_AGENT, describe: (message) => `answer ${answerId} by ${answeredBy}: ${message}` },
    );
    if (outcome.applied) log.info(outcome.events.length > 0 ? 'run resumed' : 'answer already applied', { events: outcome.events.map((e) => e.type) });
    else log.warn('answer rejected', { code: outcome.code, reason: outcome.message });
  }
}
