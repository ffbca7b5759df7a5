import { HandoffCreatedSchema, type HandoffEvent } from '@baton/contracts';
import { fold } from '../decider';
import { given } from '../testing/given';
import { meshEntryHandoffId, meshHandoffId, meshResumeHandoffId } from '../mesh/decide';
import { handoffIdFor } from '../run/ids';
import { LEDGER_DERIVED_HANDOFF_ID, ROUTER_DERIVED_HANDOFF_ID } from './decide';
import { handoffDecider } from './decider';
import { at, cmd, history, HID, Ledger, meta, PROJECT } from './handoff.fixtures';
import type { HandoffCommand } from './commands';

const HEX = '0123456789abcdef0123456789abcdef';

/** `command` sent to handoff `id` instead of the fixtures' HID. */
function to<C extends HandoffCommand>(id: string, command: C): C {
  return { ...command, data: { ...command.data, handoff_id: id } };
}

describe('handoff: an idempotency key is a retry only for the command and actor that stored it', () => {
  it('a worker heartbeating with the watchdog`s requeue key does not stop its lease from expiring', () => {
    const spent = history(cmd.create(), cmd.claim('bob', 'c1', 0), cmd.heartbeat('bob', 'c1', 5, 'requeue:c1'));
    given(handoffDecider, spent)
      .when(cmd.requeue('c1', 200))
      .thenMatch([{ type: 'handoff.lease_expired', data: expect.objectContaining({ claim_id: 'c1', retry_count: 1 }) }]);
  });

  it('a worker spending the requeue key cannot stop the retry cap from escalating', () => {
    const spent = history(cmd.create({ max_retries: 0 }), cmd.claim('bob', 'c1', 0), cmd.heartbeat('bob', 'c1', 5, 'requeue:c1'));
    given(handoffDecider, spent)
      .when(cmd.requeue('c1', 200))
      .thenMatch([{ type: 'handoff.escalated', data: expect.objectContaining({ cause: 'lease_expired' }) }]);
  });

  it('the watchdog`s own retry of a requeue is still recognised', () => {
    const requeued = history(cmd.create(), cmd.claim('bob', 'c1', 0), cmd.requeue('c1', 200));
    given(handoffDecider, requeued).when(cmd.requeue('c1', 201)).then([]);
  });

  it('a worker spending the rework policy`s key on the parent does not block the rework', () => {
    const ledger = new Ledger();
    ledger.send(HID, cmd.create());
    ledger.send(HID, cmd.claim('bob', 'c1', 1));
    // The worker knows the handback id its return will get, so it can compute the rework key.
    expect(ledger.send(HID, cmd.heartbeat('bob', 'c1', 2, 'handback-rework:hb-c1')).ok).toBe(true);
    ledger.send(HID, cmd.ret('bob', 'c1', 3));
    expect(ledger.send('hb-c1', cmd.decide('hb-c1', 'alice', 'rework')).ok).toBe(true);
    const parent = ledger.state(HID);
    expect(parent.status).toBe('pending');
    expect(parent.status !== 'absent' && parent.retry.retry_count).toBe(1);
    expect(ledger.refusedReactions).toEqual([]);
  });

  it('a second claimer reusing the winner`s claim key is refused handoff_not_pending; the winner`s retry is ok', () => {
    const claimed = history(cmd.create(), cmd.claim('bob', 'c1'));
    given(handoffDecider, claimed).when(cmd.claim('carol', 'c1')).thenFails('handoff_not_pending');
    given(handoffDecider, claimed).when(cmd.claim('bob', 'c1')).then([]);
  });

  it('a create with another creator`s key is already_exists; the creator`s own retry is ok', () => {
    const created = history(cmd.create());
    given(handoffDecider, created)
      .when(cmd.create({ from_agent: 'bob' }, meta('bob')))
      .thenFails('already_exists');
    given(handoffDecider, created).when(cmd.create()).then([]);
  });

  it('a create by the router records its creator: its retry is ok, the delegator`s reuse of its key is already_exists', () => {
    const router = meta('baton-router', 'system');
    const created = history(cmd.create({}, router));
    expect(created[0]?.data).toMatchObject({ created_by: 'baton-router', created_by_kind: 'system' });
    given(handoffDecider, created).when(cmd.create({}, router)).then([]);
    given(handoffDecider, created).when(cmd.create()).thenFails('already_exists');
  });

  it('events stored before the scope was recorded still fold, and their retries are told apart by command and actor', () => {
    // A router's create as stored before `created_by` existed: it is attributed to its from_agent.
    const legacy: HandoffEvent[] = [
      {
        type: 'handoff.created',
        data: {
          handoff_id: HID,
          at: at(0),
          idempotency_key: 'run-1:step-1',
          project: 'proj',
          kind: 'task',
          priority: 'medium',
          from_agent: 'alice',
          summary: 'write the parser',
          context: {},
          acceptance: {},
          max_retries: 3,
        },
      },
      {
        type: 'handoff.claimed',
        data: { handoff_id: HID, at: at(1), idempotency_key: 'claim:c1', claimed_by: 'bob', claim_id: 'c1', lease_expires_at: at(61) },
      },
    ];
    expect(HandoffCreatedSchema.safeParse(legacy[0]?.data).success).toBe(true);
    expect(fold(handoffDecider, legacy).status).toBe('claimed');
    given(handoffDecider, legacy)
      .when(cmd.claim('bob', 'c1', 2))
      .then([]);
    given(handoffDecider, legacy)
      .when(cmd.claim('carol', 'c1', 2))
      .thenFails('handoff_not_pending');
    // Documented: the router's retry of a create stored before the upgrade is refused, never answered as someone else's.
    given(handoffDecider, legacy)
      .when(cmd.create({ idempotency_key: 'run-1:step-1' }, meta('baton-router', 'system')))
      .thenFails('already_exists');
  });
});

