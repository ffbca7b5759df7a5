import { Controller, Inject } from '@nestjs/common';
import { Ctx, EventPattern } from '@nestjs/microservices';
import { JetStreamContext } from '@baton/platform';
import { HandoffReactor } from './handoff-reactor';

/** Every project-control event of every project (the kill switch). */
export const PROJECT_EVENTS_PATTERN = '{prefix}.ev.*.project.*';

/** Durable name of the consumer that re-offers on resume, shared by every ledger instance. */
export const PROJECT_REACTOR_DURABLE = 'ledger_project_reactor';

/**
 * Thin: hands each project-control event to the {@link HandoffReactor}'s resume table (on
 * `project.resumed`, re-offer every pending handoff of the project; acked once done, a failure is
 * retried by the transport).
 */
@Controller()
export class ProjectReactorController {
  constructor(@Inject(HandoffReactor) private readonly reactor: HandoffReactor) {}

  @EventPattern(PROJECT_EVENTS_PATTERN)
  onProjectEvent(@Ctx() ctx: JetStreamContext): Promise<void> {
    return ctx.react(this.reactor.resumeTable);
  }
}
