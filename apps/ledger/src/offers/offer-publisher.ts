import { Inject, Injectable } from '@nestjs/common';
import { MsgIds, OfferHeader, handoffOfferSubject, type HandoffEvent } from '@baton/contracts';
import { toHandoffRecord, type HandoffState } from '@baton/domain';
import { LruCache, headersFrom, hopTraceHeaders, publishUnderOwnId, type HopTrace } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { ProjectControlService } from '../governance/project-control.service';

/**
 * The events after which a handoff is pending again for its addressee: each triggers an offer —
 * `handoff.offer_given_up` too (its agent gave up on the last offer unclaimed: the next round),
 * except on a completion handback, which waits in the operators' inbox instead ({@link offerAfter}).
 */
export const OFFER_EVENTS: ReadonlySet<HandoffEvent['type']> = new Set([
  'handoff.created',
  'handoff.lease_expired',
  'handoff.reworked',
  'handoff.offer_given_up',
]);

/** Created events offered by the command that stored them, kept until the reactor sees them (bounded; a miss costs one offer the inbox drops as a duplicate). */
const OFFERED_AHEAD_CAPACITY = 4096;

const encoder = new TextEncoder();

/** What became of an offer: published, held while the project is paused, or none due (not pending, no addressed agent). */
export type OfferOutcome = 'offered' | 'held' | 'none';

/**
 * The one place an offer is published: the handoff record on `<prefix>.in.<project>.offer.<agent>`
 * (`Nats-Msg-Id` `offer:<project>:<handoff id>:<event seq>` — or `…:resume:<pause id>` for a
 * re-offer — so the inbox stores each offer once whoever publishes it), held while the project is
 * paused.
 *
 * Two callers: the handoff reactor, after every event that leaves a handoff pending (the offer
 * survives any crash: the event is redelivered until offered); and the `create` command, right
 * after it stored `handoff.created`, so the agent hears of its work without waiting for the
 * reactor's delivery. The command then remembers the event ({@link offeredAhead}), and the reactor
 * — which waits for a create of the same handoff still running in this process
 * ({@link beginCreate}) — skips what is already done; an instance that does not remember it offers
 * again, and the inbox drops the duplicate by its message id.
 */
@Injectable()
export class OfferPublisher {
  private readonly ahead = new LruCache<string, true>(OFFERED_AHEAD_CAPACITY);
  /** Creates running in this process (storing, then offering), by project and handoff id. */
  private readonly creating = new Map<string, Promise<void>>();

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(ProjectControlService) private readonly control: ProjectControlService,
  ) {}

  /**
   * Offer the handoff as `event` (stored at `seq`) left it, unless the project is paused (held:
   * `project.resumed` re-offers) or the handoff is not pending for an addressed agent. Throws what
   * the control-state read or the publish throws.
   */
  async offerAfter(event: HandoffEvent['type'], state: HandoffState, seq: number, trace?: HopTrace, paused?: Promise<boolean>): Promise<OfferOutcome> {
    if (!OFFER_EVENTS.has(event) || state.status !== 'pending' || state.to_agent === undefined) return 'none';
    // A review its reviewer gave up on is not offered to it again: a review has no retry cap, so
    // offering it round after round would never end; its inbox item stays open for a person.
    if (event === 'handoff.offer_given_up' && state.kind === 'completion_handback') return 'none';
    // Kill switch: while the project is paused offers are held; `project.resumed` re-offers.
    if (await (paused ?? this.control.isPaused(state.project))) {
      this.runtime.logger.info('offer held: project paused', { project: state.project, handoff_id: state.id });
      return 'held';
    }
    return (await this.publish(state, seq, event, MsgIds.offer(state.project, state.id, String(seq)), trace)) ? 'offered' : 'none';
  }

  /**
   * The `create` command's offer, right after it stored `handoff.created` (event `eventId` at
   * `seq`): offered as the reactor would, and remembered so the reactor need not (see the class).
   * `paused` is the project's pause state as {@link readPause} read it when the create began.
   */
  async offerCreated(eventId: string, state: HandoffState, seq: number, trace?: HopTrace, paused?: Promise<boolean>): Promise<OfferOutcome> {
    const outcome = await this.offerAfter('handoff.created', state, seq, trace, paused);
    if (outcome === 'offered') this.ahead.set(eventId, true);
    return outcome;
  }

  /**
   * Start reading whether `project` is paused, for an offer that will follow: a create reads it
   * while it stores the handoff rather than after (one round trip less before the agent hears of
   * its work). A pause acknowledged before the create began is seen; one stored while the create
   * runs races it either way, as it would a read after the append (`project.resumed` re-offers
   * what a pause held; an offer out just before a pause is one the agent may act on). A failed
   * read fails the offer that awaits it.
   */
  readPause(project: string): Promise<boolean> {
    const read = this.control.isPaused(project);
    // Awaited by the offer (which reports a failure); until then a rejection is not unhandled.
    read.catch(() => undefined);
    return read;
  }

  /**
   * A `create` of `handoffId` in `project` starts (before it stores anything); call the returned
   * function when it has answered — stored and offered, or not. Until then {@link createSettled}
   * waits for it: the reactor may be delivered the created event before the create's own append
   * returned, and would otherwise offer it a second time.
   */
  beginCreate(project: string, handoffId: string): () => void {
    const key = `${project}\u0000${handoffId}`;
    let done!: () => void;
    const running = new Promise<void>((resolve) => (done = resolve));
    const before = this.creating.get(key);
    // A second create of the same handoff (a retry racing the first): wait for both.
    const settled = before ? Promise.all([before, running]).then(() => undefined) : running;
    this.creating.set(key, settled);
    return () => {
      done();
      void settled.then(() => {
        if (this.creating.get(key) === settled) this.creating.delete(key);
      });
    };
  }

  /** Resolves when no `create` of the handoff runs in this process (at once when none does). */
  createSettled(project: string, handoffId: string): Promise<void> | undefined {
    return this.creating.get(`${project}\u0000${handoffId}`);
  }

  /** True (once) when the command that stored event `eventId` offered its handoff already. */
  offeredAhead(eventId: string): boolean {
    if (this.ahead.get(eventId) === undefined) return false;
    this.ahead.delete(eventId);
    return true;
  }

  /** Publish the offer (no pause check); false when the handoff is not pending for an agent whose name is a subject token. */
  async publish(state: HandoffState, seq: number, cause: string, msgId: string, trace?: HopTrace): Promise<boolean> {
    if (state.status !== 'pending' || state.to_agent === undefined) return false;
    const record = toHandoffRecord(state);
    const subject = handoffOfferSubject(this.runtime.config.BATON_PREFIX, state.project, state.to_agent);
    if (!record || !subject) return false;
    const headers = headersFrom({
      [OfferHeader.handoffId]: state.id,
      [OfferHeader.eventSeq]: String(seq),
      [OfferHeader.eventType]: cause,
      ...hopTraceHeaders(trace),
    });
    const ack = await publishUnderOwnId(this.runtime.nats, subject, encoder.encode(JSON.stringify(record)), msgId, { headers });
    if (ack.foreign.length > 0) {
      this.runtime.logger.warn('offer id taken by another publisher; offered under another id', {
        project: state.project,
        handoff_id: state.id,
        msg_id: msgId,
        stored_as: ack.msgId,
        taken_by: ack.foreign,
      });
    }
    this.runtime.logger.info('handoff offered', { project: state.project, handoff_id: state.id, to_agent: state.to_agent, seq });
    return true;
  }
}
