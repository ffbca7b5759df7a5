import { Limits, NextForm, PendingToolCall, StopCap, StopPacket, StopWhy } from '@baton/contracts';
import { acknowledgeForm, approveDenyForm, clip, raiseCapForm, typeIntentForm } from './forms';
import { assertNever } from '../decider';
import { deepFreeze } from './freeze';
import { freezePending, pendingDigest } from './pending';

/** One entry of what a run tried: a tool / step name, or a name with the trace id that shows it. */
export type TriedEntry = string | { name: string; trace_id?: string };

/**
 * Where a stopped run's packet should go, as the run asks for it. Absent means the human queue.
 * A specialist is accepted only when it honours stop and runs on a budget of its own.
 */
export interface StopDestinationRequest {
  agent: string;
  /** The destination itself stops with a packet when it cannot finish (seed 003). */
  honors_stop: boolean;
  /** The specialist's own budget; absent or without a positive bound means unbounded (refused). */
  budget?: { max_steps?: number; max_tool_calls?: number; max_tokens?: number; max_cost_usd?: number } | null;
}

/** The run's facts at the moment it stops. Time and ids arrive here; buildStop reads no clock. */
export interface StopFacts {
  packet_id: string;
  /** ISO time of the stop; becomes `created_at`. */
  now: string;
  why: StopWhy;
  /** What the run tried, oldest first. Copied; later mutation of the caller's list changes nothing. */
  tried: readonly TriedEntry[];
  /** Extra trace links beyond those carried by `tried` entries. */
  trace_ids?: readonly string[];
  /** The tool call that was pending, or null / undefined when none was. Deep-frozen into the packet. */
  pending?: PendingToolCall | null;
  run_id: string;
  workflow_run_id: string;
  project: string;
  agent: string;
  step: string;
  /** A short engine-written reason for operators. Never shown to the user. */
  detail?: string;
  /** The cap a budget stop hit. */
  cap?: StopCap;
  /** Kinds the router knows, offered as choices on the type_intent form. */
  intents?: readonly string[];
  /** Where the packet should go; see {@link stopDestination}. */
  destination?: StopDestinationRequest;
}

/** The three documents of one stop, built together so none is ever missing (seed 003). */
export interface StopDocuments {
  /** The stored packet (status `open`); it embeds the user message and the form. */
  packet: StopPacket;
  /** One or two sentences for the user: a person will take this; not blocked on the model. */
  userMessage: string;
  /** The one form the operator answers (the same object as `packet.next_form`). */
  operatorForm: NextForm | null;
}

/**
 * The user-facing copy, per why. Fixed sentences: nothing from the run (no detail, no agent text,
 * no model thought, no trace) is ever interpolated, so nothing can leak to the user, and none says
 * "crash" — the user is waiting on a person, not blocked on a stack trace.
 */
export const StopUserMessages: Readonly<Record<StopWhy, string>> = {
  unknown_intent:
    'We could not tell what kind of request this is, so a person will take it from here. You are not blocked on the model; someone will follow up.',
  policy: 'This needs a person to approve it before it can go ahead, and a person will take it from here. You are not blocked on the model.',
  budget: 'This request needs more work than it may do on its own, so a person will take it from here. You are not blocked on the model.',
  parse_fail: 'A person will take this from here. You are not blocked on the model; someone will follow up.',
  thrash: 'A person will take this from here. You are not blocked on the model; someone will follow up.',
  circuit_open: 'A service this request needs is not available right now, so a person will take it from here. You are not blocked on the model.',
  banned_click: 'This step needs a person, so a person will take it from here. You are not blocked on the model.',
  guard_failed: 'A person will take this from here. You are not blocked on the model; someone will follow up.',
};

/**
 * Builds the three documents of a handoff stop from one set of facts: the stored packet, the
 * short user message and the operator's one form. Pure and deterministic.
 *
 * - `tried` is copied into a list of names; trace ids go to `trace_ids` (deduplicated, in order),
 *   never rows of the trace. Names are clipped to 200 characters and the list keeps the latest
 *   500 entries (the trace links hold the rest).
 * - `pending` is a deep frozen copy of the pending call, or null when none was pending: a call is
 *   never invented and a real one is never dropped, whatever the why (budget included).
 * - The form per why: unknown_intent → type_intent; budget → raise_cap; policy and every other why
 *   → approve_deny when a call is pending, else acknowledge.
 * - `goal_done` is false: a handoff stop is success of control, not of the user's goal.
 *
 * The packet is returned deep-frozen; answering it goes through {@link markAnswered}.
 */
export function buildStop(facts: StopFacts): StopDocuments {
  const tried: string[] = [];
  const traceIds: string[] = [];
  for (const entry of facts.tried) {
    const name = typeof entry === 'string' ? entry : entry.name;
    if (name.length > 0) tried.push(clip(name, 200));
    if (typeof entry !== 'string' && entry.trace_id) traceIds.push(entry.trace_id);
  }
  for (const id of facts.trace_ids ?? []) traceIds.push(id);
  const links = [...new Set(traceIds.filter((id) => id.length > 0).map((id) => clip(id, 200)))].slice(-Limits.maxListItems);
  const triedKept = tried.slice(-Limits.maxListItems);

  const pending = freezePending(facts.pending);
  const digest = pending ? pendingDigest(pending) : null;
  const detail = facts.detail ? clip(facts.detail, Limits.maxShortText) : undefined;
  const userMessage = StopUserMessages[facts.why];
  const operatorForm = formFor(facts, pending, digest, triedKept, detail);

  const packet: StopPacket = {
    stop: 'handoff',
    packet_id: facts.packet_id,
    why: facts.why,
    ...(detail !== undefined ? { detail } : {}),
    tried: triedKept,
    trace_ids: links,
    pending,
    pending_digest: digest,
    run_id: facts.run_id,
    workflow_run_id: facts.workflow_run_id,
    project: facts.project,
    agent: facts.agent,
    step: facts.step,
    user_msg: userMessage,
    next_form: operatorForm,
    ...(facts.cap !== undefined ? { cap: { ...facts.cap } } : {}),
    goal_done: false,
    created_at: facts.now,
    status: 'open',
  };
  const frozen = deepFreeze(packet);
  return { packet: frozen, userMessage, operatorForm: frozen.next_form };
}

function formFor(facts: StopFacts, pending: PendingToolCall | null, digest: string | null, tried: readonly string[], detail: string | undefined): NextForm {
  switch (facts.why) {
    case 'unknown_intent':
      return typeIntentForm(facts.intents, detail, pending);
    case 'budget':
      return raiseCapForm(facts.cap, detail, {}, pending);
    case 'policy':
    case 'parse_fail':
    case 'thrash':
    case 'circuit_open':
    case 'banned_click':
    case 'guard_failed':
      return pending && digest ? approveDenyForm(pending, digest, facts.why, detail) : acknowledgeForm(facts.why, tried, detail);
    default:
      return assertNever(facts.why, 'stop why');
  }
}
