import { Inject, Injectable } from '@nestjs/common';
import { isSubjectToken } from '@baton/contracts';
import { handoffClaimFold, handoffClaimView, type HandoffClaimView } from '@baton/domain';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';

/**
 * Reads the claim of a handoff for the claim rule (issue 11: a result is accepted only under the
 * current claim of the run's current handoff). The handoff aggregate is the ledger's; the router
 * only reads it, through the event store (`<prefix>.ev.<project>.handoff.<id>`), and never writes
 * it: the subject's last sequence, then the events after the store's cached fold, one point read
 * each (a handoff under a result has two or three). The router's handoff-event consumer parses
 * only `handoff.deadline_expired` (`eventTypes`), so it no longer folds every handoff event ahead
 * of this read: measured in pairs, the router spent about 8 % less CPU per hop and nats-server
 * about 7 % more (the point reads), a small net gain (docs/performance.md, session 12). The read
 * itself is never skipped, so the view is the stream's as of this call. The fold is
 * `handoffClaimFold`: the ledger's, without the work item (context, acceptance, summary), so the
 * router's fold cache keeps a tenth of the bytes per handoff.
 */
@Injectable()
export class HandoffClaims {
  constructor(@Inject(RUNTIME) private readonly runtime: ServiceRuntime) {}

  /**
   * The handoff `handoffId` of `project` as stored now: its status and current claim. An id that
   * cannot name a handoff subject reads as `absent` (there is no such handoff). Store failures are
   * thrown: the caller's message is redelivered.
   */
  async view(project: string, handoffId: string): Promise<HandoffClaimView> {
    if (!isSubjectToken(handoffId)) return { handoff_id: handoffId, status: 'absent', claim: null };
    const { state } = await this.runtime.store.current({ project, kind: 'handoff', id: handoffId }, handoffClaimFold);
    return handoffClaimView(handoffId, state);
  }
}
