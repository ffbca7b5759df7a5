import { RedisFullError } from '@baton/projections';
import { FullWatch, type FullWatchLog, type FullWatchWords } from './full-watch';

/** The limit a full Redis reached: its `maxmemory` (under `maxmemory-policy noeviction`). */
const LIMIT = 'maxmemory';

/** What the Redis watch's lines say. */
const REDIS_WORDS: FullWatchWords = {
  start: 'redis full: projection writes refused; the projections wait until Redis has room (docs/sre.md, What fills Redis)',
  still: 'redis still full: projection writes refused',
  was: 'redis was full: projection writes refused',
  ended: 'redis full no longer: projection writes applied',
  what: 'write',
};

/** What `/health/ready` (`details.redis`) and `GET /v1/projections` (`redis`) say of a full Redis. */
export interface RedisFullStatus {
  /** True while Redis refuses the projections' writes (maxmemory reached), from the first refusal until a write goes through. */
  full: boolean;
  /** When the first refusal of this condition came (ISO 8601); null when not full. */
  since: string | null;
  /** Writes refused since then (0 when not full). Which writes (their stream sequences) only the log says: readiness answers without a token. */
  refused: number;
}

export interface RedisFullWatchOptions {
  /** At most one summary line a window (default a minute). */
  windowMs?: number;
  /** Counted for each refused write (`baton_redis_full_refused_total`). */
  onRefused?: () => void;
  now?: () => number;
}

/**
 * Redis full — its memory at `maxmemory` under `maxmemory-policy noeviction`, so it refuses every
 * write (`OOM command not allowed…`, {@link RedisFullError}) while reads answer — said once rather
 * than once per write: the notifier's projection applier passes every write it could not make
 * here ({@link refused}) and says when one went through again ({@link wrote}). The lines are
 * {@link FullWatch}'s, as for a full JetStream ({@link StorageFullWatch}): a warn `redis full` when
 * refusals start (with Redis's words), at most one warn `redis still full` a minute with the
 * refusals held back, an info `redis full no longer` (`refused`, `full_ms`) once a write is applied
 * again. The condition is also on `/health/ready` and `GET /v1/projections` ({@link status}) and
 * in `baton_redis_full` / `baton_redis_full_refused_total`.
 */
export class RedisFullWatch {
  private readonly watch: FullWatch<typeof LIMIT>;

  constructor(
    log: FullWatchLog,
    private readonly options: RedisFullWatchOptions = {},
  ) {
    this.watch = new FullWatch(log, REDIS_WORDS, {
      ...(options.windowMs !== undefined ? { windowMs: options.windowMs } : {}),
      ...(options.now !== undefined ? { now: options.now } : {}),
    });
  }

  /**
   * A write of `what` failed with `error`: when Redis refused it for being full it is counted and
   * true is answered; anything else is ignored (false).
   */
  refused(what: string, error: unknown): boolean {
    const full = RedisFullError.of(error);
    if (full === null) return false;
    this.options.onRefused?.();
    this.watch.refuse(LIMIT, LIMIT, {}, what, { error: full.message });
    return true;
  }

  /** A write went through: a full Redis has room again. */
  wrote(): void {
    this.watch.end(LIMIT);
  }

  /** Whether Redis refuses writes now (the `baton_redis_full` gauge). */
  full(): boolean {
    return this.watch.holds(LIMIT);
  }

  status(): RedisFullStatus {
    const condition = this.watch.conditions()[0];
    if (condition === undefined) return { full: false, since: null, refused: 0 };
    return { full: true, since: new Date(condition.since).toISOString(), refused: condition.refused };
  }

  /** Stop sweeping; refusals no line has counted yet are written in one last summary. */
  stop(): void {
    this.watch.stop();
  }
}
