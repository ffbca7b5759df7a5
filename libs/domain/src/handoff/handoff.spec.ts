import { HandoffRecordSchema, type HandoffEvent } from '@baton/contracts';
import type { HandoffCommand } from './commands';
import { fold } from '../decider';
import { given } from '../testing/given';
import { handoffDecider } from './decider';
import { at, cmd, deriveId, history, HID, LEASE_MS, Ledger, meta, report } from './handoff.fixtures';
import { reactToHandoffEvent } from './policies';
import { MAX_DECLINED_REVIEWS } from './decide';
import { RECENT_KEYS_LIMIT, toHandoffRecord } from './state';

const created = () => history(cmd.create());
const claimedByBob = () => history(cmd.create(), cmd.claim('bob', 'c1'));
const returnedByBob = () => history(cmd.create(), cmd.claim('bob', 'c1'), cmd.ret('bob', 'c1'));

describe('handoff: optimistic claim guard (UPDATE ... WHERE status = pending)', () => {
  it('only a pending handoff can be claimed: the claim carries the claim id and a lease expiry of now + lease', () => {
    given(handoffDecider, created())
      .when(cmd.claim('bob', 'c1', 5))
      .then([
        {
          type: 'handoff.claimed',
          data: {
            handoff_id: HID,
            at: at(5),
            idempotency_key: 'claim:c1',
            claimed_by: 'bob',
            claimed_by_kind: 'agent',
            claim_id: 'c1',
            lease_expires_at: at(5 + LEASE_MS / 1000),
          },
        },
      ]);
  });

  it('the second claimer loses: a claim on a claimed handoff is refused with handoff_not_pending', () => {
    const error = given(handoffDecider, claimedByBob())
      .when(cmd.claim('carol', 'c2', 1))
      .thenFails('handoff_not_pending');
    expect(error.kind).toBe('wrong_state');
  });

  it('to_agent addressing: a claimer that is not the addressee is refused', () => {
    const events = history(cmd.create({ to_agent: 'bob' }));
    given(handoffDecider, events).when(cmd.claim('carol', 'c1')).thenFails('not_the_addressee');
    given(handoffDecider, events)
      .when(cmd.claim('bob', 'c1'))
      .thenMatch([{ type: 'handoff.claimed' }]);
  });

  it('to_role addressing: the claimer must hold the role (resolved by the ledger, not claimed by the caller)', () => {
    const events = history(cmd.create({ to_role: 'reviewer' }));
    given(handoffDecider, events)
      .when(cmd.claim('carol', 'c1', 0, { claimer_roles: ['writer'] }))
      .thenFails('not_the_addressee');
    given(handoffDecider, events)
      .when(cmd.claim('carol', 'c1', 0, { claimer_roles: ['reviewer'] }))
      .thenMatch([{ type: 'handoff.claimed' }]);
  });
});

describe('handoff: heartbeat extends the lease of the current claim', () => {
  it('a heartbeat by the claimer extends the lease to now + lease', () => {
    const state = given(handoffDecider, claimedByBob())
      .when(cmd.heartbeat('bob', 'c1', 30))
      .stateAfter();
    expect(state.status === 'claimed' && state.claim.lease_expires_at).toBe(at(30 + LEASE_MS / 1000));
  });

  it('a heartbeat naming no lease renews the claim to the length it was taken with (a short lease stays short); one naming a length uses it', () => {
    const short = history(cmd.create({ to_agent: 'bob' }), cmd.claim('bob', 'c1', 0, { lease_ms: 10_000 }));
    const beat = { ...cmd.heartbeat('bob', 'c1', 5), data: { handoff_id: HID, claim_id: 'c1', idempotency_key: 'hb-short' } } as HandoffCommand;
    const renewed = given(handoffDecider, short).when(beat).stateAfter();
    expect(renewed.status === 'claimed' && renewed.claim).toMatchObject({ lease_expires_at: at(15), lease_ms: 10_000 });
    const named = given(handoffDecider, short)
      .when({ ...beat, data: { handoff_id: HID, claim_id: 'c1', idempotency_key: 'hb-long', lease_ms: 30_000 } } as HandoffCommand)
      .stateAfter();
    // The length the claim was taken with stays what a later beat naming none renews to.
    expect(named.status === 'claimed' && named.claim).toMatchObject({ lease_expires_at: at(35), lease_ms: 10_000 });
  });

  it('a stale claim id is refused: after requeue and a new claim, the old claimer cannot heartbeat', () => {
    const events = history(cmd.create(), cmd.claim('bob', 'c1'), cmd.requeue('c1', 61), cmd.claim('carol', 'c2', 62));
    given(handoffDecider, events)
      .when(cmd.heartbeat('bob', 'c1', 63))
      .thenFails('stale_claim');
  });

  it('a heartbeat from someone who is not the claimer is refused', () => {
    given(handoffDecider, claimedByBob())
      .when(cmd.heartbeat('carol', 'c1', 30))
      .thenFails('not_the_claimer');
  });

  it('a heartbeat after the lease ran out is refused: the claim is lost to the watchdog (details say when it ran out)', () => {
    const error = given(handoffDecider, claimedByBob())
      .when(cmd.heartbeat('bob', 'c1', 60))
      .thenFails('lease_expired');
    // Claimed at the fixture's 00:00:00 with the default 60 s lease.
    expect(error.details).toEqual({ handoff_id: 'h-1', lease_expires_at: '2026-01-01T00:01:00.000Z' });
  });
});

