import { z } from 'zod';
import { AgentNameSchema, IdSchema, ProjectIdSchema } from './common';
import { inboxPrefixOf } from './principal';

/*
 * A result the router refused — a workflow run's (`run.result_rejected`) or a mesh turn
 * (`mesh.turn_rejected`) — is said to the agent that published it, on a core NATS subject under
 * that agent's own inbox prefix (the family of its claim-withdrawn notices, claim-withdrawn.ts):
 * only that agent reads it, only Baton's services (and the admin) write it. The router's reactors
 * send it once the refusal is stored (and its results consumer, for a result dead-lettered instead
 * of refused on its run, once the letter is stored), so an agent learns it without reading the run or the mesh,
 * which its credentials do not allow. A hint like the withdrawn notice: at most once per delivery of
 * the refusal event, lost while no process of the agent is connected; the event stays the record.
 * It carries the stable code, never the refusal's words (they may describe a run the agent has no
 * part in: an agent may name any run of its project).
 */

/** What the router says to an agent whose result or mesh turn it refused (`result-refused.json`). */
export const ResultRefusedSchema = z.object({
  project: ProjectIdSchema,
  /** The agent that published the result (the subject's, as the refusal recorded it). */
  agent: AgentNameSchema,
  /** What was refused: a workflow run's result (`result`, `run.result_rejected`) or a mesh turn (`turn`, `mesh.turn_rejected`). */
  of: z.enum(['result', 'turn']),
  /** The run the result named: the workflow run, or for a turn the mesh run (the result's `workflow_run_id`). */
  workflow_run_id: IdSchema,
  /** The refused result's id: decided once, so it is spent — a new result needs a new id. */
  result_id: IdSchema,
  /** The handoff and the claim the result named, when the refusal recorded them. */
  handoff_id: IdSchema.optional(),
  claim_id: IdSchema.optional(),
  /** Why, as a stable code (docs/errors.md sections 3.1 and 3.4: `handoff_not_claimed`, `claim_mismatch`, `mesh_not_running`…; `not_found`, `foreign_refusals_spent`, `idle_refusals_spent` for a result dead-lettered: docs/runs.md rule 3c). */
  code: z.string().min(1).max(80),
  /** The refusal event's stream sequence; for a result dead-lettered instead (`not_found`, `foreign_refusals_spent`, `idle_refusals_spent`: no event), the result's own inbox sequence, its letter's `Baton-Dlq-Seq`. */
  seq: z.number().int().positive(),
  /** When the refusal was stored (ISO 8601). */
  at: z.string().min(1),
});
export type ResultRefused = z.infer<typeof ResultRefusedSchema>;

/** The token under an agent's inbox prefix where it hears of its results refused. */
export const RESULT_REFUSED_TOKEN = 'refused';

/** `<agent's inbox prefix>.refused`: where the processes of `agent` of `project` hear of their results and mesh turns refused. */
export function resultRefusedSubject(prefix: string, project: string, agent: string): string {
  return `${inboxPrefixOf(prefix, { kind: 'agent', project, agent })}.${RESULT_REFUSED_TOKEN}`;
}
