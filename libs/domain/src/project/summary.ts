import type { ProjectControlEvent, ProjectDefinition, ProjectDefinitionSummary, ProjectSummary } from '@baton/contracts';
import { projectControlDecider, toProjectControlRecord } from './project-control';

/** A stored event as the summary reads it. */
export interface SummarizedEvent {
  type: string;
  payload: unknown;
}

/**
 * The project as Baton holds it, from the events of its definition aggregate (`definition` /
 * `current`) and of its control aggregate (`project` / `control`), each in stream order: the newest
 * published definition in short, and the folded kill switch. Pure; what `baton project` and
 * `GET /v1/projects/{project}` show.
 */
export function projectSummaryOf(project: string, definitionEvents: readonly SummarizedEvent[], controlEvents: readonly SummarizedEvent[]): ProjectSummary {
  const published = definitionEvents.filter((event) => event.type === 'definition.published');
  const last = published.at(-1)?.payload as { definition: ProjectDefinition; published_by: string; on_behalf_of?: string; published_at: string } | undefined;
  const control = controlEvents.reduce(
    (state, stored) => projectControlDecider.evolve(state, { type: stored.type, data: stored.payload } as ProjectControlEvent),
    projectControlDecider.initialState(),
  );
  return {
    project,
    definition:
      last === undefined
        ? null
        : {
            published_at: last.published_at,
            published_by: last.published_by,
            ...(last.on_behalf_of !== undefined ? { on_behalf_of: last.on_behalf_of } : {}),
            publishes: published.length,
            lead: last.definition.lead ?? null,
            agents: last.definition.agents.map((agent) => agent.name),
            workflows: [...new Set((last.definition.workflows ?? []).map((workflow) => workflow.name))],
            meshes: (last.definition.meshes ?? []).map((mesh) => mesh.name),
            accepts_handoffs_from: last.definition.accepts_handoffs_from ?? [],
            workflow_versions: workflowVersionsOf(published.map((event) => (event.payload as { definition: ProjectDefinition }).definition)),
          },
    control: toProjectControlRecord(project, control),
  };
}

/**
 * Each workflow of the published definitions (oldest first, the last in force) with every version
 * ever published and the versions the definition in force holds, both ascending: the workflows
 * in force first, in their order, then those only earlier publishes held, in the order they came.
 */
function workflowVersionsOf(definitions: readonly ProjectDefinition[]): NonNullable<ProjectDefinitionSummary['workflow_versions']> {
  const inForce = definitions.at(-1)?.workflows ?? [];
  const names = [...new Set([...inForce, ...definitions.flatMap((definition) => definition.workflows ?? [])].map((workflow) => workflow.name))];
  const ascending = (versions: Iterable<number>) => [...new Set(versions)].sort((a, b) => a - b);
  return names.map((name) => ({
    name,
    versions: ascending(definitions.flatMap((definition) => (definition.workflows ?? []).filter((w) => w.name === name).map((w) => w.version))),
    in_force: ascending(inForce.filter((w) => w.name === name).map((w) => w.version)),
  }));
}

/** A project Baton knows nothing of: no definition published, never paused. */
export function isUnknownProject(summary: ProjectSummary): boolean {
  return summary.definition === null && summary.control.version === 0;
}
