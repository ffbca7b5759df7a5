import { Controller, Inject } from '@nestjs/common';
import { Ctx, EventPattern } from '@nestjs/microservices';
import { JetStreamContext } from '@baton/platform';
import { HandoffReactor } from './handoff-reactor';

/** Every handoff event of every project (the reactor's consumer filter). */
export const HANDOFF_EVENTS_PATTERN = '{prefix}.ev.*.handoff.*';

/** Durable name of the reactor's consumer, shared by every ledger instance. */
export const REACTOR_DURABLE = 'ledger_handoff_reactor';

/** Thin: hands each stored handoff event to the {@link HandoffReactor}'s table; ack once it resolves. */
@Controller()
export class HandoffReactorController {
  constructor(@Inject(HandoffReactor) private readonly reactor: HandoffReactor) {}

  @EventPattern(HANDOFF_EVENTS_PATTERN)
  onHandoffEvent(@Ctx() ctx: JetStreamContext): Promise<void> {
    return ctx.react(this.reactor.table);
  }
}
