/**
 * The lease deadlines the watchdog watches: one entry per CLAIMED handoff (project and handoff id →
 * claim id, lease expiry), nothing for handoffs in any other status, so 100k handoffs cost only as
 * much memory as the ones currently claimed. Entries are keyed by project and id together: two
 * projects may hold handoffs of the same id (a run's first handoff is named after its run id),
 * and one project's claim or release must never touch the other's lease.
 *
 * Due entries come out of a binary min-heap keyed on the time they are next due. The heap is
 * lazy: a heartbeat or a new claim pushes a fresh node and bumps the entry's generation, and
 * nodes whose generation no longer matches are dropped when they surface. The heap is rebuilt
 * when dead nodes outnumber live ones, so it stays within about twice the table's size.
 */

/** A lease as the table holds it. Times are epoch milliseconds. */
export interface Deadline {
  handoffId: string;
  project: string;
  claimId: string;
  leaseExpiresAt: number;
  /** The `traceparent` of the event that started the lease (the claim's): the requeue continues its trace. */
  traceparent?: string;
}

interface Entry {
  handoffId: string;
  project: string;
  claimId: string;
  leaseExpiresAt: number;
  traceparent: string | undefined;
  /** When the entry is next due: the expiry, or later after an attempt (see `postpone`) or an answer (see `answer`). */
  dueAt: number;
  /** Not due before this time (0: no hold): the claim was answered by a result the router is closing it with. */
  holdUntil: number;
  /** Bumped on every change; only the heap node with the current generation is live. */
  generation: number;
  /** False between `takeDue` handing the entry out and the `postpone` that reschedules it. */
  scheduled: boolean;
}

interface HeapNode {
  dueAt: number;
  /** The entry's key ({@link keyOf}). */
  key: string;
  generation: number;
}

function deadlineOf(entry: Entry): Deadline {
  const { handoffId, project, claimId, leaseExpiresAt, traceparent } = entry;
  return traceparent !== undefined ? { handoffId, project, claimId, leaseExpiresAt, traceparent } : { handoffId, project, claimId, leaseExpiresAt };
}

/** One entry as saved in the watchdog's snapshot: its lease, and the hold an answer put on it (0: none). */
export interface SavedDeadline extends Deadline {
  holdUntil: number;
}

/** The key of a handoff in the watchdog's tables: neither project keys nor ids hold a `/`. */
export function keyOf(project: string, handoffId: string): string {
  return `${project}/${handoffId}`;
}

/** Rebuild the heap when it holds more than this many nodes beyond twice the table's size. */
const COMPACTION_SLACK = 1024;

export class DeadlineTable {
  private readonly entries = new Map<string, Entry>();
  private heap: HeapNode[] = [];
  /** One string per project: events decoded from JSON would otherwise each carry their own copy. */
  private readonly projects = new Map<string, string>();

  /** Number of claimed handoffs tracked. */
  get size(): number {
    return this.entries.size;
  }

  /** Number of heap nodes, live and dead (for tests and status). */
  get heapSize(): number {
    return this.heap.length;
  }

  /** The lease of a handoff, if it is claimed. */
  get(project: string, handoffId: string): Deadline | undefined {
    const entry = this.entries.get(keyOf(project, handoffId));
    if (!entry) return undefined;
    return deadlineOf(entry);
  }

  /** A new claim: track (or replace) the handoff's lease, due at its expiry; `traceparent` is the claim event's (its trace). */
  claim(handoffId: string, project: string, claimId: string, leaseExpiresAt: number, traceparent?: string): void {
    const key = keyOf(project, handoffId);
    const previous = this.entries.get(key);
    const entry: Entry = {
      handoffId,
      project: this.intern(project),
      claimId,
      leaseExpiresAt,
      traceparent,
      dueAt: leaseExpiresAt,
      holdUntil: 0,
      generation: (previous?.generation ?? 0) + 1,
      scheduled: true,
    };
    this.entries.set(key, entry);
    this.push({ dueAt: entry.dueAt, key, generation: entry.generation });
  }

  /**
   * A heartbeat: move the lease of the current claim to `leaseExpiresAt`. Returns false (and
   * changes nothing) when the handoff is not tracked.
   */
  extend(project: string, handoffId: string, leaseExpiresAt: number): boolean {
    const key = keyOf(project, handoffId);
    const entry = this.entries.get(key);
    if (!entry) return false;
    entry.leaseExpiresAt = leaseExpiresAt;
    this.reschedule(key, entry, leaseExpiresAt);
    return true;
  }

  /**
   * An agent's result (or mesh turn) accepted under `claimId` answered the handoff: the router is
   * closing it (`complete_from_result`), so a requeue of that claim would only race the completion
   * (docs/handoffs.md rule 4a). The lease is not due before `leaseExpiresAt + holdMs`; if the
   * completion has not cleared it by then, the requeue goes ahead (and the completion, when it comes,
   * voids the lapse). While a request about the claim is in flight (handed out by `takeDue`), the
   * hold is kept and applies when it is rescheduled (`postpone` after a refusal or no answer): an
   * answer read meanwhile is never lost. Returns false (and changes nothing) when the handoff is
   * not tracked under that claim.
   */
  answer(project: string, handoffId: string, claimId: string, holdMs: number): boolean {
    const key = keyOf(project, handoffId);
    const entry = this.entries.get(key);
    if (!entry || entry.claimId !== claimId) return false;
    entry.holdUntil = entry.leaseExpiresAt + holdMs;
    if (entry.scheduled && entry.dueAt < entry.holdUntil) this.reschedule(key, entry, entry.holdUntil);
    return true;
  }

