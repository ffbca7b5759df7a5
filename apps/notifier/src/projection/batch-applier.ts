import type { EventRegistry } from '@baton/contracts';
import {
  PoisonError,
  decodeEvent,
  isUnavailable,
  LruCache,
  headerOf,
  streamReader,
  traceIdFromHeaders,
  type BatchVerdict,
  type ConsumedMessage,
  type NatsHandle,
  type StreamReader,
} from '@baton/eventstore';
import {
  jetStreamReplaySource,
  ProjectionGapError,
  ProjectionLostError,
  ProjectionVersionError,
  RedisFullError,
  type BatonProjector,
  type EventRange,
  type RedisLock,
  type SequencedEvent,
} from '@baton/projections';
import type { JsonLogger } from '@baton/platform';
import { carriesNotice } from './notice-publisher';

/** Delay before a message that waits behind a failing earlier event is offered again, ms. */
export const WAIT_BEHIND_MS = 1000;

/**
 * Delay before the messages of a batch Redis refused for being full (maxmemory) are offered again,
 * ms: every one waits, none uses up a failure, and the applier catches up within this once Redis
 * has room.
 */
export const REDIS_FULL_WAIT_MS = 2000;

/** Delays before an own event that failed is offered again, by the number of its failures here (the last repeats). */
const RETRY_FAILED_MS = [1000, 5000, 15000, 30000];

/** Failing sequences remembered at most (a failing event is rare; the oldest is forgotten first). */
const MAX_TRACKED_FAILURES = 1024;

/**
 * Notices this applier remembers having published, by event id: a range whose commit is retried
 * (another applier or a rebuild's swap moved the projection between its publish and its commit), or
 * re-applied event by event after a failure, does not publish them again.
 */
const PUBLISHED_REMEMBERED = 4096;

/** Most sequences applied as one range (longer spans are applied piecewise). */
const MAX_RANGE = 2048;

/** Gaps up to this many sequences are read message by message (in parallel); longer ones with an ordered consumer. */
const SMALL_GAP = 32;

export interface BatchApplierOptions {
  projector: BatonProjector;
  registry: EventRegistry;
  nats: NatsHandle;
  /** The events stream. */
  stream: string;
  prefix: string;
  /** Failures of an event here (not its deliveries) after which the projections skip it and it is dead-lettered. */
  maxDeliver: number;
  /** Publish the human action notices among `events` (not yet applied by `notices`). */
  publishNotices: (events: readonly SequencedEvent[]) => Promise<void>;
  /**
   * Held across every notifier instance of the prefix while a range is applied: its notices
   * published and its commits made by one instance at a time (see {@link ProjectionBatchApplier}).
   * None: this applier never overlaps another (tests with one applier).
   */
  applyLock?: RedisLock;
  /** Called for each event of this applier's own messages once every projection has applied it. */
  onApplied: (event: SequencedEvent) => void;
  /** Called with the `notices` projection's last applied seq after each range (what is known published). */
  onNoticesAt?: (seq: number) => void;
  /**
   * Called when a projection turns out lost (no active generation past the stream's first event:
   * Redis lost its data): the range waits, nothing is written; the caller starts the rebuild.
   */
  onLost?: (error: ProjectionLostError) => void;
  /**
   * Called when a projection's active generation was built by another version of its definition
   * ({@link ProjectionVersionError}: another release rebuilt it): the range waits, nothing is
   * written. The caller stands back (a newer release built it) or rebuilds it (an older one did).
   */
  onVersion?: (error: ProjectionVersionError) => void;
  /**
   * Told of every write Redis refused for being full ({@link RedisFullError}: `refused`, with the
   * range), and of every batch applied whole since (`wrote`): the notifier's `RedisFullWatch`,
   * which says the condition once and counts it. Without it nothing is said of a full Redis.
   */
  redisFull?: { refused(what: string, error: unknown): boolean; wrote(): void };
  logger: JsonLogger;
}

type Decoded = { msg: ConsumedMessage; event: SequencedEvent | null; error: unknown };

