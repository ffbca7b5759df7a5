import type { HandoffEvent } from '@baton/contracts';
import { given } from '../testing/given';
import type { AbandonHandoff, ExpireDeadline } from './commands';
import { handoffDecider } from './decider';
import { at, cmd, deriveId, HID, history, meta, PROJECT } from './handoff.fixtures';
import { reactToHandoffEvent } from './policies';
import { toHandoffRecord } from './state';

const DEADLINE = at(600);
const expire = (now: string, actorKind: 'watchdog' | 'agent' = 'watchdog'): ExpireDeadline => ({
  type: 'expire_deadline',
  data: { handoff_id: HID, idempotency_key: `deadline:${HID}` },
  metadata: meta(actorKind === 'watchdog' ? 'baton-watchdog' : 'bob', actorKind, now),
});

function createdWithDeadline(): HandoffEvent {
  const result = handoffDecider.decide(cmd.create({ to_agent: 'bob', deadline_at: DEADLINE }), handoffDecider.initialState());
  if (!result.ok) throw new Error(result.error.code);
  return result.events[0] as HandoffEvent;
}

describe('handoff deadline (generic; the run side consumes handoff.deadline_expired)', () => {
  it('past its deadline a pending handoff fails once with terminal_reason deadline', () => {
    const when = given(handoffDecider, [createdWithDeadline()]).when(expire(at(601)));
    when.thenMatch([{ type: 'handoff.deadline_expired', data: expect.objectContaining({ deadline_at: DEADLINE, expired_by: 'baton-watchdog' }) }]);
    expect(toHandoffRecord(when.stateAfter())).toMatchObject({ status: 'failed', terminal_reason: 'deadline', deadline_at: DEADLINE });
  });

  it('a second expiry (another watchdog) finds the handoff failed: handoff_not_open, or nothing for the same key', () => {
    const created = createdWithDeadline();
    const first = given(handoffDecider, [created]).when(expire(at(601))).then;
    const events = first([{ type: 'handoff.deadline_expired', data: expect.anything() } as never]);
    given(handoffDecider, [created, ...events])
      .when(expire(at(602)))
      .then([]);
    given(handoffDecider, [created, ...events])
      .when({ ...expire(at(602)), data: { handoff_id: HID, idempotency_key: 'other' } })
      .thenFails('handoff_not_open');
  });

  it('a claim at or past the deadline is refused (deadline_passed): the handoff fails at its deadline unclaimed, nobody`s failure; before it the claim is taken', () => {
    given(handoffDecider, [createdWithDeadline()])
      .when(cmd.claim('bob', 'c-late', 600))
      .thenFails('deadline_passed');
    const late = handoffDecider.decide(cmd.claim('bob', 'c-late', 700), handoffDecider.evolve(handoffDecider.initialState(), createdWithDeadline()));
    expect(late).toMatchObject({ ok: false, error: { code: 'deadline_passed', kind: 'wrong_state', details: { deadline_at: DEADLINE } } });
    given(handoffDecider, [createdWithDeadline()])
      .when(cmd.claim('bob', 'c-in-time', 599))
      .thenMatch([{ type: 'handoff.claimed', data: expect.objectContaining({ claimed_by: 'bob', claim_id: 'c-in-time' }) }]);
  });

  it('before the deadline the expiry is refused (deadline_not_reached); agents may not expire', () => {
    given(handoffDecider, [createdWithDeadline()])
      .when(expire(at(599)))
      .thenFails('deadline_not_reached');
    given(handoffDecider, [createdWithDeadline()])
      .when(expire(at(601), 'agent'))
      .thenFails('internal_command');
  });
});

describe('a local create is checked against the project`s roster when its definition names one', () => {
  const roster = ['alice', 'bob', 'lead'];
  it('an addressee or escalation target the definition does not name is refused (addressee_not_in_roster): the work would wait for a claimer that never comes', () => {
    given(handoffDecider)
      .when(cmd.create({ to_agent: 'nobody', roster }))
      .thenFails('addressee_not_in_roster');
    const refused = handoffDecider.decide(cmd.create({ to_agent: 'bob', escalate_to: 'ghost', roster }), handoffDecider.initialState());
    expect(refused).toMatchObject({ ok: false, error: { code: 'addressee_not_in_roster', kind: 'forbidden', details: { field: 'escalate_to' } } });
    given(handoffDecider)
      .when(cmd.create({ to_agent: 'bob', escalate_to: 'lead', roster }))
      .thenMatch([{ type: 'handoff.created', data: expect.not.objectContaining({ roster: expect.anything() }) }]);
  });

  it('an agent the definition does not name creates nothing (delegator_not_in_roster); a project without a definition checks nothing', () => {
    const ghost = { ...cmd.create({ from_agent: 'ghost', to_agent: 'bob', roster }), metadata: meta('ghost', 'agent', at(0)) };
    given(handoffDecider).when(ghost).thenFails('delegator_not_in_roster');
    given(handoffDecider)
      .when({ ...cmd.create({ from_agent: 'ghost', to_agent: 'nobody', roster: [] }), metadata: meta('ghost', 'agent', at(0)) })
      .thenMatch([{ type: 'handoff.created' }]);
  });
});

