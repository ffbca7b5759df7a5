import { Controller, UseFilters } from '@nestjs/common';
import { Ctx, EventPattern } from '@nestjs/microservices';
import { JetStreamContext, JetStreamExceptionFilter } from '@baton/platform';
import { perRun, routerConsumer } from '../shared/ordering';
import { inboundOrigin } from '../shared/refusal-budget';
import { RouterPatterns } from '../shared/subjects';
import { RecordResultUseCase } from './use-cases/record-result';
import { ResumeRunUseCase } from './use-cases/resume-run';
import { SessionMessageUseCase } from './use-cases/session-message';
import { StartRunUseCase } from './use-cases/start-run';
import { StopRunUseCase } from './use-cases/stop-run';

/**
 * The router's inbox (durable pull consumers on `<PREFIX>_INBOX`, one per pattern). Each handler
 * decodes the original bytes itself (size cap first), so the transport's parsed payload is not
 * used. Resolving acks; a PoisonError dead-letters; anything else is retried with a delay.
 */
@Controller()
// runService installs HybridExceptionFilter globally; this keeps the controller safe when it is
// mounted in a plain microservice (tests) as well.
@UseFilters(new JetStreamExceptionFilter())
export class RunsController {
  constructor(
    private readonly startRun: StartRunUseCase,
    private readonly recordResult: RecordResultUseCase,
    private readonly resumeRun: ResumeRunUseCase,
    private readonly stopRun: StopRunUseCase,
    private readonly sessionMessage: SessionMessageUseCase,
  ) {}

  @EventPattern(RouterPatterns.runStart, routerConsumer(RouterPatterns.runStart, perRun))
  onStart(@Ctx() ctx: JetStreamContext): Promise<void> {
    return this.startRun.execute(ctx.subject, ctx.data, ctx.trace);
  }

  @EventPattern(RouterPatterns.agentRunStart, routerConsumer(RouterPatterns.agentRunStart, perRun))
  onAgentStart(@Ctx() ctx: JetStreamContext): Promise<void> {
    return this.startRun.execute(ctx.subject, ctx.data, ctx.trace);
  }

  @EventPattern(RouterPatterns.agentResult, routerConsumer(RouterPatterns.agentResult, perRun))
  onResult(@Ctx() ctx: JetStreamContext): Promise<void> {
    return this.recordResult.execute(ctx.subject, ctx.data, ctx.trace, ctx.storedAt);
  }

  @EventPattern(RouterPatterns.operatorAnswer, routerConsumer(RouterPatterns.operatorAnswer, perRun))
  onAnswer(@Ctx() ctx: JetStreamContext): Promise<void> {
    return this.resumeRun.execute(ctx.subject, ctx.data, ctx.trace);
  }

  @EventPattern(RouterPatterns.sessionMessage, routerConsumer(RouterPatterns.sessionMessage, perRun))
  onMessage(@Ctx() ctx: JetStreamContext): Promise<void> {
    return this.sessionMessage.execute(ctx.subject, ctx.data, ctx.trace, ctx.deliveryCount, inboundOrigin(ctx, RouterPatterns.sessionMessage));
  }

  @EventPattern(RouterPatterns.agentSessionMessage, routerConsumer(RouterPatterns.agentSessionMessage, perRun))
  onAgentMessage(@Ctx() ctx: JetStreamContext): Promise<void> {
    return this.sessionMessage.execute(ctx.subject, ctx.data, ctx.trace, ctx.deliveryCount, inboundOrigin(ctx, RouterPatterns.agentSessionMessage));
  }

  @EventPattern(RouterPatterns.stopRequest, routerConsumer(RouterPatterns.stopRequest, perRun))
  onStop(@Ctx() ctx: JetStreamContext): Promise<void> {
    return this.stopRun.execute(ctx.subject, ctx.data, ctx.trace);
  }
}
