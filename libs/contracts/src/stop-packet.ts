import { z } from 'zod';
import { PendingToolCallSchema, StopCapSchema } from './agent-result';
import { AgentNameSchema, IdSchema, IsoTimeSchema, Limits, ProjectIdSchema, ShortTextSchema } from './common';

// The stop packet (seed 003, "Handoff Is a First-Class Stop"): a run that cannot or must not go on
// stops with `stop: 'handoff'` and a packet — why (a closed enum), what it tried (names + trace
// links), the frozen pending call if one was pending, a short user message, and ONE operator form.
// A handoff stop is success of control, never success of the user goal: `goal_done` is always false.

/** Why a run stopped for a person. A closed enum: operators filter on it; prose goes in `detail`. */
export const StopWhy = {
  /** The router could not name the kind of request (its unknown kind). */
  unknownIntent: 'unknown_intent',
  /** A rule forbids doing it without a person (e.g. an amount over a cap). */
  policy: 'policy',
  /** A run budget (steps, tool calls, tokens, cost) is spent. */
  budget: 'budget',
  /** The agent's output could not be parsed. */
  parseFail: 'parse_fail',
  /** The agent repeats itself (e.g. router, search, search). */
  thrash: 'thrash',
  /** A circuit breaker in front of a dependency is open. */
  circuitOpen: 'circuit_open',
  /** The agent tried a banned action (the banned Pay cell). */
  bannedClick: 'banned_click',
  /** A guard (validation, evidence floor, loop guard) failed. */
  guardFailed: 'guard_failed',
} as const;
export type StopWhy = (typeof StopWhy)[keyof typeof StopWhy];
export const StopWhySchema = z.enum(['unknown_intent', 'policy', 'budget', 'parse_fail', 'thrash', 'circuit_open', 'banned_click', 'guard_failed']);

/** The kinds of operator form. Each kind has a fixed set of buttons ({@link NextFormActionsByKind}). */
export const NextFormKind = {
  /** Shows the frozen call; approve runs exactly that call once, deny stops. */
  approveDeny: 'approve_deny',
  /** A person types (or picks) the kind of request; it re-enters the router as a human decision. */
  typeIntent: 'type_intent',
  /** An operator sets a new, higher cap; the model never asks for one. */
  raiseCap: 'raise_cap',
  /** A completion handback: accept it, or send it back for rework with a note. */
  acceptRework: 'accept_rework',
  /** Nothing to decide, but a person must look: the form still carries why and tried. */
  acknowledge: 'acknowledge',
} as const;
export type NextFormKind = (typeof NextFormKind)[keyof typeof NextFormKind];
export const NextFormKindSchema = z.enum(['approve_deny', 'type_intent', 'raise_cap', 'accept_rework', 'acknowledge']);

/** The buttons an operator can press (the `action` of an {@link OperatorAnswer}). */
export const OperatorAnswerAction = {
  approve: 'approve',
  deny: 'deny',
  intent: 'intent',
  raiseCap: 'raise_cap',
  accept: 'accept',
  rework: 'rework',
  acknowledge: 'acknowledge',
} as const;
export type OperatorAnswerAction = (typeof OperatorAnswerAction)[keyof typeof OperatorAnswerAction];
export const OperatorAnswerActionSchema = z.enum(['approve', 'deny', 'intent', 'raise_cap', 'accept', 'rework', 'acknowledge']);

/**
 * The buttons each form kind shows, and therefore the only answers it accepts. An answer whose
 * action is not in its packet's list is refused (`answer_not_allowed`).
 */
export const NextFormActionsByKind: Readonly<Record<NextFormKind, readonly OperatorAnswerAction[]>> = {
  approve_deny: ['approve', 'deny'],
  type_intent: ['intent', 'deny'],
  raise_cap: ['raise_cap', 'deny'],
  accept_rework: ['accept', 'rework'],
  acknowledge: ['acknowledge'],
};

/** The input kinds a form field can have. `display` is read-only (e.g. the frozen call). */
export const NextFormFieldKindSchema = z.enum(['display', 'text', 'select', 'number', 'note']);
export type NextFormFieldKind = z.infer<typeof NextFormFieldKindSchema>;