/**
 * Applies what the notifier's durable consumer delivers to the projections in contiguous ranges of
 * the events stream (`BatonProjector.applyRange`): one atomic compare-and-set commit per projection
 * for a whole batch instead of one script call per event and projection.
 *
 * Why ranges: the projections' seq guard skips anything at or below their last applied seq, so an
 * event committed after a later one would be lost. A range always starts right after what every
 * projection has applied: sequences of the range this applier was not delivered (held by another
 * notifier instance, or waiting for redelivery) are read from the stream itself, so several
 * instances may share the consumer, each with many messages in flight, and none ever leaves a
 * hole. Whichever commits first wins; the other finds the projection moved and re-folds.
 *
 * Notices: a range's notices are published just before its `notices` commit (the events above what
 * the projection has applied). Two instances applying overlapping ranges at once would each publish
 * them, and one acting on its cache of its own last commit (not knowing the other's since) or
 * re-folding after losing the compare-and-set would publish them again. So a range that carries a
 * notice is applied under the `applyLock`, which the instances share through Redis, with `notices`
 * read from Redis for it (`verified`): the holder sees what the others committed, publishes the
 * notices of what is still unapplied, commits, and lets go; the next holder finds those events
 * applied and publishes nothing for them. Ranges without a notice (most) take no lock and keep the
 * cache. A notice is published twice only when an instance dies (or stalls past the lock's lease)
 * between its publish and its commit.
 *
 * Failures: an undecodable message is dead-lettered (poison) and its sequence is applied as a
 * no-op. When a range fails, events are applied one by one to find the first that fails: the ones
 * before it are acknowledged; its own message waits under this applier's backoff (1, 5, 15, 30 s)
 * and, after `maxDeliver` failures here — never for Redis, NATS or the stream not answering
 * (`isUnavailable`), and not counted by deliveries, which waiting inflates — is skipped (its
 * sequence committed as a no-op) and dead-lettered `projection_failed`, only once the skip is
 * committed; messages behind it wait ({@link WAIT_BEHIND_MS}).
 *
 * A full Redis (maxmemory reached under `noeviction`: every write refused, {@link RedisFullError})
 * says nothing about the events: the messages from the first one not applied on wait
 * ({@link REDIS_FULL_WAIT_MS}), none uses up a failure or is ever skipped, and nothing is logged per
 * event or per batch — `redisFull` is told, which says it once. The events before the refused one
 * are applied and acknowledged (a large write may be refused while small ones still fit).
 *
 * Lost projections: a projection with no active generation while the events before the batch have
 * been applied (Redis lost its data) is never folded from the stream's start here — that would
 * publish every notice in history again. Every message waits ({@link WAIT_BEHIND_MS}, no delivery
 * used up), `onLost` is told, and the rebuild (which publishes nothing) restores the projection.
 *
 * Another release's projections: a commit the apply script refuses because another version of the
 * projection's definition built its active generation ({@link ProjectionVersionError}) writes
 * nothing; every message waits the same way and `onVersion` is told (the notifier stands back from
 * a newer release, or rebuilds an older one's). The notices a range published are remembered by
 * event id, so a retried commit or an event-by-event re-apply does not publish them again.
 */
export class ProjectionBatchApplier {
  private readonly reader: StreamReader;
  /**
   * How many times each failing event's apply failed in this applier. Not the message's delivery
   * count: a message waiting behind a failing event is redelivered every second, and JetStream
   * counts each of those, so after a few seconds of waiting its first failure of its own would have
   * found it "out of deliveries" and skipped it for good.
   */
  private readonly failures = new LruCache<number, number>(MAX_TRACKED_FAILURES);
  /** Ids of the events whose notices this applier published (see {@link PUBLISHED_REMEMBERED}). */
  private readonly published = new LruCache<string, true>(PUBLISHED_REMEMBERED);
  /** A lost projection was reported and no range has been applied since (logged once per loss). */
  private lost = false;
  /** A projection of another version was reported and no range has been applied since (logged once). */
  private versionSkew = false;
  /** Some projection committed events during the batch being handled (a write Redis took). */
  private wrote = false;

  constructor(private readonly opts: BatchApplierOptions) {
    this.reader = streamReader(opts.nats, opts.stream);
  }

