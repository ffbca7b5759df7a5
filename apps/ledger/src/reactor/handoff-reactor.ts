import { Inject, Injectable } from '@nestjs/common';
import { claimWithdrawnSubject, HandoffEventSchemas, MsgIds, type HandoffEvent, type ProjectControlEvent } from '@baton/contracts';
import { LEDGER_ACTOR, handoffDecider, projectControlDecider, reactToHandoffEvent, type HandoffState, type ProjectControlState } from '@baton/domain';
import {
  DlqSources,
  PoisonError,
  TransientError,
  batonStreamNames,
  isUnavailable,
  reactor,
  streamReader,
  type AggregateRef,
  type HopTrace,
  type Reactor,
  type ReactorContext,
  type ReactorEvent,
  type ReactorHandlers,
  type ReactorStates,
} from '@baton/eventstore';
import { RUNTIME, type JsonLogger, type ServiceRuntime } from '@baton/platform';
import { withdrawnClaim } from './claim-withdrawn';
import { OfferPublisher, OFFER_EVENTS } from '../offers/offer-publisher';
import { pendingHandoffs } from '../governance/pending-handoffs';
import { LedgerIds } from '../ids';
import { ProjectDirectory } from '../projects/project-directory';

/**
 * Dead-letter source of the handoff reactor: its consumer's letters (events that do not decode,
 * deliveries exhausted) and the policy commands the target handoff refused
 * (`<prefix>.dlq.ledger-handoff-reactor`; letters written before readable names say `ledger-reactor`
 * or `ledger_handoff_reactor`).
 */
export const REACTOR_DLQ_SOURCE = DlqSources.ledgerHandoffReactor;

/**
 * What the ledger does after a handoff event is stored (the reactor; durable consumer on
 * `<prefix>.ev.*.handoff.*`):
 * 1. takes the handoff as it stood right after the event (the store's fold cache: what the
 *    command that appended it just folded) and runs `reactToHandoffEvent`; each
 *    resulting command (handback creation, parent completion / rework, escalation consult) is
 *    applied to its handoff with ids derived from the event, so a redelivery changes nothing.
 *    A command the target refuses is logged and recorded as a dead letter (source
 *    `ledger-handoff-reactor`, reason `policy_refused`, the event's bytes) and NOT retried;
 * 2. when the event left the handoff pending for an addressed agent (created, requeued after
 *    lease expiry, reworked, its last offer given up on unclaimed — not a completion handback's) publishes an OFFER (the HandoffRecord JSON) to
 *    `<prefix>.in.<project>.offer.<agent>` with `Nats-Msg-Id` `offer:<project>:<handoff id>:<event seq>`,
 *    unless the handoff already has later events (a replay of old history offers nothing), or the
 *    `create` command that stored a `handoff.created` offered it already ({@link OfferPublisher});
 * 3. when the event took a claim away from its agent, says so to that agent's processes at once
 *    (`<agent inbox>.withdrawn`, a hint; {@link withdrawnClaim}, docs/handoffs.md rule 3a).
 * Store or publish failures throw {@link TransientError} (the consumer naks with backoff). Decoding
 * and the subject/envelope identity check are the edge's (`ctx.react`): an event that cannot be
 * decoded, or names another aggregate than its subject, is dead-lettered by the consumer.
 */
@Injectable()
export class HandoffReactor {
  /** The reactor table: every handoff event type, with the handoff as it stood right after the event. */
  readonly table: Reactor<HandoffEvent, HandoffState> = reactor({
    name: 'ledger handoff reactor',
    aggregate: 'handoff',
    decider: handoffDecider,
    on: Object.fromEntries(
      (Object.keys(HandoffEventSchemas) as HandoffEvent['type'][]).map((type) => [
        type,
        (event: ReactorEvent<HandoffEvent>, states: ReactorStates<HandoffState>, ctx: ReactorContext) => this.react(event, states, ctx),
      ]),
    ) as ReactorHandlers<HandoffEvent, HandoffState>,
  });

