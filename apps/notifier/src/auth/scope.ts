import { HttpStatus } from '@nestjs/common';
import { ApiError, notFound } from '../api/http';
import { canAnswer, canSeeProject, visibleProjects, type Principal } from './roles';

/**
 * The project filter a listing runs with: the requested projects when the caller may see them all
 * (403 `project_forbidden` otherwise), else every project the caller may see (undefined = all).
 */
export function scopedProjects(principal: Principal, requested: readonly string[] | undefined): string[] | undefined {
  const visible = visibleProjects(principal);
  if (requested !== undefined) {
    const hidden = requested.filter((project) => !canSeeProject(principal, project));
    if (hidden.length > 0)
      throw new ApiError(HttpStatus.FORBIDDEN, 'project_forbidden', `this token may not read project ${hidden.join(', ')}`, [], { projects: hidden });
    return [...requested];
  }
  return visible === null ? undefined : [...visible];
}

/**
 * Refuse to show or act on an item of a project the caller may not see: answered 404 `not_found`,
 * exactly as for an item that does not exist, so nothing leaks about other projects.
 */
export function assertVisible(principal: Principal, project: string, what: string, id: string): void {
  if (!canSeeProject(principal, project)) throw notFound(what, id);
}

/** Refuse an answer from a role that only reads: 403 `role_forbidden`. */
export function assertCanAnswer(principal: Principal): void {
  if (!canAnswer(principal))
    throw new ApiError(
      HttpStatus.FORBIDDEN,
      'role_forbidden',
      `a ${principal.role} token only reads; answering and acting on items (answers, decisions, withdrawals) need the operator or admin role`,
    );
}
