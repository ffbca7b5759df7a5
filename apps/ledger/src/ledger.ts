import { DlqSources, batonStreamNames } from '@baton/eventstore';
import { runService, type RunningService } from '@baton/platform';
import { LedgerConfigSchema, loadLedgerConfig } from './config';
import { LedgerModule, type LedgerOptions } from './ledger.module';
import { HANDOFF_EVENTS_PATTERN, REACTOR_DURABLE } from './reactor/handoff-reactor.controller';
import { PROJECT_EVENTS_PATTERN, PROJECT_REACTOR_DURABLE } from './reactor/project-reactor.controller';

/** Handoff events the reactor handles at once (one at a time per handoff). */
export const REACTOR_CONCURRENCY = 32;

/** The ledger's default HTTP port (health). */
export const LEDGER_PORT = 7102;

/** The ledger's folded-state cache when `BATON_FOLD_CACHE_SIZE` is unset. */
export const LEDGER_FOLD_CACHE_SIZE = 5_000;

/** MiB of estimated heap the ledger's folded handoffs may weigh together when `BATON_FOLD_CACHE_MB` is unset. */
export const LEDGER_FOLD_CACHE_MB = 16;

/**
 * Start the ledger service: request/reply on `<prefix>.cmd.ledger.>` (queue group `ledger`) and
 * the handoff reactor (durable `ledger_handoff_reactor` on `<prefix>.ev.*.handoff.*`, dead letters under `ledger-handoff-reactor`, one message
 * at a time per handoff, up to {@link REACTOR_CONCURRENCY} handoffs at once per instance). Throws `ConfigError` when a ledger variable is invalid.
 */
export async function startLedger(env: Record<string, string | undefined> = process.env, options: LedgerOptions = {}): Promise<RunningService> {
  const config = loadLedgerConfig(env);
  return runService({
    ownSettings: Object.keys(LedgerConfigSchema.shape),
    service: 'ledger',
    defaultPort: LEDGER_PORT,
    // The ledger keeps nothing in Redis (its state is the event stream and NATS KV): no connection,
    // and a Redis outage never makes it unready.
    redis: false,
    // The handoffs a ledger acts on are the ones moving now (created, claimed, returned within
    // seconds of each other); 5 000 of them keep its heap within 64 MB (docs/performance.md), and
    // 16 MiB keeps it there when handoffs carry large contexts (5 000 of the bench's weigh ~13).
    defaultCacheSize: LEDGER_FOLD_CACHE_SIZE,
    defaultCacheMb: LEDGER_FOLD_CACHE_MB,
    env,
    imports: [LedgerModule.register(config, options)],
    consumers: (runtime) => [
      {
        durable: REACTOR_DURABLE,
        dlqSource: DlqSources.ledgerHandoffReactor,
        stream: batonStreamNames(runtime.config.BATON_PREFIX).events,
        filterSubject: HANDOFF_EVENTS_PATTERN,
        patterns: [HANDOFF_EVENTS_PATTERN],
        // One handoff's events in order, different handoffs in parallel.
        concurrency: REACTOR_CONCURRENCY,
        orderingKey: 'subject',
        deliverFrom: 'all',
      },
      {
        durable: PROJECT_REACTOR_DURABLE,
        dlqSource: DlqSources.ledgerProjectReactor,
        stream: batonStreamNames(runtime.config.BATON_PREFIX).events,
        filterSubject: PROJECT_EVENTS_PATTERN,
        patterns: [PROJECT_EVENTS_PATTERN],
        concurrency: 1,
        deliverFrom: 'all',
      },
    ],
  });
}
