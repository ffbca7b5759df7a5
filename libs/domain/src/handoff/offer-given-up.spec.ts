import type { HandoffEvent } from '@baton/contracts';
import { given } from '../testing/given';
import type { GiveUpOffer } from './commands';
import { handoffDecider } from './decider';
import { at, cmd, history, HID, Ledger, meta } from './handoff.fixtures';
import { toHandoffRecord } from './state';

/** `agent` gave up on the offer of HID (at version `offered`, when given) under `key`. */
function giveUp(agent: string, key: string, overrides: Partial<GiveUpOffer['data']> = {}, seconds = 60): GiveUpOffer {
  return {
    type: 'give_up_offer',
    data: {
      handoff_id: HID,
      deliveries: 5,
      reason: 'onOffer failed 5 times: model endpoint down',
      project_lead: 'lena',
      escalation_handoff_id: `esc-give-up-${key}`,
      idempotency_key: key,
      ...overrides,
    },
    metadata: meta(agent, 'agent', at(seconds)),
  };
}

/** Decide `command` on `events` and return the events it adds (fails the test when refused). */
function decided(events: HandoffEvent[], command: GiveUpOffer): HandoffEvent[] {
  return given(handoffDecider, events).when(command).thenMatch([{}]);
}

describe('an offer its agent gave up on before claiming it (give_up_offer): never left silently pending', () => {
  it('the addressee gives up: the handoff stays pending, retry_count + 1, the record says who gave up, when and why', () => {
    const created = history(cmd.create({ to_agent: 'bob' }));
    const when = given(handoffDecider, created).when(giveUp('bob', 'give_up:h-1:7', { offered_version: 1 }));
    when.thenMatch([
      {
        type: 'handoff.offer_given_up',
        data: expect.objectContaining({ given_up_by: 'bob', deliveries: 5, retry_count: 1, reason: 'onOffer failed 5 times: model endpoint down' }),
      },
    ]);
    expect(toHandoffRecord(when.stateAfter())).toMatchObject({
      status: 'pending',
      retry: { max_retries: 3, retry_count: 1 },
      offer_given_up: { by: 'bob', at: at(60), deliveries: 5, reason: 'onOffer failed 5 times: model endpoint down' },
      version: 2,
    });
  });

  it('seed 002 retry cap → CONSULT escalation: the give-up that would pass max_retries escalates (cause offer_given_up) to the lead, and the handoff ends failed', () => {
    let events = history(cmd.create({ to_agent: 'bob', max_retries: 2 }));
    events = [...events, ...decided(events, giveUp('bob', 'g1', { offered_version: 1 }))];
    events = [...events, ...decided(events, giveUp('bob', 'g2', { offered_version: 2 }))];
    const when = given(handoffDecider, events).when(giveUp('bob', 'g3', { offered_version: 3 }));
    when.thenMatch([
      {
        type: 'handoff.escalated',
        data: expect.objectContaining({
          cause: 'offer_given_up',
          attempted_retry: 3,
          max_retries: 2,
          outcome: { escalate_to: 'lena', consult_handoff_id: 'esc-give-up-g3' },
          note: 'onOffer failed 5 times: model endpoint down',
          given_up: { by: 'bob', deliveries: 5, reason: 'onOffer failed 5 times: model endpoint down' },
        }),
      },
    ]);
    expect(toHandoffRecord(when.stateAfter())).toMatchObject({
      status: 'failed',
      terminal_reason: 'retry cap 2 reached (offer_given_up); escalated to lena',
      escalation_outcome: { escalate_to: 'lena', consult_handoff_id: 'esc-give-up-g3' },
      offer_given_up: { by: 'bob', deliveries: 5 },
    });
  });

  it('the escalation creates the consult to the lead (the ledger`s policy), replying to the handoff', () => {
    const ledger = new Ledger('lena');
    expect(ledger.send(HID, cmd.create({ to_agent: 'bob', max_retries: 0 }))).toMatchObject({ ok: true });
    expect(ledger.send(HID, giveUp('bob', 'g1'))).toMatchObject({ ok: true, events: [{ type: 'handoff.escalated' }] });
    expect(ledger.refusedReactions).toEqual([]);
    expect(toHandoffRecord(ledger.state('esc-give-up-g1'))).toMatchObject({
      kind: 'consult',
      status: 'pending',
      to_agent: 'lena',
      priority: 'high',
      reply_to_handoff_id: HID,
      context: { escalated_handoff_id: HID, cause: 'offer_given_up', note: 'onOffer failed 5 times: model endpoint down' },
    });
  });

  it('never a consult back to the agent that gave up: a lead that gave up its own work, or with no lead anywhere, asks for a guard_failed stop', () => {
    const toLead = history(cmd.create({ to_agent: 'lena', max_retries: 0 }));
    given(handoffDecider, toLead)
      .when(giveUp('lena', 'g1'))
      .thenMatch([
        {
          type: 'handoff.escalated',
          data: expect.objectContaining({
            outcome: {
              stop_why: 'guard_failed',
              detail: `handoff ${HID} reached its retry cap (0) and its escalation target, lena, is the agent that gave up its offer`,
            },
          }),
        },
      ]);
    const noLead = history(cmd.create({ to_agent: 'bob', max_retries: 0 }));
    const { project_lead: _lead, ...withoutLead } = giveUp('bob', 'g1').data;
    given(handoffDecider, noLead)
      .when({ ...giveUp('bob', 'g1'), data: withoutLead })
      .thenMatch([
        {
          type: 'handoff.escalated',
          data: expect.objectContaining({
            outcome: { stop_why: 'guard_failed', detail: `handoff ${HID} reached its retry cap (0) and project proj has no lead` },
          }),
        },
      ]);
  });

  it('identity: only the addressed agent gives up its offer (not_the_addressee) — not another agent, not an operator; a handoff offered to nobody has no offer to give up', () => {
    const created = history(cmd.create({ to_agent: 'bob' }));
    given(handoffDecider, created).when(giveUp('mallory', 'g1')).thenFails('not_the_addressee');
    given(handoffDecider, created)
      .when({ ...giveUp('olga', 'g1'), metadata: meta('olga', 'operator', at(60)) })
      .thenFails('not_the_addressee');
    given(handoffDecider, history(cmd.create({ to_role: 'dev' })))
      .when(giveUp('bob', 'g1'))
      .thenFails('not_the_addressee');
  });

  it('a claimed handoff`s path is unchanged: a give-up once it is claimed (or ended) is refused handoff_not_pending — the lease decides', () => {
    const claimed = history(cmd.create({ to_agent: 'bob' }), cmd.claim('bob', 'c-1'));
    given(handoffDecider, claimed).when(giveUp('bob', 'g1')).thenFails('handoff_not_pending');
    const released = history(cmd.create({ to_agent: 'bob' }), cmd.claim('bob', 'c-1'), cmd.release('bob', 'c-1'));
    given(handoffDecider, released).when(giveUp('bob', 'g1')).thenFails('handoff_not_pending');
  });

  it('a give-up of an earlier round`s offer (offered_version behind the handoff) is refused stale_offer: two offers of one round count once', () => {
    const created = history(cmd.create({ to_agent: 'bob' }));
    const first = decided(created, giveUp('bob', 'g1', { offered_version: 1 }));
    const stale = given(handoffDecider, [...created, ...first])
      .when(giveUp('bob', 'g2', { offered_version: 1 }))
      .thenFails('stale_offer');
    expect(stale).toMatchObject({ kind: 'wrong_state', details: { offered_version: 1, version: 2 } });
    given(handoffDecider, [...created, ...first])
      .when(giveUp('bob', 'g2', { offered_version: 2 }))
      .thenMatch([{ type: 'handoff.offer_given_up', data: expect.objectContaining({ retry_count: 2 }) }]);
  });

  it('idempotent by key: the same give-up again stores nothing; another agent cannot spend that key', () => {
    const created = history(cmd.create({ to_agent: 'bob' }));
    const events = [...created, ...decided(created, giveUp('bob', 'give_up:h-1:7', { offered_version: 1 }))];
    given(handoffDecider, events)
      .when(giveUp('bob', 'give_up:h-1:7', { offered_version: 1 }))
      .then([]);
    given(handoffDecider, events)
      .when(giveUp('mallory', 'give_up:h-1:7', { offered_version: 1 }))
      .thenFails('not_the_addressee');
  });

  it('a completion handback has no retry cap (rule 5): its reviewer`s give-up is recorded with the count unchanged, never escalated', () => {
    const ledger = new Ledger('lena');
    ledger.send(HID, cmd.create({ to_agent: 'bob' }));
    ledger.send(HID, cmd.claim('bob', 'c-1'));
    expect(ledger.send(HID, cmd.ret('bob', 'c-1'))).toMatchObject({ ok: true });
    const handbackId = 'hb-c-1';
    expect(toHandoffRecord(ledger.state(handbackId))).toMatchObject({ kind: 'completion_handback', to_agent: 'alice', retry: { max_retries: 0 } });
    const first = ledger.send(handbackId, { ...giveUp('alice', 'g1'), data: { ...giveUp('alice', 'g1').data, handoff_id: handbackId } });
    expect(first).toMatchObject({ ok: true, events: [{ type: 'handoff.offer_given_up', data: { given_up_by: 'alice', retry_count: 0 } }] });
    // Not offered again, so a second give-up (another key) stores nothing.
    const second = ledger.send(handbackId, { ...giveUp('alice', 'g2'), data: { ...giveUp('alice', 'g2').data, handoff_id: handbackId } });
    expect(second).toMatchObject({ ok: true, events: [] });
    expect(toHandoffRecord(ledger.state(handbackId))).toMatchObject({ status: 'pending', offer_given_up: { by: 'alice' } });
    expect(toHandoffRecord(ledger.state(HID))).toMatchObject({ status: 'returned', handback_id: handbackId });
  });
  it('seed 001: a returnable child (a run handoff with a deadline) given up before it is claimed fails at once — its run`s ON_FAILURE applies, no retry round, no escalation', () => {
    const created = history(cmd.create({ to_agent: 'bob', workflow_run_id: 'conv-1', deadline_at: at(3600) }));
    const when = given(handoffDecider, created).when(giveUp('bob', 'give_up:h-1:3', { offered_version: 1 }));
    when.thenMatch([
      {
        type: 'handoff.failed',
        data: expect.objectContaining({
          failed_by: 'bob',
          cause: 'offer_given_up',
          deliveries: 5,
          reason: 'offer given up unclaimed by bob after 5 deliveries: onOffer failed 5 times: model endpoint down',
        }),
      },
    ]);
    expect(toHandoffRecord(when.stateAfter())).toMatchObject({
      status: 'failed',
      retry: { retry_count: 0 },
      offer_given_up: { by: 'bob', deliveries: 5, reason: 'onOffer failed 5 times: model endpoint down' },
      terminal_reason: expect.stringContaining('offer given up unclaimed by bob'),
    });
    // The same give-up again is a retry of it (stores nothing), not a reuse of the key by a fail.
    const events = [...created, ...decided(created, giveUp('bob', 'give_up:h-1:3', { offered_version: 1 }))];
    given(handoffDecider, events)
      .when(giveUp('bob', 'give_up:h-1:3', { offered_version: 1 }))
      .then([]);
  });
});