describe('handoff: lease expiry → watchdog auto-requeue', () => {
  it('an expired claim is requeued: claimed → pending, retry_count + 1, the claim is cleared', () => {
    const result = given(handoffDecider, claimedByBob()).when(cmd.requeue('c1', 60));
    result.thenMatch([{ type: 'handoff.lease_expired', data: expect.objectContaining({ claim_id: 'c1', expired_claimer: 'bob', retry_count: 1 }) }]);
    const state = result.stateAfter();
    expect(state.status).toBe('pending');
    expect(state.status !== 'absent' && state.retry.retry_count).toBe(1);
    expect(toHandoffRecord(state)).not.toHaveProperty('claim_id');
  });

  it('requeue happens exactly once: two watchdogs racing on the same expired claim, the second is refused', () => {
    const afterFirst = history(cmd.create(), cmd.claim('bob', 'c1'), cmd.requeue('c1', 60));
    given(handoffDecider, afterFirst)
      .when(cmd.requeue('c1', 61, { idempotency_key: 'watchdog-2' }))
      .thenFails('handoff_not_claimed');
    const reclaimed = history(cmd.create(), cmd.claim('bob', 'c1'), cmd.requeue('c1', 60), cmd.claim('carol', 'c2', 62));
    given(handoffDecider, reclaimed)
      .when(cmd.requeue('c1', 200, { idempotency_key: 'watchdog-2' }))
      .thenFails('stale_claim');
  });

  it('a requeue before the lease expires is refused with lease_not_expired', () => {
    given(handoffDecider, claimedByBob()).when(cmd.requeue('c1', 59)).thenFails('lease_not_expired');
  });

  it('a heartbeat pushes the expiry out, so the watchdog requeue it saw coming is refused', () => {
    const events = history(cmd.create(), cmd.claim('bob', 'c1'), cmd.heartbeat('bob', 'c1', 50));
    given(handoffDecider, events).when(cmd.requeue('c1', 61)).thenFails('lease_not_expired');
  });
});

describe('handoff: retry cap → CONSULT escalation', () => {
  const cappedAfterOneRetry = () => history(cmd.create({ max_retries: 1 }), cmd.claim('bob', 'c1'), cmd.requeue('c1', 60), cmd.claim('bob', 'c2', 61));

  it('retry cap → escalate instead of requeue: a consult handoff to the project lead', () => {
    const result = given(handoffDecider, cappedAfterOneRetry()).when(cmd.requeue('c2', 200));
    const [event] = result.thenMatch([
      {
        type: 'handoff.escalated',
        data: expect.objectContaining({
          cause: 'lease_expired',
          attempted_retry: 2,
          max_retries: 1,
          outcome: { escalate_to: 'lena', consult_handoff_id: 'esc-c2' },
        }),
      },
    ]);
    const state = result.stateAfter();
    expect(state.status).toBe('failed');
    expect(HandoffRecordSchema.safeParse(toHandoffRecord(state)).success).toBe(true);
    const reactions = reactToHandoffEvent(event!, { state, deriveId });
    expect(reactions).toEqual([
      {
        aggregateId: 'esc-c2',
        command: expect.objectContaining({
          type: 'create',
          data: expect.objectContaining({ handoff_id: 'esc-c2', kind: 'consult', to_agent: 'lena', reply_to_handoff_id: HID, priority: 'high' }),
        }),
      },
    ]);
  });

  it('the handoff escalation policy names the lead when it has one, over the project lead', () => {
    const events = history(cmd.create({ max_retries: 0, escalate_to: 'vera' }), cmd.claim('bob', 'c1'));
    given(handoffDecider, events)
      .when(cmd.requeue('c1', 60))
      .thenMatch([{ type: 'handoff.escalated', data: expect.objectContaining({ outcome: { escalate_to: 'vera', consult_handoff_id: 'esc-c1' } }) }]);
  });

  it('with no lead anywhere the escalation requests a stop (guard_failed) and creates no consult', () => {
    const events = history(cmd.create({ max_retries: 0 }), cmd.claim('bob', 'c1'));
    const result = given(handoffDecider, events).when(cmd.requeue('c1', 60, { project_lead: undefined }));
    const [event] = result.thenMatch([
      { type: 'handoff.escalated', data: expect.objectContaining({ outcome: expect.objectContaining({ stop_why: 'guard_failed' }) }) },
    ]);
    expect(reactToHandoffEvent(event!, { state: result.stateAfter(), deriveId })).toEqual([]);
    expect(result.stateAfter()).toMatchObject({
      status: 'failed',
      terminal_reason: 'retry cap 0 reached (lease_expired); nobody to escalate to (guard_failed)',
    });
  });

  it('an escalation never goes back to the agent that held the work: a lead whose own claim lapsed (its consult, or work addressed to it) gets no consult of it, the outcome is guard_failed', () => {
    // Work addressed to the lead, claimed by the lead, lapsed at its cap: nobody else to ask.
    const own = given(handoffDecider, history(cmd.create({ max_retries: 0, to_agent: 'lena' }), cmd.claim('lena', 'c1'))).when(cmd.requeue('c1', 60));
    const [event] = own.thenMatch([
      {
        type: 'handoff.escalated',
        data: expect.objectContaining({
          outcome: { stop_why: 'guard_failed', detail: `handoff ${HID} reached its retry cap (0) and its escalation target, lena, is the agent that held it` },
        }),
      },
    ]);
    expect(reactToHandoffEvent(event!, { state: own.stateAfter(), deriveId })).toEqual([]);
    // escalate_to naming the claimer is the same (another claimer escalates to it: the tests above).
    given(handoffDecider, history(cmd.create({ max_retries: 0, escalate_to: 'vera' }), cmd.claim('vera', 'c1')))
      .when(cmd.requeue('c1', 60))
      .thenMatch([{ type: 'handoff.escalated', data: expect.objectContaining({ outcome: expect.objectContaining({ stop_why: 'guard_failed' }) }) }]);
  });
});

