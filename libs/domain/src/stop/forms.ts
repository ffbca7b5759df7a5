import { clipText, Limits, NextForm, NextFormField, PendingToolCall, StopCap, StopWhy } from '@baton/contracts';
import { stableStringify } from './freeze';

// One form per stop, buttons not prose (seed 003: "Refund 40 on 99, approve or deny" is a next
// action; "please look into this" is a shrug). Every text here is built from the run's facts for
// the OPERATOR; none of it is ever shown to the user.

const titleMax = 300;

/** Operator-facing words for each why. */
export const StopWhyLabel: Readonly<Record<StopWhy, string>> = {
  unknown_intent: 'unknown intent',
  policy: 'policy',
  budget: 'budget spent',
  parse_fail: 'output could not be parsed',
  thrash: 'thrashing (repeated the same steps)',
  circuit_open: 'circuit open',
  banned_click: 'banned action',
  guard_failed: 'guard failed',
};

/**
 * The approve / deny form for a frozen call: the title names the call and its arguments
 * (`refund amount=40 order_id=99 — approve or deny`), a read-only field shows the exact call, and
 * `pending_digest` travels with the form so the answer can prove which call it approves.
 */
/**
 * The frozen call shown read-only on a form that does not decide it (type_intent, raise_cap): the
 * operator sees what the run was about to do; the answer hands it on, not approved.
 */
function frozenCallField(pending: PendingToolCall | null | undefined, label = 'Frozen call (handed on with the run, not approved)'): NextFormField[] {
  if (!pending) return [];
  return [
    {
      id: 'call',
      kind: 'display',
      label,
      required: false,
      value: clip(stableStringify(pending), Limits.maxShortText),
    },
  ];
}

export function approveDenyForm(pending: PendingToolCall, digest: string, why: StopWhy, detail?: string): NextForm {
  return {
    kind: 'approve_deny',
    title: clip(`${callSummary(pending)} — approve or deny`, titleMax),
    prompt: `The run stopped (${StopWhyLabel[why]}) before calling ${clip(pending.name, 200)}. Approve runs exactly this call once; deny stops the run.`,
    fields: [...frozenCallField(pending, 'Frozen call'), ...detailField(detail), { id: 'note', kind: 'note', label: 'Note (optional)', required: false }],
    actions: [
      { id: 'approve', label: 'Approve', style: 'primary' },
      { id: 'deny', label: 'Deny', style: 'danger' },
    ],
    pending_digest: digest,
  };
}

/**
 * The form for an unknown intent: one field where a person types the kind (or picks one of
 * `intents` when the router offers a list). The typed kind re-enters the router as a human
 * decision. Close stops the run. A call the agent had pending is shown, and goes with the work
 * to the kind the person names (`pending_call`), not approved.
 */
export function typeIntentForm(intents: readonly string[] | undefined, detail?: string, pending?: PendingToolCall | null): NextForm {
  const options = intents && intents.length > 0 ? [...new Set(intents)].slice(0, Limits.maxListItems) : undefined;
  const field: NextFormField = options
    ? { id: 'intent', kind: 'select', label: 'Kind of request', required: true, options }
    : { id: 'intent', kind: 'text', label: 'Kind of request', required: true };
  return {
    kind: 'type_intent',
    title: 'Unknown intent — name the kind of request',
    prompt: pending
      ? `The router could not name the kind of this request. Give the kind and press Route; it re-enters the router as your decision, and the call the run was about to make (${clip(pending.name, 200)}, shown) goes with it, not approved. Close stops the run.`
      : 'The router could not name the kind of this request. Give the kind and press Route; it re-enters the router as your decision. Close stops the run.',
    fields: [field, ...frozenCallField(pending), ...detailField(detail), { id: 'note', kind: 'note', label: 'Note (optional)', required: false }],
    actions: [
      { id: 'intent', label: 'Route', style: 'primary' },
      { id: 'deny', label: 'Close', style: 'danger' },
    ],
  };
}

/**
 * The name of the hop budget's cap: the watchdog's hop-budget stop names it (`cap.name`), and only
 * a raise answering a packet that names it (or, for packets stored before stops named their cap, a
 * budget packet that names none) lifts the run's hop limit.
 */
export const HopCapName = 'hops';

/**
 * The most hops a run's budget may be raised to: what `WATCHDOG_MAX_HOPS` may be set to. An
 * operator's raise past it (a typo, `1e15`) would switch the loop guard off for the run.
 */
export const HOP_CAP_MAX = 100_000;

/** The most a cap may be raised to: a packet's form states it (`at_most`); the hop budget's is {@link HOP_CAP_MAX} on every packet. */
export function capAtMost(cap: StopCap | undefined, stated: number | undefined): number | undefined {
  return stated ?? (cap?.name === HopCapName ? HOP_CAP_MAX : undefined);
}

/**
 * What a raised cap must exceed: the cap's limit, and what was used when that is more (the
 * watchdog's hop budget stops at hop limit + 1, and resuming is the next hop: a raise up to the
 * hops already used would stop the run again at once, with no work done).
 */
export function capFloor(cap: StopCap): number {
  return Math.max(cap.limit, cap.used ?? cap.limit);
}

