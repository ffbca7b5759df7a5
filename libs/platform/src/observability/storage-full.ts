import {
  batonTopology,
  StorageFull,
  storageLimitOf,
  subjectMatches,
  tokenRevocationStream,
  watchdogSnapshotStream,
  type StorageLimit,
} from '@baton/eventstore';
import { FullWatch, type FullWatchLog, type FullWatchWords } from './full-watch';

/** The log calls the watch makes (a {@link JsonLogger} in a service). */
export type StorageFullLog = FullWatchLog;

/** What the storage watch's lines say. */
const STORAGE_WORDS: FullWatchWords = {
  start: 'storage full: publishes refused; the platform waits with them until room is made (docs/sre.md, Capacity)',
  still: 'storage still full: publishes refused',
  was: 'storage was full: publishes refused',
  ended: 'storage full no longer: a publish was stored',
  what: 'subject',
};

/** A storage limit refusing this service's publishes now, as `/health/ready` (`details.storage`) shows it. */
export interface StorageFullCondition {
  limit: StorageLimit;
  /** The stream whose limit refused (`null` for the account's storage, which refuses every stream). */
  stream: string | null;
  /** When the first refusal of this condition came (ISO 8601). */
  since: string;
  /** Publishes refused since then. */
  refused: number;
  last_subject: string;
}

/** What `/health/ready` says of storage under `details.storage`: full or not, and which limits refuse. */
export interface StorageStatus {
  full: boolean;
  conditions: StorageFullCondition[];
}

export interface StorageFullWatchOptions {
  /** The deployment's subject prefix: which Baton stream a refused subject belongs to. */
  prefix: string;
  /** At most one summary line a window per limit (default `REFUSED_LETTER_WINDOW_MS`, a minute). */
  windowMs?: number;
  /** Counted for each refused publish, by limit (`baton_storage_full_refused_total`). */
  onRefused?: (limit: StorageLimit) => void;
  now?: () => number;
}

/**
 * A storage limit refusing a service's JetStream publishes — a full inbox (`BATON_INBOX_MAX_BYTES`,
 * `stream_bytes`) or a full account (`--max-store`, `account_storage`) — said once rather than once
 * per publish: every publish of the service passes here (the NATS handle's `onJetStreamPublishError`
 * and `onJetStreamPublish`, libs/eventstore/src/instrument-nats.ts), so its appends, offers and
 * letters are seen alike, whoever made them.
 *
 * Log ({@link FullWatch}'s lines), per limit (the account, or the stream that refused): a warn `storage full` when refusals
 * start; then at most one warn `storage still full` a window (a minute) with how many were held back
 * since the last line (`held_back`); an info `storage full no longer` when a publish the limit
 * refused is stored again, with how many the condition refused. The budget is the refused letters'
 * (`RefusedLetterCap`, one line a window per limit): a limit that flaps — a small publish
 * fits, the next does not — starts again without a line within the window, and its refusals are in
 * the window's summary. Every refusal is in exactly one line: the start line's own, or a later
 * line's `held_back`. The condition is also on `/health/ready` ({@link status}) and the metrics.
 */
export class StorageFullWatch {
  private readonly watch: FullWatch<StorageLimit, { stream?: string }>;
  private readonly streams: Array<{ name: string; subjects: string[] }>;

  constructor(
    log: StorageFullLog,
    private readonly options: StorageFullWatchOptions,
  ) {
    this.watch = new FullWatch(log, STORAGE_WORDS, {
      ...(options.windowMs !== undefined ? { windowMs: options.windowMs } : {}),
      ...(options.now !== undefined ? { now: options.now } : {}),
    });
    const { prefix } = options;
    this.streams = [...batonTopology(prefix).streams, watchdogSnapshotStream(prefix), tokenRevocationStream(prefix)].map((s) => ({
      name: s.name,
      subjects: [...s.subjects],
    }));
  }

  /** A JetStream publish to `subject` failed with `error`: a refusal by a storage limit is counted, anything else ignored. */
  refused(subject: string, error: unknown): void {
    const limit = error instanceof StorageFull ? error.limit : storageLimitOf(error);
    if (limit === null) return;
    this.options.onRefused?.(limit);
    const stream = limit === 'account_storage' ? null : this.streamOf(subject);
    this.watch.refuse(keyOf(limit, stream), limit, stream !== null ? { stream } : {}, subject);
  }

  /** A JetStream publish was stored by `stream`: a condition of that stream, or of the account, has ended. */
  stored(stream: string): void {
    for (const key of [keyOf('stream_bytes', stream), keyOf('stream_messages', stream), keyOf('account_storage', null)]) this.watch.end(key);
  }

  /** The limits refusing now (for `/health/ready`). */
  status(): StorageStatus {
    const conditions = this.watch.conditions().map((c) => ({
      limit: c.limit,
      stream: c.scope.stream ?? null,
      since: new Date(c.since).toISOString(),
      refused: c.refused,
      last_subject: c.last,
    }));
    return { full: conditions.length > 0, conditions };
  }

  /** Whether a condition of `limit` holds now (the `baton_storage_full` gauge). */
  full(limit: StorageLimit): boolean {
    return this.watch.conditions().some((c) => c.limit === limit);
  }

  /** Stop sweeping; refusals no line has counted yet are written in one last summary per limit. */
  stop(): void {
    this.watch.stop();
  }

  /** The Baton stream whose subjects hold `subject` (null for a subject none binds). */
  private streamOf(subject: string): string | null {
    for (const s of this.streams) if (s.subjects.some((pattern) => subjectMatches(pattern, subject))) return s.name;
    return null;
  }
}

function keyOf(limit: StorageLimit, stream: string | null): string {
  return limit === 'account_storage' ? 'account_storage' : `${limit}:${stream ?? '?'}`;
}
