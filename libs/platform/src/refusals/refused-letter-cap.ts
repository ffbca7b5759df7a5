import { EdgeInputKinds, parseSubject, SubjectTable } from '@baton/contracts';
import { LruCache } from '@baton/eventstore';

/** The window a sender's refused letters are counted in: the budget is letters per minute. */
export const REFUSED_LETTER_WINDOW_MS = 60_000;

/**
 * Senders whose windows one service instance keeps at once. A window is a few hundred bytes, so
 * this bounds the cap's memory to a few MB however many names a publisher makes up (without
 * authentication the subject names whoever the publisher says).
 */
export const REFUSED_LETTER_SENDERS_KEPT = 10_000;

/**
 * Who sent an inbox message an agent may publish (`<prefix>.in.<project>.<kind>[.<agent>]`, a kind
 * of `EdgeInputKinds`: result, mesh_result, start, message, mesh_start): `<project>/<agent>`, or the
 * project on its shared subject. Null for anything else — operators' answers and stops, services'
 * messages, offers, subjects no entry of the subject table describes — whose letters are not capped.
 */
export function inboxSenderOf(prefix: string, subject: string): string | null {
  const parsed = parseSubject(prefix, subject);
  if (parsed === null || parsed.name === 'unknown') return null;
  const { inboxKind } = SubjectTable[parsed.name];
  if (inboxKind === undefined || !(EdgeInputKinds as readonly string[]).includes(inboxKind)) return null;
  return 'agent' in parsed ? `${parsed.project}/${parsed.agent}` : 'project' in parsed ? parsed.project : null;
}

/**
 * The most runs of consecutive sequences one summary lists per stream: a flood's sequences are
 * listed while they fit (a few kB), then only counted (`unlisted`), the first and last always kept.
 */
export const SUMMARY_SEQUENCE_RUNS_KEPT = 500;

/** The stored messages among a summary's refusals, of one stream: where an SRE finds the originals. */
export interface StoredRefusals {
  stream: string;
  /** How many of the summary's refusals were messages of this stream. */
  count: number;
  firstSeq: number;
  lastSeq: number;
  /** Their sequences as runs `[from, to]`, in the order refused, at most {@link SUMMARY_SEQUENCE_RUNS_KEPT}. */
  runs: Array<[number, number]>;
  /** Sequences past the runs kept: counted, not listed. */
  unlisted: number;
}

/** Refusals of one sender whose letters were not written: what its summary letter says. */
export interface SuppressedRefusals {
  sender: string;
  /** When the sender's window began (ms since the epoch). */
  windowStart: number;
  /** Refusals not written as letters of their own. */
  count: number;
  /** Of those, how many per reason code. */
  reasons: Record<string, number>;
  firstSubject: string;
  lastSubject: string;
  firstAt: number;
  lastAt: number;
  /**
   * The refusals of messages a stream stored (an inbox message a consumer gave up on), by stream;
   * the rest (`count` minus theirs) were core messages no stream stores (a request, an edge message).
   */
  stored: StoredRefusals[];
}

/** One sender's window: letters written in it, and what was suppressed once they ran out. */
interface SenderWindow {
  readonly start: number;
  letters: number;
  suppressed: SuppressedRefusals | null;
}

/** What to do with one refusal. */
export interface RefusalVerdict {
  /** Write the refusal's own letter (the sender's budget is not spent). */
  letter: boolean;
  /** True for the first refusal of a window that is suppressed: the one worth a log line. */
  firstSuppressed: boolean;
  /** Summaries due now: the sender's previous window, senders evicted to make room. Write each once. */
  due: SuppressedRefusals[];
}

/**
 * A per-sender cap on the dead letters of refused edge messages, pure (time arrives as `now`).
 *
 * Each sender has a fixed window of `windowMs` from its first refusal; in it, its first `perWindow`
 * refusals are written as letters of their own, and the rest are counted (per reason, first and
 * last subject). When the window has ended — found by the next refusal or by {@link sweep} — the
 * count is handed back once, as a summary to write as one letter. So a sender writes at most
 * `perWindow + 1` letters a window, and nothing refused goes unrecorded. Only refusals are
 * counted: messages relayed never meet the cap.
 *
 * Memory: windows live in an LRU of `capacity` senders. A sender evicted with suppressed refusals
 * has its summary handed back at once (with the next verdict or sweep) rather than lost; it starts
 * a new window when it is refused again.
 */
export class RefusedLetterCap {
  private readonly windows: LruCache<string, SenderWindow>;
  /** Windows holding suppressed refusals, by sender: the same objects as in `windows`, swept when they end. */
  private readonly pending = new Map<string, SenderWindow>();
  /** Summaries of senders evicted with suppressed refusals, until they are handed back. */
  private evictedDue: SuppressedRefusals[] = [];
  private suppressedTotal = 0;

