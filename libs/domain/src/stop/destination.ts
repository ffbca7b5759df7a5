import { AgentNameSchema } from '@baton/contracts';
import { DomainError, DomainErrorKind } from '../decider';
import { StopDestinationRequest, StopFacts } from './build-stop';

/** Where a stop packet goes: the human queue (default), or a bounded specialist that honours stop. */
export type StopDestination = { kind: 'human_queue' } | { kind: 'specialist'; agent: string };

export type StopDestinationDecision = { ok: true; destination: StopDestination } | { ok: false; error: DomainError };

/** Why a destination was refused (`details.reason` of `destination_not_allowed`). */
export const DestinationRefusal = {
  exec: 'exec',
  computerUse: 'computer_use',
  unbounded: 'unbounded',
  cannotHonorStop: 'cannot_honor_stop',
  self: 'self',
  invalidName: 'invalid_name',
} as const;
export type DestinationRefusal = (typeof DestinationRefusal)[keyof typeof DestinationRefusal];

const humanAliases = new Set(['human', 'humans', 'human_queue', 'human:queue', 'operator', 'operators']);
const execTokens = new Set(['exec', 'execute', 'executor', 'shell', 'bash', 'sh', 'terminal', 'cmd', 'eval']);

/**
 * Where a stopped run's packet goes (seed 003, "Destinations"). No destination, or one naming the
 * humans, is the human queue — "if you cannot name the destination, it is humans". A named
 * specialist is accepted only when it honours stop (it stops with a packet of its own) and runs
 * on a budget of its own with at least one positive bound; it still receives the packet and the
 * run is still a stop. Refused with `destination_not_allowed` (and `details.reason`): exec or
 * shell destinations, computer use, an unbounded (budget-less) agent, one that cannot honour
 * stop, the stopped agent itself (a second loop), or an invalid agent name. Pure.
 */
export function stopDestination(facts: Pick<StopFacts, 'agent' | 'destination'>): StopDestinationDecision {
  const request = facts.destination;
  if (request === undefined) return { ok: true, destination: { kind: 'human_queue' } };
  const name = request.agent.trim();
  if (humanAliases.has(name.toLowerCase())) return { ok: true, destination: { kind: 'human_queue' } };
  const refusal = refusalFor(name, request, facts.agent);
  if (refusal !== null) {
    return {
      ok: false,
      error: {
        code: 'destination_not_allowed',
        kind: DomainErrorKind.invalid,
        message: `a stop packet may not go to ${JSON.stringify(name)} (${refusal}); send it to the human queue or a bounded specialist that honours stop`,
        details: { agent: name, reason: refusal },
      },
    };
  }
  return { ok: true, destination: { kind: 'specialist', agent: name } };
}

function refusalFor(name: string, request: StopDestinationRequest, stoppedAgent: string): DestinationRefusal | null {
  if (!AgentNameSchema.safeParse(name).success) return 'invalid_name';
  const tokens = name
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((t) => t.length > 0);
  const joined = tokens.join('');
  if (tokens.some((t) => execTokens.has(t))) return 'exec';
  if (joined.includes('computeruse')) return 'computer_use';
  if (name === stoppedAgent) return 'self';
  if (!request.honors_stop) return 'cannot_honor_stop';
  if (!isBounded(request.budget)) return 'unbounded';
  return null;
}

function isBounded(budget: StopDestinationRequest['budget']): boolean {
  if (!budget) return false;
  return [budget.max_steps, budget.max_tool_calls, budget.max_tokens, budget.max_cost_usd].some(
    (bound) => typeof bound === 'number' && Number.isFinite(bound) && bound > 0,
  );
}