  /**
   * The kill switch's reactor table: on `project.resumed`, re-offer every pending handoff of the
   * project. `project.paused` needs no reaction: offers and claims check the control state themselves.
   */
  readonly resumeTable: Reactor<ProjectControlEvent, ProjectControlState> = reactor({
    name: 'ledger project reactor',
    aggregate: 'project',
    decider: projectControlDecider,
    on: { 'project.resumed': async (event, _state, ctx) => void (await this.reofferPending(event.project, event.payload.pause_id, ctx.trace)) },
  });

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(ProjectDirectory) private readonly projects: ProjectDirectory,
    @Inject(OfferPublisher) private readonly offers: OfferPublisher,
  ) {}

  /**
   * On `project.resumed`: offer every pending handoff of the project again (offers are derived
   * data). `Nats-Msg-Id` is `offer:<project>:<handoff id>:resume:<pause id>`, so a redelivered resume event
   * offers each handoff once. An offer held while paused (or refused by a claim while paused) is
   * how nothing is lost: the handoff stayed pending in the stream.
   */
  async reofferPending(project: string, pauseId: string, trace?: HopTrace): Promise<number> {
    const names = batonStreamNames(this.runtime.config.BATON_PREFIX);
    const pending = await this.transient(`list the pending handoffs of ${project}`, () =>
      pendingHandoffs(streamReader(this.runtime.nats, names.events), this.runtime.config.BATON_PREFIX, project, this.runtime.registry),
    );
    let offered = 0;
    for (const { state, lastSeq } of pending) {
      const published = await this.transient(`offer ${state.id} again`, () =>
        this.offers.publish(state, lastSeq, 'project.resumed', MsgIds.offer(project, state.id, `resume:${pauseId}`), trace),
      );
      if (published) offered++;
    }
    this.runtime.logger.info('project resumed; pending handoffs re-offered', { project, pause_id: pauseId, offered });
    return offered;
  }

  /** React to one stored handoff event, given the handoff as it stood before and right after it. */
  private async react(envelope: ReactorEvent<HandoffEvent>, states: ReactorStates<HandoffState>, ctx: ReactorContext): Promise<void> {
    const state = states.after;
    const event = { type: envelope.type, data: envelope.payload } as HandoffEvent;
    const ref = ctx.ref;
    const log = this.runtime.logger.child({ trace_id: ctx.trace.traceId, project: ref.project, handoff_id: ref.id, event_id: envelope.id });
    this.sayWithdrawn(envelope, states, ctx, log);

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
          trace: ctx.trace,
        }),
      );
      if (result.ok) {
        if (result.events.length > 0)
          log.info('policy applied', { target: reaction.aggregateId, command: reaction.command.type, events: result.events.map((e) => e.type) });
        continue;
      }
      log.warn('policy command refused', {
        target: reaction.aggregateId,
        command: reaction.command.type,
        code: result.error.code,
        reason: result.error.message,
      });
      await this.transient('record the refused policy command', () =>
        ctx.deadLetter({
          source: REACTOR_DLQ_SOURCE,
          reason: 'policy_refused',
          detail: `${reaction.command.type} on ${reaction.aggregateId} refused: ${result.error.code}: ${result.error.message}`,
          deliveries: 1,
          consumer: this.runtime.instance,
          // One letter per refused reaction of this event.
          part: `${reaction.command.type}:${reaction.aggregateId}`,
        }),
      );
    }

    if (!OFFER_EVENTS.has(event.type) || state.status !== 'pending') return;
    // Offered by the create that stored it (this instance remembers), or already moved on (a
    // replay of old history, whose offer would only be refused): nothing to offer.
    if (event.type === 'handoff.created') {
      // Delivered while the create that stored it is still offering it: wait, then see.
      const creating = this.offers.createSettled(ref.project, ref.id);
      if (creating) await creating;
      if (this.offers.offeredAhead(envelope.id)) return;
    }
    if (await this.transient(`read handoff ${ref.id}`, () => ctx.superseded())) return;
    await this.transient(`offer ${state.id}`, () => this.offers.offerAfter(event.type, state, ctx.seq, ctx.trace));
  }

  /**
   * When the event took a claim away from its agent (abandoned, failed or archived by someone else,
   * requeued, failed at its deadline), say so to that agent's processes now (a core message on
   * `<agent inbox>.withdrawn`, `claim-withdrawn.json`), so that the one working on it stops before its
   * next heartbeat would have told it. A hint: its process confirms with a heartbeat, which the
   * ledger refuses; sent again on a redelivery (the process sees a claim it no longer holds, or
   * asks again); never retried, and its loss costs only the wait for that heartbeat.
   */
  private sayWithdrawn(envelope: ReactorEvent<HandoffEvent>, states: ReactorStates<HandoffState>, ctx: ReactorContext, log: JsonLogger): void {
    const withdrawn = withdrawnClaim({ ...envelope, seq: ctx.seq, project: ctx.ref.project }, states.before, states.after);
    if (withdrawn === null) return;
    try {
      this.runtime.nats.connection.publish(
        claimWithdrawnSubject(this.runtime.config.BATON_PREFIX, withdrawn.project, withdrawn.agent),
        JSON.stringify(withdrawn),
      );
    } catch (error) {
      log.debug('could not say a claim was withdrawn (its heartbeat will tell)', { claim_id: withdrawn.claim_id, reason: String(error) });
    }
  }

  /**
   * Run an I/O step; a failure becomes a {@link TransientError} (nak with backoff, then DLQ) — one
   * the runner retries until it passes when NATS or the store did not answer (`isUnavailable`):
   * the reactor's letters cannot be redriven, and an outage must not cost a handoff its offer.
   */
  private async transient<T>(what: string, step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (error) {
      if (error instanceof TransientError || error instanceof PoisonError) throw error;
      throw new TransientError(`cannot ${what}: ${error instanceof Error ? error.message : String(error)}`, { cause: error, unbounded: isUnavailable(error) });
    }
  }
}
