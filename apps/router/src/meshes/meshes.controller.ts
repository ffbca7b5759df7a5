import { Controller, UseFilters } from '@nestjs/common';
import { Ctx, EventPattern } from '@nestjs/microservices';
import { JetStreamContext, JetStreamExceptionFilter } from '@baton/platform';
import { AnswerMeshStopUseCase } from './answer-mesh-stop';
import { routerConsumer } from '../shared/ordering';
import { inboundOrigin } from '../shared/refusal-budget';
import { MeshPatterns } from './mesh-subjects';
import { MeshReactor } from './mesh-reactor';
import { RecordMeshTurnUseCase } from './record-mesh-turn';
import { StartMeshUseCase } from './start-mesh';

/**
 * Handoff meshes in the router: mesh starts, mesh turns and operators' answers to mesh stops (durable pull consumers on
 * `<PREFIX>_INBOX`) and the mesh reactor (a durable consumer of the mesh events on
 * `<PREFIX>_EVENTS`, handed to its reactor table by the transport). Inbox handlers decode the
 * original bytes themselves; resolving acks, a PoisonError dead-letters, anything else is retried
 * with a delay.
 */
@Controller()
@UseFilters(new JetStreamExceptionFilter())
export class MeshesController {
  constructor(
    private readonly startMesh: StartMeshUseCase,
    private readonly recordTurn: RecordMeshTurnUseCase,
    private readonly reactor: MeshReactor,
    private readonly answerStop: AnswerMeshStopUseCase,
  ) {}

  @EventPattern(MeshPatterns.meshStart, routerConsumer(MeshPatterns.meshStart))
  onStart(@Ctx() ctx: JetStreamContext): Promise<void> {
    return this.startMesh.execute(ctx.subject, ctx.data, ctx.trace);
  }

  @EventPattern(MeshPatterns.agentMeshStart, routerConsumer(MeshPatterns.agentMeshStart))
  onAgentStart(@Ctx() ctx: JetStreamContext): Promise<void> {
    return this.startMesh.execute(ctx.subject, ctx.data, ctx.trace);
  }

  @EventPattern(MeshPatterns.meshResult, routerConsumer(MeshPatterns.meshResult))
  onTurn(@Ctx() ctx: JetStreamContext): Promise<void> {
    return this.recordTurn.execute(ctx.subject, ctx.data, ctx.trace, ctx.storedAt, inboundOrigin(ctx, MeshPatterns.meshResult));
  }

  @EventPattern(MeshPatterns.meshAnswer, routerConsumer(MeshPatterns.meshAnswer))
  onAnswer(@Ctx() ctx: JetStreamContext): Promise<void> {
    return this.answerStop.execute(ctx.subject, ctx.data, ctx.trace);
  }

  @EventPattern(MeshPatterns.meshEvents, routerConsumer(MeshPatterns.meshEvents))
  onMeshEvent(@Ctx() ctx: JetStreamContext): Promise<void> {
    return ctx.react(this.reactor.table);
  }
}
