import { assertNever } from '@baton/domain';

/**
 * Operator roles. `viewer` reads the inbox, stops, runs and handoffs of its projects; `operator`
 * also answers them (stop forms, holds, handbacks); `admin` does both for every project.
 */
export const Role = { viewer: 'viewer', operator: 'operator', admin: 'admin' } as const;
export type Role = (typeof Role)[keyof typeof Role];

/** The project scope of a token: a list of project keys, or every project (`*`). */
export const ALL_PROJECTS = '*';
export type ProjectScope = readonly string[] | typeof ALL_PROJECTS;

/** Who is calling, as the notifier authenticated them (from a bearer token or a browser session). */
export interface Principal {
  /** The token's id (never the secret). */
  tokenId: string;
  /** The operator's name: the answers' `answered_by` and the decisions' actor. */
  name: string;
  role: Role;
  projects: ProjectScope;
  /** `session` when a browser session cookie authenticated the request. */
  via: 'token' | 'session';
}

/** True when `principal` may read the items of `project`. Admins see every project. */
export function canSeeProject(principal: Principal, project: string): boolean {
  if (principal.role === Role.admin || principal.projects === ALL_PROJECTS) return true;
  return principal.projects.includes(project);
}

/** The projects `principal` may read, or null for all of them. */
export function visibleProjects(principal: Principal): readonly string[] | null {
  if (principal.role === Role.admin || principal.projects === ALL_PROJECTS) return null;
  return principal.projects;
}

/** True when `principal`'s role may answer (operator, admin); a viewer only reads. */
export function canAnswer(principal: Principal): boolean {
  switch (principal.role) {
    case Role.operator:
    case Role.admin:
      return true;
    case Role.viewer:
      return false;
    default:
      return assertNever(principal.role, 'role');
  }
}