describe('handoff: return → returned, completion handback to the delegator', () => {
  it('worker RETURNS: parent → returned; the handback is addressed to the delegator when the sender is a visible actor', () => {
    const result = given(handoffDecider, claimedByBob()).when(cmd.ret('bob', 'c1'));
    const [event] = result.thenMatch([
      {
        type: 'handoff.returned',
        data: expect.objectContaining({ worker: 'bob', handback_id: 'hb-c1', handback_recipient: { to_agent: 'alice', reason: 'delegator' } }),
      },
    ]);
    const state = result.stateAfter();
    expect(state.status).toBe('returned');
    expect(reactToHandoffEvent(event!, { state, deriveId })).toEqual([
      {
        aggregateId: 'hb-c1',
        command: expect.objectContaining({
          type: 'create',
          data: expect.objectContaining({
            handoff_id: 'hb-c1',
            kind: 'completion_handback',
            reply_to_handoff_id: HID,
            to_agent: 'alice',
            reviewed_worker: 'bob',
          }),
          metadata: { actor: 'baton-ledger', actorKind: 'system', now: at(10) },
        }),
      },
    ]);
  });

  it('the handback goes to the project default lead when the sender is not a visible actor', () => {
    const hidden = { visible_actors: ['bob', 'lena'], project_lead: 'lena' };
    given(handoffDecider, claimedByBob())
      .when(cmd.ret('bob', 'c1', 10, report(), 'agent', { roster: hidden }))
      .thenMatch([{ type: 'handoff.returned', data: expect.objectContaining({ handback_recipient: { to_agent: 'lena', reason: 'project_lead' } }) }]);
  });

  it('with neither a visible delegator nor a lead the handback goes to the operators', () => {
    given(handoffDecider, claimedByBob())
      .when(cmd.ret('bob', 'c1', 10, report(), 'agent', { roster: { visible_actors: [] } }))
      .thenMatch([
        { type: 'handoff.returned', data: expect.objectContaining({ handback_recipient: { to_role: 'operator', reason: 'no_eligible_reviewer' } }) },
      ]);
  });

  it('an operator may return on the worker`s behalf without the claim id; the worker is still the claimer', () => {
    given(handoffDecider, claimedByBob())
      .when(cmd.ret('olga', undefined, 10, report(), 'operator'))
      .thenMatch([{ type: 'handoff.returned', data: expect.objectContaining({ returned_by: 'olga', worker: 'bob', claim_id: 'c1' }) }]);
  });

  it('only the claimer returns, with the current claim id', () => {
    given(handoffDecider, claimedByBob()).when(cmd.ret('carol', 'c1')).thenFails('not_the_claimer');
    given(handoffDecider, claimedByBob()).when(cmd.ret('bob', 'c0')).thenFails('stale_claim');
    given(handoffDecider, claimedByBob()).when(cmd.ret('bob', undefined)).thenFails('stale_claim');
    given(handoffDecider, created()).when(cmd.ret('bob', 'c1')).thenFails('handoff_not_claimed');
  });

  it('the parent stays returned until the handback is decided: the watchdog cannot requeue it', () => {
    given(handoffDecider, returnedByBob()).when(cmd.requeue('c1', 500)).thenFails('handoff_not_claimed');
    given(handoffDecider, returnedByBob())
      .when(cmd.claim('carol', 'c2', 500))
      .thenFails('handoff_not_pending');
  });
});