export const NextFormFieldSchema = z.strictObject({
  /** The answer property this field fills (`intent`, `cap`, `note`), or a display id. */
  id: z.string().min(1).max(64),
  kind: NextFormFieldKindSchema,
  label: z.string().min(1).max(200),
  required: z.boolean(),
  /** The shown value (display fields) or the current value (number fields). */
  value: z.union([z.string().max(Limits.maxShortText), z.number()]).optional(),
  /** The choices of a select field. */
  options: z.array(z.string().min(1).max(Limits.maxIdLength)).max(Limits.maxListItems).optional(),
  /** The exclusive lower bound of a number field (a raised cap must exceed the current one). */
  greater_than: z.number().optional(),
  /** The inclusive upper bound of a number field (a mesh's cap: at most 1000 turns). */
  at_most: z.number().optional(),
  /** A number field takes whole numbers only (a mesh's cap counts turns). */
  whole: z.boolean().optional(),
});
export type NextFormField = z.infer<typeof NextFormFieldSchema>;

export const NextFormActionSchema = z.strictObject({
  id: OperatorAnswerActionSchema,
  label: z.string().min(1).max(80),
  style: z.enum(['primary', 'danger', 'default']),
});
export type NextFormAction = z.infer<typeof NextFormActionSchema>;

/**
 * What the human should do next: one form with buttons, never prose ("Refund 40 on 99, approve
 * or deny", not "please look into this"). Its actions are exactly the buttons of its kind.
 */
export const NextFormSchema = z
  .strictObject({
    kind: NextFormKindSchema,
    title: z.string().min(1).max(300),
    /** One line telling the operator what each button does. */
    prompt: z.string().min(1).max(1_000),
    fields: z.array(NextFormFieldSchema).max(20),
    actions: z.array(NextFormActionSchema).min(1).max(4),
    /** Digest of the frozen call the form shows; the operator's answer echoes it (stale check). */
    pending_digest: z.string().min(1).max(200).optional(),
  })
  .superRefine((form, ctx) => {
    const expected = NextFormActionsByKind[form.kind];
    const ids = form.actions.map((a) => a.id);
    if (ids.length !== expected.length || !expected.every((id) => ids.includes(id))) {
      ctx.addIssue({ code: 'custom', path: ['actions'], message: `a ${form.kind} form has exactly the buttons ${expected.join(', ')}` });
    }
  });
export type NextForm = z.infer<typeof NextFormSchema>;

/**
 * What an operator submits to answer a stop packet. `answer_id` is the idempotency key.
 * `pending_digest` is the digest of the frozen call the operator saw; a mismatch is refused as
 * stale (fail closed), and approving a pending call requires it.
 */
export const OperatorAnswerSchema = z
  .strictObject({
    packet_id: IdSchema,
    answer_id: IdSchema,
    action: OperatorAnswerActionSchema,
    intent: z.string().min(1).max(Limits.maxIdLength).optional(),
    cap: z.number().finite().positive().optional(),
    note: ShortTextSchema.optional(),
    pending_digest: z.string().min(1).max(200).optional(),
    answered_by: z.string().min(1).max(200),
    answered_at: IsoTimeSchema,
  })
  .superRefine((answer, ctx) => {
    if (answer.action === 'intent' && answer.intent === undefined) {
      ctx.addIssue({ code: 'custom', path: ['intent'], message: 'an intent answer names the intent' });
    }
    if (answer.action === 'raise_cap' && answer.cap === undefined) {
      ctx.addIssue({ code: 'custom', path: ['cap'], message: 'a raise_cap answer names the new cap' });
    }
    if (answer.action === 'rework' && (answer.note === undefined || answer.note.trim() === '')) {
      ctx.addIssue({ code: 'custom', path: ['note'], message: 'a rework answer carries a note' });
    }
  })
  .meta({
    allOf: [
      { if: { properties: { action: { const: 'intent' } }, required: ['action'] }, then: { required: ['intent'] } },
      { if: { properties: { action: { const: 'raise_cap' } }, required: ['action'] }, then: { required: ['cap'] } },
      { if: { properties: { action: { const: 'rework' } }, required: ['action'] }, then: { required: ['note'], properties: { note: { pattern: '\\S' } } } },
    ],
  });
