import { Inject, Injectable } from '@nestjs/common';
import { isSubjectToken } from '@baton/contracts';
import { handoffClaimFold, handoffClaimView, type HandoffClaimView } from '@baton/domain';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';

/**
 * Reads the claim of a handoff for the claim rule (issue 11: a result is accepted only under the
 * current claim of the run's current handoff). The handoff aggregate is the ledger's; the router
 * only reads it, through the event store (`<prefix>.ev.<project>.handoff.<id>`), and never writes
 * it: the subject's last sequence, then the events after the store's cached fold, one point read
 * each. The router's handoff-event consumer folds every handoff event onto that cache as it is
 * delivered (`observe`), so the read is usually the last sequence alone. Session 12 had that
 * consumer parse only `handoff.deadline_expired`, and the claim check then read the two or three
 * events it lacked one after another — about 1.1–1.3 ms on the critical path of every result, and
 * JetStream API requests that cost nats-server more than deliveries; session 14 measured folding
 * them again as lighter in all (docs/performance.md). The read
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
