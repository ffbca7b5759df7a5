import fc from 'fast-check';
import { ClaimCaps, ClaimWindow, type ClaimWindowState } from './rate-limiter';

const W = 60_000;
const B = 2_000; // 30 slots of a minute
const T = 1_000_000 * B; // the start of a slot

/** Take `times.length` claims in order; the refusals or the final state. */
function takeAll(window: ClaimWindow, limit: number, times: number[], start: ClaimWindowState | null = null) {
  let state = start;
  const granted: number[] = [];
  for (const now of times) {
    const taken = window.take(state, limit, now);
    if (taken.granted) {
      state = taken.state;
      granted.push(now);
    }
  }
  return { state, granted };
}

describe('claim caps', () => {
  it('the default applies to every agent; an override replaces it for that agent, 0 (no cap) included', () => {
    const caps = new ClaimCaps(10, { rita: 2, free: 0 });
    expect(caps.capOf('bob')).toBe(10);
    expect(caps.capOf('rita')).toBe(2);
    expect(caps.capOf('free')).toBe(0);
  });

  it('0 everywhere is off (no agent capped); any cap above 0 turns it on', () => {
    expect(new ClaimCaps(0).active).toBe(false);
    expect(new ClaimCaps(0, { a: 0 }).active).toBe(false);
    expect(new ClaimCaps(0, { a: 3 }).active).toBe(true);
    expect(new ClaimCaps(5, { a: 0 }).active).toBe(true);
    expect(new ClaimCaps(0, { a: 3 }).capOf('b')).toBe(0);
  });

  it('an agent named like an object property gets the default, not something inherited', () => {
    const caps = new ClaimCaps(7, {});
    expect(caps.capOf('toString')).toBe(7);
    expect(caps.capOf('constructor')).toBe(7);
    expect(caps.capOf('__proto__')).toBe(7);
  });
});

