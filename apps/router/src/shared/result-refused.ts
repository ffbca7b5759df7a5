import { resultRefusedSubject, type ResultRefused } from '@baton/contracts';
import { PoisonError } from '@baton/eventstore';
import type { JsonLogger, ServiceRuntime } from '@baton/platform';

/** A stored refusal of an agent's result or mesh turn, as the router's reactors are delivered it. */
export interface StoredRefusal {
  type: 'run.result_rejected' | 'mesh.turn_rejected';
  project: string;
  /** The run or the mesh run the refusal is recorded on (the aggregate's id). */
  runId: string;
  seq: number;
  occurredAt: string;
  payload: {
    result_id: string;
    agent: string;
    code: string;
    /** The refusal's words: kept on the event, never sent to the agent. */
    message?: string | undefined;
    /** `run.result_rejected`: what was refused (`result`, `answer`, `message`). */
    refused?: string | undefined;
    /** `mesh.turn_rejected`: what was refused (`turn`, `answer`). */
    of?: string | undefined;
    handoff_id?: string | undefined;
    claim_id?: string | undefined;
  };
}

/**
 * What the agent whose result (or mesh turn) a stored refusal refused is told
 * (`result-refused.json`), or null: the refusal is of an operator's answer or a customer's message
 * (they are no agent's), or was stored before it recorded what it refused. The agent is the one the
 * refusal recorded — the result's subject named it. Only the stable code goes out: the refusal's
 * words may describe a run the agent has no part in (an agent may name any run of its project).
 */
export function refusedResultNotice(refusal: StoredRefusal): ResultRefused | null {
  const p = refusal.payload;
  const of = refusal.type === 'run.result_rejected' ? (p.refused === 'result' ? 'result' : null) : p.of === 'turn' ? 'turn' : null;
  if (of === null) return null;
  return {
    project: refusal.project,
    agent: p.agent,
    of,
    workflow_run_id: refusal.runId,
    result_id: p.result_id,
    ...(p.handoff_id !== undefined ? { handoff_id: p.handoff_id } : {}),
    ...(p.claim_id !== undefined ? { claim_id: p.claim_id } : {}),
    code: p.code,
    seq: refusal.seq,
    at: refusal.occurredAt,
  };
}

/**
 * Say a stored refusal to the agent whose result it refused: a core message on its own
 * `<agent inbox>.refused` (docs/runs.md rule 3c), which only that agent reads. A hint, as the
 * ledger's claim-withdrawn notice is: sent again when the event is delivered again, never retried,
 * lost while no process of the agent listens; the event stays the record.
 */
export function sayResultRefused(runtime: ServiceRuntime, refusal: StoredRefusal, log: JsonLogger): void {
  const notice = refusedResultNotice(refusal);
  if (notice !== null) tellResultRefused(runtime, notice, log);
}

/** An agent's result (or mesh turn) the router refused without recording the refusal on its run (or mesh): dead-lettered instead. */
export interface LetteredResult {
  /** What was refused: a workflow run's result (the default) or a mesh turn (`workflow_run_id` is then the mesh run). */
  of?: ResultRefused['of'];
  project: string;
  /** The agent that published it: the result's subject named it (the body was checked against it). */
  agent: string;
  workflow_run_id: string;
  result_id: string;
  handoff_id?: string | undefined;
  claim_id?: string | undefined;
}

/**
 * What the agent whose result was dead-lettered instead of refused on its run is told: the result
 * named a run that does not exist (`not_found`), or one that holds its cap of this agent's refusals
 * (`foreign_refusals_spent`, `idle_refusals_spent`: docs/runs.md rule 3b); or whose mesh turn named
 * a mesh run that does not exist (`of: turn`, `not_found`). No event records it, so
 * `seq` is the result's own sequence in the inbox stream — the letter's `Baton-Dlq-Seq` — and `at`
 * when the router refused it.
 */
export function letteredResultNotice(result: LetteredResult, code: string, stored: { seq: number }, at: string): ResultRefused {
  return {
    project: result.project,
    agent: result.agent,
    of: result.of ?? 'result',
    workflow_run_id: result.workflow_run_id,
    result_id: result.result_id,
    ...(result.handoff_id !== undefined ? { handoff_id: result.handoff_id } : {}),
    ...(result.claim_id !== undefined ? { claim_id: result.claim_id } : {}),
    code,
    seq: stored.seq,
    at,
  };
}

/**
 * Say a dead-lettered result's refusal to the agent that published it, as {@link sayResultRefused}
 * says a recorded one — called once the result's own letter is stored (`PoisonError.lettered`), so
 * the notices go under the sender's budget of letters (`RefusedLetters`): past it the result is
 * only counted in the sender's `refusals_suppressed` letter, and nothing is said. A flood of
 * results naming made-up runs is no flood of notices.
 */
export function sayLetteredResultRefused(
  runtime: ServiceRuntime,
  result: LetteredResult,
  code: string,
  stored: { seq: number },
  at: string,
  log: JsonLogger,
): void {
  tellResultRefused(runtime, letteredResultNotice(result, code, stored, at), log);
}

/**
 * The poison error that dead-letters `result` (a result or mesh turn refused `code` with no run or
 * mesh to record it on) and, once the runner has stored its own letter, tells its agent
 * ({@link sayLetteredResultRefused}); past the sender's budget of letters nothing is said.
 */
export function letteredRefusal(runtime: ServiceRuntime, result: LetteredResult, code: string, message: string, at: string, log: JsonLogger): PoisonError {
  return new PoisonError(`${code}: ${message}`, code, { lettered: (stored) => sayLetteredResultRefused(runtime, result, code, stored, at, log) });
}

/** Publish `notice` on its agent's `<agent inbox>.refused`: a hint, never retried, never thrown. */
function tellResultRefused(runtime: ServiceRuntime, notice: ResultRefused, log: JsonLogger): void {
  try {
    runtime.nats.connection.publish(resultRefusedSubject(runtime.config.BATON_PREFIX, notice.project, notice.agent), JSON.stringify(notice));
  } catch (error) {
    log.debug('could not tell the agent its result was refused (the refusal is recorded)', { result_id: notice.result_id, reason: String(error) });
  }
}
