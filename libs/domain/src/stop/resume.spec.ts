import { OperatorAnswer, OperatorAnswerSchema, ResumeEffectSchema, StopPacket, StopPacketSchema, StopWhySchema } from '@baton/contracts';
import { buildStop, StopFacts } from './build-stop';
import { HOP_CAP_MAX, raiseCapForm } from './forms';
import { pendingDigest } from './pending';
import { allowedActions, decideResume, goalDone, markAnswered, ResumeContext } from './resume';

const operator: ResumeContext = { now: '2025-03-01T10:05:00.000Z', actorRole: 'operator' };

function stop(overrides: Partial<StopFacts> = {}): StopPacket {
  return buildStop({
    packet_id: 'pkt-1',
    now: '2025-03-01T10:00:00.000Z',
    why: 'policy',
    tried: ['router', 'lookup_order'],
    pending: { name: 'refund', args: { amount: 40, order_id: 99 }, call_id: 'call-7' },
    run_id: 'run-1',
    workflow_run_id: 'wfr-1',
    project: 'shop',
    agent: 'billing',
    step: 'refund',
    ...overrides,
  }).packet;
}

function answer(packet: StopPacket, overrides: Partial<OperatorAnswer> = {}): OperatorAnswer {
  return {
    packet_id: packet.packet_id,
    answer_id: 'ans-1',
    action: 'approve',
    pending_digest: packet.pending_digest ?? undefined,
    answered_by: 'ops@example.com',
    answered_at: '2025-03-01T10:04:00.000Z',
    ...overrides,
  };
}

