import type { RequeueExpiredCommand } from '@baton/contracts';
import { JsonLogger } from '@baton/platform';
import { DeadlineTable } from '../deadlines/deadline-table';
import { RequeueLoop, type RequeueOutcome } from './requeue-loop';
import { requeueKey, type RequeueLedger, type RequeueReply } from './requeue-port';

const logger = new JsonLogger('watchdog', 'error', {}, () => undefined);

/** A ledger that records what it was sent and answers from a script. */
class ScriptedLedger implements RequeueLedger {
  readonly sent: Array<{ project: string; command: RequeueExpiredCommand }> = [];
  inFlight = 0;
  maxInFlight = 0;
  constructor(private readonly answer: (command: RequeueExpiredCommand) => RequeueReply | Promise<RequeueReply> = () => ({ ok: true })) {}
  async requeueExpired(project: string, command: RequeueExpiredCommand): Promise<RequeueReply> {
    this.sent.push({ project, command });
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      await new Promise((resolve) => setImmediate(resolve));
      return await this.answer(command);
    } finally {
      this.inFlight--;
    }
  }
}

/** Where a watchdog's follow of the events stream stands: the last sequence read, and how many stored events it has not read. */
class FollowPosition {
  read = 0;
  unread: number | null = 0;
  lastSeq = () => this.read;
  behind = async () => this.unread;
}

function setup(ledger: ScriptedLedger, maxInflight = 4, position?: FollowPosition) {
  const table = new DeadlineTable();
  let now = 0;
  const outcomes: RequeueOutcome[] = [];
  const loop = new RequeueLoop({
    table,
    ledger,
    logger,
    tickMs: 100,
    retryMs: 1_000,
    maxInflight,
    batch: 100,
    now: () => now,
    onOutcome: (o) => outcomes.push(o),
    ...(position ? { position } : {}),
  });
  return { table, loop, outcomes, at: (ms: number) => (now = ms) };
}

