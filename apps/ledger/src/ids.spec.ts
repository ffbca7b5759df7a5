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
});
