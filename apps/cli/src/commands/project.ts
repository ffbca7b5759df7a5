import { ProjectControlId, ProjectIdSchema, type ProjectControlEvent, type ProjectControlRecord, type ProjectDefinition } from '@baton/contracts';
import { projectControlDecider, toProjectControlRecord } from '@baton/domain';
import type { Command } from '../command';
import { parseCommandArgs } from '../command';
import type { CliContext } from '../context';
import { CliError, CliErrorCode, ExitCode, UsageError } from '../errors';
import { printJson, renderFields } from '../output';
import { readHistory } from '../timeline';

/** What `baton project --json` prints: the project's published definition and its kill switch. */
export interface ProjectSummary {
  project: string;
  /** The definition in force (its last `definition.published`), or null when none was published. */
  definition: {
    published_at: string;
    published_by: string;
    /** How many definitions were published (the newest is in force). */
    publishes: number;
    lead: string | null;
    agents: string[];
    workflows: string[];
    meshes: string[];
    accepts_handoffs_from: string[];
  } | null;
  /** The kill switch, folded from the project's control aggregate (`active` when never paused). */
  control: ProjectControlRecord;
}

/** Read a project's definition and kill-switch state straight from the events stream. */
export async function readProjectSummary(ctx: CliContext, project: string): Promise<ProjectSummary> {
  const [definitions, control] = await Promise.all([
    readHistory(ctx, 'definition', 'current', project),
    readHistory(ctx, 'project', ProjectControlId, project),
  ]);
  const published = (definitions?.events ?? []).filter((event) => event.type === 'definition.published');
  const last = published.at(-1);
  const body = last?.payload as { definition: ProjectDefinition; published_by: string; published_at: string } | undefined;
  const state = (control?.events ?? []).reduce(
    (current, stored) => projectControlDecider.evolve(current, { type: stored.type, data: stored.payload } as ProjectControlEvent),
    projectControlDecider.initialState(),
  );
  return {
    project,
    definition:
      body === undefined
        ? null
        : {
            published_at: body.published_at,
            published_by: body.published_by,
            publishes: published.length,
            lead: body.definition.lead ?? null,
            agents: body.definition.agents.map((agent) => agent.name),
            workflows: [...new Set((body.definition.workflows ?? []).map((workflow) => workflow.name))],
            meshes: (body.definition.meshes ?? []).map((mesh) => mesh.name),
            accepts_handoffs_from: body.definition.accepts_handoffs_from ?? [],
          },
    control: toProjectControlRecord(project, state),
  };
}

export const projectCommand: Command = {
  name: 'project',
  summary: "a project's published definition and kill switch (active or paused: by whom, when, why)",
  help: `Usage: baton project <project> [--json]

Show what Baton holds for a project, read from the events stream: whether a definition is
published (when, by whom, its agents, workflows and meshes, and the projects it accepts handoffs
from) and the kill switch — active, or paused with the pause id, who paused it, when and why.
A project with neither is unknown to Baton: refused not_found (exit 1), as a misspelt key is.
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { json: { type: 'boolean' } }, { min: 1, max: 1 });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const project = args.positionals[0] as string;
    if (!ProjectIdSchema.safeParse(project).success) throw new UsageError(`"${project}" is not a project key (lowercase letters, digits, _ and -)`);
    const summary = await readProjectSummary(ctx, project);
    if (summary.definition === null && summary.control.version === 0) {
      throw new CliError(`project ${project} is unknown: no definition was published and it was never paused`, {
        code: CliErrorCode.notFound,
        details: { project },
      });
    }
    if (args.values['json'] === true) printJson(ctx.io, summary);
    else {
      const d = summary.definition;
      const c = summary.control;
      ctx.io.stdout.write(
        renderFields({
          project,
          definition: d === null ? 'none published' : `published ${d.published_at} by ${d.published_by} (${d.publishes === 1 ? '1 publish' : `${d.publishes} publishes`})`,
          ...(d !== null
            ? {
                lead: d.lead,
                agents: d.agents.join(', '),
                workflows: d.workflows.length > 0 ? d.workflows.join(', ') : '-',
                meshes: d.meshes.length > 0 ? d.meshes.join(', ') : '-',
                'accepts from': d.accepts_handoffs_from.length > 0 ? d.accepts_handoffs_from.join(', ') : '-',
              }
            : {}),
          status: c.status,
          ...(c.status === 'paused' ? { pause_id: c.pause_id, paused_by: c.paused_by, paused_at: c.paused_at, reason: c.reason } : {}),
        }),
      );
    }
    return ExitCode.ok;
  },
};
