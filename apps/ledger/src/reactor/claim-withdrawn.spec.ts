import type { HandoffState } from '@baton/domain';
import { withdrawnClaim } from './claim-withdrawn';

const claim = { claimed_by: 'bob', claim_id: 'c-1', claimed_at: '2026-12-06T10:00:00.000Z', lease_expires_at: '2026-12-06T10:01:00.000Z', lease_ms: 60_000 };
// Only the fields the rule reads; the rest of a folded handoff does not matter to it.
const claimed = { status: 'claimed', id: 'h-1', claim } as unknown as HandoffState;
const as = (status: string, extra: Record<string, unknown> = {}) => ({ status, id: 'h-1', ...extra }) as unknown as HandoffState;
const event = (type: string, actor: string) =>
  ({ type, actor, seq: 42, occurredAt: '2026-12-06T10:00:30.000Z', project: 'shop' }) as Parameters<typeof withdrawnClaim>[0];

describe('which stored handoff events take a claim away from its agent (the notice the ledger says to it)', () => {
  it('abandoned, failed or archived by someone else, requeued at the lease, failed at the deadline: the claim, the agent and the event', () => {
    const cases: Array<[string, string, HandoffState]> = [
      ['handoff.abandoned', 'olga', as('abandoned')],
      ['handoff.failed', 'olga', as('failed')],
      ['handoff.lease_expired', 'baton-watchdog', as('pending')],
      ['handoff.deadline_expired', 'baton-watchdog', as('failed')],
      ['handoff.archived', 'admin', as('archived')],
    ];
    for (const [type, actor, after] of cases) {
      expect(withdrawnClaim(event(type, actor), claimed, after)).toEqual({
        project: 'shop',
        handoff_id: 'h-1',
        claim_id: 'c-1',
        agent: 'bob',
        event_type: type,
        seq: 42,
        at: '2026-12-06T10:00:30.000Z',
      });
    }
  });

  it("the claimer's own doing, an event that leaves the claim held, a handoff that was not claimed, or any other event: nothing to say", () => {
    expect(withdrawnClaim(event('handoff.failed', 'bob'), claimed, as('failed'))).toBeNull();
    expect(withdrawnClaim(event('handoff.abandoned', 'olga'), claimed, claimed)).toBeNull();
    expect(withdrawnClaim(event('handoff.abandoned', 'olga'), as('pending'), as('abandoned'))).toBeNull();
    expect(withdrawnClaim(event('handoff.abandoned', 'olga'), as('returned', { claim }), as('abandoned'))).toBeNull();
    for (const type of ['handoff.completed_by_result', 'handoff.released', 'handoff.returned', 'handoff.heartbeat', 'handoff.escalated']) {
      expect(withdrawnClaim(event(type, 'baton-router'), claimed, as('completed'))).toBeNull();
    }
  });

  it('a claim held under another claim id after the event is a new claim: the old one was taken away', () => {
    const reclaimed = { status: 'claimed', id: 'h-1', claim: { ...claim, claim_id: 'c-2' } } as unknown as HandoffState;
    expect(withdrawnClaim(event('handoff.lease_expired', 'baton-watchdog'), claimed, reclaimed)).toMatchObject({ claim_id: 'c-1' });
  });

  it('a claimer whose name is no agent name has no inbox to be told on', () => {
    const odd = { status: 'claimed', id: 'h-1', claim: { ...claim, claimed_by: 'Not An Agent!' } } as unknown as HandoffState;
    expect(withdrawnClaim(event('handoff.abandoned', 'olga'), odd, as('abandoned'))).toBeNull();
  });
});