/** What a cap field's answer must also be, beyond exceeding the current cap: a mesh's is a whole number of at most 1000 turns. */
export interface CapBounds {
  atMost?: number;
  whole?: boolean;
}

/**
 * The form for a spent budget: a number field for the new cap, which must exceed the current
 * limit (and stay within `bounds`, which the form states so a person is not refused for a limit
 * they could not see). Only an operator may press Raise cap; the packet never raises it by itself.
 */
export function raiseCapForm(cap: StopCap | undefined, detail?: string, bounds: CapBounds = {}, pending?: PendingToolCall | null): NextForm {
  const shown = cap ? `${cap.name}: ${cap.used ?? cap.limit} used of ${cap.limit}` : undefined;
  // The hop budget counts hops: a whole number, like a mesh's turns; an agent's cap says so itself.
  const whole = bounds.whole === true || cap?.name === HopCapName || cap?.whole === true;
  const atMost = capAtMost(cap, bounds.atMost);
  const limits = {
    ...(atMost !== undefined ? { at_most: atMost } : {}),
    ...(whole ? { whole: true } : {}),
  };
  const floor = cap ? capFloor(cap) : 0;
  // Pre-filled with an answer the form takes: the floor raised by the spent cap again (another
  // budget of the same size), within `at_most`; none when nothing above the floor fits.
  const proposed = cap ? Math.min(floor + Math.max(1, whole ? Math.ceil(cap.limit) : cap.limit), atMost ?? Number.POSITIVE_INFINITY) : 0;
  const capField: NextFormField = cap
    ? {
        id: 'cap',
        kind: 'number',
        label: `New ${cap.name} cap`,
        required: true,
        ...(proposed > floor ? { value: proposed } : {}),
        greater_than: floor,
        ...limits,
      }
    : { id: 'cap', kind: 'number', label: 'New cap', required: true, greater_than: 0, ...limits };
  return {
    kind: 'raise_cap',
    title: clip(shown ? `Budget spent (${shown}) — raise the cap or stop` : 'Budget spent — raise the cap or stop', titleMax),
    prompt: 'Only an operator raises a cap. Set a higher cap and the run continues; Stop ends it.',
    fields: [
      ...(shown ? [{ id: 'current_cap', kind: 'display' as const, label: 'Current cap', required: false, value: shown }] : []),
      capField,
      ...frozenCallField(pending),
      ...detailField(detail),
      { id: 'note', kind: 'note', label: 'Note (optional)', required: false },
    ],
    actions: [
      { id: 'raise_cap', label: 'Raise cap', style: 'primary' },
      { id: 'deny', label: 'Stop', style: 'danger' },
    ],
  };
}

/**
 * The form for a stop with nothing to decide: it still says why and what was tried, so a person
 * can look (open the trace) and, if needed, make a form. Acknowledging ends the run (`stop`, which
 * the run aggregate records as `run.terminated`): a person has taken the work.
 */
export function acknowledgeForm(why: StopWhy, tried: readonly string[], detail?: string): NextForm {
  const triedText = tried.length > 0 ? tried.join(', ') : 'nothing (stopped before the loop)';
  return {
    kind: 'acknowledge',
    title: clip(`Stopped: ${StopWhyLabel[why]} — look and acknowledge`, titleMax),
    prompt: 'Open the trace to see what happened, then acknowledge; the run ends there: a person has taken the work.',
    fields: [
      { id: 'why', kind: 'display', label: 'Why', required: false, value: why },
      { id: 'tried', kind: 'display', label: 'Tried', required: false, value: clip(triedText, Limits.maxShortText) },
      ...detailField(detail),
      { id: 'note', kind: 'note', label: 'Note (optional)', required: false },
    ],
    actions: [{ id: 'acknowledge', label: 'Acknowledge', style: 'primary' }],
  };
}

/**
 * The form for a completion handback waiting on a person: accept takes the returned work, rework
 * sends it back with a note (the note is required by the answer schema).
 */
export function handbackForm(summary: string): NextForm {
  return {
    kind: 'accept_rework',
    title: clip(`Handback: ${summary || 'work returned'} — accept or rework`, titleMax),
    prompt: 'Accept takes the returned work; Rework sends it back with your note.',
    fields: [
      { id: 'summary', kind: 'display', label: 'Summary', required: false, value: clip(summary, Limits.maxShortText) },
      { id: 'note', kind: 'note', label: 'Rework note', required: false },
    ],
    actions: [
      { id: 'accept', label: 'Accept', style: 'primary' },
      { id: 'rework', label: 'Rework', style: 'default' },
    ],
  };
}

/** `refund amount=40 order_id=99`: the call's name and its top-level arguments, in key order. */
export function callSummary(pending: PendingToolCall): string {
  const args = Object.keys(pending.args)
    .sort()
    .map((key) => {
      const value = pending.args[key];
      return `${key}=${typeof value === 'string' ? value : stableStringify(value)}`;
    });
  return [pending.name, ...args].join(' ');
}

function detailField(detail: string | undefined): NextFormField[] {
  return detail ? [{ id: 'detail', kind: 'display', label: 'Detail', required: false, value: clip(detail, Limits.maxShortText) }] : [];
}

/** Clip operator-facing text to a length, marking the cut (`clipText`). */
export const clip: (text: string, max: number) => string = clipText;