describe('handoff: completion handback accept / rework', () => {
  function returnedInLedger(maxRetries = 3): Ledger {
    const ledger = new Ledger();
    for (const command of [cmd.create({ max_retries: maxRetries }), cmd.claim('bob', 'c1'), cmd.ret('bob', 'c1')]) {
      expect(ledger.send(HID, command).ok).toBe(true);
    }
    return ledger;
  }

  it('the return creates a pending completion handback that replies to the parent', () => {
    const ledger = returnedInLedger();
    const record = toHandoffRecord(ledger.state('hb-c1'));
    expect(record).toMatchObject({ kind: 'completion_handback', status: 'pending', reply_to_handoff_id: HID, to_agent: 'alice', reviewed_worker: 'bob' });
    expect(ledger.state(HID).status).toBe('returned');
  });

  it('decision=accept → parent completed', () => {
    const ledger = returnedInLedger();
    expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'alice', 'accept'))).toMatchObject({ ok: true });
    expect(ledger.state('hb-c1').status).toBe('completed');
    const parent = toHandoffRecord(ledger.state(HID));
    expect(parent).toMatchObject({ status: 'completed', completed_at: at(20), claimed_by: 'bob' });
    expect(ledger.refusedReactions).toEqual([]);
  });

  it('decision=rework → parent pending, retry_count + 1, and claimable again', () => {
    const ledger = returnedInLedger();
    ledger.send('hb-c1', cmd.decide('hb-c1', 'alice', 'rework'));
    const parent = ledger.state(HID);
    expect(parent.status).toBe('pending');
    expect(parent.status !== 'absent' && parent.retry.retry_count).toBe(1);
    expect(toHandoffRecord(parent)).not.toHaveProperty('completion_report');
    expect(ledger.send(HID, cmd.claim('bob', 'c2', 30)).ok).toBe(true);
  });

  it('decision=rework → the record the worker is offered and claims says what to change (last_rework), kept through its next round', () => {
    const ledger = returnedInLedger();
    expect(toHandoffRecord(ledger.state(HID))).not.toHaveProperty('last_rework');
    ledger.send('hb-c1', cmd.decide('hb-c1', 'alice', 'rework'));
    const rework = { by: 'alice', at: at(20), handback_id: 'hb-c1', note: 'add tests for the error paths' };
    const offered = toHandoffRecord(ledger.state(HID));
    expect(offered).toMatchObject({ status: 'pending', last_rework: rework });
    expect(HandoffRecordSchema.parse(offered)).toMatchObject({ last_rework: rework });
    expect(ledger.send(HID, cmd.claim('bob', 'c2', 30)).ok).toBe(true);
    expect(toHandoffRecord(ledger.state(HID))).toMatchObject({ status: 'claimed', last_rework: rework });
  });

  it('the retry cap on rework → escalation as a consult handoff to the lead', () => {
    const ledger = returnedInLedger(0);
    ledger.send('hb-c1', cmd.decide('hb-c1', 'alice', 'rework'));
    expect(toHandoffRecord(ledger.state(HID))).toMatchObject({ status: 'failed', escalation_outcome: { escalate_to: 'lena' } });
    const consultId = deriveId('escalation', HID, 'hb-c1');
    expect(toHandoffRecord(ledger.state(consultId))).toMatchObject({ kind: 'consult', status: 'pending', to_agent: 'lena', reply_to_handoff_id: HID });
  });

  it('a handback is decided once: a second decision is refused with handback_already_decided', () => {
    const ledger = returnedInLedger();
    ledger.send('hb-c1', cmd.decide('hb-c1', 'alice', 'accept'));
    expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'olga', 'rework', 'operator'))).toEqual({ ok: false, code: 'handback_already_decided' });
  });

  it('a decision and an abandon of the parent racing: the ledger says what the other side is, and the loser is refused (review decided / review withdrawn)', () => {
    // The review was decided (its policy is moving the parent): abandoning the parent now is refused.
    const ledger = returnedInLedger();
    const abandon = cmd.abandon('olga', 'operator') as Extract<HandoffCommand, { type: 'abandon' }>;
    expect(ledger.send(HID, { ...abandon, data: { ...abandon.data, review_decided: { handback_id: 'hb-c1' } } })).toEqual({
      ok: false,
      code: 'handback_already_decided',
    });
    // Another handback than the open one (an earlier round's) refuses nothing.
    expect(ledger.send(HID, { ...abandon, data: { ...abandon.data, review_decided: { handback_id: 'hb-old' } } }).ok).toBe(true);
    // The parent was abandoned first (the review is being withdrawn): deciding it is refused.
    const other = returnedInLedger();
    const decide = cmd.decide('hb-c1', 'olga', 'accept', 'operator');
    for (const parent_status of ['abandoned', 'failed']) {
      expect(other.send('hb-c1', { ...decide, data: { ...decide.data, parent_status } })).toEqual({ ok: false, code: 'review_withdrawn' });
    }
    expect(other.send('hb-c1', { ...decide, data: { ...decide.data, parent_status: 'returned' } }).ok).toBe(true);
  });

  it('only the addressee (or an operator) decides a handback', () => {
    const ledger = returnedInLedger();
    expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'carol', 'accept'))).toEqual({ ok: false, code: 'not_the_addressee' });
    expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'olga', 'accept', 'operator')).ok).toBe(true);
  });

  it('a stale handback can never move the parent, and the handback commands are the ledger`s alone', () => {
    const events = returnedByBob();
    const complete = (handbackId: string, kind: 'system' | 'agent') => ({
      type: 'complete_from_handback' as const,
      data: { handoff_id: HID, handback_id: handbackId, accepted_by: 'alice', idempotency_key: `c:${handbackId}:${kind}` },
      metadata: meta('baton-ledger', kind, at(20)),
    });
    given(handoffDecider, events).when(complete('hb-old', 'system')).thenFails('stale_handback');
    given(handoffDecider, events).when(complete('hb-c1', 'agent')).thenFails('internal_command');
    given(handoffDecider, events)
      .when(complete('hb-c1', 'system'))
      .thenMatch([{ type: 'handoff.completed' }]);
  });

  describe('a handback that ends without a decision reopens the review (the parent would wait on it for good)', () => {
    const on = (handbackId: string, command: HandoffCommand): HandoffCommand =>
      ({ ...command, data: { ...command.data, handoff_id: handbackId } }) as HandoffCommand;
    const reopenedId = `hb-${deriveId('handback-reopen', 'hb-c1')}`;

    it('released by its reviewer: the parent stays returned with a new handback for the same report and recipient; deciding it completes the parent, the ended one is stale', () => {
      const ledger = returnedInLedger();
      expect(ledger.send('hb-c1', on('hb-c1', cmd.claim('alice', 'r1', 15))).ok).toBe(true);
      const claimId = (ledger.state('hb-c1') as { claim: { claim_id: string } }).claim.claim_id;
      expect(ledger.send('hb-c1', on('hb-c1', cmd.release('alice', claimId))).ok).toBe(true);
      const parent = ledger.state(HID);
      expect(parent).toMatchObject({ status: 'returned', handback_id: reopenedId });
      expect(ledger.streams.get(HID)!.at(-1)).toMatchObject({
        type: 'handoff.review_reopened',
        data: { previous_handback_id: 'hb-c1', ended: 'released', handback_id: reopenedId, worker: 'bob', handback_recipient: { to_agent: 'alice' } },
      });
      const reopened = toHandoffRecord(ledger.state(reopenedId));
      const first = toHandoffRecord(ledger.state('hb-c1'));
      expect(reopened).toMatchObject({ kind: 'completion_handback', status: 'pending', reply_to_handoff_id: HID, to_agent: 'alice', reviewed_worker: 'bob' });
      expect(reopened?.context).toEqual(first?.context);
      expect(ledger.send(reopenedId, cmd.decide(reopenedId, 'alice', 'accept'))).toMatchObject({ ok: true });
      expect(ledger.state(HID).status).toBe('completed');
      expect(ledger.refusedReactions).toEqual([]);
    });

    it(`a reviewer that declines again and again is asked ${MAX_DECLINED_REVIEWS} times; then the review goes to the operators (no endless new handbacks)`, () => {
      const ledger = returnedInLedger();
      let open = 'hb-c1';
      const recipients: unknown[] = [];
      for (let round = 1; round <= MAX_DECLINED_REVIEWS; round++) {
        expect(ledger.send(open, on(open, cmd.claim('alice', `r${round}`, 15))).ok).toBe(true);
        const claimId = (ledger.state(open) as { claim: { claim_id: string } }).claim.claim_id;
        expect(ledger.send(open, on(open, cmd.release('alice', claimId))).ok).toBe(true);
        open = `hb-${deriveId('handback-reopen', open)}`;
        expect(ledger.state(HID)).toMatchObject({ status: 'returned', handback_id: open, reviews_declined: round });
        recipients.push(toHandoffRecord(ledger.state(open))?.to_agent ?? toHandoffRecord(ledger.state(open))?.to_role);
      }
      // Asked twice more after the first release; the third release sends the review to the operators.
      expect(recipients).toEqual(['alice', 'alice', 'operator']);
      expect(ledger.streams.get(HID)!.at(-1)).toMatchObject({
        type: 'handoff.review_reopened',
        data: { ended: 'released', handback_recipient: { to_role: 'operator', reason: 'no_eligible_reviewer' } },
      });
      // An operator decides it, and the parent completes.
      expect(ledger.send(open, cmd.decide(open, 'olga', 'accept', 'operator'))).toMatchObject({ ok: true });
      expect(ledger.state(HID).status).toBe('completed');
      expect(ledger.refusedReactions).toEqual([]);
    });

    it('a lapsed review is requeued to its recipient, however often (a review has no retry cap: no escalation, no consult, no run stop)', () => {
      const ledger = returnedInLedger();
      for (let round = 1; round <= 4; round++) {
        ledger.send('hb-c1', on('hb-c1', cmd.claim('alice', `r${round}`, 15)));
        const claimId = (ledger.state('hb-c1') as { claim: { claim_id: string } }).claim.claim_id;
        const lapsed = ledger.send('hb-c1', on('hb-c1', cmd.requeue(claimId, 400)));
        expect(lapsed).toMatchObject({ ok: true, events: [{ type: 'handoff.lease_expired', data: { retry_count: 0 } }] });
        expect(ledger.state('hb-c1')).toMatchObject({ status: 'pending', retry: { retry_count: 0, max_retries: 0 } });
      }
      expect(ledger.state(HID)).toMatchObject({ status: 'returned', handback_id: 'hb-c1' });
      expect([...ledger.streams.keys()].filter((id) => id !== HID && id !== 'hb-c1')).toEqual([]);
      expect(ledger.refusedReactions).toEqual([]);
    });

    it('failed by an operator: reopened, and again from the reopened one; the worker still cannot review its own work', () => {
      const ledger = returnedInLedger();
      expect(ledger.send('hb-c1', on('hb-c1', cmd.fail('olga', undefined, 'operator'))).ok).toBe(true);
      expect(ledger.state(HID)).toMatchObject({ status: 'returned', handback_id: reopenedId });
      expect(toHandoffRecord(ledger.state(reopenedId))).toMatchObject({ status: 'pending', reviewed_worker: 'bob' });
      expect(ledger.send(reopenedId, on(reopenedId, cmd.fail('olga', undefined, 'operator'))).ok).toBe(true);
      const again = `hb-${deriveId('handback-reopen', reopenedId)}`;
      expect(ledger.state(HID)).toMatchObject({ status: 'returned', handback_id: again });
      expect(ledger.send(again, cmd.decide(again, 'bob', 'accept'))).toEqual({ ok: false, code: 'self_accept_forbidden' });
      expect(ledger.refusedReactions).toEqual([]);
    });

    it('nothing reopens once the parent moved on (an operator abandoned or failed it: its open review is withdrawn), and a reopen for a handback that is not the open one decides nothing', () => {
      const ledger = returnedInLedger();
      expect(ledger.send(HID, cmd.abandon('olga', 'operator')).ok).toBe(true);
      expect(ledger.state(HID).status).toBe('abandoned');
      // The open review is withdrawn by the ledger (nobody is left asked to decide it), and nothing reopens.
      expect(ledger.state('hb-c1')).toMatchObject({ status: 'abandoned', terminal_reason: `the work it reviews (${HID}) was abandoned` });
      expect(ledger.state(reopenedId).status).toBe('absent');
      // Redelivered, the withdrawal changes nothing; a parent failed instead withdraws its review the same way.
      expect(
        ledger.send('hb-c1', {
          type: 'abandon',
          data: { handoff_id: 'hb-c1', reason: 'again', idempotency_key: 'w2' },
          metadata: meta('baton-ledger', 'system', at(50)),
        }),
      ).toEqual({ ok: true, events: [] });
      const failed = returnedInLedger();
      expect(failed.send(HID, cmd.fail('olga', undefined, 'operator')).ok).toBe(true);
      expect(failed.state('hb-c1')).toMatchObject({ status: 'abandoned', terminal_reason: `the work it reviews (${HID}) was failed` });
      expect(failed.refusedReactions).toEqual([]);
      const stale: HandoffCommand = {
        type: 'reopen_review',
        data: { handoff_id: HID, handback_id: 'hb-old', ended: 'released', new_handback_id: 'hb-x', worker: 'bob', idempotency_key: 'r:old' },
        metadata: meta('baton-ledger', 'system', at(40)),
      };
      given(handoffDecider, returnedByBob()).when(stale).then([]);
      given(handoffDecider, returnedByBob())
        .when({ ...stale, data: { ...stale.data, handback_id: 'hb-c1' }, metadata: meta('bob', 'agent', at(40)) } as HandoffCommand)
        .thenFails('internal_command');
    });
  });

  it('decide_handback on a task is refused with not_a_handback', () => {
    given(handoffDecider, returnedByBob())
      .when(cmd.decide(HID, 'alice', 'accept'))
      .thenFails('not_a_handback');
  });

  it('a completion handback is decided, never returned', () => {
    const ledger = returnedInLedger();
    ledger.send('hb-c1', { ...cmd.claim('alice', 'r1', 15), data: { ...cmd.claim('alice', 'r1', 15).data, handoff_id: 'hb-c1' } });
    const refused = ledger.send('hb-c1', { ...cmd.ret('alice', 'r1', 16), data: { ...cmd.ret('alice', 'r1', 16).data, handoff_id: 'hb-c1' } });
    expect(refused).toEqual({ ok: false, code: 'not_returnable' });
  });
});

