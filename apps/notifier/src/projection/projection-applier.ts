import { BeforeApplicationShutdown, Inject, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { Subjects } from '@baton/contracts';
import { DlqSources, batonStreamNames, provision, runConsumer, type ConsumerRunner } from '@baton/eventstore';
import {
  eventsStreamMark,
  jetStreamReplaySource,
  noticesPublishedThrough,
  RedisLock,
  RebuildAbortedError,
  type BatonProjector,
  type EnsureCurrentOptions,
  type NewerRelease,
  type ProjectionStatus,
  type ReplaySource,
} from '@baton/projections';
import { RedisFullWatch, RUNTIME, type ServiceConfig, type ServiceRuntime } from '@baton/platform';
import { NOTIFIER_CONFIG, type NotifierConfig } from '../notifier.config';
import { AppliedEvents } from './applied-events';
import { ProjectionBatchApplier } from './batch-applier';
import { NoticePublisher } from './notice-publisher';
import { StandingBack } from './stand-back';
import { BATON_PROJECTOR, PROJECTION_DURABLE } from './tokens';

/** Unacknowledged events the consumer lets out at once, over every notifier instance. */
export const PROJECTION_MAX_ACK_PENDING = 1024;
/** Events one notifier instance holds at once (arrived, waiting or being applied). */
export const PROJECTION_IN_FLIGHT = 512;
/** Most events applied as one range. */
export const PROJECTION_BATCH = 256;
/** How long the apply lock holds without renewal: a notifier that dies holding it frees it after this, ms. */
export const APPLY_LOCK_TTL_MS = 10_000;

/**
 * How often a notifier that stands back from a newer release's projections looks again whether it
 * may resume, ms, when the regular check is off (NOTIFIER_PROJECTION_CHECK_MS=0).
 */
export const STAND_BACK_CHECK_MS = 5_000;

/** The Redis key of the lock the notifier instances of `prefix` apply ranges under (outside the projections' keyspace). */
export const applyLockKey = (prefix: string) => `${prefix}:notifier:apply-lock`;

/**
 * Keeps the Redis projections up to date with the events stream.
 *
 * At start (before the HTTP API serves): every projection with no active generation, or built by
 * another version of its definition, is rebuilt from the stream into a shadow generation and
 * swapped in. Then a durable pull consumer on `<prefix>.ev.>` feeds {@link ProjectionBatchApplier}:
 * the events that have arrived are applied as one contiguous range of the stream, each projection
 * in one compare-and-set commit, then acknowledged. Ranges always start right after what every
 * projection has applied (sequences not delivered here are read from the stream), so nothing is
 * ever overtaken and skipped, with any number of messages in flight and any number of notifier
 * instances sharing the consumer (they split the deliveries; whoever commits first wins, the other
 * re-folds). Each commit is idempotent by stream sequence, so redeliveries change nothing. An event
 * that does not decode is dead-lettered and its sequence applied as a no-op (the rebuild skips it
 * the same way). A failing apply is retried with the runner's backoff; an event the projections
 * still cannot apply after BATON_MAX_DELIVER deliveries is skipped and dead-lettered.
 *
 * A full Redis (maxmemory under `noeviction`: every write refused) is not an event's failure: the
 * events wait, none is acknowledged, skipped or dead-lettered, and the applier catches up by itself
 * once Redis has room. It is said once ({@link RedisFullWatch}: a warn, then a summary at most
 * once a minute, an info when writes go through again), counted (`baton_redis_full`,
 * `baton_redis_full_refused_total`) and shown on `/health/ready` (`details.redis`) and
 * `GET /v1/projections` (docs/sre.md, What fills Redis).
 *
 * Self-healing: every NOTIFIER_PROJECTION_CHECK_MS the same check as at start runs again, so a
 * projection Redis lost (FLUSHALL, a replaced or failed-over Redis without its data) is noticed —
 * it has no active generation any more — and rebuilt from the stream into a shadow generation and
 * swapped in, as `baton replay` would. So is a projection that has applied more of the stream than
 * the stream holds: it was built from an events stream that is gone (NATS storage lost, the stream
 * recreated), and is rebuilt from this one and swapped in over the stale generation. The rebuild hands over to the live applier like any other
 * (the swap waits until the shadow has applied what the live side has), and several notifier
 * instances doing it at once are safe (one swap wins, the others drop their shadow).
 *
 * A loss under live traffic is usually found first by the live applier (its range finds no active
 * generation): it writes nothing, its messages wait, and the same check runs at once instead of at
 * the next tick. The lost `notices` projection is rebuilt only up to what was published before the
 * loss ({@link noticesThrough}, or the consumer's ack floor if higher): the live applier then
 * applies the events after it, publishing the notices the loss kept it from publishing — and none
 * of the history again. A loss found at start is bounded by the consumer's ack floor alone (see
 * {@link noticesBoundAtStart}).
 *
 * Two releases side by side (a rolling upgrade of several notifiers): a projection's definition
 * version only grows from one release to the next. A notifier that finds a projection built by a
 * newer release — at start, at a check, or by its live applier's commit being refused
 * (`ProjectionVersionError`: the apply script compares versions, so no older ops ever land on a
 * newer generation) — stands back ({@link StandingBack}): it stops its consumer (its deliveries
 * go to the newer notifiers), rebuilds and publishes nothing, and is not ready; it resumes by itself
 * once no projection is newer than its code (a rollback rebuilt them to its version). A notifier
 * that finds a projection built by an OLDER release rebuilds it to its own version, as at start.
 * So the two never rebuild a projection back and forth.
 */
@Injectable()
export class ProjectionApplier implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private runner: ConsumerRunner | null = null;
  private started: Promise<void> | null = null;
  private checkTimer: NodeJS.Timeout | null = null;
  private checking: Promise<void> | null = null;
  /** A check was asked for while one ran: run another once it ends. */
  private checkAgain = false;
  /** Re-checks while standing back when the regular check is off. */
  private standBackTimer: NodeJS.Timeout | null = null;
  private batches: ProjectionBatchApplier | null = null;
  private stopping = false;
  /** Aborts a rebuild still running at shutdown (it swaps nothing and drops its shadows). */
  private readonly shutdown = new AbortController();
  private source: ReplaySource | null = null;
  /**
   * The highest stream sequence whose notice is known published (this process published it, or
   * the `notices` projection was seen holding it): where a lost `notices` projection is rebuilt to.
   */
  private noticesThrough = 0;

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime<ServiceConfig>,
    @Inject(NOTIFIER_CONFIG) private readonly config: NotifierConfig,
    @Inject(BATON_PROJECTOR) private readonly projector: BatonProjector,
    private readonly notices: NoticePublisher,
    private readonly applied: AppliedEvents,
    private readonly redisFull: RedisFullWatch,
    private readonly standing: StandingBack,
  ) {}

  onApplicationBootstrap(): Promise<void> {
    this.started ??= this.start();
    return this.started;
  }

  private async start(): Promise<void> {
    const { config, nats, registry, logger } = this.runtime;
    const prefix = config.BATON_PREFIX;
    const source = jetStreamReplaySource({
      nats,
      prefix,
      registry,
      onUndecodable: (seq, subject, rejection) =>
        logger.warn('rebuild skipped an undecodable event', { seq, subject, code: rejection.code, reason: rejection.message }),
    });
    this.source = source;
    // A newer release's projections in Redis: a newer notifier runs, and what Redis lost is its to
    // rebuild — rebuilt here at this release's version, it would rebuild it back. Stand back first.
    const found = await this.projector.status();
    const newerAtStart = await this.projector.newerReleases(found);
    if (newerAtStart.length === 0) await this.ensureCurrent(source, 'at start');
    const statuses = newerAtStart.length === 0 ? await this.projector.status() : found;
    const notices = statuses.find((status) => status.projection === 'notices');
    this.noticesThrough = Math.max(this.noticesThrough, notices?.lastSeq ?? 0);
    const stream = batonStreamNames(prefix).events;
    this.batches = new ProjectionBatchApplier({
      projector: this.projector,
      registry,
      nats,
      stream,
      prefix,
      maxDeliver: config.BATON_MAX_DELIVER,
      // One instance at a time applies a range (its notices published once): see ProjectionBatchApplier.
      ...(this.runtime.redis
        ? { applyLock: new RedisLock(this.runtime.redis.client, applyLockKey(prefix), { ttlMs: APPLY_LOCK_TTL_MS, signal: this.shutdown.signal }) }
        : {}),
      publishNotices: async (events) => {
        await this.notices.publishUnapplied(events);
        this.noticesThrough = Math.max(this.noticesThrough, events.at(-1)?.seq ?? 0);
      },
      onNoticesAt: (seq) => (this.noticesThrough = Math.max(this.noticesThrough, seq)),
      // Found by the live applier first: rebuild now, not at the next tick.
      onLost: () => this.check(),
      // Another release rebuilt a projection: stand back (newer) or rebuild it (older), now.
      onVersion: () => this.check(),
      // Said once, counted, on readiness: not a line per event or batch.
      redisFull: this.redisFull,
      onApplied: (event) => {
        const failed = this.applied.publish(event);
        if (failed > 0) logger.warn('an applied-event listener threw', { seq: event.seq, event_id: event.id, listeners: failed });
      },
      logger,
    });
    await provision(nats.jsm, {
      consumers: [
        {
          stream,
          durable: PROJECTION_DURABLE,
          filterSubject: Subjects.events(prefix),
          deliverFrom: 'all',
          ackWaitMs: config.BATON_ACK_WAIT_MS,
          maxAckPending: PROJECTION_MAX_ACK_PENDING,
          description: 'notifier: Redis projections and human action notices',
        },
      ],
    });
    // Projections a newer release built: stand back from the start (the consumer is not started).
    const newer = newerAtStart.length > 0 ? newerAtStart : await this.projector.newerReleases(statuses);
    if (newer.length > 0) await this.standBack(newer);
    else this.startRunner();
    const every = this.config.NOTIFIER_PROJECTION_CHECK_MS;
    if (every > 0 && !this.stopping) {
      this.checkTimer = setInterval(() => this.check(), every);
      this.checkTimer.unref();
    }
  }

  /** Start the projection consumer, feeding the batch applier. */
  private startRunner(): void {
    const { config, nats, logger } = this.runtime;
    const prefix = config.BATON_PREFIX;
    const stream = batonStreamNames(prefix).events;
    const batches = this.batches as ProjectionBatchApplier;
    this.runner = runConsumer({
      js: nats.js,
      stream,
      durable: PROJECTION_DURABLE,
      prefix,
      source: DlqSources.notifierProjections,
      maxDeliver: config.BATON_MAX_DELIVER,
      concurrency: PROJECTION_IN_FLIGHT,
      batch: PROJECTION_BATCH,
      pullExpiresMs: 1000,
      handleBatch: (msgs) => batches.handle(msgs),
      onOutcome: (outcome) => {
        if (outcome.kind === 'acked') return;
        // A message offered again later waits behind what the batch applier found and said once
        // (a failing event, a lost projection, a full Redis): a line per waiting message would be
        // hundreds a second. Anything else (a dead letter) is worth a line of its own.
        (outcome.kind === 'retry' ? logger.debug : logger.warn).call(logger, `projection event ${outcome.kind}`, {
          seq: outcome.msg.seq,
          subject: outcome.msg.subject,
          error: String('error' in outcome ? outcome.error : ''),
        });
      },
      onError: (error) => logger.error('projection consumer pull failed', { error: String(error) }),
      // Deleted or lost at runtime: re-created after its ack floor (the runner does it; logged here).
      onConsumerLost: (event) =>
        (event.outcome === 'failed' ? logger.error : logger.warn).call(logger, `projection consumer lost: ${event.outcome}`, {
          durable: event.durable,
          ack_floor: event.ackFloor,
          ...(event.startSeq !== undefined ? { start_seq: event.startSeq } : {}),
          ...(event.error !== undefined ? { error: String(event.error) } : {}),
        }),
    });
    logger.info('projection consumer started', { stream, durable: PROJECTION_DURABLE });
  }

  /**
   * Stand back from the projections a newer release built (see the class comment): said once at
   * error, the consumer stopped, not ready until it resumes.
   */
  private async standBack(newer: readonly NewerRelease[]): Promise<void> {
    if (this.standing.enter(newer)) {
      this.runtime.logger.error(
        'a newer release of the notifier built these projections: this notifier stands back (applies, rebuilds and publishes nothing; not ready) — upgrade or stop it',
        { projections: newer.map((n) => `${n.projection}@${n.storedVersion}>${n.version}`).join(',') },
      );
    }
    const runner = this.runner;
    this.runner = null;
    await runner?.stop();
    if (this.config.NOTIFIER_PROJECTION_CHECK_MS <= 0 && this.standBackTimer === null && !this.stopping) {
      this.standBackTimer = setInterval(() => this.check(), STAND_BACK_CHECK_MS);
      this.standBackTimer.unref();
    }
  }

  /**
   * Run the check after start now: stand back from a newer release's projections, or resume when
   * none is left, and rebuild what is lost or of an older version. Never two at once (a rebuild is
   * not started twice): one asked for while another runs follows it.
   */
  private check(): void {
    if (this.stopping || !this.source) return;
    if (this.checking) {
      this.checkAgain = true;
      return;
    }
    const source = this.source;
    this.checking = this.reconcile(source).finally(() => {
      this.checking = null;
      if (this.checkAgain) {
        this.checkAgain = false;
        this.check();
      }
    });
  }

  private async reconcile(source: ReplaySource): Promise<void> {
    const { logger } = this.runtime;
    let statuses: ProjectionStatus[];
    try {
      statuses = await this.projector.status();
    } catch (error) {
      logger.error('projection check failed; retrying at the next check', error instanceof Error ? error : { error: String(error) });
      return;
    }
    const newer = await this.projector.newerReleases(statuses);
    if (newer.length > 0) return this.standBack(newer);
    // A projection it stood back from that Redis lost meanwhile is the newer release's to rebuild:
    // rebuilt here at this release's version, the newer notifiers would rebuild it back.
    const stoodFrom = new Set(this.standing.view()?.projections.map((p) => p.projection));
    if (statuses.some((s) => s.activeGeneration === null && stoodFrom.has(s.projection))) return;
    if (this.standing.leave()) {
      logger.warn('no projection is of a newer release any more: this notifier applies them again');
      if (this.standBackTimer) clearInterval(this.standBackTimer);
      this.standBackTimer = null;
    }
    await this.ensureCurrent(source, 'after start');
    if (this.runner === null && !this.stopping && !this.standing.active) this.startRunner();
  }

  /**
   * Where a lost `notices` projection is rebuilt to: the highest sequence whose notice is known
   * published — by this process, or acknowledged on the shared consumer (every projection, notices
   * included, had applied it) — so that the events after it get their notices from the live applier.
   */
  private async noticesBound(): Promise<number> {
    return Math.max(this.noticesThrough, (await noticesPublishedThrough(this.runtime.nats, this.runtime.config.BATON_PREFIX)) ?? 0);
  }

  /**
   * Where a `notices` projection Redis does not hold is rebuilt to at start. A notifier that starts
   * on an empty Redis cannot tell a loss from a new Redis by Redis alone, but the projection
   * consumer can: when it exists, the events after its ack floor were never applied by any notifier
   * — their notices never published — so `notices` is rebuilt to the ack floor and the live applier
   * publishes the rest (the notices of events stored while Redis was lost and no notifier ran). No
   * consumer: nothing was ever published from this stream here, and its history gets no notices.
   */
  private async noticesBoundAtStart(): Promise<Readonly<Record<string, number>>> {
    const through = await noticesPublishedThrough(this.runtime.nats, this.runtime.config.BATON_PREFIX);
    return through === null ? {} : { notices: through };
  }

  /**
   * Rebuild every projection Redis does not hold (or holds from another definition version), all
   * over one read of the stream (folded in memory and written in bulk); progress is logged every
   * 10 s and shown by `GET /v1/projections` and `/health/ready` while it runs.
   */
  private async ensureCurrent(source: ReplaySource, when: 'at start' | 'after start'): Promise<void> {
    const { logger, nats, config } = this.runtime;
    try {
      const stream = await nats.jsm.streams.info(batonStreamNames(config.BATON_PREFIX).events).then(
        (info) => info.state,
        () => null,
      );
      let logged = 0;
      const options: EnsureCurrentOptions = {
        // This process's name (BATON_INSTANCE, else `notifier-<host>-<pid>`): two notifiers rebuilding
        // at once are told apart in `GET /v1/projections` and readiness, each reporting its own.
        by: this.runtime.instance,
        signal: this.shutdown.signal,
        // Half the CLI's chunk and caches: the rebuild fits the service's small heap
        // (--max-old-space-size=96 in deployment) next to everything else the notifier keeps.
        chunkEvents: 1_024,
        stateCacheSize: 2_048,
        itemCacheSize: 2_048,
        ...(stream ? { targetSeq: stream.last_seq, totalEvents: stream.messages } : {}),
        // Lost: `notices` up to what was published — after start what this process published or
        // the consumer acknowledged, at start the consumer's ack floor (none: no bound).
        lostUntil: when === 'after start' ? async () => ({ notices: await this.noticesBound() }) : () => this.noticesBoundAtStart(),
        onProgress: (progress) => {
          if (progress.elapsedMs - logged < 10_000) return;
          logged = progress.elapsedMs;
          logger.info('projection rebuild progress', {
            projections: progress.projections.join(','),
            phase: progress.phase,
            events: progress.events,
            ...(progress.totalEvents !== null ? { total_events: progress.totalEvents } : {}),
            events_per_s: Math.round((progress.events * 1000) / Math.max(1, progress.elapsedMs)),
          });
        },
      };
      // Shadows of rebuilds whose process died (a killed `baton replay`) are deleted.
      const abandoned = await this.projector.collectAbandoned();
      if (abandoned > 0) logger.warn('deleted the shadow generations of rebuilds that died', { shadows: abandoned });
      const streamName = batonStreamNames(config.BATON_PREFIX).events;
      const streamMark = () => eventsStreamMark(nats, streamName).catch(() => null);
      for (const rebuilt of await this.projector.ensureCurrent(source, options, streamMark)) {
        const fields = {
          projection: rebuilt.projection,
          reason: rebuilt.reason,
          status: rebuilt.result.status,
          ...(rebuilt.result.status === 'swapped' ? { last_seq: rebuilt.result.lastSeq } : {}),
          // `notices` rebuilt up to what was published (lost, or of another version): the live
          // applier publishes from here.
          ...(rebuilt.projection === 'notices' &&
          rebuilt.result.status === 'swapped' &&
          (rebuilt.reason === 'no_active_generation' || (rebuilt.reason === 'version_changed' && stream !== null && rebuilt.result.lastSeq < stream.last_seq))
            ? { notices_from_seq: rebuilt.result.lastSeq + 1 }
            : {}),
        };
        // Another instance's rebuild swapped in first: this one's shadow was dropped, and the line
        // that the projection was rebuilt is that instance's to write.
        if (rebuilt.result.status === 'lost') logger.info('projection rebuilt by another instance first; this rebuild was dropped', fields);
        else if (rebuilt.reason === 'stream_replaced')
          logger.error('projection was built from another events stream (recreated, its sequences started again): rebuilt from this one', fields);
        else if (when === 'at start') logger.info('projection rebuilt at start', fields);
        // Found after start with another version than this code's: an older release rebuilt it (a
        // rollback's replay, an older notifier that rebuilt it after a loss).
        else if (rebuilt.reason === 'version_changed') logger.warn('projection was built by an older version of its definition: rebuilt to this one', fields);
        else logger.warn('projection lost from Redis: rebuilt from the events stream', fields);
      }
    } catch (error) {
      if (error instanceof RebuildAbortedError) return; // shutting down
      // At start the notifier must not serve half-built projections: fail the start. Later, the
      // next check tries again.
      if (when === 'at start') throw error;
      // A rebuild a full Redis refused: said once with the applier's refusals, not at every check.
      if (this.redisFull.refused('projections rebuild', error)) return;
      logger.error('projection check failed; retrying at the next check', error instanceof Error ? error : { error: String(error) });
    }
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    this.shutdown.abort();
    if (this.checkTimer) clearInterval(this.checkTimer);
    this.checkTimer = null;
    if (this.standBackTimer) clearInterval(this.standBackTimer);
    this.standBackTimer = null;
    await this.checking?.catch(() => undefined);
    await this.started?.catch(() => undefined);
    await this.runner?.stop();
    this.runner = null;
    // What no line has counted yet is summed up once.
    this.redisFull.stop();
  }
}