  constructor(
    /** Letters per sender per window; 0 means no cap (every refusal is written). */
    readonly perWindow: number,
    readonly windowMs: number = REFUSED_LETTER_WINDOW_MS,
    capacity: number = REFUSED_LETTER_SENDERS_KEPT,
  ) {
    if (!Number.isInteger(perWindow) || perWindow < 0) throw new RangeError(`letters per window must be a whole number ≥ 0, got ${perWindow}`);
    if (!Number.isInteger(windowMs) || windowMs < 1) throw new RangeError(`window must be a whole number of ms ≥ 1, got ${windowMs}`);
    this.windows = new LruCache<string, SenderWindow>(capacity, undefined, (sender, window) => {
      if (window.suppressed === null) return;
      this.pending.delete(sender);
      this.evictedDue.push(window.suppressed);
    });
  }

  /** False when the cap is off (`perWindow` 0). */
  get active(): boolean {
    return this.perWindow > 0;
  }

  /** Senders whose windows are kept (bounded by the capacity). */
  get senders(): number {
    return this.windows.size;
  }

  /** Refusals not written as letters of their own, since the cap was made. */
  get suppressed(): number {
    return this.suppressedTotal;
  }

  /**
   * Decide one refusal of `sender` for `reason` on `subject` at `now`; `original` names the stream
   * and sequence of a stored message (absent for a core message), listed in the summary if suppressed.
   */
  refuse(sender: string, reason: string, subject: string, now: number, original?: { stream: string; seq: number }): RefusalVerdict {
    if (!this.active) return { letter: true, firstSuppressed: false, due: [] };
    const due: SuppressedRefusals[] = [];
    let window = this.windows.get(sender);
    if (window !== undefined && this.ended(window, now)) {
      this.close(sender, window, due);
      window = undefined;
    }
    if (window === undefined) {
      window = { start: now, letters: 0, suppressed: null };
      this.windows.set(sender, window);
    }
    due.push(...this.takeEvicted());
    if (window.letters < this.perWindow) {
      window.letters++;
      return { letter: true, firstSuppressed: false, due };
    }
    this.suppressedTotal++;
    const suppressed = window.suppressed;
    if (suppressed === null) {
      window.suppressed = {
        sender,
        windowStart: window.start,
        count: 1,
        reasons: { [reason]: 1 },
        firstSubject: subject,
        lastSubject: subject,
        firstAt: now,
        lastAt: now,
        stored: [],
      };
      if (original !== undefined) noteStored(window.suppressed.stored, original);
      this.pending.set(sender, window);
      return { letter: false, firstSuppressed: true, due };
    }
    suppressed.count++;
    suppressed.reasons[reason] = (suppressed.reasons[reason] ?? 0) + 1;
    suppressed.lastSubject = subject;
    suppressed.lastAt = now;
    if (original !== undefined) noteStored(suppressed.stored, original);
    return { letter: false, firstSuppressed: false, due };
  }

  /** Summaries of the windows that ended by `now` (and of senders evicted), each handed back once. */
  sweep(now: number): SuppressedRefusals[] {
    const due = this.takeEvicted();
    for (const [sender, window] of this.pending) if (this.ended(window, now)) this.close(sender, window, due);
    return due;
  }

  /** Every summary still held, ended or not (the relay is stopping). */
  drain(): SuppressedRefusals[] {
    const due = this.takeEvicted();
    for (const [sender, window] of this.pending) this.close(sender, window, due);
    return due;
  }

  private ended(window: SenderWindow, now: number): boolean {
    return now - window.start >= this.windowMs;
  }

  /** Forget a sender's window, handing back its summary if it has one. */
  private close(sender: string, window: SenderWindow, due: SuppressedRefusals[]): void {
    this.windows.delete(sender);
    this.pending.delete(sender);
    if (window.suppressed !== null) due.push(window.suppressed);
  }

  private takeEvicted(): SuppressedRefusals[] {
    if (this.evictedDue.length === 0) return [];
    const due = this.evictedDue;
    this.evictedDue = [];
    return due;
  }
}

/** Add one stored message to a summary's list of its stream: a run extended, a new run, or counted past the runs kept. */
function noteStored(stored: StoredRefusals[], original: { stream: string; seq: number }): void {
  let of = stored.find((s) => s.stream === original.stream);
  if (of === undefined) {
    of = { stream: original.stream, count: 0, firstSeq: original.seq, lastSeq: original.seq, runs: [], unlisted: 0 };
    stored.push(of);
  }
  of.count++;
  of.firstSeq = Math.min(of.firstSeq, original.seq);
  of.lastSeq = Math.max(of.lastSeq, original.seq);
  const last = of.runs[of.runs.length - 1];
  if (last !== undefined && original.seq === last[1] + 1) last[1] = original.seq;
  else if (of.runs.length < SUMMARY_SEQUENCE_RUNS_KEPT) of.runs.push([original.seq, original.seq]);
  else of.unlisted++;
}
