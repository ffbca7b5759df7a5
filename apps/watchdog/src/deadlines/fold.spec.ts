import fc from 'fast-check';
import type { HandoffActorKind, HandoffEvent } from '@baton/contracts';
import { evolveHandoff, handoffDecider, initialHandoffState, type HandoffCommand, type HandoffState } from '@baton/domain';
import { DeadlineTable } from './deadline-table';
import { applyHandoffEvent, deadlineEffectOf, DeadlineEffectByType } from './fold';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const iso = (ms: number) => new Date(T0 + ms).toISOString();
const HID = 'h-1';

const ops = ['claim', 'heartbeat', 'return', 'release', 'abandon', 'fail', 'requeue', 'requeue_stale', 'complete_from_result'] as const;
const stepArb = fc.record({
  op: fc.constantFrom(...ops),
  advanceMs: fc.integer({ min: 0, max: 90_000 }),
  leaseMs: fc.constantFrom(1_000, 30_000, 60_000),
});

/** Turn an abstract step into a command against the live state, as a cooperative actor would. */
function command(op: (typeof ops)[number], state: HandoffState, now: number, leaseMs: number, n: number): HandoffCommand {
  const claimId = state.status !== 'absent' && state.claim ? state.claim.claim_id : 'none';
  const metadata = (actor: string, actorKind: HandoffActorKind = 'agent') => ({ now: iso(now), actor, actorKind });
  const key = `k-${n}`;
  switch (op) {
    case 'claim':
      return {
        type: 'claim',
        data: { handoff_id: HID, claim_id: `c-${n}`, lease_ms: leaseMs, claimer_roles: [], idempotency_key: key },
        metadata: metadata('bob'),
      };
    case 'heartbeat':
      return { type: 'heartbeat', data: { handoff_id: HID, claim_id: claimId, lease_ms: leaseMs, idempotency_key: key }, metadata: metadata('bob') };
    case 'return':
      return {
        type: 'return',
        data: {
          handoff_id: HID,
          claim_id: claimId,
          report: { summary: 'done', files_changed: [], verification: '', next_steps: '', outcome: 'partial', evidence: {} },
          handback_id: `hb-${n}`,
          roster: { visible_actors: ['alice', 'bob'] },
          idempotency_key: key,
        },
        metadata: metadata('bob'),
      };
    case 'release':
      return { type: 'release', data: { handoff_id: HID, claim_id: claimId, reason: 'no time', idempotency_key: key }, metadata: metadata('bob') };
    case 'abandon':
      return { type: 'abandon', data: { handoff_id: HID, reason: 'withdrawn', idempotency_key: key }, metadata: metadata('alice') };
    case 'fail':
      return { type: 'fail', data: { handoff_id: HID, reason: 'broken', idempotency_key: key }, metadata: metadata('olga', 'operator') };
    case 'requeue':
    case 'requeue_stale':
      return {
        type: 'requeue_expired',
        data: {
          handoff_id: HID,
          claim_id: op === 'requeue' ? claimId : 'c-old',
          escalation_handoff_id: `esc-${n}`,
          idempotency_key: `requeue:${HID}:${claimId}`,
        },
        metadata: metadata('baton-watchdog', 'watchdog'),
      };
    case 'complete_from_result':
      return {
        type: 'complete_from_result',
        data: { handoff_id: HID, result_id: `r-${n}`, agent: 'bob', evidence: { tests_run: ['ok'] }, idempotency_key: key },
        metadata: metadata('baton-router', 'system'),
      };
    default:
      throw new Error(`unknown op ${String(op)}`);
  }
}

describe('deadline fold', () => {
  it('tracks a lease exactly when evolveHandoff says the handoff is claimed, with the same claim and expiry', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3 }), fc.array(stepArb, { minLength: 1, maxLength: 40 }), (maxRetries, steps) => {
        const table = new DeadlineTable();
        let state: HandoffState = initialHandoffState();
        let now = 0;
        const apply = (events: HandoffEvent[]) => {
          for (const event of events) {
            state = evolveHandoff(state, event);
            applyHandoffEvent(table, 'proj', event);
          }
        };
        const created = handoffDecider.decide(
          {
            type: 'create',
            data: {
              handoff_id: HID,
              project: 'proj',
              kind: 'task',
              priority: 'medium',
              from_agent: 'alice',
              to_agent: 'bob',
              summary: 's',
              context: {},
              acceptance: {},
              max_retries: maxRetries,
              idempotency_key: 'create',
            },
            metadata: { now: iso(0), actor: 'alice', actorKind: 'agent' },
          },
          state,
        );
        if (!created.ok) throw new Error('create refused');
        apply(created.events);
        steps.forEach((step, n) => {
          now += step.advanceMs;
          const decision = handoffDecider.decide(command(step.op, state, now, step.leaseMs, n), state);
          if (decision.ok) apply(decision.events);
          const tracked = table.get('proj', HID);
          if (state.status === 'claimed') {
            expect(tracked).toEqual({
              handoffId: HID,
              project: 'proj',
              claimId: state.claim.claim_id,
              leaseExpiresAt: Date.parse(state.claim.lease_expires_at),
            });
          } else {
            expect(tracked).toBeUndefined();
          }
        });
      }),
      { numRuns: 300 },
    );
  });

  it('classifies every handoff event type, and an unknown type as unknown (kept, never cleared)', () => {
    for (const type of Object.keys(DeadlineEffectByType)) expect(deadlineEffectOf(type)).not.toBe('unknown');
    expect(deadlineEffectOf('handoff.teleported')).toBe('unknown');
    expect(deadlineEffectOf('toString')).toBe('unknown');
  });
});
