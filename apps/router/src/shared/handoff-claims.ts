import { Inject, Injectable } from '@nestjs/common';
import { isSubjectToken } from '@baton/contracts';
import { handoffClaimView, handoffDecider, type HandoffClaimView } from '@baton/domain';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';

/**
 * Reads the claim of a handoff for the claim rule (issue 11: a result is accepted only under the
 * current claim of the run's current handoff). The handoff aggregate is the ledger's; the router
 * only reads it, through the event store (`<prefix>.ev.<project>.handoff.<id>`), and never writes
 * it. The fold comes from the store's one fold cache, which the router's own handoff-event
 * reactor (handoff deadlines, same fold) keeps up with the stream: the reactor edge observes every
 * handoff event it is delivered (`observe`: folded on only when it directly follows the cached
 * fold), so the read asks only for what was appended after it — one round trip (the subject's
 * last sequence) when the reactor has seen everything, as it usually has by the time an agent's
 * result arrives. The read itself is never skipped, so the view is the stream's as of this call.
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
    const { state } = await this.runtime.store.current({ project, kind: 'handoff', id: handoffId }, handoffDecider);
    return handoffClaimView(handoffId, state);
  }
}
