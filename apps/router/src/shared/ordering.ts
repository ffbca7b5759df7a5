import { ROUTER_DLQ_SOURCES } from '@baton/eventstore';

/**
 * Handlers per router consumer. Messages of one workflow run (inbox) or one run stream (events)
 * are handled one at a time in delivery order; different runs in parallel, up to this many.
 */
export const ROUTER_CONCURRENCY = 32;

/**
 * `@EventPattern` extras of the router's inbox consumers (run start, agent result, operator answer,
 * stop request): per-run order — keyed by the `workflow_run_id` the JSON body names, the body
 * parsed once for the key and the handler — runs in parallel.
 */
export const perRun = { concurrency: ROUTER_CONCURRENCY, orderingKey: { bodyField: 'workflow_run_id' } } as const;

/** `@EventPattern` extras of the router's run-event consumer: per-stream order, streams in parallel. */
export const perRunStream = { concurrency: ROUTER_CONCURRENCY, orderingKey: 'subject' } as const;

/**
 * The `@EventPattern` extras of the router's consumer of `pattern` (as written in the decorator):
 * `extras` plus the readable dead-letter source of that consumer (`router-results`...; the durable
 * keeps its derived name). Throws for a pattern the table does not name, so a new consumer cannot
 * dead-letter under its durable name by accident.
 */
export function routerConsumer<E extends object>(pattern: string, extras?: E): E & { dlqSource: string } {
  const dlqSource = ROUTER_DLQ_SOURCES[pattern];
  if (dlqSource === undefined) throw new Error(`no dead-letter source is declared for the router's pattern ${pattern} (ROUTER_DLQ_SOURCES)`);
  return { ...(extras ?? ({} as E)), dlqSource };
}