describe('handoff: the ids the ledger derives are its own', () => {
  it.each([`hb-${HEX}`, `esc-${HEX}`, `d-${HEX}`])('create of %s by anyone but the ledger`s policies is refused with reserved_id', (id) => {
    expect(LEDGER_DERIVED_HANDOFF_ID.test(id)).toBe(true);
    given(handoffDecider)
      .when(cmd.create({ handoff_id: id }))
      .thenFails('reserved_id');
    given(handoffDecider)
      .when(cmd.create({ handoff_id: id }, meta('baton-router', 'system')))
      .thenFails('reserved_id');
    given(handoffDecider)
      .when(cmd.create({ handoff_id: id, kind: 'consult' }, meta('baton-ledger', 'system')))
      .thenMatch([{ type: 'handoff.created' }]);
  });

  it('ids that only look alike stay open to callers', () => {
    for (const id of ['hb-login', `hb-${HEX}0`, `esc-${HEX.toUpperCase()}`, `x-${HEX}`]) {
      given(handoffDecider)
        .when(cmd.create({ handoff_id: id }))
        .thenMatch([{ type: 'handoff.created' }]);
    }
  });
});

describe('handoff: the ids the router derives for routes are its own', () => {
  it.each([
    handoffIdFor('wr-1', { kind: 'result', id: 'r-next' }),
    handoffIdFor('wr-1', { kind: 'start', id: 'wr-1' }),
    meshHandoffId('mesh-1', 'turn-7'),
    meshEntryHandoffId('mesh-1'),
    meshResumeHandoffId('mesh-1', 'answer-3'),
  ])('an agent that computes %s (its own next result id chooses it) cannot create it first: reserved_id; the router can', (id) => {
    expect(ROUTER_DERIVED_HANDOFF_ID.test(id)).toBe(true);
    given(handoffDecider)
      .when(cmd.create({ handoff_id: id }))
      .thenFails('reserved_id');
    given(handoffDecider)
      .when(cmd.create({ handoff_id: id }, meta('baton-ledger', 'system')))
      .thenFails('reserved_id');
    given(handoffDecider)
      .when(cmd.create({ handoff_id: id }, meta('baton-router', 'system')))
      .thenMatch([{ type: 'handoff.created' }]);
  });

  it('ids that only look alike stay open to callers (ho-demo-1, how-to, mh-x-1)', () => {
    for (const id of ['ho-demo-1', 'how-to', 'mh-x-1', 'ho-r']) {
      given(handoffDecider)
        .when(cmd.create({ handoff_id: id }))
        .thenMatch([{ type: 'handoff.created' }]);
    }
  });
});

