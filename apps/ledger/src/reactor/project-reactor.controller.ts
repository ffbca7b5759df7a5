import { Controller, Inject } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import type { EventEnvelope, ProjectControlEvent } from '@baton/contracts';
import { PoisonError } from '@baton/eventstore';
import { JetStreamContext, RUNTIME, type ServiceRuntime } from '@baton/platform';
import { HandoffReactor } from './handoff-reactor';

/** Every project-control event of every project (the kill switch). */
export const PROJECT_EVENTS_PATTERN = '{prefix}.ev.*.project.*';

/** Durable name of the consumer that re-offers on resume, shared by every ledger instance. */
export const PROJECT_REACTOR_DURABLE = 'ledger_project_reactor';

/**
 * Thin: on `project.resumed`, re-offer every pending handoff of the project (acked once done;
 * a failure is retried by the transport). `project.paused` needs no reaction: offers and claims
 * check the control state themselves.
 */
@Controller()
export class ProjectReactorController {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(HandoffReactor) private readonly reactor: HandoffReactor,
  ) {}

  @EventPattern(PROJECT_EVENTS_PATTERN)
  async onProjectEvent(@Payload() data: unknown, @Ctx() ctx: JetStreamContext): Promise<void> {
    const decoded = this.runtime.registry.decode(data);
    if (!decoded.ok) throw new PoisonError(`project event ${ctx.subject}#${ctx.seq} does not decode: ${decoded.rejection.message}`, decoded.rejection.code);
    const envelope = decoded.value as EventEnvelope<ProjectControlEvent['data']>;
    if (envelope.type !== 'project.resumed') return;
    await this.reactor.reofferPending(envelope.project, (envelope.payload as { pause_id: string }).pause_id);
  }
}
