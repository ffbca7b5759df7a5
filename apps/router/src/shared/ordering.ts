import { Limits } from '@baton/contracts';
import { ROUTER_DLQ_SOURCES } from '@baton/eventstore';

const decoder = new TextDecoder();

/**
 * Handlers per router consumer. Messages of one workflow run (inbox) or one run stream (events)
 * are handled one at a time in delivery order; different runs in parallel, up to this many.
 */
export const ROUTER_CONCURRENCY = 32;

/**
 * The ordering key of an inbox message (run start, agent result, operator answer, stop request):
 * the `workflow_run_id` its JSON body names. Undefined for a body that is too large or not JSON
 * with such a string field: the handler rejects those anyway, so they need no order.
 */
export function workflowRunKey(msg: { data: Uint8Array }): string | undefined {
  if (msg.data.length > Limits.maxMessageBytes) return undefined;
  try {
    const body = JSON.parse(decoder.decode(msg.data)) as { workflow_run_id?: unknown } | null;
    const id = body?.workflow_run_id;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

/** `@EventPattern` extras of the router's inbox consumers: per-run order, runs in parallel. */
export const perRun = { concurrency: ROUTER_CONCURRENCY, orderingKey: workflowRunKey } as const;

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
