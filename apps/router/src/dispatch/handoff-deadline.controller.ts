import { Controller, UseFilters } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { JetStreamExceptionFilter } from '@baton/platform';
import { perRunStream } from '../shared/ordering';
import { RouterPatterns } from '../shared/subjects';
import { HandoffDeadlineReactor } from './handoff-deadline-reactor';

/**
 * The handoff-deadline reactor's entry point: a durable pull consumer of `<PREFIX>_EVENTS` handoff
 * events (per handoff stream in order, streams in parallel); acks once the reactor resolves.
 */
@Controller()
// As in DispatchController: the global filter does not reach hybrid-app controllers.
@UseFilters(new JetStreamExceptionFilter())
export class HandoffDeadlineController {
  constructor(private readonly reactor: HandoffDeadlineReactor) {}

  @EventPattern(RouterPatterns.handoffEvents, perRunStream)
  onHandoffEvent(@Payload() envelope: unknown): Promise<void> {
    return this.reactor.handle(envelope);
  }
}
