import { DynamicModule, Module } from '@nestjs/common';
import { LedgerCommandListener } from './commands/command-listener';
import { LedgerCommands } from './commands/ledger-commands';
import { LEDGER_CONFIG, type LedgerConfig } from './config';
import { ProjectDirectory } from './projects/project-directory';
import { ProjectControlService } from './governance/project-control.service';
import { ClaimRateLimiter } from './governance/rate-limiter';
import { ProjectReactorController } from './reactor/project-reactor.controller';
import { HandoffReactor } from './reactor/handoff-reactor';
import { HandoffReactorController } from './reactor/handoff-reactor.controller';

/** The ledger: command request/reply, the handoff reactor and offers. Needs `RuntimeModule`. */
@Module({})
export class LedgerModule {
  static register(config: LedgerConfig): DynamicModule {
    return {
      module: LedgerModule,
      controllers: [HandoffReactorController, ProjectReactorController],
      providers: [
        { provide: LEDGER_CONFIG, useValue: config },
        { provide: ClaimRateLimiter, useValue: new ClaimRateLimiter(config.LEDGER_CLAIMS_PER_MINUTE, config.LEDGER_AGENT_CLAIM_CAPS) },
        ProjectDirectory,
        ProjectControlService,
        LedgerCommands,
        LedgerCommandListener,
        HandoffReactor,
      ],
      exports: [LedgerCommandListener],
    };
  }
}
