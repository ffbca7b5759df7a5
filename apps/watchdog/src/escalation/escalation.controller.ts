import { Controller, Inject } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import type { EventEnvelope, HandoffEventData } from '@baton/contracts';
import { decodeParsedEvent, DlqSources, PoisonError, TransientError } from '@baton/eventstore';
import { JetStreamContext, RUNTIME, type ServiceRuntime } from '@baton/platform';
import { EscalationStopper } from './escalation-stopper';

/** Durable consumer shared by every watchdog instance: each escalation is handled by one of them. */
export const ESCALATION_DURABLE = 'watchdog_escalations';

/**
 * Reads every handoff event through one durable consumer (at-least-once, acked after the stop
 * request is stored) and hands `handoff.escalated` events to the {@link EscalationStopper}. Other
 * types are acked by the transport without being parsed or reaching this handler (`eventTypes`,
 * read from their `Baton-Event-Type` header). An event that does not decode is
 * poison (dead-lettered); a failure to read or publish is transient (redelivered later).
 * Pulls expire after a second so that shutdown never waits longer than that for an idle pull.
 */
@Controller()
export class EscalationController {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(EscalationStopper) private readonly stopper: EscalationStopper,
  ) {}

  @EventPattern('{prefix}.ev.*.handoff.*', {
    durable: ESCALATION_DURABLE,
    dlqSource: DlqSources.watchdogEscalations,
    pullExpiresMs: 1000,
    eventTypes: ['handoff.escalated'],
  })
  async onHandoffEvent(@Payload() data: unknown, @Ctx() ctx: JetStreamContext): Promise<void> {
    const decoded = decodeParsedEvent(this.runtime.registry, data, (name) => ctx.header(name));
    if (!decoded.ok) throw new PoisonError(`escalation event ${ctx.subject}#${ctx.seq} does not decode: ${decoded.rejection.message}`, decoded.rejection.code);
    if (decoded.envelope.type !== 'handoff.escalated') return;
    try {
      await this.stopper.handle(decoded.envelope as EventEnvelope<HandoffEventData<'handoff.escalated'>>, ctx.trace);
    } catch (error) {
      throw new TransientError(`cannot request the stop for ${ctx.subject}#${ctx.seq}: ${(error as Error).message}`, { cause: error });
    }
  }
}