describe('handoff: evidence floor (apply_completion_evidence_floor)', () => {
  it('a completion with no tests_run, artifacts or work_product_id is stored as partial with evidence_floor', () => {
    const result = given(handoffDecider, claimedByBob()).when(cmd.ret('bob', 'c1', 10, report({ evidence: {} })));
    result.thenMatch([
      {
        type: 'handoff.returned',
        data: expect.objectContaining({
          report: expect.objectContaining({ outcome: 'partial' }),
          evidence_floor: { applied: true, original_outcome: 'completed', reason: 'no_evidence' },
        }),
      },
    ]);
    expect(toHandoffRecord(result.stateAfter())).toMatchObject({ evidence_floor: { applied: true }, completion_report: { outcome: 'partial' } });
  });

  it('a completion with real evidence stays completed', () => {
    given(handoffDecider, claimedByBob())
      .when(cmd.ret('bob', 'c1', 10, report({ evidence: { work_product_id: 'pr-42' } })))
      .thenMatch([{ type: 'handoff.returned', data: expect.not.objectContaining({ evidence_floor: expect.anything() }) }]);
  });

  it.each(['operator', 'human'] as const)('%s returns are untouched', (kind) => {
    given(handoffDecider, claimedByBob())
      .when(cmd.ret('olga', undefined, 10, report({ evidence: {} }), kind))
      .thenMatch([{ type: 'handoff.returned', data: expect.objectContaining({ report: expect.objectContaining({ outcome: 'completed' }) }) }]);
  });

  it('partial and blocked outcomes are recorded as given, with no floor noted', () => {
    for (const outcome of ['partial', 'blocked'] as const) {
      const [event] = given(handoffDecider, claimedByBob())
        .when(cmd.ret('bob', 'c1', 10, report({ outcome, evidence: {} })))
        .thenMatch([{}]);
      expect(event!.type === 'handoff.returned' && event!.data.evidence_floor).toBeUndefined();
    }
  });
});

