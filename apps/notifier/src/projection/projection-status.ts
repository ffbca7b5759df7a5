import { Inject, Injectable } from '@nestjs/common';
import { batonStreamNames } from '@baton/eventstore';
import type { BatonProjector, RebuildInfo } from '@baton/projections';
import { RUNTIME, type ReadinessDetails, type ServiceRuntime } from '@baton/platform';
import { BATON_PROJECTOR } from './tokens';

/** A rebuild as the API shows it: who runs it, how far it is, how fast, how long it has left. */
export interface RebuildView {
  generation: number;
  /** `rebuild`: a shadow that will be swapped in; `scratch`: a comparison (`baton verify`, a dry run). */
  kind: RebuildInfo['kind'];
  by: string;
  started_at: string;
  updated_at: string;
  phase: RebuildInfo['phase'];
  /** Last stream sequence written into the shadow, and the stream's last sequence when it started. */
  seq: number;
  target_seq: number | null;
  /** Events folded, of how many the stream held when it started. */
  events: number;
  total_events: number | null;
  /** Percent done (events over total, else sequence over target), null when unknown. */
  percent: number | null;
  /** Events per second since it started, and the seconds left at that rate. */
  rate: number;
  eta_seconds: number | null;
  /** Its lease ran out: the process died; the next rebuild deletes what it left. */
  stale: boolean;
}

/** One projection's state for the API and readiness. */
export interface ProjectionView {
  name: string;
  version: number;
  /** The generation operators read (kept, whole, while a rebuild runs), and the last stream sequence it applied. */
  active_generation: number | null;
  last_seq: number;
  stored_version: number | null;
  needs_rebuild: boolean;
  /** Stream events it has not applied yet (null when the stream could not be read). */
  behind_by: number | null;
  rebuilding: boolean;
  rebuilds: RebuildView[];
}

export interface ProjectionsReport {
  stream: { name: string; last_seq: number; messages: number } | null;
  /** Whether any projection is being rebuilt (a live rebuild, not a stale one or a comparison). */
  rebuilding: boolean;
  projections: ProjectionView[];
}

/**
 * What a caller scoped to some projects sees of {@link ProjectionsReport}: the same report without
 * the counters of the events stream every project shares — its sequence and message count, each
 * projection's `last_seq` and `behind_by` (`behind` says whether it is), a rebuild's positions,
 * event counts and rate — which would tell other tenants' activity. What a projection and its
 * rebuilds are doing (`rebuilding`, `phase`, `percent`, `eta_seconds`) stays.
 */
export interface ScopedProjectionsReport {
  counters: 'hidden';
  rebuilding: boolean;
  projections: Array<
    Pick<ProjectionView, 'name' | 'version' | 'active_generation' | 'stored_version' | 'needs_rebuild' | 'rebuilding'> & {
      behind: boolean | null;
      rebuilds: Array<Pick<RebuildView, 'generation' | 'kind' | 'by' | 'started_at' | 'updated_at' | 'phase' | 'percent' | 'eta_seconds' | 'stale'>>;
    }
  >;
}

/** {@link ScopedProjectionsReport} of a full report. Pure. */
export function scopedProjectionsReport(report: ProjectionsReport): ScopedProjectionsReport {
  return {
    counters: 'hidden',
    rebuilding: report.rebuilding,
    projections: report.projections.map((p) => ({
      name: p.name,
      version: p.version,
      active_generation: p.active_generation,
      stored_version: p.stored_version,
      needs_rebuild: p.needs_rebuild,
      behind: p.behind_by === null ? null : p.behind_by > 0,
      rebuilding: p.rebuilding,
      rebuilds: p.rebuilds.map((r) => ({
        generation: r.generation,
        kind: r.kind,
        by: r.by,
        started_at: r.started_at,
        updated_at: r.updated_at,
        phase: r.phase,
        percent: r.percent,
        eta_seconds: r.eta_seconds,
        stale: r.stale,
      })),
    })),
  };
}

export function rebuildView(info: RebuildInfo): RebuildView {
  const percent =
    info.totalEvents !== null && info.totalEvents > 0
      ? Math.min(100, Math.floor((info.events / info.totalEvents) * 1000) / 10)
      : info.targetSeq !== null && info.targetSeq > 0
        ? Math.min(100, Math.floor((info.seq / info.targetSeq) * 1000) / 10)
        : null;
  const left = info.totalEvents !== null ? Math.max(0, info.totalEvents - info.events) : null;
  return {
    generation: info.generation,
    kind: info.kind,
    by: info.by,
    started_at: info.startedAt,
    updated_at: info.updatedAt,
    phase: info.phase,
    seq: info.seq,
    target_seq: info.targetSeq,
    events: info.events,
    total_events: info.totalEvents,
    percent,
    rate: info.rate,
    eta_seconds: left !== null && info.rate > 0 ? Math.round(left / info.rate) : null,
    stale: info.stale,
  };
}

/**
 * The projections' state for `GET /v1/projections` and the readiness details: per projection the
 * active generation (what operators read; a rebuild never touches it until its atomic swap) and
 * how far it is behind the stream, and the rebuilds running on it — by this notifier, another one
 * or `baton replay` — with their progress, read from Redis.
 */
@Injectable()
export class ProjectionStatus {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(BATON_PROJECTOR) private readonly projector: BatonProjector,
  ) {}

  async report(): Promise<ProjectionsReport> {
    const name = batonStreamNames(this.runtime.config.BATON_PREFIX).events;
    const [statuses, rebuilds, stream] = await Promise.all([
      this.projector.status(),
      this.projector.rebuilds(),
      this.runtime.nats.jsm.streams.info(name).then(
        (info) => ({ name, last_seq: info.state.last_seq, messages: info.state.messages }),
        () => null,
      ),
    ]);
    const projections = statuses.map((status): ProjectionView => {
      const mine = rebuilds.filter((r) => r.projection === status.projection).map(rebuildView);
      const version = this.projector.projections.find((p) => p.name === status.projection)?.version ?? 0;
      return {
        name: status.projection,
        version,
        active_generation: status.activeGeneration,
        last_seq: status.lastSeq,
        stored_version: status.storedVersion,
        needs_rebuild: status.needsRebuild,
        behind_by: stream === null ? null : Math.max(0, stream.last_seq - status.lastSeq),
        rebuilding: mine.some((r) => r.kind === 'rebuild' && !r.stale),
        rebuilds: mine,
      };
    });
    return { stream, rebuilding: projections.some((p) => p.rebuilding), projections };
  }

  /**
   * The readiness details: compact (one line per projection); never fails readiness itself.
   * Readiness answers without a token, so it carries no counter of the events stream every project
   * shares (the same cut as {@link scopedProjectionsReport}); `GET /v1/projections` has them.
   */
  async readiness(): Promise<Record<string, unknown>> {
    const report = scopedProjectionsReport(await this.report());
    return {
      rebuilding: report.rebuilding,
      projections: Object.fromEntries(
        report.projections.map((p) => {
          const running = p.rebuilds.find((r) => r.kind === 'rebuild' && !r.stale);
          return [p.name, { behind: p.behind, rebuilding: running ? { percent: running.percent, eta_seconds: running.eta_seconds, by: running.by } : null }];
        }),
      ),
    };
  }
}

/** The notifier's readiness details: `projections` (rebuilds and their progress) in `/health/ready`. */
export function projectionReadiness(status: ProjectionStatus): ReadinessDetails[] {
  return [{ name: 'projections', details: () => status.readiness() }];
}
