import { Controller, UseFilters } from '@nestjs/common';
import { Ctx, EventPattern } from '@nestjs/microservices';
import { JetStreamContext, JetStreamExceptionFilter } from '@baton/platform';
import { perRunStream, routerConsumer } from '../shared/ordering';
import { RouterPatterns } from '../shared/subjects';
import { HandoffDeadlineReactor } from './handoff-deadline-reactor';

/**
 * The handoff-deadline reactor's entry point: a durable pull consumer of `<PREFIX>_EVENTS` handoff
 * events (per handoff stream in order, streams in parallel), handed to the reactor table by the
 * transport; acks once the handler resolves. Only `handoff.deadline_expired` is parsed and
 * handled (`eventTypes`): every other handoff event is acked by its type header, unread.
 */
@Controller()
// As in DispatchController: the global filter does not reach hybrid-app controllers.
@UseFilters(new JetStreamExceptionFilter())
export class HandoffDeadlineController {
  constructor(private readonly reactor: HandoffDeadlineReactor) {}

  @EventPattern(RouterPatterns.handoffEvents, routerConsumer(RouterPatterns.handoffEvents, { ...perRunStream, eventTypes: ['handoff.deadline_expired'] }))
  onHandoffEvent(@Ctx() ctx: JetStreamContext): Promise<void> {
    return ctx.react(this.reactor.table);
  }
}