describe('cross-project handoff: validates both rosters; never cross-registers', () => {
  const cross = { source_project: 'src', source_visible: ['alice'], target_visible: ['bob'], target_accepts: true };
  const base = { project: PROJECT, target_project: PROJECT, to_agent: 'bob', cto_override: 'dec-1', cross_project: cross };

  it('a delegator on the source roster and an addressee on the target roster: the handoff lives in the target project', () => {
    given(handoffDecider)
      .when(cmd.create(base))
      .thenMatch([
        { type: 'handoff.created', data: expect.objectContaining({ project: PROJECT, source_project: 'src', cto_override: 'dec-1', to_agent: 'bob' }) },
      ]);
  });
  it('without a cto_override decision it is refused', () => {
    const { cto_override: _c, ...rest } = base;
    given(handoffDecider).when(cmd.create(rest)).thenFails('cto_override_required');
  });
  it('a target project whose definition does not accept handoffs from the source refuses it, before anything about its roster is told', () => {
    given(handoffDecider)
      .when(cmd.create({ ...base, cross_project: { ...cross, target_accepts: false } }))
      .thenFails('cross_project_not_accepted');
    given(handoffDecider)
      .when(cmd.create({ ...base, to_agent: 'nobody', cross_project: { ...cross, target_accepts: false } }))
      .thenFails('cross_project_not_accepted');
  });
  it('a delegator not on the source roster is refused', () => {
    given(handoffDecider)
      .when(cmd.create({ ...base, cross_project: { ...cross, source_visible: ['zed'] } }))
      .thenFails('delegator_not_in_source_roster');
  });
  it('an addressee not on the target roster is refused', () => {
    given(handoffDecider)
      .when(cmd.create({ ...base, to_agent: 'carol' }))
      .thenFails('addressee_not_in_target_roster');
  });
  it('a target_project the ledger did not resolve is refused', () => {
    const { cross_project: _x, ...rest } = base;
    given(handoffDecider).when(cmd.create(rest)).thenFails('cross_project_unresolved');
  });

  // The target project's own handoff of this id, made by its own agent with the same (guessable)
  // idempotency key a cross-project create then sends.
  const targetOwn = (): HandoffEvent => {
    const made = handoffDecider.decide(cmd.create({ to_agent: 'bob' }), handoffDecider.initialState());
    if (!made.ok) throw new Error(made.error.code);
    return made.events[0] as HandoffEvent;
  };

  it("a key met on the target project's own handoff is not a retry of this create: already_exists, not ok with the target's record", () => {
    given(handoffDecider, [targetOwn()]).when(cmd.create(base)).thenFails('already_exists');
  });

  it("a refused cross-project create learns nothing of the target's handoff: the roster or override refusal comes first", () => {
    const { cto_override: _c, ...rest } = base;
    given(handoffDecider, [targetOwn()]).when(cmd.create(rest)).thenFails('cto_override_required');
    given(handoffDecider, [targetOwn()])
      .when(cmd.create({ ...base, cross_project: { ...cross, source_visible: ['zed'] } }))
      .thenFails('delegator_not_in_source_roster');
  });

  // The handoff lives in the target project; its run `wr-1` is the source project's. A handoff the
  // ledger derives from it (handback, consult) is created in the target project with no
  // source_project, so it must not carry the run id: paired with the target project it would name
  // another run (stopped by the watchdog on an escalation, linked to by the console).
  it("its handback and its escalation's consult do not carry its run: the run is the source project's, they live in the target", () => {
    const crossRun = { ...base, workflow_run_id: 'wr-1' };
    const returned = given(handoffDecider, history(cmd.create(crossRun), cmd.claim('bob', 'c1'))).when(cmd.ret('bob', 'c1'));
    const [ret] = returned.thenMatch([{ type: 'handoff.returned', data: expect.anything() }]);
    const handback = reactToHandoffEvent(ret!, { state: returned.stateAfter(), deriveId });
    expect(handback).toEqual([{ aggregateId: 'hb-c1', command: expect.objectContaining({ type: 'create' }) }]);
    expect(handback[0]!.command.data).not.toHaveProperty('workflow_run_id');

    const escalated = given(handoffDecider, history(cmd.create({ ...crossRun, max_retries: 0 }), cmd.claim('bob', 'c1'))).when(cmd.requeue('c1', 60));
    const [esc] = escalated.thenMatch([
      { type: 'handoff.escalated', data: expect.objectContaining({ outcome: expect.objectContaining({ escalate_to: 'lena' }) }) },
    ]);
    const consult = reactToHandoffEvent(esc!, { state: escalated.stateAfter(), deriveId });
    expect(consult).toEqual([{ aggregateId: 'esc-c1', command: expect.objectContaining({ type: 'create' }) }]);
    expect(consult[0]!.command.data).not.toHaveProperty('workflow_run_id');
  });

  it("a local handoff's handback and consult keep its run (it is the run of their own project)", () => {
    const returned = given(handoffDecider, history(cmd.create({ to_agent: 'bob', workflow_run_id: 'wr-1' }), cmd.claim('bob', 'c1'))).when(
      cmd.ret('bob', 'c1'),
    );
    const [ret] = returned.thenMatch([{ type: 'handoff.returned', data: expect.anything() }]);
    expect(reactToHandoffEvent(ret!, { state: returned.stateAfter(), deriveId })[0]!.command.data).toMatchObject({ workflow_run_id: 'wr-1' });
  });

  it("its handback goes to the target project's lead, never to an agent of the target that shares the delegator's name; with no lead, to the operators", () => {
    // The target's roster holds an `alice` too: someone else than the source project's delegator.
    const returned = given(handoffDecider, history(cmd.create(base), cmd.claim('bob', 'c1'))).when(cmd.ret('bob', 'c1'));
    returned.thenMatch([{ type: 'handoff.returned', data: expect.objectContaining({ handback_recipient: { to_agent: 'lena', reason: 'project_lead' } }) }]);
    const leaderless = { visible_actors: ['alice', 'bob'] };
    given(handoffDecider, history(cmd.create(base), cmd.claim('bob', 'c1')))
      .when(cmd.ret('bob', 'c1', 10, undefined, 'agent', { roster: leaderless }))
      .thenMatch([
        { type: 'handoff.returned', data: expect.objectContaining({ handback_recipient: { to_role: 'operator', reason: 'no_eligible_reviewer' } }) },
      ]);
    // A local handoff's delegator still reviews.
    given(handoffDecider, history(cmd.create({ to_agent: 'bob' }), cmd.claim('bob', 'c1')))
      .when(cmd.ret('bob', 'c1'))
      .thenMatch([{ type: 'handoff.returned', data: expect.objectContaining({ handback_recipient: { to_agent: 'alice', reason: 'delegator' } }) }]);
  });

  describe('withdrawing it (abandon)', () => {
    const abandonFrom = (actor: string, actorProject: string | undefined, kind: 'agent' | 'operator' = 'agent'): AbandonHandoff => ({
      type: 'abandon',
      data: { handoff_id: HID, reason: 'no longer needed', idempotency_key: `abandon:${actor}` },
      metadata: { ...meta(actor, kind, at(5)), ...(actorProject !== undefined ? { actorProject } : {}) },
    });
    const created = history(cmd.create(base));

    it('its delegator abandons it from the source project; the event names the project it acted from', () => {
      given(handoffDecider, created)
        .when(abandonFrom('alice', 'src'))
        .thenMatch([{ type: 'handoff.abandoned', data: expect.objectContaining({ abandoned_by: 'alice', abandoned_by_project: 'src' }) }]);
      // Also once claimed, as a local delegator may.
      given(handoffDecider, history(cmd.create(base), cmd.claim('bob', 'c1')))
        .when(abandonFrom('alice', 'src'))
        .thenMatch([{ type: 'handoff.abandoned', data: expect.objectContaining({ abandoned_by_project: 'src' }) }]);
    });

    it('an agent of the target project that shares the delegator`s name is someone else: not_the_delegator', () => {
      const refused = given(handoffDecider, created).when(abandonFrom('alice', undefined)).thenFails('not_the_delegator');
      expect(refused.details).toMatchObject({ delegator: 'alice', delegator_project: 'src' });
      expect(refused.message).toContain('alice of project src');
      // Naming the target project as its own changes nothing.
      given(handoffDecider, created).when(abandonFrom('alice', PROJECT)).thenFails('not_the_delegator');
      // The target project's operators may.
      given(handoffDecider, created)
        .when(abandonFrom('olga', undefined, 'operator'))
        .thenMatch([
          {
            type: 'handoff.abandoned',
            data: { handoff_id: HID, at: at(5), idempotency_key: 'abandon:olga', abandoned_by: 'olga', reason: 'no longer needed' },
          },
        ]);
    });

    it('from the source project only the delegator may: another agent, or a person of the source project, is not_the_delegator — also once it ended (its state is the delegator`s to learn)', () => {
      given(handoffDecider, created).when(abandonFrom('carol', 'src')).thenFails('not_the_delegator');
      given(handoffDecider, created)
        .when(abandonFrom('olga', 'src', 'operator'))
        .thenFails('not_the_delegator');
      const ended = history(cmd.create(base), abandonFrom('alice', 'src'));
      const refused = given(handoffDecider, ended).when(abandonFrom('carol', 'src')).thenFails('not_the_delegator');
      expect(refused.details).not.toHaveProperty('status');
      given(handoffDecider, ended).when(abandonFrom('alice', 'src')).then([]);
    });

    it('its delegator`s key is its own: the target project`s agent of that name sending it is decided as usual, neither a retry nor a reuse', () => {
      const withDigest = (c: AbandonHandoff, digest: string): AbandonHandoff => ({ ...c, metadata: { ...c.metadata, digest } });
      const ended = history(cmd.create(base), withDigest(abandonFrom('alice', 'src'), 'd-src'));
      // The same key (abandon:alice) from another actor: handoff_not_open, as with any other key.
      given(handoffDecider, ended)
        .when(withDigest(abandonFrom('alice', undefined), 'd-src'))
        .thenFails('handoff_not_open');
      given(handoffDecider, ended)
        .when(withDigest(abandonFrom('alice', undefined), 'd-other'))
        .thenFails('handoff_not_open');
      // The delegator's own retry is still one, and its other body under the key a reuse.
      given(handoffDecider, ended)
        .when(withDigest(abandonFrom('alice', 'src'), 'd-src'))
        .then([]);
      given(handoffDecider, ended)
        .when(withDigest(abandonFrom('alice', 'src'), 'd-other'))
        .thenFails('idempotency_key_reused');
    });

    it('a caller from another project learns nothing of handoffs its project did not delegate: not_found, as for an id that does not exist', () => {
      const absent = given(handoffDecider).when(abandonFrom('alice', 'src')).thenFails('not_found');
      const local = given(handoffDecider, history(cmd.create({ to_agent: 'bob' })))
        .when(abandonFrom('alice', 'src'))
        .thenFails('not_found');
      const others = given(handoffDecider, created).when(abandonFrom('alice', 'elsewhere')).thenFails('not_found');
      expect(local).toEqual(absent);
      expect(others).toEqual(absent);
      // Even under the key the target project's own alice abandoned it with: not a retry answered with its record.
      const abandonedHere = history(cmd.create({ to_agent: 'bob' }), abandonFrom('alice', undefined));
      const usedKey = given(handoffDecider, abandonedHere).when(abandonFrom('alice', 'src')).thenFails('not_found');
      expect(usedKey).toEqual(absent);
    });
  });

  it('its escalate_to names an actor of the target project, where the consult is created: another name is refused', () => {
    given(handoffDecider)
      .when(cmd.create({ ...base, escalate_to: 'lena' }))
      .thenFails('addressee_not_in_target_roster');
    given(handoffDecider)
      .when(cmd.create({ ...base, cross_project: { ...cross, target_visible: ['bob', 'lena'] }, escalate_to: 'lena' }))
      .thenMatch([{ type: 'handoff.created', data: expect.objectContaining({ escalate_to: 'lena' }) }]);
  });

  it('a create of a reserved id, a forged handback or another agent`s handoff is refused alike whether the id exists or not (no existence oracle)', () => {
    const existing = (id: string): HandoffEvent[] => {
      const made = handoffDecider.decide(cmd.create({ handoff_id: id }, meta('baton-router', 'system')), handoffDecider.initialState());
      if (!made.ok) throw new Error(made.error.code);
      return made.events as HandoffEvent[];
    };
    for (const id of ['ho-s-run-1', 'hb-0123456789abcdef0123456789abcdef']) {
      const probe = cmd.create({ ...base, handoff_id: id, idempotency_key: 'probe' });
      given(handoffDecider).when(probe).thenFails('reserved_id');
      given(handoffDecider, id.startsWith('ho-') ? existing(id) : [])
        .when(probe)
        .thenFails('reserved_id');
    }
    given(handoffDecider, existing('h-plain'))
      .when(cmd.create({ handoff_id: 'h-plain', from_agent: 'bob', idempotency_key: 'probe' }))
      .thenFails('not_the_delegator');
  });

  it('a retry of the cross-project create that made the handoff is still a retry (no events), and a local create of the same key is not', () => {
    const made = handoffDecider.decide(cmd.create(base), handoffDecider.initialState());
    if (!made.ok) throw new Error(made.error.code);
    given(handoffDecider, made.events as HandoffEvent[])
      .when(cmd.create(base))
      .then([]);
    given(handoffDecider, made.events as HandoffEvent[])
      .when(cmd.create({ to_agent: 'bob' }))
      .thenFails('already_exists');
  });
});
