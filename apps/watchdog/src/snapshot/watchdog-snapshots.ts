import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { GuardConfig } from '@baton/domain';
import type { NatsHandle } from '@baton/eventstore';
import type { JsonLogger } from '@baton/platform';
import type { DeadlineTable, SavedDeadline } from '../deadlines/deadline-table';
import type { HandoffDeadlineTracker, SavedHandoffDeadlines } from '../deadlines/handoff-deadlines';
import type { GuardBook, GuardBookState } from '../guards/guard-book';
import type { GuardRunner } from '../guards/guard-runner';
import type { SnapshotMiss, SnapshotStore } from './snapshot-store';

/**
 * The version of what a snapshot holds and how the watchdog folds events into it. Bump it with any
 * change to the guard book, the deadline tables or the facts and steps that fold into them: a
 * snapshot of another version is not loaded (the watchdog reads the events stream from its start,
 * as before snapshots).
 */
export const SNAPSHOT_FORMAT = 1;

/** What a snapshot document holds: the three folds the watchdog keeps from the events stream. */
export interface WatchdogDocument {
  guards: GuardBookState;
  leases: SavedDeadline[];
  deadlines: SavedHandoffDeadlines;
}

/** The parts of the watchdog a snapshot is taken of and restored into. */
export interface SnapshotParts {
  book: GuardBook;
  runner: Pick<GuardRunner, 'idle'>;
  leases: DeadlineTable;
  deadlines: Pick<HandoffDeadlineTracker, 'save' | 'restore'>;
  /** The last events-stream sequence handed to the folds (0 before any). */
  position: () => number;
}

export interface WatchdogSnapshotsOptions {
  store: SnapshotStore;
  jsm: NatsHandle['jsm'];
  /** The events stream the folds read. */
  eventsStream: string;
  guardConfig: GuardConfig;
  /** How often a snapshot is saved, in ms (0: never saved, never loaded). */
  intervalMs: number;
  instance: string;
  logger: JsonLogger;
  parts: SnapshotParts;
}

/** What `GET /status` says of snapshots. */
export interface SnapshotStatus {
  enabled: boolean;
  /** The sequence the folds were restored through at start (0: read from the start). */
  restored_through_seq: number;
  /** Why none was restored (null when one was, or snapshots are off). */
  restore_miss: SnapshotMiss | null;
  saves: number;
  last_saved_through_seq: number;
  last_saved_at: string | null;
  last_saved_bytes: number;
  /** Saves put off because a stop was still owed (they are tried again a few seconds later). */
  put_off: number;
  /** Saves another watchdog's save overtook (nothing lost: its snapshot stands). */
  superseded: number;
  failures: number;
}

/** While a stop is owed, the next attempt comes this soon. */
const BUSY_RETRY_MS = 5_000;

/** The fingerprint of a watchdog's fold: the format and the guard settings (another hop budget folds the same events into another book). */
export function snapshotFingerprint(config: GuardConfig): string {
  // Every setting the book folds with, whatever it grows to, in a fixed order.
  const settings = Object.entries(config).sort(([a], [b]) => a.localeCompare(b));
  return createHash('sha256')
    .update(JSON.stringify({ format: SNAPSHOT_FORMAT, settings }))
    .digest('hex')
    .slice(0, 16);
}

/**
 * The watchdog's snapshots (docs/reliability.md "The watchdog restarts from a snapshot"): its folds
 * of the events stream — the guard book, the lease table, the handoff deadlines — saved every
 * `intervalMs` once caught up, and restored at start, so a restart reads only the events after the
 * snapshot's sequence instead of the whole history. A save is taken in one synchronous step
 * between two deliveries (every fold has applied exactly the events through `position()`), and
 * only while nothing is owed: no stop or escalation held or being asked for (those live outside
 * the folds, and a restart from the snapshot would never ask them). A snapshot is loaded only when
 * it was folded the same way (`snapshotFingerprint`) from the same events stream (name and
 * creation time) and does not run past it; otherwise the watchdog reads from the start, as without
 * snapshots. Every instance folds the same events alike, so any instance's snapshot serves all.
 */
export class WatchdogSnapshots {
  private readonly fingerprint: string;
  private timer: NodeJS.Timeout | null = null;
  private saving: Promise<void> | null = null;
  private stopped = false;
  private eventsCreated = '';
  private readonly stats: SnapshotStatus;

  constructor(private readonly opts: WatchdogSnapshotsOptions) {
    this.fingerprint = snapshotFingerprint(opts.guardConfig);
    this.stats = {
      enabled: opts.intervalMs > 0,
      restored_through_seq: 0,
      restore_miss: null,
      saves: 0,
      last_saved_through_seq: 0,
      last_saved_at: null,
      last_saved_bytes: 0,
      put_off: 0,
      superseded: 0,
      failures: 0,
    };
  }