  /** The handoff is no longer claimed. Returns whether it was tracked. */
  release(project: string, handoffId: string): boolean {
    return this.entries.delete(keyOf(project, handoffId));
  }

  /** Whether {@link takeDue} at `now` may hand anything out (a cheap look at the earliest entry; may say yes for one since moved). */
  hasDue(now: number): boolean {
    const top = this.heap[0];
    return top !== undefined && top.dueAt <= now;
  }

  /**
   * Hand out up to `limit` leases due at `now` (expiry or postponement passed), earliest first.
   * A lease handed out is not handed out again until {@link postpone} reschedules it (or a new
   * event about the handoff does), so a slow request is never sent twice by overlapping ticks.
   */
  takeDue(now: number, limit: number): Deadline[] {
    const due: Deadline[] = [];
    while (due.length < limit && this.heap.length > 0) {
      const top = this.heap[0] as HeapNode;
      if (top.dueAt > now) break;
      this.pop();
      const entry = this.entries.get(top.key);
      if (!entry || entry.generation !== top.generation) continue;
      entry.scheduled = false;
      due.push(deadlineOf(entry));
    }
    this.compactIfNeeded();
    return due;
  }

  /**
   * Ask about this claim again at `until` (after a refused or failed requeue, or to re-check a
   * requeue whose event has not arrived yet). Ignored when the handoff is no longer claimed under
   * `claimId`, or when an event rescheduled it in the meantime.
   */
  postpone(project: string, handoffId: string, claimId: string, until: number): void {
    const key = keyOf(project, handoffId);
    const entry = this.entries.get(key);
    if (!entry || entry.claimId !== claimId || entry.scheduled) return;
    this.reschedule(key, entry, Math.max(until, entry.leaseExpiresAt));
  }

  /** Every entry, with its hold (the watchdog's snapshot); when each is next due follows from them. */
  save(): SavedDeadline[] {
    return [...this.entries.values()].map((entry) => ({ ...deadlineOf(entry), holdUntil: entry.holdUntil }));
  }

  /**
   * Replace the table with saved entries: each due at its expiry or the end of its hold, whichever
   * is later (one handed out for a request when it was saved is due again: asking twice is safe).
   */
  restore(saved: readonly SavedDeadline[]): void {
    this.clear();
    for (const { handoffId, project, claimId, leaseExpiresAt, traceparent, holdUntil } of saved) {
      this.claim(handoffId, project, claimId, leaseExpiresAt, traceparent);
      if (holdUntil > 0) {
        const key = keyOf(project, handoffId);
        const entry = this.entries.get(key) as Entry;
        entry.holdUntil = holdUntil;
        if (entry.dueAt < holdUntil) this.reschedule(key, entry, holdUntil);
      }
    }
  }

  /** Forget everything (used before a rebuild from the stream). */
  clear(): void {
    this.entries.clear();
    this.heap = [];
  }

  private reschedule(key: string, entry: Entry, dueAt: number): void {
    entry.dueAt = Math.max(dueAt, entry.holdUntil);
    entry.generation++;
    entry.scheduled = true;
    this.push({ dueAt: entry.dueAt, key, generation: entry.generation });
  }

  private intern(project: string): string {
    const known = this.projects.get(project);
    if (known !== undefined) return known;
    this.projects.set(project, project);
    return project;
  }

  private compactIfNeeded(): void {
    if (this.heap.length <= 2 * this.entries.size + COMPACTION_SLACK) return;
    const live: HeapNode[] = [];
    for (const [key, entry] of this.entries) {
      if (entry.scheduled) live.push({ dueAt: entry.dueAt, key, generation: entry.generation });
    }
    live.sort((a, b) => a.dueAt - b.dueAt); // a sorted array is a valid min-heap
    this.heap = live;
  }

  private push(node: HeapNode): void {
    const heap = this.heap;
    heap.push(node);
    let index = heap.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if ((heap[parent] as HeapNode).dueAt <= node.dueAt) break;
      heap[index] = heap[parent] as HeapNode;
      index = parent;
    }
    heap[index] = node;
    this.compactIfNeeded();
  }

  private pop(): void {
    const heap = this.heap;
    const last = heap.pop() as HeapNode;
    if (heap.length === 0) return;
    let index = 0;
    const length = heap.length;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= length) break;
      const right = left + 1;
      const child = right < length && (heap[right] as HeapNode).dueAt < (heap[left] as HeapNode).dueAt ? right : left;
      if ((heap[child] as HeapNode).dueAt >= last.dueAt) break;
      heap[index] = heap[child] as HeapNode;
      index = child;
    }
    heap[index] = last;
  }
}
