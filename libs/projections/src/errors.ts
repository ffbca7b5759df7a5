import type { RebuildResult } from './store';

/** Base class of every error this library raises. `cause` carries the client or server error. */
export class ProjectionError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ProjectionError';
  }
}

/** What ioredis and Redis say when Redis did not answer, or cannot serve commands right now. */
const UNAVAILABLE_MESSAGE =
  /^(Command timed out|Connection is closed|Stream isn't writeable|Reached the max retries per request limit|connect ETIMEDOUT|(LOADING|BUSY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN)\b)/;
const UNAVAILABLE_CODE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

/**
 * Redis did not answer in time (a readiness check, or any command past the client's command
 * timeout: `REDIS_COMMAND_TIMEOUT_MS`), refused the connection, or cannot serve commands now
 * (loading, busy). Callers answer "unavailable, try again" (the operator API: 503
 * `projections_unavailable`) instead of hanging.
 */
export class RedisUnavailableError extends ProjectionError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RedisUnavailableError';
  }

  /**
   * `error` as a RedisUnavailableError when it (or an error in its `cause` chain) says Redis is
   * unavailable — a command timeout, a closed or refused connection, the retry limit of a
   * disconnected client, LOADING / BUSY replies — else null (a bug, a bad reply: not Redis being away).
   */
  static of(error: unknown): RedisUnavailableError | null {
    let current: unknown = error;
    for (let depth = 0; depth < 6 && current instanceof Error; depth++) {
      if (current instanceof RedisUnavailableError) return current;
      const code = (current as { code?: unknown }).code;
      if (
        current.name === 'MaxRetriesPerRequestError' ||
        UNAVAILABLE_MESSAGE.test(current.message) ||
        (typeof code === 'string' && UNAVAILABLE_CODE.has(code))
      ) {
        return new RedisUnavailableError(`redis is unavailable: ${current.message}`, { cause: error });
      }
      current = current.cause;
    }
    return null;
  }
}

/**
 * What Redis answers a write while its memory is at `maxmemory` and its policy evicts nothing
 * (`noeviction`): the reply's error code is `OOM` ("OOM command not allowed when used memory >
 * 'maxmemory'"), for a command and for a script's first write alike (the script wrote nothing). A
 * transaction with such a command is discarded (`EXECABORT`, the OOM among its previous errors).
 */
const FULL_MESSAGE = /^OOM\b/;

/**
 * Redis refused a write because it is full: its memory reached `maxmemory` under the
 * `noeviction` policy. Nothing of the refused command (or script) was written; reads still answer,
 * and writes answer again once Redis has room (maxmemory raised, memory added, keys deleted). Not
 * {@link RedisUnavailableError}: Redis answered, and waiting seconds does not free it. Callers wait
 * with what they could not write (the projection applier) or answer 503 `redis_full` (the operator
 * API).
 */
export class RedisFullError extends ProjectionError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RedisFullError';
  }

  /**
   * `error` as a RedisFullError when it (or an error in its `cause` chain, or a discarded
   * transaction's `previousErrors`) is Redis's `OOM` refusal, else null.
   */
  static of(error: unknown): RedisFullError | null {
    let current: unknown = error;
    for (let depth = 0; depth < 6 && current instanceof Error; depth++) {
      if (current instanceof RedisFullError) return current;
      if (FULL_MESSAGE.test(current.message)) return new RedisFullError(`redis is full (maxmemory): ${current.message}`, { cause: error });
      const previous = (current as { previousErrors?: unknown }).previousErrors;
      if (Array.isArray(previous)) {
        const full = previous.find((e): e is Error => e instanceof Error && FULL_MESSAGE.test(e.message));
        if (full) return new RedisFullError(`redis is full (maxmemory): ${full.message}`, { cause: error });
      }
      current = current.cause;
    }
    return null;
  }
}

/**
 * A projection produced an operation that cannot be executed: a malformed op (caught before Redis
 * is called) or an op whose target key holds a different Redis type (caught by the apply script's
 * validation pass before its first write). Either way nothing of the batch was written.
 */
