import { DeadlineTable } from './deadline-table';

describe('DeadlineTable', () => {
  it('hands out a lease only once it has expired, earliest first', () => {
    const table = new DeadlineTable();
    table.claim('h-2', 'p', 'c-2', 2_000);
    table.claim('h-1', 'p', 'c-1', 1_000);
    table.claim('h-3', 'p', 'c-3', 3_000);
    expect(table.takeDue(999, 10)).toEqual([]);
    expect(table.takeDue(2_000, 10).map((d) => d.handoffId)).toEqual(['h-1', 'h-2']);
    expect(table.takeDue(10_000, 10)).toEqual([{ handoffId: 'h-3', project: 'p', claimId: 'c-3', leaseExpiresAt: 3_000 }]);
  });

  it('a lease keeps the traceparent of its claim through heartbeats; a new claim brings its own', () => {
    const table = new DeadlineTable();
    const tp = (n: number) => `00-${String(n).repeat(32)}-${'a'.repeat(16)}-01`;
    table.claim('h-1', 'p', 'c-1', 1_000, tp(1));
    table.extend('p', 'h-1', 2_000);
    expect(table.takeDue(2_000, 10)).toEqual([{ handoffId: 'h-1', project: 'p', claimId: 'c-1', leaseExpiresAt: 2_000, traceparent: tp(1) }]);
    table.claim('h-1', 'p', 'c-2', 3_000, tp(2));
    expect(table.get('p', 'h-1')?.traceparent).toBe(tp(2));
    table.claim('h-1', 'p', 'c-3', 4_000);
    expect(table.get('p', 'h-1')).toEqual({ handoffId: 'h-1', project: 'p', claimId: 'c-3', leaseExpiresAt: 4_000 });
  });

  it('a lease its claim`s accepted result answered is held until expiry + hold; another claim, or an untracked handoff, is not', () => {
    const table = new DeadlineTable();
    table.claim('h-1', 'p', 'c-1', 1_000);
    table.claim('h-2', 'p', 'c-2', 1_000);
    expect(table.answer('p', 'h-1', 'c-1', 5_000)).toBe(true);
    expect(table.answer('p', 'h-2', 'c-old', 5_000)).toBe(false);
    expect(table.answer('q', 'h-1', 'c-1', 5_000)).toBe(false);
    expect(table.takeDue(1_000, 10).map((d) => d.handoffId)).toEqual(['h-2']);
    // A heartbeat, or a postponement after a refused requeue, never brings it before the hold ends.
    table.extend('p', 'h-1', 2_000);
    expect(table.takeDue(5_999, 10)).toEqual([]);
    expect(table.takeDue(6_000, 10).map((d) => d.claimId)).toEqual(['c-1']);
    table.postpone('p', 'h-1', 'c-1', 6_100);
    expect(table.takeDue(6_099, 10)).toEqual([]);
    // A new claim starts without a hold.
    table.claim('h-1', 'p', 'c-3', 7_000);
    expect(table.takeDue(7_000, 10).map((d) => d.claimId)).toEqual(['c-3']);
  });

  it('an answer read while the lease`s requeue is in flight is kept: the postponement after that request failed respects the hold', () => {
    const table = new DeadlineTable();
    table.claim('h-1', 'p', 'c-1', 1_000);
    expect(table.takeDue(1_000, 10)).toHaveLength(1); // a requeue request in flight
    expect(table.answer('p', 'h-1', 'c-1', 30_000)).toBe(true); // the result, read meanwhile
    // The request got no answer: asked again after the retry delay — but not before the hold ends.
    table.postpone('p', 'h-1', 'c-1', 6_000);
    expect(table.takeDue(6_000, 10)).toEqual([]);
    expect(table.takeDue(30_999, 10)).toEqual([]);
    expect(table.takeDue(31_000, 10).map((d) => d.claimId)).toEqual(['c-1']);
  });

  it('a heartbeat before expiry moves the deadline: the old expiry no longer hands the lease out', () => {
    const table = new DeadlineTable();
    table.claim('h-1', 'p', 'c-1', 1_000);
    expect(table.extend('p', 'h-1', 5_000)).toBe(true);
    expect(table.takeDue(1_000, 10)).toEqual([]);
    expect(table.takeDue(5_000, 10).map((d) => d.leaseExpiresAt)).toEqual([5_000]);
  });

  it('a released handoff is never handed out, and a heartbeat for an untracked handoff changes nothing', () => {
    const table = new DeadlineTable();
    table.claim('h-1', 'p', 'c-1', 1_000);
    expect(table.release('p', 'h-1')).toBe(true);
    expect(table.extend('p', 'h-1', 2_000)).toBe(false);
    expect(table.takeDue(10_000, 10)).toEqual([]);
    expect(table.size).toBe(0);
  });

  it('a lease handed out is not handed out again until postponed; a postponement for an old claim is ignored', () => {
    const table = new DeadlineTable();
    table.claim('h-1', 'p', 'c-1', 1_000);
    expect(table.takeDue(1_000, 10)).toHaveLength(1);
    expect(table.takeDue(50_000, 10)).toEqual([]);
    table.postpone('p', 'h-1', 'c-old', 2_000);
    expect(table.takeDue(50_000, 10)).toEqual([]);
    table.postpone('p', 'h-1', 'c-1', 2_000);
    expect(table.takeDue(1_999, 10)).toEqual([]);
    expect(table.takeDue(2_000, 10).map((d) => d.claimId)).toEqual(['c-1']);
  });

  it('a new claim replaces the old one, even while the old one is handed out', () => {
    const table = new DeadlineTable();
    table.claim('h-1', 'p', 'c-1', 1_000);
    expect(table.takeDue(1_000, 10)).toHaveLength(1);
    table.claim('h-1', 'p', 'c-2', 4_000);
    table.postpone('p', 'h-1', 'c-1', 1_500); // the answer about the old claim arrives late
    expect(table.takeDue(3_999, 10)).toEqual([]);
    expect(table.takeDue(4_000, 10).map((d) => d.claimId)).toEqual(['c-2']);
  });

  it("two projects may hold handoffs of the same id: each keeps its own lease, and one's release or heartbeat never touches the other's", () => {
    const table = new DeadlineTable();
    table.claim('ho-s-ticket-42', 'alpha', 'c-a', 1_000);
    table.claim('ho-s-ticket-42', 'beta', 'c-b', 2_000);
    expect(table.size).toBe(2);
    expect(table.release('beta', 'ho-s-ticket-42')).toBe(true);
    expect(table.extend('beta', 'ho-s-ticket-42', 9_000)).toBe(false);
    expect(table.get('alpha', 'ho-s-ticket-42')).toEqual({ handoffId: 'ho-s-ticket-42', project: 'alpha', claimId: 'c-a', leaseExpiresAt: 1_000 });
    expect(table.takeDue(1_000, 10)).toEqual([{ handoffId: 'ho-s-ticket-42', project: 'alpha', claimId: 'c-a', leaseExpiresAt: 1_000 }]);
    table.postpone('beta', 'ho-s-ticket-42', 'c-a', 3_000); // another project's postponement changes nothing here
    expect(table.takeDue(50_000, 10)).toEqual([]);
  });

  it('respects the batch limit and keeps the rest for the next call', () => {
    const table = new DeadlineTable();
    for (let i = 0; i < 5; i++) table.claim(`h-${i}`, 'p', `c-${i}`, 100 + i);
    expect(table.takeDue(1_000, 3)).toHaveLength(3);
    expect(table.takeDue(1_000, 3).map((d) => d.handoffId)).toEqual(['h-3', 'h-4']);
  });

  it('holds 100k claimed handoffs with heartbeats, keeps the heap compact and takes exactly the due ones', () => {
    const table = new DeadlineTable();
    const n = 100_000;
    for (let i = 0; i < n; i++) table.claim(`handoff-${i}`, `project-${i % 10}`, `claim-${i}`, 60_000 + i);
    // Three heartbeat rounds leave dead heap nodes behind; compaction bounds them.
    for (let round = 1; round <= 3; round++) {
      for (let i = 0; i < n; i++) table.extend(`project-${i % 10}`, `handoff-${i}`, 60_000 + round * 100_000 + i);
    }
    expect(table.size).toBe(n);
    expect(table.heapSize).toBeLessThanOrEqual(2 * n + 1024 + 1);
    expect(table.takeDue(360_000 + 499, 10_000)).toHaveLength(500);
    expect(table.takeDue(360_000 + n, n)).toHaveLength(n - 500);
  });
});