  async handle(msgs: ConsumedMessage[]): Promise<Map<ConsumedMessage, BatchVerdict>> {
    this.wrote = false;
    const verdicts = new Map<ConsumedMessage, BatchVerdict>();
    const own = new Map<number, Decoded>();
    for (const msg of msgs) {
      const decoded = this.decode(msg);
      if (decoded.event === null) verdicts.set(msg, { kind: 'failed', error: decoded.error });
      const earlier = own.get(msg.seq);
      // The same sequence twice in one batch (a redelivery overtook the first copy): keep one, ack both.
      if (!earlier || earlier.event === null) own.set(msg.seq, decoded);
    }
    if (own.size === 0) return verdicts;
    const seqs = [...own.keys()].sort((a, b) => a - b);
    const toSeq = seqs.at(-1) as number;
    let fromSeq = seqs[0] as number;
    const contiguous = toSeq - fromSeq + 1 === seqs.length;
    if (!contiguous) {
      try {
        fromSeq = Math.min(fromSeq, (await this.lowestApplied(fromSeq)) + 1);
      } catch (error) {
        // Redis did not answer: everything waits (failing the batch would use up deliveries).
        return this.isolate(null, own, verdicts, error);
      }
    }

    const failed: { range: EventRange | null } = { range: null };
    try {
      await this.applySpan(fromSeq, toSeq, own, failed);
    } catch (error) {
      if (!(error instanceof ProjectionGapError)) return this.isolate(failed.range, own, verdicts, error);
      // Some projection is behind the first message of the batch: start from where it stands.
      try {
        await this.applySpan(Math.min(fromSeq, (await this.lowestApplied(fromSeq)) + 1), toSeq, own, failed);
      } catch (retryError) {
        return this.isolate(failed.range, own, verdicts, retryError);
      }
    }
    for (const seq of own.keys()) this.failures.delete(seq);
    if (this.wrote) this.opts.redisFull?.wrote();
    this.applied(own.values());
    return verdicts;
  }

  /**
   * Apply `fromSeq..toSeq` in ranges of at most {@link MAX_RANGE} sequences (a long gap — a new
   * instance far behind, projections lost with a Redis flush — is caught up piecewise, never read
   * into memory whole). `failed.range` is the range being applied when an error was thrown.
   */
  private async applySpan(fromSeq: number, toSeq: number, own: Map<number, Decoded>, failed: { range: EventRange | null }): Promise<void> {
    for (let start = fromSeq; start <= toSeq; start += MAX_RANGE) {
      failed.range = null;
      const range = await this.rangeOf(start, Math.min(toSeq, start + MAX_RANGE - 1), own);
      failed.range = range;
      await this.apply(range);
    }
  }

  private async apply(range: EventRange): Promise<void> {
    // A range that carries a notice: applied under the lock, `notices` from where it stands in Redis.
    const withNotice = range.events.some((event) => carriesNotice(event.type));
    const applyRange = () =>
      this.opts.projector.applyRange(range, {
        beforeCommit: async (projection, events) => {
          if (projection !== 'notices') return;
          // Published by an earlier attempt of this range, or an earlier pass over these events: not again.
          const unpublished = events.filter((event) => this.published.get(event.id) === undefined);
          await this.opts.publishNotices(unpublished);
          for (const event of unpublished) if (carriesNotice(event.type)) this.published.set(event.id, true);
        },
        ...(withNotice ? { verified: ['notices'] } : {}),
      });
    const results = withNotice && this.opts.applyLock ? await this.opts.applyLock.run(applyRange) : await applyRange();
    this.lost = false;
    this.versionSkew = false;
    if (Object.values(results).some((result) => result.status === 'applied')) this.wrote = true;
    const notices = results['notices'];
    if (notices) this.opts.onNoticesAt?.(notices.lastSeq);
  }

  /** A projection was found lost: log it once per loss and tell the caller (who rebuilds it). */
  private reportLost(error: ProjectionLostError): void {
    if (!this.lost)
      this.opts.logger.warn('live applier found a projection lost from Redis: waiting for its rebuild', { projection: error.projection, seq: error.fromSeq });
    this.lost = true;
    this.opts.onLost?.(error);
  }

  /** A projection was found built by another release: log it once until a range applies again, and tell the caller. */
  private reportVersion(error: ProjectionVersionError): void {
    if (!this.versionSkew)
      this.opts.logger.warn('live applier found a projection built by another version of its definition: waiting', {
        projection: error.projection,
        version: error.version,
        stored_version: error.storedVersion,
      });
    this.versionSkew = true;
    this.opts.onVersion?.(error);
  }