describe('handoff: the known holes (v0.2.006 W1) are closed', () => {
  it('hole (a): applicability is decided by the actor kind the platform attaches, never by caller metadata or names', () => {
    // An agent that calls itself "operator" is still an agent.
    const events = history(cmd.create(), cmd.claim('operator', 'c1'));
    given(handoffDecider, events)
      .when(cmd.ret('operator', 'c1', 10, report({ evidence: {} }), 'agent'))
      .thenMatch([{ type: 'handoff.returned', data: expect.objectContaining({ evidence_floor: expect.objectContaining({ applied: true }) }) }]);
    // The watchdog or the ledger itself never bypass the floor either.
    given(handoffDecider, claimedByBob())
      .when(cmd.ret('bob', 'c1', 10, report({ evidence: {} }), 'agent', { roster: { visible_actors: [], project_lead: 'operator' } }))
      .thenMatch([{ type: 'handoff.returned', data: expect.objectContaining({ report: expect.objectContaining({ outcome: 'partial' }) }) }]);
  });

  const placeholders: Array<[string, object]> = [
    ['[{}]', { tests_run: [{}] }],
    ['[""]', { tests_run: [''] }],
    ['["  "]', { artifacts: ['  '] }],
    ['[null]', { artifacts: [null] }],
    ['[{ "name": "" }]', { tests_run: [{ name: '' }] }],
    ['objects whose values are all blank', { artifacts: [{ path: ' ', url: '', note: ['  '] }] }],
    ['a whitespace-only work_product_id', { work_product_id: '   ' }],
    ['"n/a"', { tests_run: ['n/a'] }],
    ['"none"', { artifacts: ['None'] }],
    ['"todo"', { work_product_id: 'TODO' }],
    ['"tbd"', { tests_run: [{ name: 'tbd' }] }],
    ['"-"', { work_product_id: '-' }],
    ['numbers and booleans alone', { tests_run: [true, 0, 12] }],
    ['a zero-width space', { tests_run: ['\u200b'] }],
    ['[{ "name": zero-width spaces }]', { tests_run: [{ name: '\u200b\u200b' }] }],
    ['a word joiner work_product_id', { work_product_id: '\u2060' }],
    ['JSON text "[{}]"', { tests_run: ['[{}]'] }],
    ['JSON text "[null]"', { artifacts: ['[null]'] }],
    ['JSON text "{ }" as work_product_id', { work_product_id: '{ }' }],
    ['"N/A."', { tests_run: ['N/A.'] }],
    ['"."', { work_product_id: '.' }],
  ];
  it.each(placeholders)('hole (b): an empty or placeholder entry is not evidence: %s → partial', (_name, evidence) => {
    given(handoffDecider, claimedByBob())
      .when(cmd.ret('bob', 'c1', 10, report({ evidence })))
      .thenMatch([{ type: 'handoff.returned', data: expect.objectContaining({ report: expect.objectContaining({ outcome: 'partial' }) }) }]);
  });

  it('hole (c): the worker can never accept its own work (self_accept_forbidden); the worker is the principal that claimed it, kind and name', () => {
    const ledger = new Ledger();
    ledger.send(HID, cmd.create());
    ledger.send(HID, cmd.claim('bob', 'c1'));
    ledger.send(HID, cmd.ret('bob', 'c1'));
    // The return records what the claimer was; the handback carries it.
    expect(ledger.streams.get(HID)!.at(-1)).toMatchObject({ type: 'handoff.returned', data: { worker: 'bob', worker_kind: 'agent' } });
    expect(toHandoffRecord(ledger.state('hb-c1'))).toMatchObject({ reviewed_worker: 'bob', reviewed_worker_kind: 'agent' });
    expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'bob', 'accept'))).toEqual({ ok: false, code: 'self_accept_forbidden' });
    expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'bob', 'rework'))).toEqual({ ok: false, code: 'self_review_forbidden' });
    expect(ledger.state(HID).status).toBe('returned');
  });

  it('hole (c): a person whose token is named like the worker agent is someone else: she may decide its handback; the agent still may not', () => {
    for (const kind of ['operator', 'human'] as const) {
      const ledger = new Ledger();
      ledger.send(HID, cmd.create());
      ledger.send(HID, cmd.claim('bob', 'c1'));
      ledger.send(HID, cmd.ret('bob', 'c1'));
      expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'bob', 'accept'))).toEqual({ ok: false, code: 'self_accept_forbidden' });
      expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'bob', 'accept', kind))).toMatchObject({
        ok: true,
        events: [{ type: 'handoff.handback_decided', data: { decided_by: 'bob', decided_by_kind: kind } }],
      });
      expect(ledger.state(HID).status).toBe('completed');
    }
  });

  it('hole (c): a person who did the work may not decide it, through any relay; an agent named like her is not the worker (the addressee rules still apply to it)', () => {
    const ledger = new Ledger();
    ledger.send(HID, cmd.create({ to_role: 'operator' }));
    ledger.send(HID, cmd.claim('olga', 'c1', 1, { claimer_roles: ['operator'] }, 'operator'));
    ledger.send(HID, cmd.ret('olga', 'c1', 2, report(), 'operator'));
    expect(toHandoffRecord(ledger.state('hb-c1'))).toMatchObject({ reviewed_worker: 'olga', reviewed_worker_kind: 'operator' });
    for (const kind of ['operator', 'human'] as const) {
      expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'olga', 'accept', kind))).toEqual({ ok: false, code: 'self_accept_forbidden' });
    }
    // An agent named olga is not the worker: what stops it is that the handback is not addressed to it.
    expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'olga', 'accept'))).toEqual({ ok: false, code: 'not_the_addressee' });
    expect(ledger.state(HID).status).toBe('returned');
  });

  it('hole (c): a reopened review keeps the worker`s kind: the new handback is still refused to the agent and open to a person of its name', () => {
    const ledger = new Ledger();
    ledger.send(HID, cmd.create());
    ledger.send(HID, cmd.claim('bob', 'c1'));
    ledger.send(HID, cmd.ret('bob', 'c1'));
    // The reviewer (alice, the delegator) claims the handback and declines it: the review reopens.
    expect(ledger.send('hb-c1', { ...cmd.claim('alice', 'r1', 11), data: { ...cmd.claim('alice', 'r1', 11).data, handoff_id: 'hb-c1' } })).toMatchObject({
      ok: true,
    });
    expect(ledger.send('hb-c1', { ...cmd.release('alice', 'r1'), data: { ...cmd.release('alice', 'r1').data, handoff_id: 'hb-c1' } } as never)).toMatchObject({
      ok: true,
    });
    const reopened = ledger.streams.get(HID)!.at(-1)!;
    expect(reopened).toMatchObject({ type: 'handoff.review_reopened', data: { worker: 'bob', worker_kind: 'agent' } });
    const next = (reopened.data as { handback_id: string }).handback_id;
    expect(toHandoffRecord(ledger.state(next))).toMatchObject({ reviewed_worker: 'bob', reviewed_worker_kind: 'agent' });
    expect(ledger.send(next, cmd.decide(next, 'bob', 'accept'))).toEqual({ ok: false, code: 'self_accept_forbidden' });
    expect(ledger.send(next, cmd.decide(next, 'bob', 'accept', 'operator'))).toMatchObject({ ok: true });
  });

  it('hole (c): a handback of work whose claim did not record its kind (stored before it was) keeps the name rule: any caller of that name is the worker', () => {
    const ledger = new Ledger();
    ledger.send(HID, cmd.create());
    ledger.send(HID, cmd.claim('bob', 'c1'));
    // The claim as an earlier ledger stored it: no claimed_by_kind.
    delete (ledger.streams.get(HID)!.at(-1)!.data as { claimed_by_kind?: string }).claimed_by_kind;
    ledger.send(HID, cmd.ret('bob', 'c1'));
    expect(ledger.state('hb-c1')).not.toHaveProperty('reviewed_worker_kind');
    expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'bob', 'accept', 'operator'))).toEqual({ ok: false, code: 'self_accept_forbidden' });
    expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'bob', 'accept'))).toEqual({ ok: false, code: 'self_accept_forbidden' });
    expect(ledger.state(HID).status).toBe('returned');
  });

  it('hole (c): a delegator that did its own work gets no self-addressed handback: it goes to the lead, and it can neither accept nor claim it', () => {
    const ledger = new Ledger();
    ledger.send(HID, cmd.create());
    ledger.send(HID, cmd.claim('alice', 'c1'));
    ledger.send(HID, cmd.ret('alice', 'c1'));
    expect(toHandoffRecord(ledger.state('hb-c1'))).toMatchObject({ to_agent: 'lena', reviewed_worker: 'alice' });
    expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'alice', 'accept'))).toEqual({ ok: false, code: 'self_accept_forbidden' });
    expect(ledger.send('hb-c1', { ...cmd.claim('alice', 'x', 11), data: { ...cmd.claim('alice', 'x', 11).data, handoff_id: 'hb-c1' } })).toEqual({
      ok: false,
      code: 'self_review_forbidden',
    });
  });

  it('hole (c): no auto-accept exists: after a return, running every policy to quiescence leaves the parent returned', () => {
    const ledger = new Ledger();
    for (const command of [
      cmd.create({ to_agent: 'alice', from_agent: 'alice' }),
      cmd.claim('alice', 'c1'),
      cmd.ret('alice', 'c1', 10, report(), 'agent', { roster: { visible_actors: ['alice'] } }),
    ]) {
      ledger.send(HID, command);
    }
    expect(ledger.state(HID).status).toBe('returned');
    expect(toHandoffRecord(ledger.state('hb-c1'))).toMatchObject({ status: 'pending', to_role: 'operator' });
    const types = [...ledger.streams.values()].flat().map((e) => e.type);
    expect(types).not.toContain('handoff.handback_decided');
    expect(types).not.toContain('handoff.completed');
  });

  it('hole (c): a completion handback cannot be forged through create', () => {
    given(handoffDecider)
      .when(cmd.create({ kind: 'completion_handback', reply_to_handoff_id: 'h-0', reviewed_worker: 'carol', to_agent: 'bob' }, meta('bob')))
      .thenFails('handback_create_forbidden');
  });
});

