import { Injectable } from '@nestjs/common';
import type { SequencedEvent } from '@baton/projections';

/** Called with each event once every projection has applied it. */
export type AppliedEventListener = (event: SequencedEvent) => void;

/**
 * In-process fan-out of the events the projection applier has just applied (live events only,
 * not the rebuild at start). The web inbox's event stream listens here, so what it pushes is
 * already readable from the projections. Listeners must not throw or block; one that throws is
 * ignored (logged by the caller) and never slows the applier.
 */
@Injectable()
export class AppliedEvents {
  private readonly listeners = new Set<AppliedEventListener>();

  /** Listen; returns the unsubscribe function. */
  subscribe(listener: AppliedEventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Tell every listener; errors are swallowed and counted. Returns how many listeners threw. */
  publish(event: SequencedEvent): number {
    let failed = 0;
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        failed += 1;
      }
    }
    return failed;
  }

  /** How many listeners there are (open event streams). */
  size(): number {
    return this.listeners.size;
  }
}
