import { NextForm, NextFormSchema, OperatorAnswerSchema, ResumeEffectSchema, StopPacket, StopPacketSchema } from './stop-packet';

const form: NextForm = {
  kind: 'approve_deny',
  title: 'refund amount=40 order_id=99 — approve or deny',
  prompt: 'Approve runs exactly this call once; deny stops the run.',
  fields: [{ id: 'call', kind: 'display', label: 'Frozen call', required: false, value: '{"name":"refund"}' }],
  actions: [
    { id: 'approve', label: 'Approve', style: 'primary' },
    { id: 'deny', label: 'Deny', style: 'danger' },
  ],
  pending_digest: 'fnv1a64:0123456789abcdef',
};

const packet: StopPacket = {
  stop: 'handoff',
  packet_id: 'pkt-1',
  why: 'policy',
  tried: ['router', 'lookup_order'],
  trace_ids: ['tr-1'],
  pending: { name: 'refund', args: { amount: 40, order_id: 99 } },
  pending_digest: 'fnv1a64:0123456789abcdef',
  run_id: 'run-1',
  workflow_run_id: 'wfr-1',
  project: 'shop',
  agent: 'billing',
  step: 'refund',
  user_msg: 'A person will take this from here. You are not blocked on the model.',
  next_form: form,
  goal_done: false,
  created_at: '2025-03-01T10:00:00.000Z',
  status: 'open',
};

const answer = {
  packet_id: 'pkt-1',
  answer_id: 'ans-1',
  action: 'approve' as const,
  pending_digest: 'fnv1a64:0123456789abcdef',
  answered_by: 'ops@example.com',
  answered_at: '2025-03-01T10:04:00.000Z',
};

describe('stop packet contracts (seed 003)', () => {
  it('a packet is JSON you can store: stop, why, tried, pending, run_id, step, user_msg, next_form', () => {
    expect(StopPacketSchema.parse(JSON.parse(JSON.stringify(packet)))).toEqual(packet);
  });

  it('stop is the string handoff and why is the closed enum', () => {
    expect(StopPacketSchema.safeParse({ ...packet, stop: 'success' }).success).toBe(false);
    expect(StopPacketSchema.safeParse({ ...packet, why: 'crash' }).success).toBe(false);
  });

  it('do not mark the user goal done: goal_done is always false', () => {
    expect(StopPacketSchema.safeParse({ ...packet, goal_done: true }).success).toBe(false);
    expect(StopPacketSchema.safeParse({ ...packet, goal_done: undefined }).success).toBe(false);
  });

  it('pending is the freeze object or null, and its digest is null exactly when it is', () => {
    expect(StopPacketSchema.safeParse({ ...packet, pending: null, pending_digest: null, next_form: null }).success).toBe(true);
    expect(StopPacketSchema.safeParse({ ...packet, pending: null }).success).toBe(false);
    expect(StopPacketSchema.safeParse({ ...packet, pending_digest: null }).success).toBe(false);
  });

  it('an answered packet carries its answer, an open one none', () => {
    expect(StopPacketSchema.safeParse({ ...packet, status: 'answered', answer }).success).toBe(true);
    expect(StopPacketSchema.safeParse({ ...packet, status: 'answered' }).success).toBe(false);
    expect(StopPacketSchema.safeParse({ ...packet, answer }).success).toBe(false);
    expect(StopPacketSchema.safeParse({ ...packet, status: 'answered', answer: { ...answer, packet_id: 'pkt-2' } }).success).toBe(false);
  });

  it('tried is a short list of names, not the trace array', () => {
    expect(StopPacketSchema.safeParse({ ...packet, tried: [{ name: 'router', rows: [1, 2, 3] }] }).success).toBe(false);
    expect(StopPacketSchema.safeParse({ ...packet, tried: Array.from({ length: 501 }, () => 'search') }).success).toBe(false);
  });

  it("the form is one form with buttons: a form's buttons are exactly those of its kind", () => {
    expect(NextFormSchema.safeParse(form).success).toBe(true);
    expect(NextFormSchema.safeParse({ ...form, actions: [form.actions[0]] }).success).toBe(false);
    expect(NextFormSchema.safeParse({ ...form, actions: [...form.actions, { id: 'raise_cap', label: 'Raise', style: 'default' }] }).success).toBe(false);
    expect(NextFormSchema.safeParse({ ...form, kind: 'acknowledge' }).success).toBe(false);
    expect(NextFormSchema.safeParse({ ...form, actions: [] }).success).toBe(false);
  });

  it('an operator answer carries what its action needs: intent for intent, cap for raise_cap, a note for rework', () => {
    expect(OperatorAnswerSchema.safeParse(answer).success).toBe(true);
    expect(OperatorAnswerSchema.safeParse({ ...answer, action: 'intent' }).success).toBe(false);
    expect(OperatorAnswerSchema.safeParse({ ...answer, action: 'intent', intent: 'billing' }).success).toBe(true);
    expect(OperatorAnswerSchema.safeParse({ ...answer, action: 'raise_cap' }).success).toBe(false);
    expect(OperatorAnswerSchema.safeParse({ ...answer, action: 'raise_cap', cap: -1 }).success).toBe(false);
    expect(OperatorAnswerSchema.safeParse({ ...answer, action: 'rework', note: '  ' }).success).toBe(false);
    expect(OperatorAnswerSchema.safeParse({ ...answer, action: 'complete' }).success).toBe(false);
  });

  it('no resume effect completes the goal', () => {
    expect(ResumeEffectSchema.options.map((o) => o.shape.kind.value).sort()).toEqual(['continue', 'raise_cap', 'reroute', 'run_pending_call', 'stop']);
    expect(ResumeEffectSchema.safeParse({ kind: 'complete' }).success).toBe(false);
    expect(ResumeEffectSchema.safeParse({ kind: 'reroute', intent: 'billing', origin: 'agent', reason: 'model guess' }).success).toBe(false);
  });
});
