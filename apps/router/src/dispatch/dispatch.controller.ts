import { Controller, UseFilters } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { JetStreamContext, JetStreamExceptionFilter } from '@baton/platform';
import { perRunStream } from '../shared/ordering';
import { RouterPatterns } from '../shared/subjects';
import { DispatchReactor } from './dispatch-reactor';

/** The dispatch reactor's entry point: a durable pull consumer of `<PREFIX>_EVENTS` run events. */
@Controller()
// The global filter runService installs does not reach hybrid-app controllers (see the report); without
// this, Nest's default RPC filter would turn PoisonError / TransientError into a generic retry.
@UseFilters(new JetStreamExceptionFilter())
export class DispatchController {
  constructor(private readonly reactor: DispatchReactor) {}

  @EventPattern(RouterPatterns.runEvents, perRunStream)
  onRunEvent(@Payload() envelope: unknown, @Ctx() ctx: JetStreamContext): Promise<void> {
    return this.reactor.handle(envelope, ctx.seq);
  }
}
