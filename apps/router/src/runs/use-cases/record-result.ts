import type { HopTrace } from '@baton/eventstore';
import { Inject, Injectable } from '@nestjs/common';
import { InboxBodySchemas } from '@baton/contracts';
import { readTypedDecision } from '@baton/domain';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { nowIso } from '../../shared/ids';
import { decodeForSubject } from '../../shared/inbound';
import { HandoffClaims } from '../../shared/handoff-claims';
import { DispatchReactor } from '../../dispatch/dispatch-reactor';
import { RunCommands, runRef } from '../run-commands';
import { ROUTER_CONFIG, type RouterConfig } from '../../config';

/**
 * Use case: record an agent result from `<prefix>.in.<project>.result.<agent>` and route the run.
 *
 * - Bad input — over `Limits.maxMessageBytes`, malformed JSON, an `AgentResultSchema` violation,
 *   or subject tokens that disagree with the body's project / agent — throws a PoisonError: the
 *   original bytes are dead-lettered with the rejection code as reason and never retried.
 * - A result for a run that does not exist is dead-lettered (`not_found`): there is no run to
 *   record it on. Its letter is whole (redrive republishes it) within its sender's budget of
 *   letters; past it, it is counted in the sender's `refusals_suppressed` letter (`RefusedLetters`).
 *   Once its letter is stored the agent is told, on its `<agent inbox>.refused` (docs/runs.md rule
 *   3c; `RunCommands.applyInbound`): a result with a letter of its own is said, one only counted
 *   is not, so the notices share the letters' budget.
 * - A result the run refuses (unknown agent, a finished run, the wrong agent, a stale handoff, a
 *   result outside the current claim) is recorded on the run as `run.result_rejected` with the
 *   decider's code, and acknowledged: a business refusal is never retried, and never becomes a
 *   stop packet or an inbox item. A result of an agent the run does not wait for is recorded so
 *   only while the run holds fewer than `ROUTER_FOREIGN_REFUSALS_PER_RUN` refusals of that agent's
 *   (an agent may name any run of its project): past that it is dead-lettered
 *   `foreign_refusals_spent` under the sender's budget of letters, and the run is left alone.
 *   So are the run's own agent's past the same cap while the run waits for no result (held,
 *   stopped, finished, waiting for the customer): `idle_refusals_spent`. Either is said to the
 *   agent as `not_found` is, once its letter is stored. Not under a sender's
 *   budget of refusals (`RefusalBudget`), unlike customer messages and mesh turns: the run's own
 *   agent's refusals on its running turn are each recorded (its circuit and the loop guards read
 *   them, and the circuit stops the run after a few), and the others are bounded per run by that cap.
 * - The claim rule (issue 11, docs/runs.md): while the run is on a handoff, the result must name
 *   that `handoff_id` and the `claim_id` this agent holds on it now. The handoff the result names
 *   is read from the ledger's stream (read-only, {@link HandoffClaims}) just before deciding;
 *   `claim_required`, `stale_handoff`, `handoff_not_claimed` and `claim_mismatch` are refusals.
 *   A result the inbox stored before its claim's lease ran out is accepted under that claim even
 *   when the watchdog requeued it before the router read the result (rule 4b: `storedAt`).
 * - An unparseable sentinel is not a refusal: the routing domain applies the no-action default
 *   and keeps the parse diagnostic in the reason. Nor is a typed `decision` that breaks the
 *   contract (no action, `task` with `function_call`, an unknown status…): the result is recorded
 *   without it and the no-action default applies, its diagnostic in the reason.
 * - Otherwise `record_result` appends `run.result_recorded` and the routing outcome. Idempotent
 *   per `result_id`: a redelivered or republished result appends nothing. The hop's ledger
 *   requests then go at once (`DispatchReactor.dispatchAhead`), ahead of the events' deliveries.
 */
@Injectable()
export class RecordResultUseCase {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly runs: RunCommands,
    private readonly claims: HandoffClaims,
    private readonly dispatch: DispatchReactor,
    @Inject(ROUTER_CONFIG) private readonly config: RouterConfig,
  ) {}

  /** @param storedAt when the inbox stored the result (ISO): rule 4b (`checkResultClaim`) compares it with a lapsed claim's expiry. */
  async execute(subject: string, bytes: Uint8Array, trace: HopTrace, storedAt?: string): Promise<void> {
    // A typed decision that breaks the contract is the no-action default, not a refusal (seed 000 §5).
    const { result, signal } = readTypedDecision(decodeForSubject(this.runtime.config.BATON_PREFIX, subject, bytes, InboxBodySchemas.result));
    const log = this.runtime.logger.child({
      trace_id: trace.traceId,
      project: result.project,
      workflow_run_id: result.workflow_run_id,
      run_id: result.run_id,
      result_id: result.result_id,
      agent: result.agent,
    });
    // The handoff the result names, as the ledger has it now (the decider checks it is the run's).
    const handoff = result.handoff_id !== undefined ? await this.claims.view(result.project, result.handoff_id) : null;
    const now = nowIso();
    const ref = runRef(result.project, result.workflow_run_id);
    const outcome = await this.runs.applyInbound(
      ref,
      (definitions) => ({
        kind: 'result',
        result,
        ...(signal !== undefined ? { signal } : {}),
        definitions,
        metadata: { now, actor: result.agent },
        handoff,
        ...(storedAt !== undefined ? { storedAt } : {}),
        traceId: trace.traceId,
      }),
      { kind: 'result', id: result.result_id, actor: result.agent, origin: 'agent', workflowRunId: result.workflow_run_id, now, trace },
      {
        kind: 'result_refused',
        agent: result.agent,
        ...(result.handoff_id !== undefined ? { handoff_id: result.handoff_id } : {}),
        ...(result.claim_id !== undefined ? { claim_id: result.claim_id } : {}),
        foreignCap: this.config.ROUTER_FOREIGN_REFUSALS_PER_RUN,
      },
    );
    // The hop's ledger requests go now rather than when the events come back through the dispatch
    // reactor's consumer (which still delivers them, and asks only for what was not done) — for
    // events this call stored; a result recorded before (a redelivery) was dispatched then.
    if (outcome.applied)
      this.dispatch.dispatchAhead(
        ref,
        outcome.events.filter((e) => e.occurredAt === now),
        trace,
      );
    if (outcome.applied) log.info(outcome.events.length > 0 ? 'result recorded' : 'result already recorded', { events: outcome.events.map((e) => e.type) });
    else log.warn('result rejected', { code: outcome.code, reason: outcome.message });
  }
}
