/**
 * The reason strings the engine writes on the Dispatches it synthesises. The first three are seed
 * 000 §5 word for word. The callback variant with a parse diagnostic is Baton's (the seed states
 * the two facts separately): it carries both the diagnostic and the caller, in that order.
 */
export const NoActionReasons = {
  /** §5: no decision, no return address → hold. */
  hold: 'no-action default: agent emitted no decision',
  /** §5: no decision, a return address → advance back to the caller. */
  returnToCaller: (callback: string) => `no-action default: agent emitted no decision; returning to caller '${callback}'`,
  /** §5: a sentinel marker was present but unparseable → hold, diagnostic kept. */
  unparseable: (diagnostic: string) => `no-action default: agent emitted no decision and the AGENT_RUN_CONFIG sentinel could not be parsed (${diagnostic})`,
  /** Baton: unparseable marker *and* a return address → advance to the caller, both facts kept. */
  unparseableReturnToCaller: (diagnostic: string, callback: string) =>
    `no-action default: agent emitted no decision and the AGENT_RUN_CONFIG sentinel could not be parsed (${diagnostic}); returning to caller '${callback}'`,
  /** Baton: a typed `decision` that breaks the contract (§2 invariants, schema) → hold, diagnostic kept. */
  invalidTyped: (diagnostic: string) => `no-action default: agent emitted no decision and its typed decision was invalid (${diagnostic})`,
  /** Baton: an invalid typed decision *and* a return address → advance to the caller, both facts kept. */
  invalidTypedReturnToCaller: (diagnostic: string, callback: string) =>
    `no-action default: agent emitted no decision and its typed decision was invalid (${diagnostic}); returning to caller '${callback}'`,
  /** Baton: a `function_call` naming the agent itself (no self re-entry, seed 000 §4) and nothing else decided → hold, the ignored call named. */
  selfCall: (diagnostic: string) => `no-action default: agent emitted no decision but ${diagnostic}`,
  /** Baton: the same with a return address → advance back to the caller. */
  selfCallReturnToCaller: (diagnostic: string, callback: string) =>
    `no-action default: agent emitted no decision but ${diagnostic}; returning to caller '${callback}'`,
  /** Baton: the agent advanced but there is no callback, no edge and the step is not terminal. */
  noRoute: (step: string) => `no-action default: no route from step '${step}' (no callback, no workflow edge, not terminal)`,
} as const;

/** A `function_call` whose `agent_name` is the calling agent itself: ignored (seed 000 §4, "no self re-entry"). */
export const SelfCall = {
  /** The diagnostic the no-action default's reason carries. */
  diagnostic: (agent: string) => `a function_call to itself ('${agent}'), which was ignored (no self re-entry)`,
} as const;

/** Engine-written reasons for the other synthesised decisions. */
export const EngineReasons = {
  humanGate: (step: string, next: string) => `human gate: step '${step}' needs a person before the workflow continues to '${next}'`,
  completed: (workflow: string, step: string) => `workflow '${workflow}' completed at terminal step '${step}'`,
} as const;
