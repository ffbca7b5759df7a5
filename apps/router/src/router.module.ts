import { Module, type DynamicModule } from '@nestjs/common';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { DefinitionCatalog } from './definitions/definition-catalog';
import { DefinitionsController } from './definitions/definitions.controller';
import { PublishDefinitionUseCase } from './definitions/publish-definition';
import { DispatchController } from './dispatch/dispatch.controller';
import { DispatchReactor } from './dispatch/dispatch-reactor';
import { HandoffDeadlineController } from './dispatch/handoff-deadline.controller';
import { HandoffDeadlineReactor } from './dispatch/handoff-deadline-reactor';
import { createRouterLedger, LEDGER } from './dispatch/ledger';
import { RunCommands } from './runs/run-commands';
import { RunsController } from './runs/runs.controller';
import { RecordResultUseCase } from './runs/use-cases/record-result';
import { ResumeRunUseCase } from './runs/use-cases/resume-run';
import { StopRunUseCase } from './runs/use-cases/stop-run';
import { StartRunUseCase } from './runs/use-cases/start-run';
import { SessionMessageUseCase } from './runs/use-cases/session-message';
import { HandoffClaims } from './shared/handoff-claims';
import { MeshesModule } from './meshes/meshes.module';
import { ROUTER_CONFIG, type RouterConfig } from './config';

/**
 * The router: the only writer of the run and definition aggregates. Definitions (request/reply),
 * run starts, agent results and operator answers (the inbox), and the dispatch reactor (run
 * events → ledger handoffs; human action notices are the notifier's), and the handoff-deadline reactor (a
 * returnable child's `handoff.deadline_expired` → the run's `handoff_failed` timeout).
 */
@Module({
  imports: [MeshesModule],
  controllers: [DefinitionsController, RunsController, DispatchController, HandoffDeadlineController],
  providers: [
    DefinitionCatalog,
    PublishDefinitionUseCase,
    RunCommands,
    HandoffClaims,
    StartRunUseCase,
    RecordResultUseCase,
    ResumeRunUseCase,
    StopRunUseCase,
    SessionMessageUseCase,
    DispatchReactor,
    HandoffDeadlineReactor,
    {
      provide: LEDGER,
      inject: [RUNTIME],
      useFactory: (runtime: ServiceRuntime) => createRouterLedger(runtime.nats, runtime.config.BATON_PREFIX),
    },
  ],
})
export class RouterModule {
  /** The router with its own settings (`ROUTER_*`, {@link RouterConfig}). */
  static register(config: RouterConfig): DynamicModule {
    return { module: RouterModule, providers: [{ provide: ROUTER_CONFIG, useValue: config }] };
  }
}
