import { Origin, ServiceActors, type EventAttribution } from '@baton/contracts';
import type { RunEvent } from './state';

/**
 * Whom the events of a decision the engine made speak for: the router, origin `engine_fallback`
 * (seed 000 §5: the tag tells a fabricated decision from an agent's own). Written as the events'
 * `actor` and `origin`, so a timeline shows who decided, not who caused it.
 */
export const ENGINE: EventAttribution = { actor: ServiceActors.router.actor, origin: Origin.engineFallback };

/** The routing decision an event records, when it records one (`run.routed`, `run.held`, `run.stopped`, `run.result_recorded`). */
function decisionOrigin(event: RunEvent): string | undefined {
  const decision = (event.data as { decision?: { dispatch?: { origin?: string } } }).decision;
  return decision === undefined ? undefined : (decision.dispatch?.origin ?? 'agent');
}

/**
 * Attribute to the engine each event of `events` that records a decision the engine made (its
 * `dispatch.origin` is `engine_fallback`: the no-action default, a workflow's entry route, an
 * unresolved target's hold) and the events that follow from it (its notice, its handoff, its
 * stop), up to the next event that records a decision of its own or says whom it speaks for (a
 * customer's queued message), and the route records before it that belong to it (see
 * {@link engineRouteRecord}). The agent's recorded result stays the command's. Events that
 * already say whom they speak for are left as they are.
 */
export function attributeEngineDecisions(events: RunEvent[]): RunEvent[] {
  let engine = false;
  let changed = false;
  const out = events.map((event, index) => {
    if (event.by !== undefined) {
      engine = false;
      return event;
    }
    const origin = decisionOrigin(event);
    if (origin !== undefined) engine = origin === Origin.engineFallback;
    if (!engine && !engineRouteRecord(events, index)) return event;
    changed = true;
    return { ...event, by: ENGINE } as RunEvent;
  });
  return changed ? out : events;
}

/**
 * The records of a conversation route that come before the decision that takes it: a HANDOFF route
 * fired (`run.handoff`) is the engine's when the `run.routed` after it is (a WHEN that held, a
 * customer message routed); a route the engine refused or found blocked (`run.handoff_completed`
 * `rejected` / `blocked`) is always its evaluation.
 */
function engineRouteRecord(events: readonly RunEvent[], index: number): boolean {
  const event = events[index]!;
  if (event.type === 'run.handoff_completed') return event.data.outcome === 'blocked' || event.data.outcome === 'rejected';
  if (event.type !== 'run.handoff') return false;
  for (let i = index + 1; i < events.length; i++) {
    const next = events[i]!;
    if (next.by !== undefined) return false;
    const origin = decisionOrigin(next);
    if (origin !== undefined) return origin === Origin.engineFallback;
  }
  return false;
}
