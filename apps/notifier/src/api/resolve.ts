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
export async function resolveProject(
  views: BatonViews,
  caller: Principal,
  kind: ScopedKind,
  id: string,
  project: string | undefined,
  /** Where the refusal of an ambiguous id points (the web pages point to their own pages); default: the API's project route. */
  route: (project: string) => string = (p) => projectRoute(kind, p, id),
): Promise<string> {
  return resolveProjectAmong({ kind, what: WHAT[kind], route, projectsOf: () => views.projectsOf(kind, id) }, caller, id, project);
}

/** The project route of a mesh run (`/v1/projects/<project>/meshes/<id>`). */
export function meshRoute(project: string, id: string): string {
  return `/v1/projects/${project}/meshes/${encodeURIComponent(id)}`;
}

/**
 * {@link resolveProject} for any record kind, with the lookup of the projects that hold the id
 * given (the projections' id lookup for runs, handoffs and stops; the events stream's subjects for
 * meshes, which no projection holds). The same rule: a project the caller may not see is 404 like
 * a missing record; an id-only lookup answers the one visible project, 404 for none, 409
 * `ambiguous_id` (naming the visible projects, `details.projects`) for several.
 */
export async function resolveProjectAmong(
  lookup: { kind: string; what: string; route: (project: string) => string; projectsOf: () => Promise<readonly string[]> },
  caller: Principal,
  id: string,
  project: string | undefined,
): Promise<string> {
  if (project !== undefined) {
    if (!canSeeProject(caller, project)) throw notFound(lookup.what, id);
    return project;
  }
  const projects = (await lookup.projectsOf()).filter((p) => canSeeProject(caller, p));
  if (projects.length === 0) throw notFound(lookup.what, id);
  if (projects.length > 1) {
    throw new ApiError(
      HttpStatus.CONFLICT,
      'ambiguous_id',
      `${lookup.what} ${id} exists in projects ${projects.join(', ')}: name the project (${projects.map((p) => lookup.route(p)).join(', ')})`,
      [],
      { kind: lookup.kind, id, projects },
    );
  }
  return projects[0] as string;
}
