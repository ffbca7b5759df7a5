import { DynamicModule, Module } from '@nestjs/common';
import { REFUSED_LETTER_WINDOW_MS, RefusedLetterCap, RefusedLetters, RUNTIME, type ServiceRuntime } from '@baton/platform';
import { LedgerCommandListener } from './commands/command-listener';
import { AgentEdgeRelay } from './edge/agent-edge';
import { TERMINATED_OFFER_GRACE, TerminatedOffers } from './edge/terminated-offers';
import { COMMAND_REFUSED_LETTERS, EDGE_REFUSED_LETTERS } from './edge/refusal-tokens';
import { LedgerCommands } from './commands/ledger-commands';
import { LEDGER_CONFIG, type LedgerConfig } from './config';
import { ProjectDirectory } from './projects/project-directory';
import { ProjectControlService } from './governance/project-control.service';
import { CLAIM_WINDOW, ClaimRateStore } from './governance/claim-rate-store';
import { ClaimWindow, DEFAULT_CLAIM_WINDOW_MS } from './governance/rate-limiter';
import { ProjectReactorController } from './reactor/project-reactor.controller';
import { HandoffReactor } from './reactor/handoff-reactor';
import { HandoffReactorController } from './reactor/handoff-reactor.controller';
import { OfferPublisher } from './offers/offer-publisher';
import { OfferConsumers } from './offers/offer-consumers';

/** Settings that are not configuration: tests use them to run quickly. */
export interface LedgerOptions {
  /** Length of the claim rate window, ms (default one minute: the caps are claims per minute). */
  claimWindowMs?: number;
  /** Length of a sender's window of refused letters, ms (default one minute: the budget is letters per minute). */
  refusalWindowMs?: number;
  /** How long a terminated offer waits before the ledger gives it up for its agent, ms (default `TERMINATED_OFFER_GRACE_MS`). */
  terminatedOfferGraceMs?: number;
}

/** The ledger: command request/reply, the handoff reactor and offers. Needs `RuntimeModule`. */
@Module({})
export class LedgerModule {
  static register(config: LedgerConfig, options: LedgerOptions = {}): DynamicModule {
    return {
      module: LedgerModule,
      controllers: [HandoffReactorController, ProjectReactorController],
      providers: [
        { provide: LEDGER_CONFIG, useValue: config },
        { provide: TERMINATED_OFFER_GRACE, useValue: options.terminatedOfferGraceMs ?? null },
        { provide: CLAIM_WINDOW, useValue: new ClaimWindow(options.claimWindowMs ?? DEFAULT_CLAIM_WINDOW_MS) },
        // Refused edge messages and rejected commands: each sender's letters capped, each path its own budget.
        ...(
          [
            [EDGE_REFUSED_LETTERS, 'edge messages'],
            [COMMAND_REFUSED_LETTERS, 'ledger commands'],
          ] as const
        ).map(([token, what]) => ({
          provide: token,
          inject: [RUNTIME],
          // The budget is the shared BATON_REFUSED_LETTERS_PER_MINUTE (runtime.config).
          useFactory: (runtime: ServiceRuntime) =>
            new RefusedLetters(
              runtime,
              new RefusedLetterCap(runtime.config.BATON_REFUSED_LETTERS_PER_MINUTE, options.refusalWindowMs ?? REFUSED_LETTER_WINDOW_MS),
              what,
            ),
        })),
        ClaimRateStore,
        ProjectDirectory,
        ProjectControlService,
        OfferConsumers,
        OfferPublisher,
        LedgerCommands,
        LedgerCommandListener,
        TerminatedOffers,
        AgentEdgeRelay,
        HandoffReactor,
      ],
      exports: [LedgerCommandListener, AgentEdgeRelay, TerminatedOffers],
    };
  }
}
