import { Gauge } from 'prom-client';
import { HandoffKeys, INBOX_STORE, InboxKind, InboxStatus, OPEN_HANDOFF_STATUSES, type OpenHandoffStatus, type ProjectionStore } from '@baton/projections';
import { MetricName, type BatonMetrics } from './metrics';

/**
 * Register the gauges the projections answer, computed when Prometheus scrapes:
 * - `baton_inbox_open_items{kind}`: open items of the operator inbox by kind (one indexed count
 *   per kind: cheap, exact at scrape time);
 * - `baton_open_handoffs{status}`: handoffs by open status (pending, claimed, returned), one
 *   ZCARD per status of the `handoffs` projection's open-status sets (cheap, exact at scrape time;
 *   it never reads the handoffs themselves, whose contexts may be large).
 * A Redis failure leaves the previous values in place. For the notifier, which owns the projections.
 */
export function registerProjectionGauges(metrics: BatonMetrics, store: ProjectionStore): void {
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
  new Gauge({
    name: MetricName.openHandoffs,
    help: 'Open handoffs by status (pending, claimed, returned), read from the handoffs projection at scrape time.',
    labelNames: ['status'],
    registers: [metrics.registry],
    async collect() {
      try {
        const counts = await countOpenHandoffs(store);
        for (const [status, count] of Object.entries(counts)) this.set({ status }, count);
      } catch {
        // Keep the last values.
      }
    },
  });
}

/** The handoffs of the `handoffs` projection's active generation in each open status, of every project (zeros included). */
export async function countOpenHandoffs(store: ProjectionStore): Promise<Record<OpenHandoffStatus, number>> {
  const reader = store.reader('handoffs');
  const counts = await Promise.all(OPEN_HANDOFF_STATUSES.map(async (status) => [status, await reader.zcard(HandoffKeys.byOpenStatus(status))] as const));
  return Object.fromEntries(counts) as Record<OpenHandoffStatus, number>;
}
