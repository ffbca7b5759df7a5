import type { ProjectControlEvent, ProjectControlRecord, ProjectControlRole } from '@baton/contracts';
import { accept, assertNever, type Decider, type DecisionResult, reject } from '../decider';
import { rememberScopedKey, scopedKeyUse, type ScopedKey } from '../scoped-keys';

/*
 * The project-control aggregate (kind `project`, id `control`): the project kill switch. The ledger
 * is its only writer. While `paused`, the ledger refuses claims (`project_paused`) and holds
 * offers; `project.resumed` makes it re-offer every pending handoff of the project.
 */

/** How many recent idempotency keys the aggregate remembers. */
export const PROJECT_RECENT_KEYS_LIMIT = 64;

/**
 * One remembered idempotency key with the command and the admin that stored it (both read from the
 * event): a key counts as a retry only for that same command from that same actor, so a `resume`
 * that happens to carry the pause's key still resumes.
 */
export type ProjectRecentKey = ScopedKey<ProjectControlCommand['type'], never>;

interface ProjectControlCore {
  project: string;
  version: number;
  recent_keys: readonly ProjectRecentKey[];
}

export type ProjectControlState =
  | { status: 'active'; project?: string; version: number; recent_keys: readonly ProjectRecentKey[]; last_pause_id?: string }
  | (ProjectControlCore & { status: 'paused'; pause_id: string; paused_by: string; paused_at: string; reason: string; on_behalf_of?: string });

interface Meta {
  now: string;
  /** Who sent it: the principal's actor (`admin` for the admin connection, the token's person for the notifier). */
  actor: string;
  role: ProjectControlRole;
  /** The person the admin connection said it acts for: a claim, recorded as `on_behalf_of` beside `actor`. */
  on_behalf_of?: string;
  /** The digest of the request body (`command_digest` on the event it causes). */
  digest?: string;
}

export type PauseProject = { type: 'pause'; data: { project: string; pause_id: string; reason: string; idempotency_key: string }; metadata: Meta };
export type ResumeProject = { type: 'resume'; data: { project: string; reason?: string; idempotency_key: string }; metadata: Meta };
export type ProjectControlCommand = PauseProject | ResumeProject;

export const ProjectControlErrorCode = {
  adminOnly: 'admin_only',
  idempotencyKeyReused: 'idempotency_key_reused',
  alreadyPaused: 'project_already_paused',
  notPaused: 'project_not_paused',
} as const;

export function initialProjectControlState(): ProjectControlState {
  return { status: 'active', version: 0, recent_keys: [] };
}

/** Apply one project-control event. Pure; an event that cannot follow the state leaves it unchanged. */
export function evolveProjectControl(state: ProjectControlState, event: ProjectControlEvent): ProjectControlState {
  const issued: ProjectRecentKey =
    event.type === 'project.paused'
      ? { key: event.data.idempotency_key, command: 'pause', actor: event.data.paused_by, actor_kind: undefined, digest: event.data.command_digest }
      : { key: event.data.idempotency_key, command: 'resume', actor: event.data.resumed_by, actor_kind: undefined, digest: event.data.command_digest };
  const recent_keys = rememberScopedKey(state.recent_keys, issued, PROJECT_RECENT_KEYS_LIMIT);
  switch (event.type) {
    case 'project.paused': {
      const d = event.data;
      return {
        status: 'paused',
        project: d.project,
        version: state.version + 1,
        recent_keys,
        pause_id: d.pause_id,
        paused_by: d.paused_by,
        paused_at: d.at,
        reason: d.reason,
        ...(d.on_behalf_of !== undefined ? { on_behalf_of: d.on_behalf_of } : {}),
      };
    }
    case 'project.resumed':
      return { status: 'active', project: event.data.project, version: state.version + 1, recent_keys, last_pause_id: event.data.pause_id };
    default:
      return assertNever(event, 'project control event');
  }
}

/**
 * Decide `pause` / `resume`. Only the `admin` role may (`admin_only`), retry or not. Pausing a
 * paused project is refused (`project_already_paused`), resuming an active one too
 * (`project_not_paused`); a retried request (same idempotency key, same command, same admin, and
 * the same body where both have a digest) yields no events; the same key with another body is
 * refused `idempotency_key_reused`.
 */
export function decideProjectControl(command: ProjectControlCommand, state: ProjectControlState): DecisionResult<ProjectControlEvent> {
  const { metadata } = command;
  if (metadata.role !== 'admin') {
    return reject('forbidden', ProjectControlErrorCode.adminOnly, `only an admin may ${command.type} project ${command.data.project}`);
  }
  const key = command.data.idempotency_key;
  const use = scopedKeyUse(state.recent_keys, key, command.type, metadata.actor, undefined, metadata.digest);
  if (use.use === 'retry') return accept();
  if (use.use === 'reused') {
    return reject(
      'wrong_state',
      ProjectControlErrorCode.idempotencyKeyReused,
      `idempotency_key ${key} was used for another ${command.type} of project ${command.data.project}; a retry sends the same body, a new request a new key`,
      { project: command.data.project, idempotency_key: key, command: command.type },
    );
  }
  const digest = metadata.digest !== undefined ? { command_digest: metadata.digest } : {};
  // Whom the admin connection said it acts for: recorded beside the actor, never as it.
  const onBehalfOf = metadata.on_behalf_of !== undefined ? { on_behalf_of: metadata.on_behalf_of } : {};
  switch (command.type) {
    case 'pause': {
      if (state.status === 'paused') {
        return reject('wrong_state', ProjectControlErrorCode.alreadyPaused, `project ${command.data.project} is already paused (${state.pause_id})`);
      }
      const d = command.data;
      return accept({
        type: 'project.paused',
        data: {
          project: d.project,
          at: metadata.now,
          idempotency_key: d.idempotency_key,
          ...digest,
          ...onBehalfOf,
          pause_id: d.pause_id,
          paused_by: metadata.actor,
          reason: d.reason,
        },
      });
    }
    case 'resume': {
      if (state.status !== 'paused') return reject('wrong_state', ProjectControlErrorCode.notPaused, `project ${command.data.project} is not paused`);
      const d = command.data;
      const event: ProjectControlEvent = {
        type: 'project.resumed',
        data: {
          project: d.project,
          at: metadata.now,
          idempotency_key: d.idempotency_key,
          ...digest,
          ...onBehalfOf,
          pause_id: state.pause_id,
          resumed_by: metadata.actor,
        },
      };
      if (d.reason !== undefined) event.data.reason = d.reason;
      return accept(event);
    }
    default:
      return assertNever(command, 'project control command');
  }
}

/** The project kill switch as a decider (aggregate kind `project`, id `control`). */
export const projectControlDecider: Decider<ProjectControlCommand, ProjectControlEvent, ProjectControlState> = {
  decide: decideProjectControl,
  evolve: evolveProjectControl,
  initialState: initialProjectControlState,
};

/** The record a reply shows for `project`. */
export function toProjectControlRecord(project: string, state: ProjectControlState): ProjectControlRecord {
  if (state.status === 'active') return { project, status: 'active', version: state.version };
  return {
    project,
    status: 'paused',
    pause_id: state.pause_id,
    paused_by: state.paused_by,
    paused_at: state.paused_at,
    reason: state.reason,
    ...(state.on_behalf_of !== undefined ? { on_behalf_of: state.on_behalf_of } : {}),
    version: state.version,
  };
}
