import { Inject, Injectable } from '@nestjs/common';
import { isSubjectToken, type HandoffEvent } from '@baton/contracts';
import { evolveHandoff, handoffClaimView, initialHandoffState, type HandoffClaimView, type HandoffState } from '@baton/domain';
import { LruCache } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';

/** Handoffs whose fold the router keeps between results (each entry is one small state). */
const CACHED_HANDOFFS = 10_000;

/**
 * Reads the claim of a handoff for the claim rule (issue 11: a result is accepted only under the
 * current claim of the run's current handoff). The handoff aggregate is the ledger's; the router
 * only reads it, through the event store (`<prefix>.ev.<project>.handoff.<id>`), and never writes
 * it. The fold is cached per handoff with its last sequence, so the next read asks only for what
 * was appended since (one round trip when nothing was); the read itself is never skipped, so the
 * view is the stream's as of this call.
 */
@Injectable()
export class HandoffClaims {
  private readonly folded = new LruCache<string, { state: HandoffState; lastSeq: number }>(CACHED_HANDOFFS);

  constructor(@Inject(RUNTIME) private readonly runtime: ServiceRuntime) {}

  /**
   * The handoff `handoffId` of `project` as stored now: its status and current claim. An id that
   * cannot name a handoff subject reads as `absent` (there is no such handoff). Store failures are
   * thrown: the caller's message is redelivered.
   */
  async view(project: string, handoffId: string): Promise<HandoffClaimView> {
    if (!isSubjectToken(handoffId)) return { handoff_id: handoffId, status: 'absent', claim: null };
    const ref = { project, kind: 'handoff' as const, id: handoffId };
    const key = `${project}/${handoffId}`;
    let base = this.folded.get(key) ?? { state: initialHandoffState(), lastSeq: 0 };
    let read = await this.runtime.store.read(ref, { afterSeq: base.lastSeq });
    if (read.lastSeq < base.lastSeq) {
      // The stream went backwards (recreated): fold from the start.
      base = { state: initialHandoffState(), lastSeq: 0 };
      read = await this.runtime.store.read(ref);
    }
    const state = read.events.reduce((s, e) => evolveHandoff(s, { type: e.type, data: e.payload } as HandoffEvent), base.state);
    const lastSeq = Math.max(read.lastSeq, base.lastSeq);
    if (lastSeq > 0) this.folded.set(key, { state, lastSeq });
    return handoffClaimView(handoffId, state);
  }
}
