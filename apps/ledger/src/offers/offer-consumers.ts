import { Inject, Injectable } from '@nestjs/common';
import { OfferAckWaitBounds, Subjects, offerDurableName } from '@baton/contracts';
import { batonStreamNames, provision } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';

/** Where an agent pulls its offers from. */
export interface OfferConsumer {
  stream: string;
  durable: string;
  filterSubject: string;
}

/**
 * The ledger's answer to `open_offers`: it provisions an agent's offers durable, so agents need no
 * permission to create consumers (a consumer create request carries its filter in the body, so an
 * agent allowed to create one could read another agent's, or another project's, offers).
 *
 * The durable is `offers-<project>-<agent>` on the inbox stream, its filter pinned to
 * `<prefix>.in.<project>.offer.<agent>` of the principal the command SUBJECT names (never the
 * body), deliver-all (or after `start_after_seq` when the agent re-opens a durable it lost), explicit
 * ack, the asked ack wait (bounded by the contract). Idempotent: every
 * replica of the agent opens the same durable; an existing one is left as it is, or updated when
 * the ack wait changed. A durable of that name with another filter was not made by the ledger and
 * would read someone else's offers: it is deleted and made again with the pinned filter.
 */
@Injectable()
export class OfferConsumers {
  constructor(@Inject(RUNTIME) private readonly runtime: ServiceRuntime) {}

  async open(project: string, agent: string, ackWaitMs: number = OfferAckWaitBounds.defaultMs, startAfterSeq?: number): Promise<OfferConsumer> {
    const prefix = this.runtime.config.BATON_PREFIX;
    const { jsm } = this.runtime.nats;
    const stream = batonStreamNames(prefix).inbox;
    const durable = offerDurableName(project, agent);
    const filterSubject = Subjects.offer(prefix, project, agent);
    // Not found (or not readable now: then `provision` below meets the same fault and throws).
    const existing = await jsm.consumers.info(stream, durable).catch(() => null);
    if (existing !== null && existing.config.filter_subject !== filterSubject) {
      this.runtime.logger.warn('an offers durable had a foreign filter: replaced', {
        project,
        agent,
        durable,
        filter: existing.config.filter_subject ?? '(none)',
      });
      await jsm.consumers.delete(stream, durable);
    }
    await provision(
      jsm,
      {
        consumers: [
          {
            stream,
            durable,
            description: `Handoffs offered to ${project}/${agent} (shared by its replicas; provisioned by the ledger)`,
            filterSubject,
            deliverFrom: 'all',
            // Made again after it was lost: from where the agent's reader had acknowledged.
            ...(startAfterSeq !== undefined ? { startAfterSeq } : {}),
            ackWaitMs,
          },
        ],
      },
      // Asked during an agent's request: one attempt (a refusal is answered `unavailable` and the
      // agent asks again), not the minute of retries a service's start-up gets.
      { retryForMs: 0 },
    );
    return { stream, durable, filterSubject };
  }
}
