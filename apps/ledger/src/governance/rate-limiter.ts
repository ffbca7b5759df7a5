/** The refusal of a claim over the cap: when to try again. */
export interface RateRefusal {
  limit: number;
  retry_after_ms: number;
}

/**
 * The configured caps: claims per window per agent. `LEDGER_CLAIMS_PER_MINUTE` is the default and
 * `LEDGER_AGENT_CLAIM_CAPS` overrides it for named agents; 0 means no cap.
 */
export class ClaimCaps {
  constructor(
    private readonly perMinute: number,
    private readonly perAgent: Readonly<Record<string, number>> = {},
  ) {}

  /** The cap for `agent` (0 = none). Only the override map's own entries count, never inherited names. */
  capOf(agent: string): number {
    return Object.hasOwn(this.perAgent, agent) ? (this.perAgent[agent] as number) : this.perMinute;
  }

  /** True when at least one agent can be capped; false means the feature is off entirely. */
  get active(): boolean {
    return this.perMinute > 0 || Object.values(this.perAgent).some((n) => n > 0);
  }
}

/** One slot of a window: its index (time / slot length) and the claims counted in it (> 0). */
export type ClaimSlot = readonly [slot: number, count: number];

/** The counters of one agent in one project: non-empty slots, oldest first. */
export interface ClaimWindowState {
  readonly slots: readonly ClaimSlot[];
}

/** What `take` decided: a counted claim (and the slot it was counted in, to refund it) or a refusal. */
export type ClaimTake = { granted: true; state: ClaimWindowState; slot: number } | { granted: false; refusal: RateRefusal };

/** The length of the rate window: the caps are claims per minute. */
export const DEFAULT_CLAIM_WINDOW_MS = 60_000;
/** Slots per window: a claim's count is released at most one slot (2 s of a minute) late. */
export const CLAIM_WINDOW_SLOTS = 30;

const EMPTY: ClaimWindowState = { slots: [] };
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The arithmetic of the rate window, pure (no clock, no I/O): time arrives as `now` in ms.
 *
 * The window of length W is cut into `slots` slots of b = ceil(W / slots) ms, aligned on the epoch
 * so every ledger instance cuts time the same way. A state holds a count per slot, at most
 * `slots + 1` of them, so it stays small however many claims an agent makes. At `now`, in slot
 * `cur`, the claims counted are those of slots `cur - slots … cur`: a span that starts up to one
 * slot before `now - W` and therefore covers every claim of the last W ms, plus a few older ones.
 *
 * Why this and not the weighted two-window estimate (`previous × overlap + current`): the estimate
 * assumes the previous window's claims were spread evenly, and a burst at the end of one window
 * followed by one late in the next lets through almost twice the cap within W. Counting whole
 * slots never lets through more than the cap in any span of W ms (the slots counted for a claim
 * include every earlier claim of the W ms before it); the price is that a claim keeps its place
 * for up to W + b instead of W, so an agent running flat out gets at least `slots / (slots + 1)`
 * of its cap (≥ 96 % with 30 slots).
 *
 * Clocks: the current slot is the later of `now`'s slot and the newest slot in the state, so a
 * state never moves backwards when instances disagree on the time; an instance whose clock runs
 * ahead by d releases counts up to d early.
 */
export class ClaimWindow {
  readonly slotMs: number;

  constructor(
    readonly windowMs: number = DEFAULT_CLAIM_WINDOW_MS,
    readonly slots: number = CLAIM_WINDOW_SLOTS,
  ) {
    if (!Number.isInteger(windowMs) || windowMs < 1) throw new RangeError(`window must be a whole number of ms ≥ 1, got ${windowMs}`);
    if (!Number.isInteger(slots) || slots < 1) throw new RangeError(`slots must be a whole number ≥ 1, got ${slots}`);
    this.slotMs = Math.max(1, Math.ceil(windowMs / slots));
  }

  /**
   * How long a state still matters after its last write: its newest slot stops counting at most
   * `(slots + 1) × b` ms later. Storage may drop a key untouched for longer (one more slot of margin).
   */
  get retentionMs(): number {
    return (this.slots + 2) * this.slotMs;
  }

