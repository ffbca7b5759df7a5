import { AgentRunConfigSchema, rejectionFromZod, type AgentRunConfig } from '@baton/contracts';
import { InvalidInputError } from './errors';

/**
 * Typed routing decisions for the `decision` field of an agent result (the typed twin of the
 * AGENT_RUN_CONFIG sentinel; when a result carries both, the typed decision wins). Each helper
 * returns a validated {@link AgentRunConfig} and throws {@link InvalidInputError} (`code`
 * `schema_violation`, `rejection.issues` naming the field) for a malformed name or reason.
 *
 * ```ts
 * await agent.publishResult({ ..., decision: decisions.callAgent('researcher', 'writer') });
 * ```
 */
export const decisions = {
  /** Go on along the workflow's edge from the current step (`dispatch.status: advance`). */
  advance(reason?: string): AgentRunConfig {
    return checked({ dispatch: reason === undefined ? { status: 'advance' } : { status: 'advance', reason } });
  },
  /** Stop and wait for a person (`dispatch.status: hold`); `reason` is shown to the operator. An explicit hold is never redirected to the callback. */
  hold(reason: string): AgentRunConfig {
    return checked({ dispatch: { status: 'hold', reason } });
  },
  /** End the run (`dispatch.status: terminate`). */
  terminate(reason: string): AgentRunConfig {
    return checked({ dispatch: { status: 'terminate', reason } });
  },
  /** Run the current step again (`dispatch.status: loop`); loop guards apply. */
  loop(reason?: string): AgentRunConfig {
    return checked({ dispatch: reason === undefined ? { status: 'loop' } : { status: 'loop', reason } });
  },
  /**
   * Call another agent (`function_call: call_agent`). With `callback`, control returns to that
   * agent when the callee finishes with no action of its own (the callback is advance-only).
   * `name` may not be the agent that publishes the result: the router ignores a call of the agent
   * itself (no self re-entry, docs/routing.md rule 7), so `publishResult` and `offer.finish` refuse
   * it before sending (`InvalidInputError`, `code` `self_call`); `loop` runs the same agent again.
   */
  callAgent(name: string, callback?: string): AgentRunConfig {
    return checked({
      function_call: callback === undefined ? { function: 'call_agent', agent_name: name } : { function: 'call_agent', agent_name: name, callback },
    });
  },
  /** Hand the work to a step, agent or role by name (`task`), resolved by the router's cascade. */
  task(name: string): AgentRunConfig {
    return checked({ task: name });
  },
} as const;

function checked(config: AgentRunConfig): AgentRunConfig {
  const parsed = AgentRunConfigSchema.safeParse(config);
  if (!parsed.success) throw new InvalidInputError('decision', rejectionFromZod(parsed.error));
  return parsed.data;
}
