import { HttpStatus } from '@nestjs/common';
import { ApiError, notFound } from '../api/http';
import { OperatorBodyActorFields } from '@baton/contracts';
import { canAnswer, canSeeProject, Role, visibleProjects, type Principal } from './roles';

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

/**
 * Refuse an action from a role that only reads: 403 `role_forbidden`, its `details` naming the
 * caller's `role` and the `required_role` — `operator`, the least role that acts (an admin may too).
 * `what` says the action in the message (`answering a stop packet`, `redelivering a notice`).
 */
export function assertCanAnswer(principal: Principal, what = 'answering and acting on items (answers, decisions, withdrawals)'): void {
  if (!canAnswer(principal)) throw roleForbidden(principal, Role.operator, `a ${principal.role} token only reads; ${what} needs the operator or admin role`);
}

/**
 * 403 `role_forbidden`: the caller's role may not do this. `details.role` is the caller's role,
 * `details.required_role` the least role that may (`operator`: an operator or an admin; `admin`:
 * an admin only), so a client can tell which token to use without reading the message.
 */
export function roleForbidden(principal: Principal, required: Role, message: string): ApiError {
  return new ApiError(HttpStatus.FORBIDDEN, 'role_forbidden', message, [], { role: principal.role, required_role: required });
}

/**
 * Who acts is the token, never the body: a body field that names the actor (`answered_by`, `actor`:
 * `OperatorBodyActorFields`) may only repeat the token's name. Another name is 403
 * `identity_mismatch` (the code the ledger gives a body that claims another actor than its
 * subject's), with the field as the path and `details.field` / `details.actor` (the token's
 * name) — checked before anything is looked up or sent, so nothing is recorded.
 */
export function assertBodyActor(principal: Principal, body: object): void {
  for (const field of OperatorBodyActorFields) {
    const claimed = (body as Record<string, unknown>)[field];
    if (claimed === undefined || claimed === principal.name) continue;
    const message = `this token is ${principal.name}: ${field} may repeat its name or be left out, not name ${JSON.stringify(claimed)} (who acts comes from the token)`;
    throw new ApiError(HttpStatus.FORBIDDEN, 'identity_mismatch', message, [{ path: field, message }], { field, actor: principal.name });
  }
}
