import { Controller, UseFilters } from '@nestjs/common';
import { Ctx, MessagePattern, Payload } from '@nestjs/microservices';
import { NatsRequestContext, JetStreamExceptionFilter } from '@baton/platform';
import type { PublishDefinitionReply } from '@baton/contracts';
import { RouterPatterns } from '../shared/subjects';
import { DEFINITIONS_DLQ_SOURCE, PublishDefinitionUseCase } from './publish-definition';

/** Request/reply entry point for project definitions (core NATS, queue group `router`). */
@Controller()
// The global filter runService installs does not reach hybrid-app controllers (see the report); without
// this, Nest's default RPC filter would turn PoisonError / TransientError into a generic retry.
@UseFilters(new JetStreamExceptionFilter())
export class DefinitionsController {
  constructor(private readonly publishDefinition: PublishDefinitionUseCase) {}

  /** `<prefix>.cmd.router.<project>.publish_definition`: body = a ProjectDefinition as JSON. */
  // Bytes that do not decode (not UTF-8, not JSON) never reach the handler: the transport dead-letters them here.
  @MessagePattern(RouterPatterns.publishDefinition, { dlqSource: DEFINITIONS_DLQ_SOURCE })
  publish(@Payload() body: unknown, @Ctx() ctx: NatsRequestContext): Promise<PublishDefinitionReply> {
    return this.publishDefinition.execute(ctx.subject, body, ctx.headers);
  }
}
