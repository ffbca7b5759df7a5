import { Controller } from '@nestjs/common';
import { Ctx, MessagePattern, Payload } from '@nestjs/microservices';
import { NatsRequestContext } from '@baton/platform';
import type { PublishDefinitionReply } from '../contracts';
import { RouterPatterns } from '../shared/subjects';
import { PublishDefinitionUseCase } from './publish-definition';

/** Request/reply entry point for project definitions (core NATS, queue group `router`). */
@Controller()
export class DefinitionsController {
  constructor(private readonly publishDefinition: PublishDefinitionUseCase) {}

  /** `<prefix>.cmd.router.<project>.publish_definition`: body = a ProjectDefinition as JSON. */
  @MessagePattern(RouterPatterns.publishDefinition)
  publish(@Payload() body: unknown, @Ctx() ctx: NatsRequestContext): Promise<PublishDefinitionReply> {
    return this.publishDefinition.execute(ctx.subject, body, ctx.headers);
  }
}