describe('handoff: release, abandon, fail, archive', () => {
  it('release: the claimer declines the work; the handoff ends released with the reason', () => {
    const state = given(handoffDecider, claimedByBob()).when(cmd.release('bob', 'c1')).stateAfter();
    expect(toHandoffRecord(state)).toMatchObject({ status: 'released', terminal_reason: 'not my area', claimed_by: 'bob' });
    given(handoffDecider, claimedByBob()).when(cmd.release('carol', 'c1')).thenFails('not_the_claimer');
    given(handoffDecider, created()).when(cmd.release('bob', 'c1')).thenFails('handoff_not_claimed');
  });

  it('abandon: the delegator or an operator withdraws unfinished work; anyone else is refused', () => {
    given(handoffDecider, claimedByBob())
      .when(cmd.abandon('alice'))
      .thenMatch([{ type: 'handoff.abandoned' }]);
    given(handoffDecider, returnedByBob())
      .when(cmd.abandon('olga', 'operator'))
      .thenMatch([{ type: 'handoff.abandoned' }]);
    given(handoffDecider, created()).when(cmd.abandon('bob')).thenFails('not_the_delegator');
  });

  it('fail: the claimer, an operator or the watchdog fails the work with a reason', () => {
    expect(toHandoffRecord(given(handoffDecider, claimedByBob()).when(cmd.fail('bob', 'c1')).stateAfter())).toMatchObject({
      status: 'failed',
      terminal_reason: 'the build is broken',
    });
    given(handoffDecider, created())
      .when(cmd.fail('wd', undefined, 'watchdog'))
      .thenMatch([{ type: 'handoff.failed' }]);
    given(handoffDecider, created()).when(cmd.fail('bob', undefined)).thenFails('not_the_claimer');
    given(handoffDecider, claimedByBob()).when(cmd.fail('bob', 'c9')).thenFails('stale_claim');
    // Rule 3: once the watchdog requeued the lapsed claim, the claimer's fail is refused like its return or release.
    const requeued = history(cmd.create(), cmd.claim('bob', 'c1'), cmd.requeue('c1', 61));
    given(handoffDecider, requeued).when(cmd.ret('bob', 'c1')).thenFails('handoff_not_claimed');
    given(handoffDecider, requeued).when(cmd.release('bob', 'c1')).thenFails('handoff_not_claimed');
    given(handoffDecider, requeued).when(cmd.fail('bob', 'c1')).thenFails('handoff_not_claimed');
  });

  const terminal: Array<[string, () => HandoffEvent[]]> = [
    ['completed', () => [...returnedByBob(), completedEvent()]],
    ['released', () => history(cmd.create(), cmd.claim('bob', 'c1'), cmd.release('bob', 'c1'))],
    ['abandoned', () => history(cmd.create(), cmd.abandon('alice'))],
    ['failed', () => history(cmd.create(), cmd.fail('olga', undefined, 'operator'))],
  ];
  function completedEvent(): HandoffEvent {
    return { type: 'handoff.completed', data: { handoff_id: HID, at: at(20), idempotency_key: 'accept', handback_id: 'hb-c1', accepted_by: 'alice' } };
  }

  it.each(terminal)('archive only from a terminal status: %s → archived', (status, events) => {
    const result = given(handoffDecider, events()).when(cmd.archive());
    result.thenMatch([{ type: 'handoff.archived', data: expect.objectContaining({ archived_from: status }) }]);
    expect(toHandoffRecord(result.stateAfter())).toMatchObject({ status: 'archived', archived_from: status });
  });

  const open: Array<[string, () => HandoffEvent[]]> = [
    ['pending', created],
    ['claimed', claimedByBob],
    ['returned', returnedByBob],
    ['archived', () => history(cmd.create(), cmd.abandon('alice'), cmd.archive())],
  ];
  it.each(open)('archive from %s is refused with handoff_not_terminal', (_status, events) => {
    given(handoffDecider, events()).when(cmd.archive('olga2')).thenFails('handoff_not_terminal');
  });

  it('nothing moves a terminal handoff: claim, return, abandon and fail are refused with typed errors', () => {
    const events = history(cmd.create(), cmd.abandon('alice'));
    given(handoffDecider, events).when(cmd.claim('bob', 'c1')).thenFails('handoff_not_pending');
    given(handoffDecider, events).when(cmd.ret('bob', 'c1')).thenFails('handoff_not_claimed');
    given(handoffDecider, events).when(cmd.abandon('olga', 'operator')).thenFails('handoff_not_open');
    given(handoffDecider, events)
      .when(cmd.fail('olga', undefined, 'operator'))
      .thenFails('handoff_not_open');
    given(handoffDecider, events)
      .when(cmd.heartbeat('bob', 'c1', 1))
      .thenFails('handoff_not_claimed');
  });
});