export type OperatorAnswer = z.infer<typeof OperatorAnswerSchema>;

export const StopPacketStatusSchema = z.enum(['open', 'answered']);
export type StopPacketStatus = z.infer<typeof StopPacketStatusSchema>;

/**
 * The stored stop packet. `tried` is a short list of tool / step names (not the trace); the trace
 * is linked by `trace_ids`. `pending` is the frozen call or null (never invented, never dropped).
 * `goal_done` is the literal false: a handoff stop never completes the user's goal.
 */
export const StopPacketSchema = z
  .strictObject({
    stop: z.literal('handoff'),
    packet_id: IdSchema,
    why: StopWhySchema,
    /** A short engine-written reason for operators (never shown to the user). */
    detail: ShortTextSchema.optional(),
    tried: z.array(z.string().min(1).max(200)).max(Limits.maxListItems),
    trace_ids: z.array(z.string().min(1).max(200)).max(Limits.maxListItems),
    pending: PendingToolCallSchema.nullable(),
    /** Digest of `pending` (null when nothing was pending); answers echo it. */
    pending_digest: z.string().min(1).max(200).nullable(),
    run_id: IdSchema,
    workflow_run_id: IdSchema,
    project: ProjectIdSchema,
    agent: AgentNameSchema,
    step: z.string().min(1).max(Limits.maxIdLength),
    user_msg: z.string().min(1).max(600),
    next_form: NextFormSchema.nullable(),
    cap: StopCapSchema.optional(),
    goal_done: z.literal(false),
    created_at: IsoTimeSchema,
    status: StopPacketStatusSchema,
    answer: OperatorAnswerSchema.optional(),
  })
  .superRefine((packet, ctx) => {
    if ((packet.pending === null) !== (packet.pending_digest === null)) {
      ctx.addIssue({ code: 'custom', path: ['pending_digest'], message: 'pending_digest is null exactly when pending is null' });
    }
    if ((packet.status === 'answered') !== (packet.answer !== undefined)) {
      ctx.addIssue({ code: 'custom', path: ['answer'], message: 'an answered packet carries its answer, an open one none' });
    }
    if (packet.answer !== undefined && packet.answer.packet_id !== packet.packet_id) {
      ctx.addIssue({ code: 'custom', path: ['answer', 'packet_id'], message: 'the answer belongs to another packet' });
    }
  })
  // What JSON Schema can say of the same invariants (the answer's packet_id matching is a check
  // across fields no schema expresses; docs/schemas/README.md lists such checks).
  .meta({
    allOf: [
      {
        anyOf: [
          { properties: { pending: { type: 'null' }, pending_digest: { type: 'null' } } },
          { properties: { pending: { type: 'object' }, pending_digest: { type: 'string' } } },
        ],
      },
      {
        anyOf: [
          { properties: { status: { const: 'answered' } }, required: ['answer'] },
          { properties: { status: { const: 'open' } }, not: { required: ['answer'] } },
        ],
      },
    ],
  });
export type StopPacket = z.infer<typeof StopPacketSchema>;

/**
 * What an operator's answer makes the stopped run do. There is deliberately no effect that
 * completes the user's goal: a handoff stop resumes, reroutes or stops — it never marks done.
 */
export const ResumeEffectSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('reroute'),
    /** The human-typed kind; it re-enters the router as a human decision, not a model guess. */
    intent: z.string().min(1).max(Limits.maxIdLength),
    origin: z.literal('human'),
    reason: ShortTextSchema,
  }),
  z.strictObject({ kind: z.literal('run_pending_call'), call: PendingToolCallSchema }),
  z.strictObject({ kind: z.literal('stop'), reason: ShortTextSchema }),
  z.strictObject({ kind: z.literal('raise_cap'), cap: z.number().finite().positive() }),
  z.strictObject({ kind: z.literal('continue') }),
]);
export type ResumeEffect = z.infer<typeof ResumeEffectSchema>;