describe('handoff: the worker cannot end the handback that reviews its work', () => {
  const returned = (): Ledger => {
    const ledger = new Ledger();
    ledger.send(HID, cmd.create());
    ledger.send(HID, cmd.claim('bob', 'c1', 1));
    ledger.send(HID, cmd.ret('bob', 'c1', 2));
    return ledger;
  };

  it('abandon of its handback by the worker is refused with review_end_forbidden', () => {
    const ledger = returned();
    expect(ledger.state('hb-c1')).toMatchObject({ status: 'pending', from_agent: 'bob', reviewed_worker: 'bob', reviewed_worker_kind: 'agent' });
    expect(ledger.send('hb-c1', to('hb-c1', cmd.abandon('bob')))).toEqual({ ok: false, code: 'review_end_forbidden' });
    expect(ledger.state('hb-c1').status).toBe('pending');
    expect(ledger.state(HID).status).toBe('returned');
  });

  it('fail or release of its handback by the worker is refused with review_end_forbidden', () => {
    const ledger = returned();
    expect(ledger.send('hb-c1', to('hb-c1', cmd.fail('bob', undefined)))).toEqual({ ok: false, code: 'review_end_forbidden' });
    // Before anyone claimed it too: the rule is said, not the status.
    expect(ledger.send('hb-c1', to('hb-c1', cmd.release('bob', undefined)))).toEqual({ ok: false, code: 'review_end_forbidden' });
    expect(ledger.send('hb-c1', to('hb-c1', cmd.claim('alice', 'r1', 3))).ok).toBe(true);
    expect(ledger.send('hb-c1', to('hb-c1', cmd.release('bob', 'r1')))).toEqual({ ok: false, code: 'review_end_forbidden' });
    expect(ledger.state('hb-c1').status).toBe('claimed');
  });

  it('a person named like the worker agent is not the worker: she may end its handback as any person may (the worker is kind and name)', () => {
    const abandoned = returned();
    expect(abandoned.send('hb-c1', to('hb-c1', cmd.abandon('bob', 'operator')))).toMatchObject({ ok: true, events: [{ type: 'handoff.abandoned' }] });
    const failed = returned();
    expect(failed.send('hb-c1', to('hb-c1', cmd.fail('bob', undefined, 'operator')))).toMatchObject({ ok: true, events: [{ type: 'handoff.failed' }] });
  });

  it('a handback of work whose claim did not record its kind keeps the name rule: the worker`s name as an operator is refused too', () => {
    const ledger = new Ledger();
    ledger.send(HID, cmd.create());
    ledger.send(HID, cmd.claim('bob', 'c1', 1));
    delete (ledger.streams.get(HID)!.at(-1)!.data as { claimed_by_kind?: string }).claimed_by_kind;
    ledger.send(HID, cmd.ret('bob', 'c1', 2));
    expect(ledger.send('hb-c1', to('hb-c1', cmd.abandon('bob', 'operator')))).toEqual({ ok: false, code: 'review_end_forbidden' });
    expect(ledger.send('hb-c1', to('hb-c1', cmd.fail('bob', undefined, 'operator')))).toEqual({ ok: false, code: 'review_end_forbidden' });
    expect(ledger.send('hb-c1', to('hb-c1', cmd.release('bob', undefined, 'operator')))).toEqual({ ok: false, code: 'review_end_forbidden' });
  });

  it('another agent is refused not_the_delegator naming only the operators: the handback`s from_agent is the worker, who may not end it', () => {
    const ledger = returned();
    const refused = handoffDecider.decide(to('hb-c1', cmd.abandon('carol')), ledger.state('hb-c1'));
    expect(refused).toMatchObject({
      ok: false,
      error: { code: 'not_the_delegator', message: `only an operator of project ${PROJECT} may abandon handback hb-c1`, details: { handoff_id: 'hb-c1' } },
    });
  });

  it('the reviewer and operators may still end the handback', () => {
    const ledger = returned();
    expect(ledger.send('hb-c1', to('hb-c1', cmd.abandon('olga', 'operator'))).ok).toBe(true);
  });
});

