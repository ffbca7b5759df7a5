import { Inject, Injectable } from '@nestjs/common';
import { OfferAckWaitBounds, Subjects, legacyOfferDurableName, offerDurableName } from '@baton/contracts';
import { batonStreamNames, provision, type NatsHandle } from '@baton/eventstore';
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
 * The durable is `offerDurableName` (`offers-<n>-<project>-<agent>`) on the inbox stream, its filter pinned to
 * `<prefix>.in.<project>.offer.<agent>` of the principal the command SUBJECT names (never the
 * body), deliver-all (or after `start_after_seq` when the agent re-opens a durable it lost), explicit
 * ack, the asked ack wait (bounded by the contract), deleted by the server once unused for longer
 * than the inbox keeps an offer (see `unusedKeptMs`). Idempotent: every
 * replica of the agent opens the same durable; an existing one is left as it is, or updated when
 * an ack wait is asked that differs from its own — a request that asks none keeps the durable's
 * (a replica starting without one does not reset what another asked for all of them). A durable of that name with another filter was not made by the ledger and
 * would read someone else's offers: it is deleted and made again with the pinned filter.
 */
@Injectable()
export class OfferConsumers {
  /** How long an unused offers durable is kept (null: for good), read once from the inbox stream. */
  private keepUnused: Promise<number | null> | null = null;

  constructor(@Inject(RUNTIME) private readonly runtime: ServiceRuntime) {}

  async open(project: string, agent: string, askedAckWaitMs?: number, startAfterSeq?: number): Promise<OfferConsumer> {
    const prefix = this.runtime.config.BATON_PREFIX;
    const { jsm } = this.runtime.nats;
    const stream = batonStreamNames(prefix).inbox;
    const durable = offerDurableName(project, agent);
    const filterSubject = Subjects.offer(prefix, project, agent);
    // Not found (or not readable now: then `provision` below meets the same fault and throws).
    const existing = await jsm.consumers.info(stream, durable).catch(() => null);
    // A durable under the name before offerDurableName took the project's length, filtered to this
    // agent's offers: the new one goes on from what it acknowledged, and it is deleted afterwards.
    const legacy = existing === null ? await legacyOf(jsm, stream, project, agent, filterSubject) : null;
    if (legacy !== null && startAfterSeq === undefined) startAfterSeq = legacy.ackFloor;
    const kept = existing !== null && existing.config.filter_subject === filterSubject ? Math.round((existing.config.ack_wait ?? 0) / 1e6) : 0;
    const ackWaitMs = askedAckWaitMs ?? (kept > 0 ? kept : OfferAckWaitBounds.defaultMs);
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
            ...inactiveThreshold(await this.unusedKeptMs(stream)),
          },
        ],
      },
      // Asked during an agent's request: one attempt (a refusal is answered `unavailable` and the
      // agent asks again), not the minute of retries a service's start-up gets.
      { retryForMs: 0 },
    );
    if (legacy !== null) {
      await jsm.consumers.delete(stream, legacy.name).catch(() => undefined);
      this.runtime.logger.info('an offers durable was moved to its new name', { project, agent, from: legacy.name, to: durable, after_seq: legacy.ackFloor });
    }
    return { stream, durable, filterSubject };
  }

  /**
   * How long an offers durable nobody pulls from is kept: the inbox's retention and a day. Past
   * that, every offer it ever acknowledged has left the inbox, so the durable `open_offers` makes
   * again for a returning agent (deliver-all) delivers exactly the offers the lost one still held:
   * those stored since it was last used. An agent that never comes back leaves no cursor for good
   * (two per project and agent grew without end). An inbox that keeps messages for good: kept for
   * good too. Read from the stream once (a failed read is asked again next time).
   */
  private unusedKeptMs(stream: string): Promise<number | null> {
    this.keepUnused ??= this.runtime.nats.jsm.streams.info(stream).then(
      (info) => {
        const maxAgeMs = Math.round((info.config.max_age ?? 0) / 1e6);
        return maxAgeMs > 0 ? maxAgeMs + DAY_MS : null;
      },
      (error: unknown) => {
        this.keepUnused = null;
        throw error;
      },
    );
    return this.keepUnused;
  }
}

/** A day: how much longer than the inbox keeps an offer an unused offers durable is kept. */
const DAY_MS = 24 * 60 * 60 * 1000;

function inactiveThreshold(ms: number | null): { inactiveThresholdMs?: number } {
  return ms !== null ? { inactiveThresholdMs: ms } : {};
}

/** The agent's durable under its former name, when there is one with this agent's filter. */
async function legacyOf(
  jsm: NatsHandle['jsm'],
  stream: string,
  project: string,
  agent: string,
  filterSubject: string,
): Promise<{ name: string; ackFloor: number } | null> {
  const name = legacyOfferDurableName(project, agent);
  const info = await jsm.consumers.info(stream, name).catch(() => null);
  if (info === null || info.config.filter_subject !== filterSubject) return null;
  return { name, ackFloor: info.ack_floor.stream_seq };
}