  /**
   * Restore the folds from the last snapshot, when one fits; returns the sequence to read the
   * events stream from (1 without one). A snapshot that cannot be read is logged and passed over.
   */
  async restore(): Promise<number> {
    if (!this.stats.enabled) return 1;
    let info;
    try {
      info = await this.opts.jsm.streams.info(this.opts.eventsStream);
    } catch (error) {
      this.stats.restore_miss = 'unreadable';
      this.opts.logger.warn('the events stream could not be read: no snapshot restored', { err: String(error) });
      return 1;
    }
    this.eventsCreated = info.created;
    const startedAt = Date.now();
    let loaded;
    try {
      loaded = await this.opts.store.load({
        fingerprint: this.fingerprint,
        eventsStream: this.opts.eventsStream,
        eventsCreated: info.created,
        lastSeq: info.state.last_seq,
      });
    } catch (error) {
      this.stats.restore_miss = 'unreadable';
      this.opts.logger.warn('the snapshot could not be read: the events stream is read from its start', { err: String(error) });
      return 1;
    }
    if (!loaded.ok) {
      this.stats.restore_miss = loaded.miss;
      const log = loaded.miss === 'none' ? this.opts.logger.info.bind(this.opts.logger) : this.opts.logger.warn.bind(this.opts.logger);
      log('no snapshot restored: the events stream is read from its start', { miss: loaded.miss, detail: loaded.detail });
      return 1;
    }
    const document = loaded.document;
    if (!isDocument(document)) {
      this.stats.restore_miss = 'unreadable';
      this.opts.logger.warn('the snapshot does not hold the watchdog folds: the events stream is read from its start', {
        through_seq: loaded.head.through_seq,
      });
      return 1;
    }
    const { parts } = this.opts;
    parts.book.restore(document.guards);
    parts.leases.restore(document.leases);
    parts.deadlines.restore(document.deadlines);
    this.stats.restored_through_seq = loaded.head.through_seq;
    this.opts.logger.info('watchdog restored from its snapshot', {
      through_seq: loaded.head.through_seq,
      taken_at: loaded.head.taken_at,
      by: loaded.head.by,
      bytes: loaded.head.bytes,
      leases: parts.leases.size,
      took_ms: Date.now() - startedAt,
    });
    return loaded.head.through_seq + 1;
  }

  /** Start saving every `intervalMs` (call once the folds have caught up). */
  start(): void {
    if (!this.stats.enabled || this.stopped || this.timer !== null) return;
    this.schedule(this.opts.intervalMs);
  }

  /** Stop saving; waits for a save under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.saving;
  }

  status(): SnapshotStatus {
    return { ...this.stats };
  }

  /** Take and save a snapshot now, unless a stop is owed or nothing was read since the last one. Returns whether one was saved. */
  async saveNow(): Promise<boolean> {
    const { parts } = this.opts;
    if (this.eventsCreated === '') this.eventsCreated = (await this.opts.jsm.streams.info(this.opts.eventsStream)).created;
    // From here to the document, one synchronous step: every fold holds exactly the events through `through`.
    if (!parts.runner.idle()) {
      this.stats.put_off++;
      return false;
    }
    const through = Math.max(parts.position(), this.stats.restored_through_seq);
    if (through === 0 || through === this.stats.last_saved_through_seq) return false;
    const document: WatchdogDocument = { guards: parts.book.save(), leases: parts.leases.save(), deadlines: parts.deadlines.save() };
    const json = JSON.stringify(document);
    const outcome = await this.opts.store.save(
      json,
      { fingerprint: this.fingerprint, eventsStream: this.opts.eventsStream, eventsCreated: this.eventsCreated, throughSeq: through },
      this.opts.instance,
    );
    if (!outcome.saved) {
      this.stats.superseded++;
      return false;
    }
    this.stats.saves++;
    this.stats.last_saved_through_seq = through;
    this.stats.last_saved_at = outcome.head.taken_at;
    this.stats.last_saved_bytes = outcome.head.bytes;
    return true;
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      this.saving = this.tick().finally(() => (this.saving = null));
    }, ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    let next = this.opts.intervalMs;
    try {
      const putOff = this.stats.put_off;
      await this.saveNow();
      if (this.stats.put_off > putOff) next = Math.min(next, BUSY_RETRY_MS);
    } catch (error) {
      this.stats.failures++;
      this.opts.logger.warn('the snapshot could not be saved; trying again at the next interval', { err: String(error) });
    }
    if (!this.stopped) this.schedule(next);
  }
}

/** The document's parts are there, with the shapes the folds restore from (their entries are the watchdog's own). */
const WatchdogDocumentSchema = z.object({
  guards: z.object({
    runs: z.array(z.unknown()),
    circuits: z.array(z.unknown()),
    handoffs: z.array(z.unknown()),
    counted: z.array(z.string()),
    withdrawn: z.array(z.unknown()),
  }),
  leases: z.array(z.unknown()),
  deadlines: z.object({ known: z.array(z.unknown()), table: z.array(z.unknown()) }),
});

function isDocument(value: unknown): value is WatchdogDocument {
  return WatchdogDocumentSchema.safeParse(value).success;
}