describe('handoff: a retry repeats the body (rule 13)', () => {
  const D1 = '11111111111111111111111111111111';
  const D2 = '22222222222222222222222222222222';
  /** `command` as an outside caller's, with the digest of its body. */
  function signed<C extends HandoffCommand>(command: C, digest: string): C {
    return { ...command, metadata: { ...command.metadata, digest } };
  }

  it('the events of an outside caller`s command carry its body digest; the services` own commands carry none', () => {
    const [created, claimed] = history(signed(cmd.create(), D1), signed(cmd.claim('bob', 'c1'), D2));
    expect(created?.data.command_digest).toBe(D1);
    expect(claimed?.data.command_digest).toBe(D2);
    const [, , lapsed] = history(cmd.create(), cmd.claim('bob', 'c1', 0), cmd.requeue('c1', 200));
    expect(lapsed?.type).toBe('handoff.lease_expired');
    expect(lapsed?.data).not.toHaveProperty('command_digest');
  });

  it('the same key, command and sender with another body is idempotency_key_reused; the same body is a retry', () => {
    const claimed = history(cmd.create(), signed(cmd.claim('bob', 'c1'), D1));
    given(handoffDecider, claimed)
      .when(signed(cmd.claim('bob', 'c1'), D1))
      .then([]);
    given(handoffDecider, claimed)
      .when(signed(cmd.claim('bob', 'c1', 0, { lease_ms: 99_000 }), D2))
      .thenFails('idempotency_key_reused');
    // The refusal names what was reused, not the first body.
    const refused = handoffDecider.decide(signed(cmd.claim('bob', 'c1'), D2), fold(handoffDecider, claimed));
    expect(refused).toEqual({
      ok: false,
      error: expect.objectContaining({ kind: 'wrong_state', details: { handoff_id: HID, idempotency_key: 'claim:c1', command: 'claim' } }),
    });
    // Another sender with the key is decided as before: the winner's key is not theirs.
    given(handoffDecider, claimed)
      .when(signed(cmd.claim('carol', 'c1'), D2))
      .thenFails('handoff_not_pending');
  });

  it('a create`s key reused with another body by its creator is idempotency_key_reused; another creator still gets already_exists', () => {
    const created = history(signed(cmd.create(), D1));
    given(handoffDecider, created).when(signed(cmd.create(), D1)).then([]);
    given(handoffDecider, created)
      .when(signed(cmd.create({ summary: 'something else' }), D2))
      .thenFails('idempotency_key_reused');
    given(handoffDecider, created)
      .when(signed(cmd.create({ from_agent: 'bob' }, meta('bob')), D2))
      .thenFails('already_exists');
  });

  it('a key stored before digests were recorded (or by a service) matches any body, as before', () => {
    const legacy = history(cmd.create(), cmd.claim('bob', 'c1'));
    expect(legacy[1]?.data).not.toHaveProperty('command_digest');
    given(handoffDecider, legacy)
      .when(signed(cmd.claim('bob', 'c1'), D2))
      .then([]);
    // A command without a digest (a service's) is never compared.
    const claimed = history(cmd.create(), signed(cmd.claim('bob', 'c1'), D1));
    given(handoffDecider, claimed).when(cmd.claim('bob', 'c1')).then([]);
  });
});
