import { inboxSenderOf, RefusedLetterCap, SUMMARY_SEQUENCE_RUNS_KEPT, type SuppressedRefusals } from './refused-letter-cap';

const W = 60_000;
const T = 1_700_000_000_000;

/** Refuse `count` messages of `sender` at `now`: how many would be written, and the summaries handed back. */
function refuseMany(cap: RefusedLetterCap, sender: string, count: number, now: number, reason = 'no_handler') {
  let letters = 0;
  const due: SuppressedRefusals[] = [];
  for (let i = 0; i < count; i++) {
    const verdict = cap.refuse(sender, reason, `p.edge.${sender.replace('/', '.x.')}.${i}`, now);
    if (verdict.letter) letters++;
    due.push(...verdict.due);
  }
  return { letters, due };
}

describe('refused letter cap', () => {
  it('writes a sender its budget of letters in a window, then counts the rest per reason with the first and last subjects', () => {
    const cap = new RefusedLetterCap(3, W);
    expect(refuseMany(cap, 'acme/bob', 3, T)).toEqual({ letters: 3, due: [] });
    const first = cap.refuse('acme/bob', 'no_handler', 'first', T + 1);
    expect(first).toEqual({ letter: false, firstSuppressed: true, due: [] });
    expect(cap.refuse('acme/bob', 'schema_violation', 'middle', T + 2)).toEqual({ letter: false, firstSuppressed: false, due: [] });
    cap.refuse('acme/bob', 'schema_violation', 'last', T + 3);
    expect(cap.suppressed).toBe(3);
    expect(cap.drain()).toEqual([
      {
        sender: 'acme/bob',
        windowStart: T,
        count: 3,
        reasons: { no_handler: 1, schema_violation: 2 },
        firstSubject: 'first',
        lastSubject: 'last',
        firstAt: T + 1,
        lastAt: T + 3,
        stored: [],
      },
    ]);
    expect(cap.drain()).toEqual([]);
  });

  it('lists the stream and sequences of the stored messages it sums up: runs of consecutive ones, at most SUMMARY_SEQUENCE_RUNS_KEPT, the rest counted', () => {
    const cap = new RefusedLetterCap(1, W);
    cap.refuse('acme', 'schema_violation', 's', T, { stream: 'B_INBOX', seq: 1 });
    for (const seq of [5, 6, 7, 9, 3]) cap.refuse('acme', 'schema_violation', 's', T + 1, { stream: 'B_INBOX', seq });
    cap.refuse('acme', 'schema_violation', 's', T + 2); // a core message: counted, no sequence
    const [summary] = cap.drain();
    expect(summary).toMatchObject({
      count: 6,
      stored: [
        {
          stream: 'B_INBOX',
          count: 5,
          firstSeq: 3,
          lastSeq: 9,
          runs: [
            [5, 7],
            [9, 9],
            [3, 3],
          ],
          unlisted: 0,
        },
      ],
    });

    const flood = new RefusedLetterCap(1, W);
    flood.refuse('acme', 'schema_violation', 's', T, { stream: 'B_INBOX', seq: 1 });
    // Every other sequence: no run joins the next, so the list is full at the cap.
    for (let i = 0; i < SUMMARY_SEQUENCE_RUNS_KEPT + 10; i++) flood.refuse('acme', 'schema_violation', 's', T, { stream: 'B_INBOX', seq: 10 + 2 * i });
    const [big] = flood.drain();
    expect(big!.stored[0]).toMatchObject({
      count: SUMMARY_SEQUENCE_RUNS_KEPT + 10,
      firstSeq: 10,
      lastSeq: 10 + 2 * (SUMMARY_SEQUENCE_RUNS_KEPT + 9),
      unlisted: 10,
    });
    expect(big!.stored[0]!.runs).toHaveLength(SUMMARY_SEQUENCE_RUNS_KEPT);
  });

  it('each sender has its own budget: one spending it leaves another untouched', () => {
    const cap = new RefusedLetterCap(2, W);
    expect(refuseMany(cap, 'acme/bob', 50, T).letters).toBe(2);
    expect(refuseMany(cap, 'acme/carol', 2, T).letters).toBe(2);
    expect(refuseMany(cap, 'acme', 2, T).letters).toBe(2);
    expect(cap.drain().map((s) => [s.sender, s.count])).toEqual([['acme/bob', 48]]);
  });

  it('window rollover: the next refusal after the window hands back its summary once and starts a new budget', () => {
    const cap = new RefusedLetterCap(2, W);
    refuseMany(cap, 'acme/bob', 5, T);
    // Still inside the window (its last ms): counted, no summary yet.
    expect(cap.refuse('acme/bob', 'no_handler', 's', T + W - 1)).toMatchObject({ letter: false, due: [] });
    const next = cap.refuse('acme/bob', 'reply_not_allowed', 's', T + W);
    expect(next.letter).toBe(true);
    expect(next.due).toEqual([expect.objectContaining({ sender: 'acme/bob', windowStart: T, count: 4, reasons: { no_handler: 4 } })]);
    expect(refuseMany(cap, 'acme/bob', 1, T + W + 1)).toEqual({ letters: 1, due: [] });
    expect(cap.refuse('acme/bob', 'no_handler', 's', T + W + 2)).toMatchObject({ letter: false, firstSuppressed: true, due: [] });
  });

  it('the sweep hands back a window summary once the window has ended, not before, and a window with nothing suppressed has none', () => {
    const cap = new RefusedLetterCap(1, W);
    refuseMany(cap, 'acme/bob', 4, T);
    refuseMany(cap, 'acme/carol', 1, T);
    expect(cap.sweep(T + W - 1)).toEqual([]);
    expect(cap.sweep(T + W).map((s) => [s.sender, s.count])).toEqual([['acme/bob', 3]]);
    expect(cap.sweep(T + 2 * W)).toEqual([]);
    // Swept, the sender starts afresh.
    expect(refuseMany(cap, 'acme/bob', 1, T + W + 5)).toEqual({ letters: 1, due: [] });
  });

  it('bounded memory: it keeps at most its capacity of senders, and one evicted with suppressed refusals has its summary handed back', () => {
    const cap = new RefusedLetterCap(1, W, 3);
    refuseMany(cap, 'acme/flood', 10, T);
    const due: SuppressedRefusals[] = [];
    for (let i = 0; i < 1_000; i++) {
      due.push(...refuseMany(cap, `acme/a${i}`, 1, T + 1).due);
      expect(cap.senders).toBeLessThanOrEqual(3);
    }
    expect(due.map((s) => [s.sender, s.count])).toEqual([['acme/flood', 9]]);
    expect(cap.drain()).toEqual([]);
    expect(cap.suppressed).toBe(9);
  });

  it('0 is no cap: every refusal is written and nothing is kept', () => {
    const cap = new RefusedLetterCap(0, W);
    expect(cap.active).toBe(false);
    expect(refuseMany(cap, 'acme/bob', 100, T)).toEqual({ letters: 100, due: [] });
    expect(cap.senders).toBe(0);
    expect(cap.drain()).toEqual([]);
  });

  it('refuses a budget or window that is not a whole number', () => {
    expect(() => new RefusedLetterCap(-1)).toThrow(RangeError);
    expect(() => new RefusedLetterCap(1.5)).toThrow(RangeError);
    expect(() => new RefusedLetterCap(1, 0)).toThrow(RangeError);
  });
});

describe('inboxSenderOf: whose budget an inbox message counts against', () => {
  it('an agent`s inputs are its own; a shared subject is the project`s; what agents do not publish is not capped', () => {
    expect(inboxSenderOf('baton', 'baton.in.acme.result.bob')).toBe('acme/bob');
    expect(inboxSenderOf('baton', 'baton.in.acme.mesh_result.bob')).toBe('acme/bob');
    expect(inboxSenderOf('baton', 'baton.in.acme.start')).toBe('acme');
    expect(inboxSenderOf('baton', 'baton.in.acme.message.web')).toBe('acme/web');
    for (const subject of [
      'baton.in.acme.answer',
      'baton.in.acme.stop',
      'baton.in.acme.offer.bob',
      'baton.ev.acme.run.r1',
      'other.in.acme.result.bob',
      'baton.in.acme.result.bob.x',
    ]) {
      expect(inboxSenderOf('baton', subject)).toBeNull();
    }
  });
});
