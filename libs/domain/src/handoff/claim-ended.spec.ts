import type { HandoffCommand } from './commands';
import { given } from '../testing/given';
import { handoffDecider } from './decider';
import { at, cmd, HID, history, meta } from './handoff.fixtures';

/*
 * A claimer whose claim is gone asks the ledger (a heartbeat) and reads the refusal: `status`, and
 * once the handoff has ended how (`details.ended`, from the handoff's state), so an agent tells
 * "claim it again once it is offered" from "nothing to claim again" without reading any message
 * (docs/errors.md section 2, docs/handoffs.md rule 3a). The audit's case: a claim kept past the
 * handoff's deadline, refused `handoff_not_claimed` with nothing saying the deadline ended it.
 */

const DEADLINE_S = 30;
const expire = (seconds: number): HandoffCommand => ({
  type: 'expire_deadline',
  data: { handoff_id: HID, idempotency_key: `deadline:${HID}` },
  metadata: meta('wd', 'watchdog', at(seconds)),
});
const failSaying = (reason: string, seconds: number): HandoffCommand => ({
  type: 'fail',
  data: { handoff_id: HID, claim_id: 'c1', reason, idempotency_key: `fail:${reason}` },
  metadata: meta('bob', 'agent', at(seconds)),
});
const withDeadline = () => cmd.create({ to_agent: 'bob', deadline_at: at(DEADLINE_S) });
const beat = (seconds = 40) => cmd.heartbeat('bob', 'c1', seconds);

describe('handoff: a lost claim`s refusal names how the handoff ended (details.ended)', () => {
  it.each([
    ['failed at its deadline', 'failed', 'deadline_passed', [expire(DEADLINE_S + 1)]],
    ['abandoned by its delegator', 'abandoned', 'handoff_abandoned', [cmd.abandon('alice')]],
    ['failed by an operator', 'failed', 'handoff_failed', [cmd.fail('olga', undefined, 'operator')]],
    ['archived after an operator failed it', 'archived', 'handoff_archived', [cmd.fail('olga', undefined, 'operator'), cmd.archive()]],
  ] as const)('a claim kept while the handoff was %s: the heartbeat is refused handoff_not_claimed, status %s, ended %s', (_what, status, ended, after) => {
    const events = history(withDeadline(), cmd.claim('bob', 'c1'), ...after);
    const error = given(handoffDecider, events).when(beat()).thenFails('handoff_not_claimed');
    expect(error).toMatchObject({ kind: 'wrong_state', details: { handoff_id: HID, status, ended } });
  });

  it('a claim whose lease lapsed and was requeued: the handoff is open again (status pending, no ended) — claiming it again can work', () => {
    const events = history(withDeadline(), cmd.claim('bob', 'c1'), cmd.requeue('c1', 61));
    const error = given(handoffDecider, events).when(beat(62)).thenFails('handoff_not_claimed');
    expect(error.details).toEqual({ handoff_id: HID, status: 'pending' });
  });

  it('a lapse past the retry cap escalates the handoff: ended handoff_escalated, not a plain failure', () => {
    const events = history(cmd.create({ to_agent: 'bob', max_retries: 0 }), cmd.claim('bob', 'c1'), cmd.requeue('c1', 61));
    const error = given(handoffDecider, events).when(beat(62)).thenFails('handoff_not_claimed');
    expect(error.details).toMatchObject({ status: 'failed', ended: 'handoff_escalated' });
  });

  it('a failure that merely says "deadline" before the deadline is a failure, not the deadline`s (the ending comes from the state, not the words)', () => {
    const early = history(withDeadline(), cmd.claim('bob', 'c1'), failSaying('deadline', 5));
    expect(given(handoffDecider, early).when(beat()).thenFails('handoff_not_claimed').details).toMatchObject({ ended: 'handoff_failed' });
  });

  it('a claim on an ended handoff is refused handoff_not_pending naming the ending too; an open one names none', () => {
    const expired = history(withDeadline(), expire(DEADLINE_S));
    expect(
      given(handoffDecider, expired)
        .when(cmd.claim('bob', 'c2', 40))
        .thenFails('handoff_not_pending').details,
    ).toMatchObject({
      status: 'failed',
      ended: 'deadline_passed',
    });
    const taken = history(withDeadline(), cmd.claim('bob', 'c1'));
    expect(
      given(handoffDecider, taken)
        .when(cmd.claim('carol', 'c2', 1))
        .thenFails('handoff_not_pending').details,
    ).toEqual({ handoff_id: HID, status: 'claimed' });
  });
});
