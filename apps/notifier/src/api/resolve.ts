import { HttpStatus } from '@nestjs/common';
import type { BatonViews, ScopedKind } from '@baton/projections';
import { canSeeProject, type Principal } from '../auth/roles';
import { ApiError, notFound } from './http';

/** How an error names a record of each kind. */
export const WHAT: Readonly<Record<ScopedKind, string>> = { run: 'run', handoff: 'handoff', stop: 'stop packet' };

/** The project route of a record (`/v1/projects/<project>/<kind>s/<id>`). */
export function projectRoute(kind: ScopedKind, project: string, id: string): string {
  return `/v1/projects/${project}/${kind === 'stop' ? 'stops' : `${kind}s`}/${encodeURIComponent(id)}`;
}

/**
 * Which project a request means for a run, handoff or stop packet id. Ids are unique only within
 * a project, so a record is addressed by project and id:
 *
 * - a project route names the project: a project the caller may not see answers 404 `not_found`
 *   exactly as a record that does not exist (nothing leaks about other projects);
 * - an id-only route (a convenience) looks the id up among the projects the caller may see: none
 *   → 404 `not_found`; exactly one → that project; several → 409 `ambiguous_id` listing them
 *   (`details.projects`), never silently one of them. Projects the caller may not see are never
 *   named or counted.
 */
export async function resolveProject(views: BatonViews, caller: Principal, kind: ScopedKind, id: string, project: string | undefined): Promise<string> {
  if (project !== undefined) {
    if (!canSeeProject(caller, project)) throw notFound(WHAT[kind], id);
    return project;
  }
  const projects = (await views.projectsOf(kind, id)).filter((p) => canSeeProject(caller, p));
  if (projects.length === 0) throw notFound(WHAT[kind], id);
  if (projects.length > 1) {
    throw new ApiError(
      HttpStatus.CONFLICT,
      'ambiguous_id',
      `${WHAT[kind]} ${id} exists in projects ${projects.join(', ')}: name the project (${projects.map((p) => projectRoute(kind, p, id)).join(', ')})`,
      [],
      { kind, id, projects },
    );
  }
  return projects[0] as string;
}
