import { NextFormActionsByKind, OperatorAnswer, OperatorAnswerAction, ResumeEffect, StopPacket } from '@baton/contracts';
import { assertNever, DomainError, DomainErrorKind } from '../decider';
import { deepFreeze } from './freeze';
import { capAtMost, capFloor, clip } from './forms';
import { freezePending, pendingDigest } from './pending';

/** Who is answering. Only `operator` and `admin` are people allowed to resume a stopped run. */
export type ResumeActorRole = 'operator' | 'admin' | 'viewer' | 'agent';

export interface ResumeContext {
  /** ISO time the answer is decided at. */
  now: string;
  actorRole: ResumeActorRole;
}

export type ResumeDecision = { ok: true; effect: ResumeEffect } | { ok: false; error: DomainError };

/** Stable codes of the refusals {@link decideResume} can return. */
export const ResumeErrorCode = {
  answerPacketMismatch: 'answer_packet_mismatch',
  stopAlreadyAnswered: 'stop_already_answered',
  answerForbidden: 'answer_forbidden',
  answerNotAllowed: 'answer_not_allowed',
  staleAnswer: 'stale_answer',
  answerIncomplete: 'answer_incomplete',
  intentNotOffered: 'intent_not_offered',
  capNotRaised: 'cap_not_raised',
} as const;
export type ResumeErrorCode = (typeof ResumeErrorCode)[keyof typeof ResumeErrorCode];

const intentPattern = /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/;

/**
 * The buttons a packet accepts: those of its form's kind. A packet with no form accepts only
 * `acknowledge` (a person looked and has taken the work; the run ends).
 */
export function allowedActions(packet: StopPacket): readonly OperatorAnswerAction[] {
  return packet.next_form ? NextFormActionsByKind[packet.next_form.kind] : ['acknowledge'];
}

/**
 * Decides what an operator's answer does to a stopped run (seed 003 resume rules). Pure; it does
 * not change the packet — record the answer with {@link markAnswered} once the effect is applied.
 *
 * Refusals, in the order they are checked (each a typed {@link DomainError}, never thrown):
 * - `answer_packet_mismatch` — the answer names another packet;
 * - `stop_already_answered` — the packet was answered; `details.same_answer` is true when it is a
 *   redelivery of the very answer recorded (an edge may reply idempotently, never re-apply);
 * - `answer_forbidden` — the actor is not a person with the operator or admin role (agents and
 *   viewers never resume a stop; in particular only an operator raises a cap). The role, not the
 *   name, tells a person from an agent: an operator named like the stopped agent may answer;
 * - `answer_not_allowed` — the action is not a button of the packet's form (or approve with no call);
 * - `stale_answer` — `pending_digest` differs from the frozen call's digest, or an approve of a
 *   frozen call does not name the digest at all (fail closed);
 * - `answer_incomplete` / `intent_not_offered` / `cap_not_raised` — the fields of the answer.
 *
 * Effects: intent → `reroute` with `origin: 'human'` (a human decision, not a model guess); approve
 * → `run_pending_call` with exactly the frozen call; deny → `stop`; raise_cap → `raise_cap` with the
 * operator's cap (never one taken from the packet); accept → `continue`; rework → `reroute` with
 * intent `rework` and the note as reason; acknowledge → `stop`. No effect completes the user's goal.
 */
