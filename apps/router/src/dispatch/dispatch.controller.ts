import { Controller, UseFilters } from '@nestjs/common';
import { Ctx, EventPattern } from '@nestjs/microservices';
import { JetStreamContext, JetStreamExceptionFilter } from '@baton/platform';
import { perRunStream, routerConsumer } from '../shared/ordering';
import { RouterPatterns } from '../shared/subjects';
import { DispatchReactor } from './dispatch-reactor';

/**
 * The dispatch reactor's entry point: a durable pull consumer of `<PREFIX>_EVENTS` run events
 * (per run stream in order, streams in parallel), handed to the reactor table by the transport.
 */
@Controller()
// The global filter runService installs does not reach hybrid-app controllers (see the report); without
// this, Nest's default RPC filter would turn PoisonError / TransientError into a generic retry.
@UseFilters(new JetStreamExceptionFilter())
export class DispatchController {
  constructor(private readonly reactor: DispatchReactor) {}

  @EventPattern(RouterPatterns.runEvents, routerConsumer(RouterPatterns.runEvents, perRunStream))
  onRunEvent(@Ctx() ctx: JetStreamContext): Promise<void> {
    return ctx.react(this.reactor.table);
  }
}