describe('decideResume — resume from handoff is not always execute (seed 003)', () => {
  it('approve runs the frozen call: exactly the frozen name, args and call id', () => {
    const packet = stop();
    const result = decideResume(packet, answer(packet, { action: 'approve' }), operator);
    expect(result).toEqual({ ok: true, effect: { kind: 'run_pending_call', call: { name: 'refund', args: { amount: 40, order_id: 99 }, call_id: 'call-7' } } });
    if (result.ok && result.effect.kind === 'run_pending_call') {
      expect(Object.isFrozen(result.effect.call.args)).toBe(true);
      expect(pendingDigest(result.effect.call)).toBe(packet.pending_digest);
    }
  });

  it('approve runs the frozen call once: after the answer is recorded, a second approve is refused', () => {
    const packet = stop();
    const first = answer(packet, { action: 'approve' });
    expect(decideResume(packet, first, operator).ok).toBe(true);
    const answered = markAnswered(packet, first);
    const again = decideResume(answered, answer(packet, { action: 'approve', answer_id: 'ans-2' }), operator);
    expect(again).toMatchObject({ ok: false, error: { code: 'stop_already_answered', details: { same_answer: false } } });
  });

  it('deny stops: policy resume might be deny (stop), never the call', () => {
    const packet = stop();
    const result = decideResume(packet, answer(packet, { action: 'deny', note: 'over the refund limit' }), operator);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.effect.kind).toBe('stop');
    expect(result.effect).toEqual({ kind: 'stop', reason: 'denied by ops@example.com after a policy stop: over the refund limit' });
  });

  it('unknown_intent resume is a human-typed kind that re-enters the router with a human decision, not a model guess', () => {
    const packet = stop({ why: 'unknown_intent', pending: null, tried: [] });
    const result = decideResume(packet, answer(packet, { action: 'intent', intent: ' billing ', pending_digest: undefined }), operator);
    expect(result).toEqual({
      ok: true,
      effect: { kind: 'reroute', intent: 'billing', origin: 'human', reason: 'human-typed intent from ops@example.com after an unknown_intent stop' },
    });
  });

  it('an intent must be one of the kinds offered when the form offers a list', () => {
    const packet = stop({ why: 'unknown_intent', pending: null, intents: ['billing', 'shipping'] });
    const refused = decideResume(packet, answer(packet, { action: 'intent', intent: 'poetry', pending_digest: undefined }), operator);
    expect(refused).toMatchObject({ ok: false, error: { code: 'intent_not_offered' } });
    const blank = decideResume(packet, answer(packet, { action: 'intent', intent: '   ', pending_digest: undefined }), operator);
    expect(blank).toMatchObject({ ok: false, error: { code: 'answer_incomplete' } });
  });

  it('a kind the form offers is taken as offered, an agent named _tech or -ops included; typed into a form without a list it must start with a letter or digit', () => {
    const listed = stop({ why: 'unknown_intent', pending: null, intents: ['a', '_tech', '-ops'] });
    for (const intent of ['_tech', '-ops']) {
      expect(decideResume(listed, answer(listed, { action: 'intent', intent, pending_digest: undefined }), operator)).toMatchObject({
        ok: true,
        effect: { kind: 'reroute', intent },
      });
    }
    // Not offered, whatever its first character: intent_not_offered with the offered kinds.
    expect(decideResume(listed, answer(listed, { action: 'intent', intent: '_nosuch', pending_digest: undefined }), operator)).toMatchObject({
      ok: false,
      error: { code: 'intent_not_offered', details: { offered: ['a', '_tech', '-ops'] } },
    });
    const free = stop({ why: 'unknown_intent', pending: null });
    expect(decideResume(free, answer(free, { action: 'intent', intent: '_tech', pending_digest: undefined }), operator)).toMatchObject({
      ok: false,
      error: { code: 'answer_incomplete', message: expect.stringContaining('starting with a letter or digit') },
    });
    expect(decideResume(free, answer(free, { action: 'intent', intent: 'billing', pending_digest: undefined }), operator)).toMatchObject({ ok: true });
  });

  it('only an operator raises a cap: operator and admin may, an agent or a viewer may not', () => {
    const packet = stop({ why: 'budget', pending: null, cap: { name: 'tool_calls', limit: 8, used: 8 } });
    const raise = answer(packet, { action: 'raise_cap', cap: 12, pending_digest: undefined });
    expect(decideResume(packet, raise, { ...operator, actorRole: 'operator' })).toEqual({ ok: true, effect: { kind: 'raise_cap', cap: 12 } });
    expect(decideResume(packet, raise, { ...operator, actorRole: 'admin' })).toEqual({ ok: true, effect: { kind: 'raise_cap', cap: 12 } });
    expect(decideResume(packet, raise, { ...operator, actorRole: 'agent' })).toMatchObject({
      ok: false,
      error: { code: 'answer_forbidden', kind: 'forbidden' },
    });
    expect(decideResume(packet, raise, { ...operator, actorRole: 'viewer' })).toMatchObject({
      ok: false,
      error: { code: 'answer_forbidden', kind: 'forbidden' },
    });
  });

  it('do not raise caps from the packet without a person: the cap comes from the answer and must exceed the current one', () => {
    const packet = stop({ why: 'budget', pending: null, cap: { name: 'tool_calls', limit: 8, used: 8 } });
    expect(decideResume(packet, answer(packet, { action: 'raise_cap', cap: undefined, pending_digest: undefined }), operator)).toMatchObject({
      ok: false,
      error: { code: 'answer_incomplete' },
    });
    expect(decideResume(packet, answer(packet, { action: 'raise_cap', cap: 8, pending_digest: undefined }), operator)).toMatchObject({
      ok: false,
      error: { code: 'cap_not_raised' },
    });
    // The role tells a person from an agent, not the name: an operator whose token is named like
    // the stopped agent is a person, and answers (an agent holds no answering role).
    expect(decideResume(packet, answer(packet, { action: 'raise_cap', cap: 20, answered_by: 'billing', pending_digest: undefined }), operator)).toMatchObject({
      ok: true,
    });
    expect(
      decideResume(packet, answer(packet, { action: 'raise_cap', cap: 20, answered_by: 'billing', pending_digest: undefined }), {
        ...operator,
        actorRole: 'viewer',
      }),
    ).toMatchObject({
      ok: false,
      error: { code: 'answer_forbidden' },
    });
  });

  it("the hop budget's raise must pass the hops already used (resuming is the next hop), and is a whole number: the form says both", () => {
    const packet = stop({ why: 'budget', pending: null, cap: { name: 'hops', limit: 50, used: 51 } });
    const field = packet.next_form!.fields.find((f) => f.id === 'cap')!;
    // Pre-filled with an answer it takes: another budget of the same size past what was used.
    expect(field).toMatchObject({ greater_than: 51, value: 101, whole: true });
    const raise = (cap: number) => decideResume(packet, answer(packet, { action: 'raise_cap', cap, pending_digest: undefined }), operator);
    expect(raise(101)).toEqual({ ok: true, effect: { kind: 'raise_cap', cap: 101 } });
    // 51 would stop the run again at once, at hop 52 of 51.
    expect(raise(51)).toMatchObject({ ok: false, error: { code: 'cap_not_raised', message: expect.stringContaining('above 51') } });
    expect(raise(50.5)).toMatchObject({ ok: false, error: { code: 'cap_not_raised' } });
    expect(raise(55.5)).toMatchObject({ ok: false, error: { code: 'answer_incomplete', message: expect.stringContaining('a whole number') } });
    expect(raise(52)).toEqual({ ok: true, effect: { kind: 'raise_cap', cap: 52 } });
    // Another cap keeps its own rule: above its limit, any number.
    const tokens = stop({ why: 'budget', pending: null, cap: { name: 'tokens', limit: 100, used: 100 } });
    expect(tokens.next_form!.fields.find((f) => f.id === 'cap')).not.toHaveProperty('whole');
    expect(tokens.next_form!.fields.find((f) => f.id === 'cap')).toMatchObject({ greater_than: 100, value: 200 });
    const tokensValue = tokens.next_form!.fields.find((f) => f.id === 'cap')!.value as number;
    expect(decideResume(tokens, answer(tokens, { action: 'raise_cap', cap: tokensValue, pending_digest: undefined }), operator)).toMatchObject({ ok: true });
    // Within at_most (a mesh's turns): nothing above the floor fits, so nothing is pre-filled.
    const full = raiseCapForm({ name: 'turns', limit: 1000, used: 1000 }, undefined, { atMost: 1000, whole: true });
    expect(full.fields.find((f) => f.id === 'cap')).not.toHaveProperty('value');
    const near = raiseCapForm({ name: 'turns', limit: 900, used: 900 }, undefined, { atMost: 1000, whole: true });
    expect(near.fields.find((f) => f.id === 'cap')).toMatchObject({ greater_than: 900, value: 1000, at_most: 1000 });
    expect(decideResume(tokens, answer(tokens, { action: 'raise_cap', cap: 150.5, pending_digest: undefined }), operator)).toMatchObject({ ok: true });
  });

  it("an agent's cap that says it is whole (tool calls) takes a whole raise only: the form says so and a fraction is refused", () => {
    const packet = stop({ why: 'budget', pending: null, cap: { name: 'tool_calls', limit: 20, used: 20, whole: true } });
    expect(packet.next_form!.fields.find((f) => f.id === 'cap')).toMatchObject({ greater_than: 20, value: 40, whole: true });
    const raise = (cap: number) => decideResume(packet, answer(packet, { action: 'raise_cap', cap, pending_digest: undefined }), operator);
    expect(raise(20.5)).toMatchObject({ ok: false, error: { code: 'answer_incomplete', message: expect.stringContaining('a whole number') } });
    expect(raise(21)).toEqual({ ok: true, effect: { kind: 'raise_cap', cap: 21 } });
    // Not said to be whole: a fraction above the cap is an answer.
    const cost = stop({ why: 'budget', pending: null, cap: { name: 'cost_usd', limit: 2.5, used: 2.5, whole: false } });
    expect(cost.next_form!.fields.find((f) => f.id === 'cap')).not.toHaveProperty('whole');
    expect(decideResume(cost, answer(cost, { action: 'raise_cap', cap: 2.75, pending_digest: undefined }), operator)).toMatchObject({ ok: true });
  });

  it('the hop budget is raised at most to HOP_CAP_MAX (what WATCHDOG_MAX_HOPS may be): the form says so, and a packet stored before it did is held to it too', () => {
    expect(HOP_CAP_MAX).toBe(100_000);
    const packet = stop({ why: 'budget', pending: null, cap: { name: 'hops', limit: 50, used: 51 } });
    expect(packet.next_form!.fields.find((f) => f.id === 'cap')).toMatchObject({ at_most: HOP_CAP_MAX, whole: true });
    const raise = (p: StopPacket, cap: number) => decideResume(p, answer(p, { action: 'raise_cap', cap, pending_digest: undefined }), operator);
    expect(raise(packet, HOP_CAP_MAX)).toEqual({ ok: true, effect: { kind: 'raise_cap', cap: HOP_CAP_MAX } });
    expect(raise(packet, 1e15)).toMatchObject({
      ok: false,
      error: { code: 'answer_incomplete', message: 'the new cap 1000000000000000 is over the most, 100000' },
    });
    // A packet whose form names no most (stored before): the hop budget's holds all the same.
    const older: StopPacket = {
      ...packet,
      next_form: { ...packet.next_form!, fields: packet.next_form!.fields.map((f) => (f.id === 'cap' ? { ...f, at_most: undefined } : f)) },
    };
    expect(older.next_form!.fields.find((f) => f.id === 'cap')!.at_most).toBeUndefined();
    expect(raise(older, HOP_CAP_MAX + 1)).toMatchObject({ ok: false, error: { code: 'answer_incomplete' } });
    // Other caps keep no most unless their form states one.
    const tokens = stop({ why: 'budget', pending: null, cap: { name: 'tokens', limit: 100, used: 100 } });
    expect(tokens.next_form!.fields.find((f) => f.id === 'cap')).not.toHaveProperty('at_most');
    expect(raise(tokens, 1e15)).toMatchObject({ ok: true });
  });

  it('budget stop keeps a real freeze: the raise_cap effect does not run or drop the frozen call', () => {
    const packet = stop({ why: 'budget', cap: { name: 'steps', limit: 3 } });
    expect(packet.pending).not.toBeNull();
    const result = decideResume(packet, answer(packet, { action: 'raise_cap', cap: 5 }), operator);
    expect(result).toEqual({ ok: true, effect: { kind: 'raise_cap', cap: 5 } });
    expect(markAnswered(packet, answer(packet, { action: 'raise_cap', cap: 5 })).pending).toEqual(packet.pending);
  });

  it('stale answer refused: a pending_digest that does not match the frozen call is refused (fail closed)', () => {
    const packet = stop();
    const otherCall = pendingDigest({ name: 'refund', args: { amount: 4000, order_id: 99 }, call_id: 'call-7' });
    expect(decideResume(packet, answer(packet, { action: 'approve', pending_digest: otherCall }), operator)).toMatchObject({
      ok: false,
      error: { code: 'stale_answer' },
    });
    expect(decideResume(packet, answer(packet, { action: 'deny', pending_digest: otherCall }), operator)).toMatchObject({
      ok: false,
      error: { code: 'stale_answer' },
    });
    // Fail closed: approving a frozen call without naming which call was seen is refused too.
    expect(decideResume(packet, answer(packet, { action: 'approve', pending_digest: undefined }), operator)).toMatchObject({
      ok: false,
      error: { code: 'stale_answer' },
    });
  });

  it('answered packet refused: a packet already answered refuses every further answer, and says when it is the same answer redelivered', () => {
    const packet = stop();
    const first = answer(packet, { action: 'deny' });
    const answered = markAnswered(packet, first);
    expect(answered.status).toBe('answered');
    expect(StopPacketSchema.safeParse(answered).success).toBe(true);
    expect(decideResume(answered, first, operator)).toMatchObject({ ok: false, error: { code: 'stop_already_answered', details: { same_answer: true } } });
    expect(decideResume(answered, answer(packet, { action: 'approve', answer_id: 'ans-2' }), operator)).toMatchObject({
      ok: false,
      error: { code: 'stop_already_answered', kind: 'wrong_state' },
    });
    // The first answer stands.
    expect(markAnswered(answered, answer(packet, { action: 'approve', answer_id: 'ans-2' })).answer?.action).toBe('deny');
  });

  it("an action that does not fit the packet's form is refused", () => {
    const policy = stop();
    expect(decideResume(policy, answer(policy, { action: 'raise_cap', cap: 100 }), operator)).toMatchObject({
      ok: false,
      error: { code: 'answer_not_allowed' },
    });
    expect(decideResume(policy, answer(policy, { action: 'intent', intent: 'billing' }), operator)).toMatchObject({
      ok: false,
      error: { code: 'answer_not_allowed' },
    });
    const ack = stop({ why: 'thrash', pending: null });
    expect(allowedActions(ack)).toEqual(['acknowledge']);
    expect(decideResume(ack, answer(ack, { action: 'approve', pending_digest: undefined }), operator)).toMatchObject({
      ok: false,
      error: { code: 'answer_not_allowed' },
    });
    expect(decideResume(ack, answer(ack, { action: 'acknowledge', pending_digest: undefined }), operator)).toMatchObject({
      ok: true,
      effect: { kind: 'stop' },
    });
  });

  it('acknowledge ends the run: its stop reason says so and names who took the work, never that the run stays stopped', () => {
    const ack = stop({ why: 'guard_failed', pending: null });
    const decided = decideResume(ack, answer(ack, { action: 'acknowledge', pending_digest: undefined, note: 'taking it from here' }), operator);
    expect(decided).toMatchObject({ ok: true, effect: { kind: 'stop' } });
    const reason = decided.ok && decided.effect.kind === 'stop' ? decided.effect.reason : '';
    expect(reason).toMatch(/^acknowledged by \S+; the run ends, a person has taken the work/);
    expect(reason).toContain('taking it from here');
    expect(reason).not.toMatch(/stays stopped/);
  });

  it('an answer for another packet is refused', () => {
    const packet = stop();
    expect(decideResume(packet, answer(packet, { packet_id: 'pkt-2' }), operator)).toMatchObject({ ok: false, error: { code: 'answer_packet_mismatch' } });
  });

  it('a completion handback form accepts (continue) or reworks with a note (back to the agent as a human decision)', () => {
    const base = stop({ why: 'guard_failed', pending: null });
    const packet: StopPacket = {
      ...base,
      next_form: {
        kind: 'accept_rework',
        title: 'Handback — accept or rework',
        prompt: 'Accept takes the work; Rework sends it back.',
        fields: [],
        actions: [
          { id: 'accept', label: 'Accept', style: 'primary' },
          { id: 'rework', label: 'Rework', style: 'default' },
        ],
      },
    };
    expect(decideResume(packet, answer(packet, { action: 'accept', pending_digest: undefined }), operator)).toEqual({ ok: true, effect: { kind: 'continue' } });
    expect(decideResume(packet, answer(packet, { action: 'rework', note: 'add the tests', pending_digest: undefined }), operator)).toEqual({
      ok: true,
      effect: { kind: 'reroute', intent: 'rework', origin: 'human', reason: 'add the tests' },
    });
    expect(decideResume(packet, answer(packet, { action: 'rework', note: ' ', pending_digest: undefined }), operator)).toMatchObject({
      ok: false,
      error: { code: 'answer_incomplete' },
    });
  });

  it('do not mark the user goal done: no why and no allowed answer yields an effect that completes the goal', () => {
    for (const why of StopWhySchema.options) {
      for (const pending of [null, { name: 'refund', args: { amount: 40 } }]) {
        const packet = stop({ why, pending, intents: undefined, cap: { name: 'steps', limit: 1 } });
        expect(goalDone(packet)).toBe(false);
        for (const action of allowedActions(packet)) {
          const reply = answer(packet, { action, intent: 'billing', cap: 2, note: 'ok' });
          expect(OperatorAnswerSchema.safeParse(reply).success).toBe(true);
          const result = decideResume(packet, reply, operator);
          expect(result.ok).toBe(true);
          if (!result.ok) continue;
          expect(ResumeEffectSchema.safeParse(result.effect).success).toBe(true);
          expect(['reroute', 'run_pending_call', 'stop', 'raise_cap', 'continue']).toContain(result.effect.kind);
          const answered = markAnswered(packet, reply);
          expect(answered.goal_done).toBe(false);
          expect(goalDone(answered)).toBe(false);
        }
      }
    }
  });
});