export class ProjectionOpError extends ProjectionError {
  constructor(
    message: string,
    readonly detail: { projection: string; seq?: number; opIndex?: number; key?: string; reason: string },
  ) {
    super(message);
    this.name = 'ProjectionOpError';
  }
}

/** A query cursor that was not produced by this library, or was produced for another order. */
export class InvalidCursorError extends ProjectionError {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidCursorError';
  }
}

/**
 * A rebuild could not catch up with the live applier within its attempts (the stream grows faster
 * than the replay, or the source cannot supply what the live generation already holds). The shadow
 * generation was dropped; the active generation is untouched.
 */
export class RebuildBehindError extends ProjectionError {
  constructor(
    readonly projection: string,
    readonly shadowSeq: number,
    readonly activeSeq: number,
  ) {
    super(`rebuild of ${projection} stayed behind the live projection (shadow at ${shadowSeq}, active at ${activeSeq})`);
    this.name = 'RebuildBehindError';
  }
}

/**
 * The active generation of a projection was built by another version of its definition than the
 * applier's: another release of the notifier (or a replay run with `--allow-version-change`)
 * rebuilt it. The apply wrote nothing — one release's ops never land on values another release
 * folded. `newer`: the stored version is above the applier's (the applier is of an older release
 * and stands back until it is upgraded or the projection is rebuilt to its version); otherwise the
 * applier is of a newer release and rebuilds the projection to its own version.
 */
export class ProjectionVersionError extends ProjectionError {
  constructor(
    readonly projection: string,
    readonly version: number,
    readonly storedVersion: number,
  ) {
    super(`projection ${projection} was built by version ${storedVersion} of its definition; this applier folds version ${version}, so it applied nothing`);
    this.name = 'ProjectionVersionError';
  }

  /** Whether the stored version is above the applier's (the applier is of an older release). */
  get newer(): boolean {
    return this.storedVersion > this.version;
  }
}

/**
 * A rebuild's shadow generation is no longer the one it created: Redis lost its data mid-rebuild
 * (FLUSHALL, a failover to a replica without it), so the shadow's early part is gone, and the
 * generation number may since have been handed to another rebuild. The apply or swap that found
 * out wrote nothing; the rebuild stopped without swapping and left that generation alone (it
 * may be another rebuild's now). Running the rebuild again is safe.
 */
export class ShadowLostError extends ProjectionError {
  constructor(
    readonly projection: string,
    readonly generation: number,
  ) {
    super(
      `the shadow generation ${generation} of ${projection} was lost mid-rebuild (Redis lost its data, or the generation now belongs to another rebuild); nothing was swapped in, run the rebuild again`,
    );
    this.name = 'ShadowLostError';
  }
}

/**
 * A rebuild of several projections over one read settled some of them (swapped in, or another
 * rebuild swapped in first) and failed the others. `settled` holds the results of the first —
 * those projections ARE rebuilt —, `failures` the error of each of the others, as a rebuild of it
 * alone would have thrown it (a {@link ShadowLostError}, a {@link RebuildBehindError}, a Redis
 * error); `cause` is the first failure. Rebuilding the failed ones again is the fix. When nothing
 * settled, a rebuild throws its first failure itself, not this.
 */
export class RebuildIncompleteError extends ProjectionError {
  constructor(
    readonly settled: Readonly<Record<string, RebuildResult>>,
    readonly failures: Readonly<Record<string, unknown>>,
  ) {
    const failed = Object.entries(failures).map(([name, error]) => `${name} (${error instanceof Error ? error.message : String(error)})`);
    super(`the rebuild settled ${Object.keys(settled).join(', ')} but failed ${failed.join('; ')}`, { cause: Object.values(failures)[0] });
    this.name = 'RebuildIncompleteError';
  }
}

/**
 * A rebuild was asked to stop (Ctrl-C on `baton replay`, a shutting-down notifier). It stopped
 * between two events, swapped nothing in and deleted its shadow generations: the live projections
 * are as they were. Running it again starts over.
 */
export class RebuildAbortedError extends ProjectionError {
  constructor(readonly projections: readonly string[]) {
    super(`the rebuild of ${projections.join(', ')} was interrupted; nothing was swapped in and its shadow generations were deleted`);
    this.name = 'RebuildAbortedError';
  }
}