  /**
   * A range failed: apply its events one at a time to find the first that fails, then settle
   * every own message by where it stands relative to that event (see the class comment).
   */
  private async isolate(
    range: EventRange | null,
    own: Map<number, Decoded>,
    verdicts: Map<ConsumedMessage, BatchVerdict>,
    error: unknown,
  ): Promise<Map<ConsumedMessage, BatchVerdict>> {
    const waitAll = (from: number, delayMs = WAIT_BEHIND_MS) => {
      for (const [seq, decoded] of own) if (seq >= from && !verdicts.has(decoded.msg)) verdicts.set(decoded.msg, { kind: 'later', delayMs });
    };
    if (error instanceof ProjectionLostError) {
      // Nothing was written: everything waits for the rebuild, using up no delivery.
      this.reportLost(error);
      waitAll(0);
      return verdicts;
    }
    if (error instanceof ProjectionVersionError) {
      // Another release built the projection: nothing was written; everything waits, using up no delivery.
      this.reportVersion(error);
      waitAll(0);
      return verdicts;
    }
    if (range === null && this.full(`projections from #${Math.min(...own.keys())}`, error)) {
      waitAll(0, REDIS_FULL_WAIT_MS);
      return verdicts;
    }
    if (range === null || error instanceof ProjectionGapError) {
      // The range could not even be assembled (stream or Redis unreachable): everything waits;
      // nothing uses up a delivery for it, and no later range can skip these events anyway.
      this.opts.logger.warn('projection batch could not be applied; retrying', { error: String(error) });
      waitAll(0);
      return verdicts;
    }
    // Redis refused the range for being full: counted once here; the steps find where it stops.
    const full = this.full(`projections #${range.fromSeq}..#${range.toSeq}`, error);
    let next = range.fromSeq;
    let stopped = false;
    const bySeq = new Map(range.events.map((event) => [event.seq, event]));
    const steps: Array<{ seq: number; event: SequencedEvent | null }> = [];
    for (let seq = range.fromSeq; seq <= range.toSeq; seq++) steps.push({ seq, event: bySeq.get(seq) ?? null });
    for (const step of steps) {
      try {
        await this.apply({ fromSeq: next, toSeq: step.seq, events: step.event ? [step.event] : [] });
        this.failures.delete(step.seq);
        next = step.seq + 1;
        continue;
      } catch (stepError) {
        stopped = true;
        if (stepError instanceof ProjectionLostError) {
          // Redis lost its data between two steps: what is left waits for the rebuild.
          this.reportLost(stepError);
          waitAll(step.seq);
          break;
        }
        if (stepError instanceof ProjectionVersionError) {
          // Another release's rebuild swapped in between two steps: what is left waits.
          this.reportVersion(stepError);
          waitAll(step.seq);
          break;
        }
        if (this.full(`projections #${step.seq}`, stepError)) {
          // Not the event's failure: it and everything after it wait, counting nothing, logging nothing.
          waitAll(step.seq, REDIS_FULL_WAIT_MS);
          break;
        }
        if (stepError instanceof ProjectionGapError) {
          // The range failed before its gap was seen (a full Redis refused the apply lock first):
          // the events before it are not applied yet, and these wait for them — not their failure.
          waitAll(step.seq, full ? REDIS_FULL_WAIT_MS : WAIT_BEHIND_MS);
          break;
        }
        const failing = own.get(step.seq);
        this.opts.logger.warn('projection event failed', {
          seq: step.seq,
          own: failing !== undefined,
          deliveries: failing?.msg.deliveryCount,
          error: String(stepError),
        });
        if (!failing) {
          waitAll(step.seq);
          break;
        }
        // Counted here, not by deliveries; never skipped for Redis, NATS or the stream not
        // answering — that says nothing about the event, and a skip cannot be undone (its letter
        // is not redriven). Either way it waits under this applier's own backoff ('later'): a
        // 'failed' verdict would let the runner dead-letter it by its delivery count, or at once
        // if the error looked like poison, and leave a hole later ranges stall on.
        const failures = this.noteFailure(step.seq);
        if (failures < this.opts.maxDeliver || isUnavailable(stepError)) {
          if (!verdicts.has(failing.msg)) {
            verdicts.set(failing.msg, { kind: 'later', delayMs: RETRY_FAILED_MS[Math.min(failures, RETRY_FAILED_MS.length) - 1] as number });
          }
          waitAll(step.seq + 1);
          break;
        }
        // Out of deliveries: skip it (a no-op at its sequence), then dead-letter it and go on.
        try {
          await this.apply({ fromSeq: step.seq, toSeq: step.seq, events: [] });
        } catch (skipError) {
          this.full(`projections #${step.seq}`, skipError);
          if (!verdicts.has(failing.msg)) verdicts.set(failing.msg, { kind: 'later', delayMs: WAIT_BEHIND_MS });
          waitAll(step.seq + 1);
          break;
        }
        this.failures.delete(step.seq);
        // Dead-lettered and termed by the runner at once: the skip is done, nothing is retried.
        verdicts.set(failing.msg, {
          kind: 'failed',
          error: new PoisonError(`the projections could not apply it ${failures} times: ${String(stepError)}`, 'projection_failed', { cause: stepError }),
        });
        stopped = false;
        next = step.seq + 1;
      }
    }
    // Every step went through, writing: a full Redis that refused the range has room again.
    if (!stopped && this.wrote) this.opts.redisFull?.wrote();
    this.applied([...own.values()].filter((decoded) => !verdicts.has(decoded.msg)));
    return verdicts;
  }

