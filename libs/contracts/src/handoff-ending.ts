import type { HandoffStatus } from './handoff';

/*
 * How a handoff got out of reach of a claim on it, as a refusal says it. A claim-bound command (a
 * heartbeat, a return, a claim) on a handoff that is not in the status it needs is refused
 * `wrong_state` with `details.status`; when the handoff has ended — or was returned for its review —
 * the refusal names how, in `details.ended`, from the handoff's own state (never from a message's
 * words). An agent whose claim was taken away reads it to tell "claim it again once it is offered"
 * (the handoff is open: no `ended`) from "nothing to claim again" (docs/handoffs.md rule 3a).
 */

/** The values of a refusal's `details.ended` (docs/errors.md, section 2). A newer ledger may add one: read an unknown value as "ended". */
export const HandoffEndings = [
  /** It failed at its deadline (`handoff.deadline_expired`: terminal_reason `deadline`, at or after `deadline_at`). */
  'deadline_passed',
  /** It reached its retry cap and was failed and escalated (`handoff.escalated`: `escalation_outcome`). */
  'handoff_escalated',
  /** Someone failed it (its claimer, a person, the give-up of its offer). */
  'handoff_failed',
  'handoff_abandoned',
  'handoff_released',
  'handoff_completed',
  /** Its work was returned: the review of its completion handback decides what follows (a rework offers it again, as a new round). */
  'handoff_returned',
  'handoff_archived',
] as const;
export type HandoffEnding = (typeof HandoffEndings)[number];

/** The fields of a handoff (its record, or the ledger's folded state) that say how it ended. */
export interface HandoffEndingFacts {
  status: HandoffStatus;
  terminal_reason?: string | undefined;
  escalation_outcome?: unknown;
  deadline_at?: string | undefined;
  updated_at: string;
}

/** The terminal reason the fold of `handoff.deadline_expired` writes. */
export const DEADLINE_TERMINAL_REASON = 'deadline';

/**
 * How `handoff` got out of reach of a claim, or null while it is open (`pending`, `claimed`). A
 * failure counts as its deadline's only when it is the deadline's own (terminal_reason `deadline`,
 * stored at or after `deadline_at`): someone's fail that merely says "deadline" earlier is a failure.
 */
export function handoffEnding(handoff: HandoffEndingFacts): HandoffEnding | null {
  switch (handoff.status) {
    case 'pending':
    case 'claimed':
      return null;
    case 'failed': {
      if (handoff.escalation_outcome !== undefined) return 'handoff_escalated';
      const deadline = handoff.deadline_at;
      const atDeadline = deadline !== undefined && Date.parse(handoff.updated_at) >= Date.parse(deadline);
      return handoff.terminal_reason === DEADLINE_TERMINAL_REASON && atDeadline ? 'deadline_passed' : 'handoff_failed';
    }
    case 'abandoned':
      return 'handoff_abandoned';
    case 'released':
      return 'handoff_released';
    case 'completed':
      return 'handoff_completed';
    case 'returned':
      return 'handoff_returned';
    case 'archived':
      return 'handoff_archived';
    default: {
      const never: never = handoff.status;
      return never;
    }
  }
}
