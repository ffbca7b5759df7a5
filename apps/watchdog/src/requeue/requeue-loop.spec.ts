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

function setup(ledger: ScriptedLedger, maxInflight = 4) {
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
});