  /** Whether `error` is Redis refusing a write for being full; if so `redisFull` is told (it says so, once). */
  private full(what: string, error: unknown): boolean {
    if (RedisFullError.of(error) === null) return false;
    this.opts.redisFull?.refused(what, error);
    return true;
  }

  /** The range `fromSeq..toSeq`: own decodable events plus the stream's events for sequences not delivered here. */
  private async rangeOf(fromSeq: number, toSeq: number, own: Map<number, Decoded>): Promise<EventRange> {
    const events = new Map<number, SequencedEvent>();
    const missing: number[] = [];
    for (let seq = fromSeq; seq <= toSeq; seq++) {
      const decoded = own.get(seq);
      if (decoded) {
        if (decoded.event) events.set(seq, decoded.event);
      } else {
        missing.push(seq);
      }
    }
    if (missing.length > 0) for (const event of await this.readStream(missing)) events.set(event.seq, event);
    return { fromSeq, toSeq, events: [...events.values()].sort((a, b) => a.seq - b.seq) };
  }

  /** Read (and decode) the stream's events at `seqs` (sorted); undecodable or absent ones are left out. */
  private async readStream(seqs: number[]): Promise<SequencedEvent[]> {
    if (seqs.length <= SMALL_GAP) {
      const found = await Promise.all(
        seqs.map(async (seq) => {
          const msg = await this.reader.message(seq);
          // The trace id comes from the stored headers, as in the live path and the replay.
          return msg === null ? null : this.decodeBytes(msg.seq, msg.data, msg.headers()).event;
        }),
      );
      return found.filter((event): event is SequencedEvent => event !== null);
    }
    const wanted = new Set(seqs);
    const last = seqs.at(-1) as number;
    const source = jetStreamReplaySource({ nats: this.opts.nats, prefix: this.opts.prefix, registry: this.opts.registry, stream: this.opts.stream });
    const events: SequencedEvent[] = [];
    for await (const event of source(seqs[0] as number)) {
      if (event.seq > last) break;
      if (wanted.has(event.seq)) events.push(event);
      if (event.seq === last) break;
    }
    return events;
  }

  /** Count one failure of the event at `seq` here; returns how many it has had. */
  private noteFailure(seq: number): number {
    const count = (this.failures.get(seq) ?? 0) + 1;
    this.failures.set(seq, count);
    return count;
  }

  /**
   * The lowest last applied seq over every projection, for a batch whose messages start at
   * `fromSeq`. A projection with no active generation there, past the stream's first event, was
   * lost (its lastSeq of 0 would fold the whole history): {@link ProjectionLostError}.
   */
  private async lowestApplied(fromSeq: number): Promise<number> {
    const statuses = await this.opts.projector.status();
    const lost = statuses.find((status) => status.activeGeneration === null);
    if (lost && fromSeq > 1) throw new ProjectionLostError(lost.projection, fromSeq);
    return Math.min(...statuses.map((status) => status.lastSeq));
  }

  private applied(decoded: Iterable<Decoded>): void {
    for (const { event } of decoded) {
      if (event === null) continue;
      try {
        this.opts.onApplied(event);
      } catch {
        // listeners must not affect the applier
      }
    }
  }

  private decode(msg: ConsumedMessage): Decoded {
    return { ...this.decodeBytes(msg.seq, msg.data, msg.headers), msg };
  }

  private decodeBytes(seq: number, data: Uint8Array, headers: Record<string, string[]>): { event: SequencedEvent | null; error: unknown } {
    const decoded = decodeEvent(this.opts.registry, data, headerOf(headers));
    if (!decoded.ok) {
      const message =
        decoded.rejection.code === 'malformed_json' ? `stored event #${seq} is not JSON` : `stored event #${seq} does not decode: ${decoded.rejection.message}`;
      return { event: null, error: new PoisonError(message, decoded.rejection.code, { cause: decoded.cause }) };
    }
    const traceId = traceIdFromHeaders(headers);
    return { event: { ...decoded.envelope, seq, ...(traceId ? { traceId } : {}) }, error: null };
  }
}
