import { Module } from '@nestjs/common';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { DefinitionCatalog } from '../definitions/definition-catalog';
import { createRouterLedger, LEDGER } from '../dispatch/ledger';
import { HandoffClaims } from '../shared/handoff-claims';
import { RefusalBudget } from '../shared/refusal-budget';
import { AnswerMeshStopUseCase } from './answer-mesh-stop';
import { MeshCommands } from './mesh-commands';
import { MeshReactor } from './mesh-reactor';
import { MeshesController } from './meshes.controller';
import { RecordMeshTurnUseCase } from './record-mesh-turn';
import { StartMeshUseCase } from './start-mesh';

/**
 * Handoff meshes (seed 004): the router is the only writer of the mesh aggregate. Self-contained
 * (its own definition cache and ledger client), so the router module imports it with one line.
 */
@Module({
  controllers: [MeshesController],
  providers: [
    DefinitionCatalog,
    MeshCommands,
    HandoffClaims,
    StartMeshUseCase,
    RecordMeshTurnUseCase,
    AnswerMeshStopUseCase,
    MeshReactor,
    RefusalBudget,
    {
      provide: LEDGER,
      inject: [RUNTIME],
      useFactory: (runtime: ServiceRuntime) => createRouterLedger(runtime.nats, runtime.config.BATON_PREFIX),
    },
  ],
  // The run stop use case stops a mesh when the watchdog's stop names a mesh run. One budget of
  // refusals recorded on runs and meshes for the whole router: the run commands take it from here.
  exports: [MeshCommands, RefusalBudget],
})
export class MeshesModule {}
