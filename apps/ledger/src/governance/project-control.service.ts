import { Inject, Injectable } from '@nestjs/common';
import {
  ProjectControlId,
  type PauseProjectRequest,
  type ProjectControlCommandName,
  type ProjectControlEvent,
  type ProjectControlReply,
  type ProjectControlRole,
  type ResumeProjectRequest,
} from '@baton/contracts';
import { projectControlDecider, toProjectControlRecord, type ProjectControlCommand, type ProjectControlState } from '@baton/domain';
import { LruCache, type AggregateRef, type HopTrace } from '@baton/eventstore';
import { PROJECTS_KEPT } from '../projects/project-directory';
import { digest, LedgerIds } from '../ids';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';

/** The control aggregate of `project`. */
export function controlRef(project: string): AggregateRef {
  return { project, kind: 'project', id: ProjectControlId };
}

/**
 * The project kill switch, as the ledger serves it: `pause` / `resume` request/reply commands
 * (`<prefix>.cmd.ledger.<project>.op.admin|op.notifier.pause|resume`, admin only: the admin CLI,
 * or the notifier relaying an admin token; see `LedgerCommandAccess`), decided by
 * `projectControlDecider` and appended to the project's control aggregate (the ledger is its only
 * writer; event ids from the idempotency key, so a retried request appends nothing). `isPaused`
 * reads what the aggregate holds after its kept fold on every call, so a pause applies to the very
 * next claim on every ledger instance.
 */
@Injectable()
export class ProjectControlService {
  /**
   * The folded control state per project and the sequence it is folded to — bounded, as the
   * project directory's cache is (a project asked about is any agent's choice; one evicted is
   * folded again).
   */
  private readonly folds = new LruCache<string, { state: ProjectControlState; lastSeq: number }>(PROJECTS_KEPT);

  constructor(@Inject(RUNTIME) private readonly runtime: ServiceRuntime) {}

  /**
   * The control state of `project`, current as of this call: the fold kept from the last call plus
   * whatever the stream holds after it (usually nothing: one round trip to learn the aggregate's
   * last sequence), so a claim never refolds the project's whole pause history.
   */
  async state(project: string): Promise<ProjectControlState> {
    const ref = controlRef(project);
    let fold = this.folds.get(project) ?? { state: projectControlDecider.initialState(), lastSeq: 0 };
    let read = await this.runtime.store.read(ref, { afterSeq: fold.lastSeq });
    if (read.lastSeq < fold.lastSeq) {
      // The stream holds less than was folded (it was recreated): fold again from the start.
      fold = { state: projectControlDecider.initialState(), lastSeq: 0 };
      read = await this.runtime.store.read(ref);
    }
    const state = read.events.reduce(
      (current, stored) => projectControlDecider.evolve(current, { type: stored.type, data: stored.payload } as ProjectControlEvent),
      fold.state,
    );
    this.folds.set(project, { state, lastSeq: Math.max(read.lastSeq, fold.lastSeq) });
    return state;
  }

  async isPaused(project: string): Promise<boolean> {
    return (await this.state(project)).status === 'paused';
  }

  /**
   * Decide one `pause` / `resume` whose body was parsed and whose caller was derived from the
   * subject by the command handler (`op.admin`, or `op.notifier` with the token's role). The domain
   * checks the role again (`admin_only`). `on_behalf_of` is the person the admin connection named:
   * recorded on the event beside the actor (`admin`), and part of the body's digest, so the same
   * key sent for another person is not taken for a retry.
   */
  async handle(
    project: string,
    name: ProjectControlCommandName,
    body: PauseProjectRequest | ResumeProjectRequest,
    caller: { actor: string; role: ProjectControlRole; on_behalf_of?: string | undefined },
    trace?: HopTrace,
  ): Promise<ProjectControlReply> {
    const now = new Date().toISOString();
    // The body's digest (rule 13): the same key with another reason is refused, not answered as the first.
    const onBehalfOf = caller.on_behalf_of;
    const bodyDigest = LedgerIds.commandDigest(onBehalfOf !== undefined ? { ...body, on_behalf_of: onBehalfOf } : body);
    const metadata = { now, actor: caller.actor, role: caller.role, digest: bodyDigest, ...(onBehalfOf !== undefined ? { on_behalf_of: onBehalfOf } : {}) };
    const command: ProjectControlCommand =
      name === 'pause'
        ? {
            type: 'pause',
            data: {
              project,
              // Named by the admin too: another admin's pause with the same key is another pause, and its
              // resume's re-offers (`…:resume:<pause id>`) are not taken for the first one's.
              pause_id: `pause-${digest(project, body.idempotency_key, caller.actor)}`,
              reason: 'reason' in body ? (body.reason ?? '') : '',
              idempotency_key: body.idempotency_key,
            },
            metadata,
          }
        : {
            type: 'resume',
            data: { project, idempotency_key: body.idempotency_key, ...(body.reason !== undefined ? { reason: body.reason } : {}) },
            metadata,
          };
    // The command id names the admin and the body too (as the handoff commands' do): another admin's
    // request with the same key and body is decided as theirs, never answered with the first one's events.
    const commandId = `ctl-${digest(project, name, body.idempotency_key, caller.actor, bodyDigest)}`;
    const result = await this.runtime.store.handleCommand(controlRef(project), projectControlDecider, command, {
      commandId,
      occurredAt: now,
      actor: caller.actor,
      origin: 'operator',
      causationId: null,
      correlationId: commandId,
      trace,
    });
    if (!result.ok)
      return {
        ok: false,
        error: result.error.details ? { ...result.error } : { code: result.error.code, kind: result.error.kind, message: result.error.message },
      };
    this.runtime.logger.info(`project ${name} ${result.appended > 0 ? 'applied' : 'already applied'}`, {
      project,
      actor: caller.actor,
      ...(onBehalfOf !== undefined ? { on_behalf_of: onBehalfOf } : {}),
    });
    return { ok: true, project: toProjectControlRecord(project, result.state), events: result.appended };
  }
}
