import { LEDGER_DERIVED_HANDOFF_ID } from '@baton/domain';
import { LedgerIds } from './ids';

describe('LedgerIds', () => {
  it('every handoff id the ledger derives is in the reserved space callers may not create', () => {
    expect(LEDGER_DERIVED_HANDOFF_ID.test(LedgerIds.handbackId('h-1', 'return-1'))).toBe(true);
    expect(LEDGER_DERIVED_HANDOFF_ID.test(LedgerIds.escalationId('h-1', LedgerIds.claimId('h-1', 'claim-1')))).toBe(true);
    // The rework escalation's consult id is a policy-derived id.
    expect(LEDGER_DERIVED_HANDOFF_ID.test(LedgerIds.derive('escalation', 'h-1', 'hb-x'))).toBe(true);
  });

  it('the command id names the caller: another actor reusing a key never shares the first caller`s event ids', () => {
    const bob = LedgerIds.commandId('proj', 'h-1', 'claim', 'claim-h-1', 'bob', 'agent');
    expect(LedgerIds.commandId('proj', 'h-1', 'claim', 'claim-h-1', 'bob', 'agent')).toBe(bob);
    expect(LedgerIds.commandId('proj', 'h-1', 'claim', 'claim-h-1', 'carol', 'agent')).not.toBe(bob);
    expect(LedgerIds.commandId('proj', 'h-1', 'claim', 'claim-h-1', 'bob', 'operator')).not.toBe(bob);
  });

  it('a body digest ignores key order and is part of the command id: another body with the same key never shares the first one`s event ids', () => {
    const a = LedgerIds.commandDigest({ handoff_id: 'h-1', lease_ms: 1000, idempotency_key: 'k' });
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(LedgerIds.commandDigest({ idempotency_key: 'k', lease_ms: 1000, handoff_id: 'h-1' })).toBe(a);
    const b = LedgerIds.commandDigest({ handoff_id: 'h-1', lease_ms: 2000, idempotency_key: 'k' });
    expect(b).not.toBe(a);
    const plain = LedgerIds.commandId('proj', 'h-1', 'claim', 'k', 'bob', 'agent');
    const withA = LedgerIds.commandId('proj', 'h-1', 'claim', 'k', 'bob', 'agent', a);
    expect(withA).not.toBe(plain);
    expect(LedgerIds.commandId('proj', 'h-1', 'claim', 'k', 'bob', 'agent', b)).not.toBe(withA);
    // The services' commands (no digest) keep the ids they always had (pinned: a redelivered
    // command from before the digest must still meet its own stored events).
    expect(plain).toBe('cmd-6abc509a319fe89ea019f73e6e9895e4');
  });
});
