import { DynamicModule, Module } from '@nestjs/common';
import { LedgerCommandListener } from './commands/command-listener';
import { LedgerCommands } from './commands/ledger-commands';
import { LEDGER_CONFIG, type LedgerConfig } from './config';
import { ProjectDirectory } from './projects/project-directory';
import { HandoffReactor } from './reactor/handoff-reactor';
import { HandoffReactorController } from './reactor/handoff-reactor.controller';

/** The ledger: command request/reply, the handoff reactor and offers. Needs `RuntimeModule`. */
@Module({})
export class LedgerModule {
  static register(config: LedgerConfig): DynamicModule {
    return {
      module: LedgerModule,
      controllers: [HandoffReactorController],
      providers: [{ provide: LEDGER_CONFIG, useValue: config }, ProjectDirectory, LedgerCommands, LedgerCommandListener, HandoffReactor],
      exports: [LedgerCommandListener],
    };
  }
}
