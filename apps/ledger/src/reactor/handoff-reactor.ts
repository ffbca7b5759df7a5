import { Inject, Injectable } from '@nestjs/common';
import { headers as natsHeaders } from 'nats';
import { MsgIds, type EventEnvelope, type HandoffEvent } from '@baton/contracts';
import { LEDGER_ACTOR, handoffDecider, reactToHandoffEvent, toHandoffRecord, type HandoffState } from '@baton/domain';
import { LruCache, PoisonError, TransientError, batonStreamNames, deadLetter, type AggregateRef } from '@baton/eventstore';
import { OfferHeader, RUNTIME, handoffOfferSubject, type ServiceRuntime } from '@baton/platform';
import { ProjectControlService } from '../governance/project-control.service';
import { pendingHandoffs } from '../governance/pending-handoffs';
import { LedgerIds } from '../ids';
import { ProjectDirectory } from '../projects/project-directory';

/** Dead-letter source for policy commands the target handoff refused (`<prefix>.dlq.ledger-reactor`). */
export const REACTOR_DLQ_SOURCE = 'ledger-reactor';

/** The events after which a handoff is pending again for its addressee: each triggers an offer. */
const OFFER_EVENTS: ReadonlySet<HandoffEvent['type']> = new Set(['handoff.created', 'handoff.lease_expired', 'handoff.reworked']);

/** One handoff event as the reactor consumer delivers it. */
export interface DeliveredEvent {
  subject: string;
  /** Stream sequence. */
  seq: number;
  stream: string;
  data: Uint8Array;
  headers: Record<string, string[]>;
}

interface Folded {
  state: HandoffState;
  lastSeq: number;
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/**
 * What the ledger does after a handoff event is stored (the reactor; durable consumer on
 * `<prefix>.ev.*.handoff.*`):
 * 1. folds the handoff as it stood right after the event and runs `reactToHandoffEvent`; each
 *    resulting command (handback creation, parent completion / rework, escalation consult) is
 *    applied to its handoff with ids derived from the event, so a redelivery changes nothing.
 *    A command the target refuses is logged and recorded as a dead letter (source
 *    `ledger-reactor`, reason `policy_refused`, the event's bytes) and NOT retried;
 * 2. when the event left the handoff pending for an addressed agent (created, requeued after
 *    lease expiry, reworked) publishes an OFFER (the HandoffRecord JSON) to
 *    `<prefix>.in.<project>.offer.<agent>` with `Nats-Msg-Id` `offer:<project>:<handoff id>:<event seq>`,
 *    unless the handoff already has later events (a replay of old history offers nothing).
 * Store or publish failures throw {@link TransientError} (the consumer naks with backoff); an
 * event that cannot be decoded throws {@link PoisonError} (dead-lettered by the consumer).
 */
@Injectable()
export class HandoffReactor {
  private readonly folded = new LruCache<string, Folded>(2_000);

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(ProjectDirectory) private readonly projects: ProjectDirectory,
    @Inject(ProjectControlService) private readonly control: ProjectControlService,
  ) {}

  /**
   * On `project.resumed`: offer every pending handoff of the project again (offers are derived
   * data). `Nats-Msg-Id` is `offer:<project>:<handoff id>:resume:<pause id>`, so a redelivered resume event
   * offers each handoff once. An offer held while paused (or refused by a claim while paused) is
   * how nothing is lost: the handoff stayed pending in the stream.
   */
  async reofferPending(project: string, pauseId: string): Promise<number> {
    const names = batonStreamNames(this.runtime.config.BATON_PREFIX);
    const pending = await this.transient(`list the pending handoffs of ${project}`, () =>
      pendingHandoffs(this.runtime.nats.js, names.events, this.runtime.config.BATON_PREFIX, project, this.runtime.registry),
    );
    let offered = 0;
    for (const { state, lastSeq } of pending) {
      if (await this.publishOffer(state, lastSeq, 'project.resumed', MsgIds.offer(project, state.id, `resume:${pauseId}`))) offered++;
    }
    this.runtime.logger.info('project resumed; pending handoffs re-offered', { project, pause_id: pauseId, offered });
    return offered;
  }

  async react(delivered: DeliveredEvent): Promise<void> {
    const envelope = this.decode(delivered);
    if (envelope.aggregate.kind !== 'handoff') return;
    const event = { type: envelope.type, data: envelope.payload } as HandoffEvent;
    const ref: AggregateRef = { project: envelope.project, kind: 'handoff', id: envelope.aggregate.id };
    const log = this.runtime.logger.child({ project: ref.project, handoff_id: ref.id, event_id: envelope.id });

    const state = await this.stateAt(ref, delivered.seq, event);
    const projectLead = await this.transient('read the project definition', async () => (await this.projects.view(ref.project)).roster.project_lead);
    const reactions = reactToHandoffEvent(event, { state, deriveId: LedgerIds.derive, ...(projectLead !== undefined ? { projectLead } : {}) });

    for (const [index, reaction] of reactions.entries()) {
      const target: AggregateRef = { project: ref.project, kind: 'handoff', id: reaction.aggregateId };
      const result = await this.transient(`apply ${reaction.command.type} to ${reaction.aggregateId}`, () =>
        this.runtime.store.handleCommand(target, handoffDecider, reaction.command, {
          commandId: LedgerIds.reactionId(target, envelope.id, index),
          occurredAt: reaction.command.metadata.now,
          actor: LEDGER_ACTOR,
          origin: 'engine_fallback',
          causationId: envelope.id,
          correlationId: envelope.correlationId,
        }),
      );
      if (result.ok) {
        if (result.events.length > 0) log.info('policy applied', { target: reaction.aggregateId, command: reaction.command.type, events: result.events.map((e) => e.type) });
        continue;
      }
      log.warn('policy command refused', { target: reaction.aggregateId, command: reaction.command.type, code: result.error.code, reason: result.error.message });
      await this.transient('record the refused policy command', () =>
        deadLetter(this.runtime.nats.js, {
          prefix: this.runtime.config.BATON_PREFIX,
          source: REACTOR_DLQ_SOURCE,
          reason: 'policy_refused',
          detail: `${reaction.command.type} on ${reaction.aggregateId} refused: ${result.error.code}: ${result.error.message}`,
          subject: delivered.subject,
          headers: delivered.headers,
          data: delivered.data,
          deliveries: 1,
          stream: delivered.stream,
          seq: delivered.seq,
          consumer: this.runtime.instance,
        }),
      );
    }

    // An offer for a handoff that has already moved on (a replay of old history) would only be refused.
    if (OFFER_EVENTS.has(event.type) && state.status === 'pending' && !(await this.superseded(ref, delivered.seq))) {
      await this.offer(event, state, delivered.seq);
    }
  }