describe('handoff: typed errors and idempotency', () => {
  it('every command but create on a handoff that does not exist is refused with not_found', () => {
    for (const command of [cmd.claim('bob', 'c1'), cmd.ret('bob', 'c1'), cmd.requeue('c1', 60), cmd.archive(), cmd.abandon('alice')]) {
      const error = given(handoffDecider).when(command).thenFails('not_found');
      expect(error.kind).toBe('not_found');
    }
  });

  it('create on an existing handoff with a new key is refused with already_exists', () => {
    given(handoffDecider, created())
      .when(cmd.create({ idempotency_key: 'another' }))
      .thenFails('already_exists');
  });

  it('an agent cannot create a handoff in another agent`s name', () => {
    given(handoffDecider)
      .when(cmd.create({}, meta('mallory')))
      .thenFails('not_the_delegator');
  });

  it('a command for another handoff is refused with wrong_aggregate', () => {
    given(handoffDecider, created())
      .when({ ...cmd.claim('bob', 'c1'), data: { ...cmd.claim('bob', 'c1').data, handoff_id: 'h-2' } })
      .thenFails('wrong_aggregate');
  });

  it('a command whose idempotency key was already applied yields no new events', () => {
    given(handoffDecider, claimedByBob()).when(cmd.claim('bob', 'c1')).then([]);
    given(handoffDecider, claimedByBob()).when(cmd.create()).then([]);
    given(handoffDecider, returnedByBob()).when(cmd.ret('bob', 'c1')).then([]);
  });

  it(`the recent idempotency keys are bounded (${RECENT_KEYS_LIMIT})`, () => {
    const beats = Array.from({ length: 300 }, (_, i) => cmd.heartbeat('bob', 'c1', 1 + i * 0.1, `beat-${i}`));
    const state = fold(handoffDecider, history(cmd.create(), cmd.claim('bob', 'c1'), ...beats));
    expect(state.status !== 'absent' && state.recent_keys.length).toBe(RECENT_KEYS_LIMIT);
    expect(state.status !== 'absent' && state.recent_keys.some((k) => k.key === 'beat-299')).toBe(true);
    expect(state.status !== 'absent' && state.recent_keys.some((k) => k.key === 'create:h-1')).toBe(false);
  });

  it('decide never throws for a business reason: refusals are values', () => {
    for (const state of [handoffDecider.initialState(), fold(handoffDecider, created()), fold(handoffDecider, returnedByBob())]) {
      for (const command of [cmd.archive(), cmd.requeue('c1', 1), cmd.heartbeat('zed', 'c7', 1), cmd.decide(HID, 'bob', 'accept')]) {
        const result = handoffDecider.decide(command, state);
        expect(result.ok).toBe(false);
      }
    }
  });

  it('the folded record validates against HandoffRecordSchema at every step of the happy path', () => {
    const events = returnedByBob();
    for (let i = 1; i <= events.length; i++) {
      expect(HandoffRecordSchema.safeParse(toHandoffRecord(fold(handoffDecider, events.slice(0, i)))).success).toBe(true);
    }
  });
});