describe('claim window arithmetic', () => {
  const window = new ClaimWindow(W);

  it('counts claims up to the cap, then refuses with the limit and retry_after_ms', () => {
    const { state, granted } = takeAll(window, 4, [T, T + 1, T + 2, T + 3]);
    expect(granted).toHaveLength(4);
    expect(window.count(state, T + 4)).toBe(4);
    const fifth = window.take(state, 4, T + 4);
    // The four sit in slot T / B, which stops counting when the slot T + W + B begins.
    expect(fifth).toEqual({ granted: false, refusal: { limit: 4, retry_after_ms: W + B - 4 } });
  });

  it('edge of the window: a claim counts until its slot leaves the window, and not a millisecond longer', () => {
    const end = T + B - 1; // the last ms of the slot
    const { state } = takeAll(window, 1, [end]);
    const release = T + W + B; // the slot that starts W after the end of the claim's slot
    expect(release - end).toBeGreaterThan(W); // never earlier than W after the claim
    expect(window.take(state, 1, release - 1)).toEqual({ granted: false, refusal: { limit: 1, retry_after_ms: 1 } });
    expect(window.take(state, 1, release)).toMatchObject({ granted: true });
    // A claim at the very start of a slot keeps its place at most one slot longer than W.
    const { state: early } = takeAll(window, 1, [T]);
    expect(window.take(early, 1, T + W + B - 1)).toMatchObject({ granted: false });
    expect(window.take(early, 1, T + W + B)).toMatchObject({ granted: true });
  });

  it('retry_after_ms is when enough of the oldest slots have left for one more claim', () => {
    const { state } = takeAll(window, 3, [T, T + 10_000, T + 20_000]);
    const refused = window.take(state, 3, T + 30_000);
    expect(refused).toEqual({ granted: false, refusal: { limit: 3, retry_after_ms: T + W + B - (T + 30_000) } });
    const again = window.take(state, 3, T + W + B);
    expect(again.granted).toBe(true);
    if (!again.granted) throw new Error('unreachable');
    // The next place frees when the claim at T + 10 s leaves.
    expect(window.take(again.state, 3, T + W + B)).toEqual({ granted: false, refusal: { limit: 3, retry_after_ms: 10_000 } });
  });

  it('a lowered cap: the wait lasts until enough slots have left, not just the oldest', () => {
    const { state } = takeAll(window, 5, [T, T + 10_000, T + 20_000]);
    expect(window.take(state, 1, T + 25_000)).toEqual({ granted: false, refusal: { limit: 1, retry_after_ms: T + 20_000 + W + B - (T + 25_000) } });
  });

  it('retry_after_ms is always at least 1 ms', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.array(fc.integer({ min: 0, max: 3 * W }), { minLength: 1, maxLength: 40 }), (limit, offsets) => {
        const times = offsets.map((o) => T + o).sort((a, b) => a - b);
        let state: ClaimWindowState | null = null;
        for (const now of times) {
          const taken = window.take(state, limit, now);
          if (taken.granted) state = taken.state;
          else expect(taken.refusal.retry_after_ms).toBeGreaterThanOrEqual(1);
        }
      }),
    );
  });

  it('never more than the cap in any span of the window, and a claim is refused only while the cap is used within window + one slot', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.array(fc.integer({ min: 0, max: 4 * W }), { minLength: 1, maxLength: 60 }), (limit, offsets) => {
        const times = offsets.map((o) => T + o).sort((a, b) => a - b);
        let state: ClaimWindowState | null = null;
        const granted: number[] = [];
        for (const now of times) {
          const taken = window.take(state, limit, now);
          const recent = granted.filter((t) => t > now - W - B).length;
          if (taken.granted) {
            state = taken.state;
            granted.push(now);
          } else {
            // Not over-conservative: refused only when the cap is used within W + one slot.
            expect(recent).toBeGreaterThanOrEqual(limit);
          }
        }
        for (const t of granted) expect(granted.filter((g) => g > t - W && g <= t).length).toBeLessThanOrEqual(limit);
      }),
    );
  });

  it('the state stays small: at most slots + 1 counters however many claims', () => {
    const times = Array.from({ length: 2_000 }, (_, i) => T + i * 97);
    const { state, granted } = takeAll(window, 1_000, times);
    expect(granted.length).toBeGreaterThan(1_000);
    expect(state?.slots.length).toBeLessThanOrEqual(window.slots + 1);
    expect(window.encode(state as ClaimWindowState).length).toBeLessThan(1_000);
  });

  it('refund gives a place back in its slot; nothing to give back once the slot has left the window', () => {
    const first = window.take(null, 2, T);
    if (!first.granted) throw new Error('unreachable');
    const second = window.take(first.state, 2, T + B);
    if (!second.granted) throw new Error('unreachable');
    expect(window.take(second.state, 2, T + B + 1).granted).toBe(false);
    const refunded = window.refund(second.state, second.slot, T + B + 2);
    expect(refunded).toEqual({ slots: [[T / B, 1]] });
    expect(window.take(refunded, 2, T + B + 3).granted).toBe(true);
    expect(window.refund(first.state, first.slot, T + W + B)).toBeNull();
    expect(window.refund(first.state, first.slot + 7, T + 1)).toBeNull();
  });

  it('a state written by an instance whose clock runs ahead never moves back', () => {
    const ahead = window.take(null, 3, T + 10 * B);
    if (!ahead.granted) throw new Error('unreachable');
    const behind = window.take(ahead.state, 3, T);
    expect(behind).toMatchObject({ granted: true, slot: T / B + 10, state: { slots: [[T / B + 10, 2]] } });
  });

  it('encodes to JSON and back; bytes it did not write read as an empty window', () => {
    const state: ClaimWindowState = {
      slots: [
        [5, 1],
        [9, 3],
      ],
    };
    expect(new TextDecoder().decode(window.encode(state))).toBe('{"v":1,"s":[[5,1],[9,3]]}');
    expect(window.decode(window.encode(state))).toEqual(state);
    for (const junk of ['', 'null', '{"v":2,"s":[]}', '{"v":1,"s":[[9,1],[5,1]]}', '{"v":1,"s":[[1,0]]}', '{"v":1,"s":[["a",1]]}', '[1]']) {
      expect(window.decode(new TextEncoder().encode(junk))).toEqual({ slots: [] });
    }
  });

  it('any window length: slots of ceil(window / 30) ms, kept window + two slots', () => {
    const short = new ClaimWindow(1_000);
    expect(short.slotMs).toBe(34);
    expect(short.retentionMs).toBe(32 * 34);
    expect(new ClaimWindow(W).retentionMs).toBe(W + 2 * B);
    expect(() => new ClaimWindow(0)).toThrow(RangeError);
    expect(() => window.take(null, 0, T)).toThrow(RangeError);
  });
});
