/**
 * A handoff's workflow run, named the only way a run id means anything: with its project. Run
 * ids are chosen by callers and repeat across projects, so `workflow_run_id` alone never names a
 * run.
 */
export interface HandoffRunRef {
  project: string;
  workflow_run_id: string;
}

/** What a handoff says about its run: its `handoff.created` payload, its folded state or its record. */
export interface HandoffRunFields {
  project: string;
  workflow_run_id?: string | undefined;
  source_project?: string | undefined;
}

/**
 * The workflow run a handoff belongs to, or null when it names none. The run lives in the
 * delegator's project: the handoff's own project, except on a cross-project handoff, which lives in
 * the target project and names its run in `source_project`. Everything that acts on a handoff's
 * run (stops it, records on it, links to it) uses this, never the handoff's project with the id.
 */
export function handoffRun(handoff: HandoffRunFields): HandoffRunRef | null {
  if (handoff.workflow_run_id === undefined) return null;
  return { project: handoff.source_project ?? handoff.project, workflow_run_id: handoff.workflow_run_id };
}
