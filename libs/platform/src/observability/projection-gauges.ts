import { Gauge } from 'prom-client';
import { HandoffStatus } from '@baton/contracts';
import { HandoffKeys, INBOX_STORE, InboxKind, InboxStatus, type ProjectionStore } from '@baton/projections';
import { MetricName, type BatonMetrics } from './metrics';

/** Handoff statuses that count as open (not yet completed, released, abandoned, failed or archived). */
export const OPEN_HANDOFF_STATUSES = [HandoffStatus.pending, HandoffStatus.claimed, HandoffStatus.returned] as const;

export interface ProjectionGaugeOptions {
  /** Least time between two counts of the open handoffs, ms (default 30 000): each count reads the whole `handoffs` projection. */
  handoffsEveryMs?: number;
}

/**
 * Register the gauges the projections answer, computed when Prometheus scrapes:
 * - `baton_inbox_open_items{kind}`: open items of the operator inbox by kind (one indexed count
 *   per kind: cheap, exact at scrape time);
 * - `baton_open_handoffs{status}`: handoffs by open status (pending, claimed, returned), counted
 *   from a snapshot of the `handoffs` projection at most every `handoffsEveryMs` (the value may be
 *   that old).
 * A Redis failure leaves the previous values in place. For the notifier, which owns the projections.
 */
export function registerProjectionGauges(metrics: BatonMetrics, store: ProjectionStore, options: ProjectionGaugeOptions = {}): void {
  const inbox = store.items('inbox', INBOX_STORE);
  new Gauge({
    name: MetricName.inboxOpenItems,
    help: 'Open items of the operator inbox by kind (stop, hold, handback, escalation), read from the inbox projection at scrape time.',
    labelNames: ['kind'],
    registers: [metrics.registry],
    async collect() {
      try {
        const counts = await Promise.all(Object.values(InboxKind).map(async (kind) => [kind, await inbox.count({ status: InboxStatus.open, kind })] as const));
        for (const [kind, count] of counts) this.set({ kind }, count);
      } catch {
        // Keep the last values.
      }
    },
  });
  const every = options.handoffsEveryMs ?? 30_000;
  let countedAt = -Infinity;
  let counting: Promise<void> | null = null;
  new Gauge({
    name: MetricName.openHandoffs,
    help: 'Open handoffs by status (pending, claimed, returned), counted from the handoffs projection (refreshed at most every 30 s).',
    labelNames: ['status'],
    registers: [metrics.registry],
    async collect() {
      if (Date.now() - countedAt < every) return;
      counting ??= (async () => {
        try {
          const counts = await countOpenHandoffs(store);
          for (const [status, count] of Object.entries(counts)) this.set({ status }, count);
          countedAt = Date.now();
        } catch {
          // Keep the last values.
        }
      })().finally(() => (counting = null));
      await counting;
    },
  });
}

/** Count the handoffs of the `handoffs` projection's active generation by open status (zeros included). */
export async function countOpenHandoffs(store: ProjectionStore): Promise<Record<(typeof OPEN_HANDOFF_STATUSES)[number], number>> {
  const counts = Object.fromEntries(OPEN_HANDOFF_STATUSES.map((s) => [s, 0])) as Record<(typeof OPEN_HANDOFF_STATUSES)[number], number>;
  const snapshot = await store.snapshot('handoffs');
  for (const [key, value] of Object.entries(snapshot.keys)) {
    // Only the handoffs' folded states (`hs:<project>:<id>`, whose status is the record's), not their timelines or indexes.
    if (!HandoffKeys.isState(key) || value.type !== 'string') continue;
    let status: unknown;
    try {
      status = (JSON.parse(value.value) as { status?: unknown }).status;
    } catch {
      continue;
    }
    if (typeof status === 'string' && status in counts) counts[status as keyof typeof counts]++;
  }
  return counts;
}
