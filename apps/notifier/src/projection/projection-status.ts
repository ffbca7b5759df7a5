import { Inject, Injectable, Optional } from '@nestjs/common';
import { batonStreamNames } from '@baton/eventstore';
import { newerRelease, type BatonProjector, type RebuildInfo } from '@baton/projections';
import { RedisFullWatch, RUNTIME, type ReadinessDetails, type RedisFullStatus, type ServiceRuntime } from '@baton/platform';
import { StandingBack, type StandingBackView } from './stand-back';
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
  /**
   * Why it is behind, when the notifier knows: `redis_full` while Redis refuses the projections'
   * writes (maxmemory reached): its events wait until Redis has room. Null when it is not behind,
   * or nothing holds it back but time.
   */
  behind_reason: BehindReason | null;
  rebuilding: boolean;
  rebuilds: RebuildView[];
}

/** Why a projection is behind the stream ({@link ProjectionView.behind_reason}). */
export type BehindReason = 'redis_full';

export interface ProjectionsReport {
  stream: { name: string; last_seq: number; messages: number } | null;
  /** Whether Redis refuses the projections' writes for being full, since when, how many (as `/health/ready`'s `details.redis`). */
  redis: RedisFullStatus;
  /** Whether any projection is being rebuilt (a live rebuild, not a stale one or a comparison). */
  rebuilding: boolean;
  /** Set while this notifier stands back from projections a newer release built ({@link StandingBack}); else null. */
  standing_back: StandingBackView | null;
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
  redis: RedisFullStatus;
  standing_back: StandingBackView | null;
  projections: Array<
    Pick<ProjectionView, 'name' | 'version' | 'active_generation' | 'stored_version' | 'needs_rebuild' | 'behind_reason' | 'rebuilding'> & {
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
    redis: report.redis,
    standing_back: report.standing_back,
    projections: report.projections.map((p) => ({
      name: p.name,
      version: p.version,
      active_generation: p.active_generation,
      stored_version: p.stored_version,
      needs_rebuild: p.needs_rebuild,
      behind: p.behind_by === null ? null : p.behind_by > 0,
      behind_reason: p.behind_reason,
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
    @Optional() private readonly redisFull?: RedisFullWatch,
    @Optional() private readonly standing?: StandingBack,
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
    const redis = this.redisFull?.status() ?? { full: false, since: null, refused: 0 };
    const projections = statuses.map((status): ProjectionView => {
      const mine = rebuilds.filter((r) => r.projection === status.projection).map(rebuildView);
      const version = this.projector.projections.find((p) => p.name === status.projection)?.version ?? 0;
      const behindBy = stream === null ? null : Math.max(0, stream.last_seq - status.lastSeq);
      return {
        name: status.projection,
        version,
        active_generation: status.activeGeneration,
        last_seq: status.lastSeq,
        stored_version: status.storedVersion,
        // Not by this notifier: a projection a newer release built is left to that release.
        needs_rebuild: status.needsRebuild && newerRelease(status, { name: status.projection, version }) === null,
        behind_by: behindBy,
        // Its events wait for room in Redis (those it had applied stay readable).
        behind_reason: redis.full && behindBy !== 0 ? 'redis_full' : null,
        rebuilding: mine.some((r) => r.kind === 'rebuild' && !r.stale),
        rebuilds: mine,
      };
    });
    return { stream, rebuilding: projections.some((p) => p.rebuilding), redis, standing_back: this.standing?.view() ?? null, projections };
  }

  /**
   * The readiness details: compact (one line per projection); never fails readiness itself.
   * Readiness answers without a token, so it carries no counter of the events stream every project
   * shares (the same cut as {@link scopedProjectionsReport}); `GET /v1/projections` has them.
   * Each projection's running rebuild is {@link reportedRebuild}'s: one generation, named, whose
   * figure only grows, and whose instance is said.
   */
  async readiness(): Promise<ProjectionsReadiness> {
    const report = scopedProjectionsReport(await this.report());
    return {
      rebuilding: report.rebuilding,
      standing_back: report.standing_back,
      projections: Object.fromEntries(
        report.projections.map((p) => [p.name, { behind: p.behind, rebuilding: reportedRebuild(p.rebuilds, this.runtime.instance) }]),
      ),
    };
  }
}

/** A projection's running rebuild as readiness shows it. */
export interface ReadinessRebuild {
  /** The generation being built: the figures are that rebuild's, whichever instance reads them. */
  generation: number;
  /** The instance that runs it (a notifier's `BATON_INSTANCE`, `<service>-<host>-<pid>` by default; `baton replay`…). */
  by: string;
  /** Whether the instance answering runs it. */
  this_instance: boolean;
  percent: number | null;
  eta_seconds: number | null;
}

/** The notifier's readiness details (`details.projections` of `/health/ready`). */
export interface ProjectionsReadiness {
  rebuilding: boolean;
  /** Set while this notifier stands back from a newer release's projections (readiness check `projection_versions` fails). */
  standing_back: StandingBackView | null;
  projections: Record<string, { behind: boolean | null; rebuilding: ReadinessRebuild | null }>;
}

/**
 * The one rebuild readiness reports for a projection, among those running on it (stale ones and
 * comparisons left out): this instance's own, else the oldest another instance runs — the lowest
 * generation, which a rebuild started later (a higher one) never displaces. So every instance
 * reports one rebuild until it ends, never alternates between two: each rebuild's figure grows
 * from its own progress entry (`events` over the stream's count when it began), and two notifiers
 * rebuilding at once each report their own, named by generation and instance. Pure.
 */
export function reportedRebuild(
  rebuilds: ReadonlyArray<Pick<RebuildView, 'generation' | 'kind' | 'by' | 'stale' | 'percent' | 'eta_seconds'>>,
  instance: string,
): ReadinessRebuild | null {
  const running = rebuilds.filter((r) => r.kind === 'rebuild' && !r.stale).sort((a, b) => a.generation - b.generation);
  const chosen = running.find((r) => r.by === instance) ?? running[0];
  if (chosen === undefined) return null;
  return { generation: chosen.generation, by: chosen.by, this_instance: chosen.by === instance, percent: chosen.percent, eta_seconds: chosen.eta_seconds };
}

/**
 * The notifier's readiness details in `/health/ready`: `projections` (rebuilds and their progress)
 * and `redis` (whether Redis refuses the projections' writes for being full: never a failed check,
 * docs/sre.md, Health).
 */
export function projectionReadiness(status: ProjectionStatus, redisFull: RedisFullWatch): ReadinessDetails[] {
  return [
    { name: 'projections', details: () => status.readiness() },
    { name: 'redis', details: () => Promise.resolve(redisFull.status()) },
  ];
}
