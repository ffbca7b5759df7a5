import { Injectable } from '@nestjs/common';
import type { NewerRelease } from '@baton/projections';

/** A projection a newer release built, as the API and readiness show it. */
export interface NewerProjectionView {
  projection: string;
  /** This notifier's definition version. */
  version: number;
  /** The version that built the active generation (above `version`). */
  stored_version: number;
}

/** Why and since when this notifier stands back (`standing_back` of `GET /v1/projections` and `/health/ready`). */
export interface StandingBackView {
  reason: 'newer_release';
  /** When this notifier began to stand back (ISO 8601). */
  since: string;
  projections: NewerProjectionView[];
}

/**
 * Whether this notifier stands back from projections a newer release of the notifier built: it
 * applies nothing (its projection consumer is stopped, so its deliveries go to the newer
 * notifiers), rebuilds nothing and publishes no notice, and `/health/ready` answers 503
 * (`checks.projection_versions: false`) until it is stopped for the newer release — or until the
 * projections are rebuilt to its own version (a rollback: `baton replay --allow-version-change`
 * with this release's `baton`), when it resumes by itself. Set and cleared by the
 * `ProjectionApplier`; read by the status report and readiness.
 */
@Injectable()
export class StandingBack {
  private current: StandingBackView | null = null;

  /** Stand back from `newer` (keeps the first `since` while it goes on); returns whether it just began. */
  enter(newer: readonly NewerRelease[]): boolean {
    const projections = newer.map((n) => ({ projection: n.projection, version: n.version, stored_version: n.storedVersion }));
    const began = this.current === null;
    this.current = { reason: 'newer_release', since: this.current?.since ?? new Date().toISOString(), projections };
    return began;
  }

  /** Stop standing back; returns whether it stood back. */
  leave(): boolean {
    const was = this.current !== null;
    this.current = null;
    return was;
  }

  /** What the API and readiness show: null while this notifier applies as usual. */
  view(): StandingBackView | null {
    return this.current;
  }

  get active(): boolean {
    return this.current !== null;
  }
}
