import { ProjectionError } from '../errors';

/**
 * How Baton's projections name a record of one project: the ONE encoding every projection key,
 * index member and inbox item id that holds an aggregate id is built with.
 *
 * An aggregate id (a workflow run, a handoff, a stop packet) is unique only within its project:
 * the same handoff id or workflow_run_id may exist in two projects, and stop packet ids are
 * derived from cause ids (result ids...), which repeat across projects too. So a record is named
 * by its project and its id together, as `<project>:<id>` (a "project ref").
 *
 * Unambiguous by construction: a project key holds no `:` (lowercase letters, digits, `_` and
 * `-`), while an id may hold `:` and `@`. The first `:` of a ref therefore always ends the project
 * and everything after it is the id, whatever it holds. Every key that holds a ref puts it LAST,
 * after fixed parts that end in `:` (`r:<ref>`, `rt:<ref>`...), so no two (project, id) pairs, and
 * no two kinds of key, ever share a name (an id such as `x:state` cannot reach another key).
 *
 * The id-only routes of the operator API and the CLI find the projects an id lives in through an
 * id lookup: a sorted set (all scores 0) whose members are `<id> <project>` (see
 * {@link idLookupMember}), read with one ZRANGEBYLEX. Its members hold both the id and the project.
 */
export interface ProjectRef {
  project: string;
  id: string;
}

const PROJECT_KEY = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/** Characters an id never holds: whitespace separates the id lookup's members. */
const ID_FORBIDDEN = /[\s]/;

function check(project: string, id: string): void {
  if (!PROJECT_KEY.test(project)) throw new ProjectionError(`invalid project key "${project}": lowercase letters, digits, _ and - (no ':')`);
  if (id.length === 0 || ID_FORBIDDEN.test(id)) throw new ProjectionError(`invalid id "${id}"`);
}

/** `<project>:<id>`: the name of one project's record (see the module comment). */
export function projectRef(project: string, id: string): string {
  check(project, id);
  return `${project}:${id}`;
}

/** The project and id of a ref made by {@link projectRef} (split at the first `:`), or null. */
export function parseProjectRef(ref: string): ProjectRef | null {
  const at = ref.indexOf(':');
  if (at <= 0 || at === ref.length - 1) return null;
  const project = ref.slice(0, at);
  const id = ref.slice(at + 1);
  return PROJECT_KEY.test(project) ? { project, id } : null;
}

/** The key of the id lookup sorted set in a projection's generation (holds no ref itself). */
export const ID_LOOKUP_KEY = 'ids';

/** A member of an id lookup: `<id> <project>` (ids and projects hold no whitespace). */
export function idLookupMember(project: string, id: string): string {
  check(project, id);
  return `${id} ${project}`;
}

/** The ZRANGEBYLEX bounds selecting exactly the members of `id` (`[<id> ` to `(<id>!`: ' ' < '!' < every id character). */
export function idLookupRange(id: string): { min: string; max: string } {
  return { min: `[${id} `, max: `(${id}!` };
}

/** The projects of lookup members read with {@link idLookupRange}, sorted. */
export function projectsOfLookup(members: readonly string[]): string[] {
  return [...new Set(members.map((m) => m.slice(m.lastIndexOf(' ') + 1)))].sort();
}