describe('DeadlineTable: saved and restored (the watchdog snapshot)', () => {
  it('gives back every lease with its hold; each is due at its expiry or the end of its hold, one handed out is due again', () => {
    const table = new DeadlineTable();
    table.claim('h-1', 'p', 'c-1', 1_000, '00-abc-def-01');
    table.claim('h-2', 'p', 'c-2', 2_000);
    table.claim('h-3', 'q', 'c-3', 3_000);
    expect(table.answer('p', 'h-2', 'c-2', 5_000)).toBe(true);
    expect(table.takeDue(1_500, 10).map((d) => d.handoffId)).toEqual(['h-1']); // in flight when saved
    const saved = JSON.parse(JSON.stringify(table.save())) as ReturnType<DeadlineTable['save']>;
    expect(saved).toEqual(
      expect.arrayContaining([
        { handoffId: 'h-1', project: 'p', claimId: 'c-1', leaseExpiresAt: 1_000, traceparent: '00-abc-def-01', holdUntil: 0 },
        { handoffId: 'h-2', project: 'p', claimId: 'c-2', leaseExpiresAt: 2_000, holdUntil: 7_000 },
      ]),
    );
    const restored = new DeadlineTable();
    restored.claim('h-gone', 'p', 'c-x', 10);
    restored.restore(saved);
    expect(restored.size).toBe(3);
    expect(restored.get('p', 'h-gone')).toBeUndefined();
    expect(restored.takeDue(3_500, 10).map((d) => d.handoffId)).toEqual(['h-1', 'h-3']);
    expect(restored.takeDue(6_999, 10)).toEqual([]);
    expect(restored.takeDue(7_000, 10).map((d) => d.handoffId)).toEqual(['h-2']);
    // The hold still applies to the claim it was put on after the restore: a refused requeue keeps it.
    restored.postpone('p', 'h-2', 'c-2', 7_100);
    expect(restored.get('p', 'h-2')).toMatchObject({ claimId: 'c-2', leaseExpiresAt: 2_000 });
  });
});