  slotOf(now: number): number {
    return Math.floor(now / this.slotMs);
  }

  /** The slots that still count at `now`, oldest first. */
  live(state: ClaimWindowState | null, now: number): ClaimSlot[] {
    const slots = state?.slots ?? [];
    const newest = slots.length > 0 ? (slots[slots.length - 1] as ClaimSlot)[0] : Number.NEGATIVE_INFINITY;
    const oldest = Math.max(this.slotOf(now), newest) - this.slots;
    return slots.filter(([slot, count]) => slot >= oldest && count > 0);
  }

  /** Claims that count against the cap at `now`. */
  count(state: ClaimWindowState | null, now: number): number {
    return this.live(state, now).reduce((sum, [, count]) => sum + count, 0);
  }

  /**
   * Count one claim under `limit` (≥ 1), or refuse it with the time until enough old slots stop
   * counting for one more claim to fit (`retry_after_ms` ≥ 1).
   */
  take(state: ClaimWindowState | null, limit: number, now: number): ClaimTake {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`limit must be a whole number ≥ 1, got ${limit}`);
    const live = this.live(state, now);
    const used = live.reduce((sum, [, count]) => sum + count, 0);
    if (used >= limit) return { granted: false, refusal: { limit, retry_after_ms: this.retryAfter(live, used, limit, now) } };
    const newest = live[live.length - 1];
    const slot = Math.max(this.slotOf(now), newest?.[0] ?? Number.NEGATIVE_INFINITY);
    const slots: ClaimSlot[] = newest !== undefined && newest[0] === slot ? [...live.slice(0, -1), [slot, newest[1] + 1]] : [...live, [slot, 1]];
    return { granted: true, state: { slots }, slot };
  }

  /**
   * Give back a claim counted in `slot` that was not granted after all. Null when there is nothing
   * to give back (the slot no longer counts, or holds nothing).
   */
  refund(state: ClaimWindowState | null, slot: number, now: number): ClaimWindowState | null {
    const live = this.live(state, now);
    const index = live.findIndex(([s]) => s === slot);
    if (index < 0) return null;
    const [, count] = live[index] as ClaimSlot;
    const slots = count > 1 ? live.map((entry, i): ClaimSlot => (i === index ? [slot, count - 1] : entry)) : live.filter((_, i) => i !== index);
    return { slots };
  }

  /** Bytes to store: `{"v":1,"s":[[slot,count],…]}`. */
  encode(state: ClaimWindowState): Uint8Array {
    return encoder.encode(JSON.stringify({ v: 1, s: state.slots }));
  }

  /** The stored state, or an empty one when the bytes are not a state this code wrote. */
  decode(bytes: Uint8Array): ClaimWindowState {
    try {
      const value: unknown = JSON.parse(decoder.decode(bytes));
      if (typeof value !== 'object' || value === null || (value as { v?: unknown }).v !== 1) return EMPTY;
      const raw = (value as { s?: unknown }).s;
      if (!Array.isArray(raw)) return EMPTY;
      const slots: ClaimSlot[] = [];
      for (const entry of raw) {
        if (!Array.isArray(entry) || entry.length !== 2) return EMPTY;
        const [slot, count] = entry as unknown[];
        if (!Number.isSafeInteger(slot) || !Number.isSafeInteger(count) || (count as number) < 1) return EMPTY;
        if (slots.length > 0 && (slots[slots.length - 1] as ClaimSlot)[0] >= (slot as number)) return EMPTY;
        slots.push([slot as number, count as number]);
      }
      return { slots };
    } catch {
      return EMPTY;
    }
  }

  private retryAfter(live: readonly ClaimSlot[], used: number, limit: number, now: number): number {
    let remaining = used;
    for (const [slot, count] of live) {
      remaining -= count;
      // Slot `slot` stops counting once the current slot passes `slot + slots`.
      if (remaining < limit) return Math.max(1, (slot + this.slots + 1) * this.slotMs - now);
    }
    return this.windowMs; // unreachable: `used` is the sum of the live counts
  }
}