export function decideResume(packet: StopPacket, answer: OperatorAnswer, ctx: ResumeContext): ResumeDecision {
  if (answer.packet_id !== packet.packet_id) {
    return refuse(DomainErrorKind.invalid, 'answer_packet_mismatch', `the answer is for packet ${answer.packet_id}, not ${packet.packet_id}`);
  }
  if (packet.status === 'answered') {
    return refuse(DomainErrorKind.wrongState, 'stop_already_answered', `stop packet ${packet.packet_id} was already answered`, {
      same_answer: packet.answer?.answer_id === answer.answer_id,
    });
  }
  if (ctx.actorRole !== 'operator' && ctx.actorRole !== 'admin') {
    return refuse(DomainErrorKind.forbidden, 'answer_forbidden', `the role ${ctx.actorRole} may not answer a stop packet; only an operator resumes a stop`);
  }
  // The role is the actor's kind: only a person (an operator or admin token) gets this far, so
  // `answered_by` is a person's name. A person whose token is named like the stopped agent is not
  // that agent, and is not refused as if it were (an agent never holds an answering role).
  const allowed = allowedActions(packet);
  if (!allowed.includes(answer.action)) {
    return refuse(DomainErrorKind.invalid, 'answer_not_allowed', `this packet's form accepts ${allowed.join(', ')}, not ${answer.action}`, {
      allowed: [...allowed],
    });
  }
  const currentDigest = packet.pending ? pendingDigest(packet.pending) : null;
  if (answer.pending_digest !== undefined && answer.pending_digest !== currentDigest) {
    return refuse(DomainErrorKind.wrongState, 'stale_answer', 'the answer was made against a different pending call than the one frozen in the packet');
  }

  const action = answer.action;
  switch (action) {
    case 'approve': {
      if (!packet.pending) return refuse(DomainErrorKind.invalid, 'answer_not_allowed', 'there is no frozen call to approve');
      if (answer.pending_digest === undefined) {
        return refuse(DomainErrorKind.wrongState, 'stale_answer', 'an approve must name the digest of the frozen call it approves');
      }
      return effect({ kind: 'run_pending_call', call: freezePending(packet.pending) ?? packet.pending });
    }
    case 'deny':
      return effect({ kind: 'stop', reason: reasonWith(`denied by ${answer.answered_by} after ${aStop(packet.why)}`, answer.note) });
    case 'intent': {
      const intent = (answer.intent ?? '').trim();
      const field = packet.next_form?.fields.find((f) => f.id === 'intent');
      // A kind the form offers is taken as offered (an agent's name may start with _ or -); a typed
      // one is a name: letters or digits first, then letters, digits, _ . : -.
      const offered = field?.options?.includes(intent) === true;
      if (intent === '' || intent.length > 128 || (field?.options === undefined && !intentPattern.test(intent))) {
        return refuse(
          DomainErrorKind.invalid,
          'answer_incomplete',
          field?.options === undefined
            ? 'an intent answer names one kind: letters, digits and _ . : - starting with a letter or digit'
            : 'an intent answer names one of the kinds the form offers',
        );
      }
      if (field?.options && !offered) {
        return refuse(DomainErrorKind.invalid, 'intent_not_offered', `the intent ${intent} is not one of the kinds offered`, { offered: [...field.options] });
      }
      return effect({
        kind: 'reroute',
        intent,
        origin: 'human',
        reason: reasonWith(`human-typed intent from ${answer.answered_by} after ${aStop(packet.why)}`, answer.note),
      });
    }
    case 'raise_cap': {
      const cap = answer.cap;
      if (cap === undefined || !Number.isFinite(cap) || cap <= 0) {
        return refuse(DomainErrorKind.invalid, 'answer_incomplete', 'a raise_cap answer names a positive new cap');
      }
      if (packet.cap && cap <= capFloor(packet.cap)) {
        const used = packet.cap.used !== undefined && packet.cap.used > packet.cap.limit ? ` (${packet.cap.used} used)` : '';
        return refuse(
          DomainErrorKind.invalid,
          'cap_not_raised',
          `the new cap ${cap} does not exceed the current ${packet.cap.name} cap ${packet.cap.limit}${used}: it must be above ${capFloor(packet.cap)}`,
        );
      }
      // The limits the form states (a mesh's cap: whole, at most 1000) hold wherever the answer is
      // decided; the hop budget's most holds on packets stored before their form stated it.
      const field = packet.next_form?.fields.find((f) => f.id === 'cap');
      const atMost = capAtMost(packet.cap, field?.at_most);
      if ((field?.whole && !Number.isInteger(cap)) || (atMost !== undefined && cap > atMost)) {
        // Name the rule the value breaks: 1001 is a whole number, just over the most.
        const broken = [
          ...(field?.whole && !Number.isInteger(cap) ? ['is not a whole number'] : []),
          ...(atMost !== undefined && cap > atMost ? [`is over the most, ${atMost}`] : []),
        ];
        return refuse(DomainErrorKind.invalid, 'answer_incomplete', `the new cap ${cap} ${broken.join(' and ')}`);
      }
      return effect({ kind: 'raise_cap', cap });
    }
    case 'accept':
      return effect({ kind: 'continue' });
    case 'rework': {
      const note = (answer.note ?? '').trim();
      if (note === '') return refuse(DomainErrorKind.invalid, 'answer_incomplete', 'a rework answer carries a note');
      return effect({ kind: 'reroute', intent: 'rework', origin: 'human', reason: clip(note, 4_000) });
    }
    case 'acknowledge':
      return effect({ kind: 'stop', reason: reasonWith(`acknowledged by ${answer.answered_by}; the run ends, a person has taken the work`, answer.note) });
    default:
      return assertNever(action, 'operator answer action');
  }
}

/**
 * The packet once answered: a new deep-frozen packet with `status: 'answered'` and a copy of the
 * answer. Call it only after {@link decideResume} accepted the answer; answering an answered packet
 * returns it unchanged (the first answer stands).
 */
export function markAnswered(packet: StopPacket, answer: OperatorAnswer): StopPacket {
  if (packet.status === 'answered') return packet;
  return deepFreeze({ ...packet, status: 'answered', answer: { ...answer } });
}

/**
 * Whether a stop completed the user's goal: always false. A handoff stop is success of control,
 * not of the goal; the packet stores `goal_done: false` and no resume effect completes a goal.
 */
export function goalDone(packet: Pick<StopPacket, 'goal_done'>): false {
  return packet.goal_done;
}

function effect(value: ResumeEffect): ResumeDecision {
  return { ok: true, effect: deepFreeze(value) };
}

function refuse(kind: DomainErrorKind, code: ResumeErrorCode, message: string, details?: Record<string, unknown>): ResumeDecision {
  return { ok: false, error: details ? { code, kind, message, details } : { code, kind, message } };
}

function reasonWith(base: string, note: string | undefined): string {
  const trimmed = note?.trim();
  return clip(trimmed ? `${base}: ${trimmed}` : base, 4_000);
}

/** `a policy stop`, `an unknown_intent stop`: the stop's why with its article, as a reason reads it. */
function aStop(why: string): string {
  return `${/^[aeiou]/.test(why) ? 'an' : 'a'} ${why} stop`;
}