describe('RequeueLoop', () => {
  it('sends requeue_expired only once the lease has expired, with the claim id it saw and the key requeue:<handoff>:<claim_id>', async () => {
    const ledger = new ScriptedLedger();
    const { table, loop, at } = setup(ledger);
    table.claim('h-1', 'proj', 'c-1', 1_000);
    at(999);
    await loop.tick();
    expect(ledger.sent).toEqual([]);
    at(1_000);
    await loop.tick();
    expect(ledger.sent).toEqual([{ project: 'proj', command: { handoff_id: 'h-1', claim_id: 'c-1', idempotency_key: 'requeue:h-1:c-1' } }]);
  });

  it('does not send again while waiting for the requeue event; asks again after the retry delay if none came', async () => {
    const ledger = new ScriptedLedger();
    const { table, loop, at } = setup(ledger);
    table.claim('h-1', 'proj', 'c-1', 1_000);
    at(1_000);
    await loop.tick();
    at(1_999);
    await loop.tick();
    expect(ledger.sent).toHaveLength(1);
    at(2_000);
    await loop.tick();
    expect(ledger.sent).toHaveLength(2);
    expect(ledger.sent[1]!.command.idempotency_key).toBe(ledger.sent[0]!.command.idempotency_key);
  });

  it('expected refusals (lease extended, already requeued, claim changed) are reported as expected and retried later', async () => {
    const ledger = new ScriptedLedger(() => ({ ok: false, error: { code: 'lease_not_expired', kind: 'wrong_state' } }));
    const { table, loop, outcomes, at } = setup(ledger);
    table.claim('h-1', 'proj', 'c-1', 1_000);
    at(1_000);
    await loop.tick();
    expect(outcomes).toMatchObject([{ kind: 'refused', code: 'lease_not_expired', expected: true }]);
    table.extend('proj', 'h-1', 5_000); // the heartbeat event arrives
    at(2_000);
    await loop.tick();
    expect(ledger.sent).toHaveLength(1);
  });

  it('no answer from the ledger (kind unavailable, or a throw) is a failure that is retried', async () => {
    let calls = 0;
    const ledger = new ScriptedLedger(() => {
      calls++;
      if (calls === 1) return { ok: false, error: { code: 'timeout', kind: 'unavailable' } };
      throw new Error('connection closed');
    });
    const { table, loop, outcomes, at } = setup(ledger);
    table.claim('h-1', 'proj', 'c-1', 1_000);
    at(1_000);
    await loop.tick();
    at(2_000);
    await loop.tick();
    expect(outcomes.map((o) => o.kind)).toEqual(['failed', 'failed']);
  });

  it('keeps at most maxInflight requests in flight', async () => {
    const ledger = new ScriptedLedger();
    const { table, loop, at } = setup(ledger, 3);
    for (let i = 0; i < 20; i++) table.claim(`h-${i}`, 'proj', `c-${i}`, 1_000);
    at(1_000);
    await loop.tick();
    expect(ledger.sent).toHaveLength(20);
    expect(ledger.maxInFlight).toBe(3);
  });

  it('requeueKey stays within the 200-character idempotency key limit', () => {
    const long = 'x'.repeat(128);
    expect(requeueKey('h-1', 'c-1')).toBe('requeue:h-1:c-1');
    expect(requeueKey(long, long).length).toBeLessThanOrEqual(200);
    expect(requeueKey(long, long)).toBe(requeueKey(long, long));
    expect(requeueKey(long, long)).not.toBe(requeueKey(long, `${long.slice(1)}y`));
  });

  describe('a watchdog behind on the events stream', () => {
    it('acts on a due lease only once it has read every event stored when the lease came due', async () => {
      const ledger = new ScriptedLedger();
      const position = new FollowPosition();
      const { table, loop, outcomes, at } = setup(ledger, 4, position);
      table.claim('h-1', 'proj', 'c-1', 1_000);
      position.read = 500;
      position.unread = 40; // the stream ends at 540 when the lease comes due
      at(1_000);
      await loop.tick();
      expect(ledger.sent).toEqual([]);
      expect(outcomes).toMatchObject([{ kind: 'deferred', behind: 40, deadline: { handoffId: 'h-1' } }]);
      // Still short of 540 (more events arrived meanwhile: it is still behind): deferred again.
      position.read = 530;
      position.unread = 60;
      at(1_100);
      await loop.tick();
      expect(ledger.sent).toEqual([]);
      // Past what was stored at the deadline, though still behind newer events: it acts.
      position.read = 541;
      position.unread = 70;
      at(1_200);
      await loop.tick();
      expect(ledger.sent).toHaveLength(1);
      expect(outcomes.at(-1)).toMatchObject({ kind: 'requeued' });
    });

    it('a result among the unread events holds the lease (its answer), so the claim is not requeued and worked twice', async () => {
      const ledger = new ScriptedLedger();
      const position = new FollowPosition();
      const { table, loop, at } = setup(ledger, 4, position);
      table.claim('h-1', 'proj', 'c-1', 1_000);
      position.read = 500;
      position.unread = 3;
      at(1_000);
      await loop.tick();
      // The follow reads the result recorded under the claim just before the expiry.
      expect(table.answer('proj', 'h-1', 'c-1', 30_000)).toBe(true);
      position.read = 503;
      position.unread = 0;
      for (const ms of [1_100, 1_200, 5_000, 30_999]) {
        at(ms);
        await loop.tick();
      }
      expect(ledger.sent).toEqual([]);
    });

    it('caught up, or its position unknown (a consumer being re-created): acts at once, as without a position', async () => {
      const ledger = new ScriptedLedger();
      const position = new FollowPosition();
      const { table, loop, at } = setup(ledger, 4, position);
      table.claim('h-1', 'proj', 'c-1', 1_000);
      table.claim('h-2', 'proj', 'c-2', 1_500);
      position.read = 500;
      at(1_000);
      await loop.tick();
      position.unread = null;
      at(1_500);
      await loop.tick();
      expect(ledger.sent.map((s) => s.command.handoff_id)).toEqual(['h-1', 'h-2']);
    });
  });
});
