import { NextFormActionsByKind, NextFormSchema, StopPacketSchema, StopWhy, StopWhySchema } from '@baton/contracts';
import { buildStop, StopFacts } from './build-stop';
import { pendingDigest } from './pending';

function facts(overrides: Partial<StopFacts> = {}): StopFacts {
  return {
    packet_id: 'pkt-1',
    now: '2025-03-01T10:00:00.000Z',
    why: 'policy',
    tried: ['router', { name: 'lookup_order', trace_id: 'tr-1' }],
    pending: null,
    run_id: 'run-1',
    workflow_run_id: 'wfr-1',
    project: 'shop',
    agent: 'billing',
    step: 'refund',
    ...overrides,
  };
}

describe('buildStop — the stop packet (seed 003)', () => {
  it('why is an enum: the closed set unknown_intent, policy, budget, parse_fail, thrash, circuit_open, banned_click, guard_failed', () => {
    expect(StopWhySchema.options).toEqual(['unknown_intent', 'policy', 'budget', 'parse_fail', 'thrash', 'circuit_open', 'banned_click', 'guard_failed']);
    expect(Object.values(StopWhy).sort()).toEqual([...StopWhySchema.options].sort());
    expect(StopWhySchema.safeParse('crash').success).toBe(false);
    expect(StopWhySchema.safeParse('other').success).toBe(false);
  });

  it('unknown intent hands off with no pending tool', () => {
    const { packet, operatorForm } = buildStop(facts({ why: 'unknown_intent', tried: [], pending: undefined }));
    expect(packet.stop).toBe('handoff');
    expect(packet.why).toBe('unknown_intent');
    expect(packet.pending).toBeNull();
    expect(packet.pending_digest).toBeNull();
    expect(operatorForm?.kind).toBe('type_intent');
    // "If tried is empty, you handed off before the loop — still valid for unknown_intent at the router."
    expect(packet.tried).toEqual([]);
    expect(StopPacketSchema.safeParse(packet).success).toBe(true);
  });

  it('do not invent a refund to attach: with no pending tool, pending is null for every why', () => {
    for (const why of StopWhySchema.options) {
      const { packet, operatorForm } = buildStop(facts({ why, pending: null }));
      expect(packet.pending).toBeNull();
      expect(operatorForm?.kind).not.toBe('approve_deny');
    }
  });

  it('policy handoff keeps frozen refund args', () => {
    const pending = { name: 'refund', args: { amount: 40, order_id: 99 }, call_id: 'call-7' };
    const { packet, operatorForm } = buildStop(facts({ why: 'policy', pending }));
    expect(packet.pending).toEqual({ name: 'refund', args: { amount: 40, order_id: 99 }, call_id: 'call-7' });
    expect(packet.pending_digest).toBe(pendingDigest(pending));
    expect(operatorForm?.kind).toBe('approve_deny');
    expect(operatorForm?.pending_digest).toBe(packet.pending_digest);
    // "Refund 40 on 99, approve or deny" is a next action: the title names the frozen call.
    expect(operatorForm?.title).toBe('refund amount=40 order_id=99 — approve or deny');
    expect(StopPacketSchema.safeParse(packet).success).toBe(true);
  });

  it("pending is a deep frozen copy: mutating the caller's args afterwards does not change the packet, and the copy cannot be mutated", () => {
    const args = { amount: 40, order: { id: 99, lines: [{ sku: 'a', qty: 1 }] } };
    const pending = { name: 'refund', args };
    const { packet } = buildStop(facts({ pending }));
    const digestBefore = packet.pending_digest;

    args.amount = 4000;
    args.order.id = 1;
    args.order.lines[0]!.qty = 50;
    args.order.lines.push({ sku: 'b', qty: 9 });
    pending.name = 'wire_transfer';

    expect(packet.pending).toEqual({ name: 'refund', args: { amount: 40, order: { id: 99, lines: [{ sku: 'a', qty: 1 }] } } });
    expect(packet.pending!.args).not.toBe(args);
    expect(Object.isFrozen(packet.pending)).toBe(true);
    expect(Object.isFrozen(packet.pending!.args)).toBe(true);
    const order = packet.pending!.args['order'] as { lines: Array<{ qty: number }> };
    expect(Object.isFrozen(order)).toBe(true);
    expect(Object.isFrozen(order.lines)).toBe(true);
    expect(Object.isFrozen(order.lines[0])).toBe(true);
    expect(() => {
      (packet.pending!.args as Record<string, unknown>)['amount'] = 1;
    }).toThrow(TypeError);
    expect(pendingDigest(packet.pending)).toBe(digestBefore);
  });

  it('budget stop keeps a real freeze: do not drop a real freeze because the why was budget', () => {
    const pending = { name: 'search', args: { q: 'order 99' } };
    const { packet, operatorForm } = buildStop(facts({ why: 'budget', pending, cap: { name: 'tool_calls', limit: 8, used: 8 } }));
    expect(packet.pending).toEqual({ name: 'search', args: { q: 'order 99' } });
    expect(Object.isFrozen(packet.pending)).toBe(true);
    expect(packet.pending_digest).toBe(pendingDigest(pending));
    expect(operatorForm?.kind).toBe('raise_cap');
    expect(packet.cap).toEqual({ name: 'tool_calls', limit: 8, used: 8 });
  });

  it("tried is copied so later mutation of the caller's list does not rewrite the packet", () => {
    const tried: Array<string | { name: string; trace_id?: string }> = ['router', 'search', { name: 'search', trace_id: 'tr-9' }];
    const { packet } = buildStop(facts({ why: 'thrash', tried }));
    tried.push('refund');
    tried[0] = 'rewritten';
    (tried[2] as { name: string }).name = 'changed';

    expect(packet.tried).toEqual(['router', 'search', 'search']);
    expect(packet.trace_ids).toEqual(['tr-9']);
    expect(packet.tried).not.toBe(tried);
    expect(Object.isFrozen(packet.tried)).toBe(true);
  });

  it('tried is a short list of names, not the trace: trace ids are links kept apart', () => {
    const { packet } = buildStop(
      facts({
        why: 'thrash',
        tried: [
          { name: 'router', trace_id: 'tr-1' },
          { name: 'search', trace_id: 'tr-2' },
          { name: 'search', trace_id: 'tr-2' },
        ],
        trace_ids: ['tr-3'],
      }),
    );
    expect(packet.tried).toEqual(['router', 'search', 'search']);
    expect(packet.trace_ids).toEqual(['tr-1', 'tr-2', 'tr-3']);
  });

  it('the user message does not say "crash": the last print is False', () => {
    for (const why of StopWhySchema.options) {
      const { userMessage, packet } = buildStop(
        facts({ why, detail: 'Error: the AI crashed\n    at refund (agent.js:10:3)', tried: ['CRASH_HANDLER', 'crash-report'] }),
      );
      expect(userMessage.toLowerCase().includes('crash')).toBe(false);
      expect(packet.user_msg).toBe(userMessage);
    }
  });

  it('user copy is one or two sentences: a person will take this; you are not blocked on the model', () => {
    for (const why of StopWhySchema.options) {
      const { userMessage } = buildStop(facts({ why }));
      const sentences = userMessage.split(/(?<=\.)\s+/).filter((s) => s.length > 0);
      expect(sentences.length).toBeGreaterThanOrEqual(1);
      expect(sentences.length).toBeLessThanOrEqual(2);
      expect(userMessage).toMatch(/a person will take/i);
      expect(userMessage).toMatch(/not blocked on the model/i);
    }
  });

  it('no chain of thought, no detail and no agent text reach the user message', () => {
    const detail = 'I think the customer is lying so I will refund anyway';
    const { userMessage, packet } = buildStop(facts({ why: 'guard_failed', detail, tried: ['secret_tool_name'] }));
    expect(userMessage).not.toContain('lying');
    expect(userMessage).not.toContain('secret_tool_name');
    expect(packet.detail).toBe(detail); // operators still get it
  });

  it('the form is one form with buttons: each why gets exactly one form whose buttons are those of its kind', () => {
    const pending = { name: 'click', args: { cell: 'Pay' } };
    const expected: Record<string, string> = {
      unknown_intent: 'type_intent',
      policy: 'approve_deny',
      budget: 'raise_cap',
      parse_fail: 'approve_deny',
      thrash: 'approve_deny',
      circuit_open: 'approve_deny',
      banned_click: 'approve_deny',
      guard_failed: 'approve_deny',
    };
    for (const why of StopWhySchema.options) {
      const { operatorForm, packet } = buildStop(facts({ why, pending }));
      expect(operatorForm).not.toBeNull();
      expect(packet.next_form).toEqual(operatorForm);
      expect(operatorForm!.kind).toBe(expected[why]);
      expect(operatorForm!.actions.map((a) => a.id)).toEqual([...NextFormActionsByKind[operatorForm!.kind]]);
      expect(operatorForm!.actions.every((a) => a.label.length > 0)).toBe(true);
      expect(operatorForm!.title.length).toBeGreaterThan(0);
      expect(NextFormSchema.safeParse(operatorForm).success).toBe(true);
    }
  });

  it('handoff without a form to decide still needs a why and a tried: acknowledge shows both', () => {
    const { operatorForm } = buildStop(facts({ why: 'circuit_open', pending: null, tried: ['router', 'payments_api'] }));
    expect(operatorForm?.kind).toBe('acknowledge');
    expect(operatorForm?.fields.find((f) => f.id === 'why')?.value).toBe('circuit_open');
    expect(operatorForm?.fields.find((f) => f.id === 'tried')?.value).toBe('router, payments_api');
    expect(operatorForm?.actions.map((a) => a.id)).toEqual(['acknowledge']);
  });

  it('the acknowledge form says what acknowledging does: the run ends, a person has taken the work (it does not stay stopped)', () => {
    const { operatorForm } = buildStop(facts({ why: 'thrash', pending: null }));
    expect(operatorForm?.prompt).toMatch(/the run ends/);
    expect(operatorForm?.prompt).toMatch(/a person has taken the work/);
    expect(operatorForm?.prompt).not.toMatch(/stays stopped/);
  });

  it("the unknown-intent form offers the router's kinds as a select when it has them", () => {
    const { operatorForm } = buildStop(facts({ why: 'unknown_intent', intents: ['billing', 'shipping', 'billing'] }));
    const field = operatorForm!.fields.find((f) => f.id === 'intent')!;
    expect(field.kind).toBe('select');
    expect(field.options).toEqual(['billing', 'shipping']);
    const typed = buildStop(facts({ why: 'unknown_intent' })).operatorForm!.fields.find((f) => f.id === 'intent')!;
    expect(typed.kind).toBe('text');
  });

  it('the raise_cap form asks for a number above the current cap', () => {
    const { operatorForm } = buildStop(facts({ why: 'budget', cap: { name: 'steps', limit: 20, used: 20 } }));
    const field = operatorForm!.fields.find((f) => f.id === 'cap')!;
    expect(field.kind).toBe('number');
    expect(field.required).toBe(true);
    expect(field.greater_than).toBe(20);
    // A run's cap has no upper bound and may be fractional (a budget in money, say).
    expect(field.at_most).toBeUndefined();
    expect(field.whole).toBeUndefined();
  });

  it('every form an operator can answer with a note offers the note field (type_intent and raise_cap as approve_deny and acknowledge)', () => {
    for (const why of StopWhySchema.options) {
      const { operatorForm } = buildStop(facts({ why, cap: { name: 'steps', limit: 20, used: 20 } }));
      expect({ why, kinds: operatorForm!.fields.map((f) => f.kind) }).toEqual({ why, kinds: expect.arrayContaining(['note']) });
    }
  });

  it('do not mark the user goal done: every packet stores goal_done false and starts open', () => {
    for (const why of StopWhySchema.options) {
      const { packet } = buildStop(facts({ why }));
      expect(packet.goal_done).toBe(false);
      expect(packet.status).toBe('open');
      expect(packet.answer).toBeUndefined();
    }
    const { packet } = buildStop(facts());
    expect(StopPacketSchema.safeParse({ ...packet, goal_done: true }).success).toBe(false);
  });

  it('build the three from one function: the packet embeds the same user message and form it returns, and is frozen', () => {
    const docs = buildStop(facts({ why: 'policy', pending: { name: 'refund', args: { amount: 40 } } }));
    expect(docs.packet.user_msg).toBe(docs.userMessage);
    expect(docs.packet.next_form).toBe(docs.operatorForm);
    expect(Object.isFrozen(docs.packet)).toBe(true);
    expect(Object.isFrozen(docs.operatorForm)).toBe(true);
    expect(docs.packet.created_at).toBe('2025-03-01T10:00:00.000Z');
  });

  it('is deterministic: the same facts build the same documents', () => {
    const f = facts({ why: 'policy', pending: { name: 'refund', args: { b: 1, a: [1, 2] } } });
    expect(buildStop(f)).toEqual(buildStop(f));
  });
});