  /** Publish the offer when the event left the handoff pending for an addressed agent. */
  private async offer(event: HandoffEvent, state: HandoffState, seq: number): Promise<void> {
    if (!OFFER_EVENTS.has(event.type) || state.status !== 'pending' || state.to_agent === undefined) return;
    // Kill switch: while the project is paused offers are held; `project.resumed` re-offers.
    if (await this.transient(`read the control state of ${state.project}`, () => this.control.isPaused(state.project))) {
      this.runtime.logger.info('offer held: project paused', { project: state.project, handoff_id: state.id });
      return;
    }
    await this.publishOffer(state, seq, event.type, MsgIds.offer(state.project, state.id, String(seq)));
  }

  private async publishOffer(state: HandoffState, seq: number, cause: string, msgId: string): Promise<boolean> {
    if (state.status !== 'pending' || state.to_agent === undefined) return false;
    const record = toHandoffRecord(state);
    const subject = handoffOfferSubject(this.runtime.config.BATON_PREFIX, state.project, state.to_agent);
    if (!record || !subject) return false;
    const hdrs = natsHeaders();
    hdrs.set(OfferHeader.handoffId, state.id);
    hdrs.set(OfferHeader.eventSeq, String(seq));
    hdrs.set(OfferHeader.eventType, cause);
    const agent = state.to_agent;
    await this.transient(`offer ${state.id} to ${agent}`, () => this.runtime.nats.js.publish(subject, encoder.encode(JSON.stringify(record)), { msgID: msgId, headers: hdrs }));
    this.runtime.logger.info('handoff offered', { project: state.project, handoff_id: state.id, to_agent: agent, seq });
    return true;
  }

  /**
   * The handoff right after the event at `seq`: the cached fold when it is exactly there; for a
   * `handoff.created` (always a handoff's first event) the event alone; else fold the events after
   * the cached point (or from the start) up to `seq` — usually just this one event, one round trip.
   */
  private async stateAt(ref: AggregateRef, seq: number, event: HandoffEvent): Promise<HandoffState> {
    const key = `${ref.project}/${ref.id}`;
    const cached = this.folded.get(key);
    if (cached && cached.lastSeq === seq) return cached.state;
    let state: HandoffState;
    if (event.type === 'handoff.created' && !(cached && cached.lastSeq < seq)) {
      state = handoffDecider.evolve(handoffDecider.initialState(), event);
    } else {
      // The history between the cached point and this event (usually nothing: one round trip), then the event itself.
      const base: Folded = cached && cached.lastSeq < seq ? cached : { state: handoffDecider.initialState(), lastSeq: 0 };
      const read = await this.transient(`read handoff ${ref.id}`, () => this.runtime.store.read(ref, { afterSeq: base.lastSeq, untilSeq: seq - 1 }));
      state = base.state;
      for (const stored of read.events) state = handoffDecider.evolve(state, { type: stored.type, data: stored.payload } as HandoffEvent);
      state = handoffDecider.evolve(state, event);
    }
    this.folded.set(key, { state, lastSeq: seq });
    return state;
  }

  /** True when the handoff has events after `seq` (the event is old history being replayed). */
  private async superseded(ref: AggregateRef, seq: number): Promise<boolean> {
    const read = await this.transient(`read handoff ${ref.id}`, () => this.runtime.store.read(ref, { afterSeq: seq }));
    return read.lastSeq > seq;
  }

  private decode(delivered: DeliveredEvent): EventEnvelope {
    let raw: unknown;
    try {
      raw = JSON.parse(decoder.decode(delivered.data));
    } catch (error) {
      throw new PoisonError(`event ${delivered.subject}#${delivered.seq} is not JSON`, 'malformed_json', { cause: error });
    }
    const decoded = this.runtime.registry.decode(raw);
    if (!decoded.ok) throw new PoisonError(`event ${delivered.subject}#${delivered.seq}: ${decoded.rejection.message}`, decoded.rejection.code);
    return decoded.value;
  }

  /** Run an I/O step; a failure becomes a {@link TransientError} (nak with backoff, then DLQ). */
  private async transient<T>(what: string, step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (error) {
      if (error instanceof TransientError || error instanceof PoisonError) throw error;
      throw new TransientError(`cannot ${what}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
  }
}
