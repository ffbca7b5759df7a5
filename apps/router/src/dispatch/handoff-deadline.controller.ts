import { Controller, UseFilters } from '@nestjs/common';
import { Ctx, EventPattern } from '@nestjs/microservices';
import { JetStreamContext, JetStreamExceptionFilter } from '@baton/platform';
import { perRunStream, routerConsumer } from '../shared/ordering';
import { RouterPatterns } from '../shared/subjects';
import { HandoffDeadlineReactor } from './handoff-deadline-reactor';

/**
 * The handoff-deadline reactor's entry point: a durable pull consumer of `<PREFIX>_EVENTS` handoff
 * events (per handoff stream in order, streams in parallel), handed to the reactor table by the
 * transport; acks once the handler resolves. Only `handoff.deadline_expired` is handled, but every
 * handoff event is parsed and folded onto the store's cache (`observe`, with `handoffClaimFold`), so
 * the claim check under an agent's result finds the handoff current and reads one sequence
 * instead of the two or three events it lacks, one round trip each (docs/performance.md, session 14).
 */
@Controller()
// As in DispatchController: the global filter does not reach hybrid-app controllers.
@UseFilters(new JetStreamExceptionFilter())
export class HandoffDeadlineController {
  constructor(private readonly reactor: HandoffDeadlineReactor) {}

  @EventPattern(RouterPatterns.handoffEvents, routerConsumer(RouterPatterns.handoffEvents, perRunStream))
  onHandoffEvent(@Ctx() ctx: JetStreamContext): Promise<void> {
    return ctx.react(this.reactor.table);
  }
}
