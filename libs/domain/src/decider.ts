/**
 * A decider in the Emmett sense: pure functions over an aggregate. `decide` never throws for a
 * business reason; an illegal command yields a typed {@link DomainError}. Time, ids and anything
 * looked up arrive inside the command.
 */
export interface Decider<Command, Event, State> {
  decide(command: Command, state: State): DecisionResult<Event>;
  evolve(state: State, event: Event): State;
  initialState(): State;
  /**
   * Event types that only record (a refused input, a notice) and decide nothing for later
   * commands: a command cut short between its appends still completes on its retry when only such
   * events of others came after its stored ones (the event store's `completeCommand`).
   */
  passive?(type: string): boolean;
  /**
   * The command to decide again when the event store completes it (its first events, `stored`,
   * already there): a check whose outside input moved on since those events were decided, and
   * which they prove passed, may be waived here (a result recorded under a claim that has lapsed
   * since). Absent: the command is decided again as it came.
   */
  resuming?(command: Command, stored: readonly Event[]): Command;
}

/** What `decide` returns: the events to append, or the typed reason the command was refused. */
export type DecisionResult<Event> = { ok: true; events: Event[] } | { ok: false; error: DomainError };

/** A typed, transport-neutral refusal. Each edge (NATS handler, HTTP controller) maps it once. */
export interface DomainError {
  /** Stable machine-readable code, e.g. `handoff_not_pending`. */
  code: string;
  /** The broad kind, which an edge maps to its own vocabulary. */
  kind: DomainErrorKind;
  message: string;
  details?: Record<string, unknown>;
}

export const DomainErrorKind = {
  /** The command is not allowed in the aggregate's current state. */
  wrongState: 'wrong_state',
  /** The command is well-formed but breaks a business rule. */
  invalid: 'invalid',
  /** The actor may not do this. */
  forbidden: 'forbidden',
  /** The aggregate does not exist. */
  notFound: 'not_found',
} as const;
export type DomainErrorKind = (typeof DomainErrorKind)[keyof typeof DomainErrorKind];

export function accept<Event>(...events: Event[]): DecisionResult<Event> {
  return { ok: true, events };
}

export function reject<Event = never>(kind: DomainErrorKind, code: string, message: string, details?: Record<string, unknown>): DecisionResult<Event> {
  return { ok: false, error: details ? { code, kind, message, details } : { code, kind, message } };
}

/** Fold events onto a state with a decider's `evolve`. */
export function fold<Event, State>(decider: Pick<Decider<unknown, Event, State>, 'evolve' | 'initialState'>, events: readonly Event[]): State {
  return events.reduce((state, event) => decider.evolve(state, event), decider.initialState());
}

/** Exhaustiveness guard for `switch` statements over unions. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unhandled ${what}: ${JSON.stringify(value)}`);
}
