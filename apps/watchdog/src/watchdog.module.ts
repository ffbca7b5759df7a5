import { DynamicModule, Inject, Injectable, Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { Principals, ServiceActors, Subjects } from '@baton/contracts';
import type { GuardConfig } from '@baton/domain';
import { LedgerClient, batonStreamNames, followHub, hopTraceHeaders, retireConsumers, type FollowHub } from '@baton/eventstore';
import { JetStreamClient, RUNTIME, type ServiceRuntime } from '@baton/platform';
import { WATCHDOG_CONFIG, type WatchdogConfig } from './config';
import { DeadlineTracker } from './deadlines/deadline-tracker';
import { DEADLINE_SLOT, expireDeadlineLedger, HandoffDeadlineTracker } from './deadlines/handoff-deadlines';
import { GuardBook } from './guards/guard-book';
import { GuardRunner } from './guards/guard-runner';
import { SnapshotStore } from './snapshot/snapshot-store';
import { WatchdogSnapshots } from './snapshot/watchdog-snapshots';
import { EscalationStopper, type InboxPublisher } from './escalation/escalation-stopper';
import { RequeueLoop, type RequeueOutcome } from './requeue/requeue-loop';
import { REQUEUE_LEDGER, type RequeueLedger } from './requeue/requeue-port';
import { StatusController } from './status/status.controller';
import { EVENTS_HUB } from './stream/stream-follower';

/** The actor the watchdog's ledger commands (derived by the ledger from `svc.watchdog`) and stop requests are issued as. */
export const WATCHDOG_ACTOR = ServiceActors.watchdog.actor;

export interface WatchdogModuleOptions {
  config: WatchdogConfig;
  /** Observe every requeue outcome (tests; metrics later). */
  onRequeueOutcome?: (outcome: RequeueOutcome) => void;
  /** Observe every `expire_deadline` outcome (tests). */
  onDeadlineOutcome?: (outcome: RequeueOutcome) => void;
}

const WATCHDOG_OPTIONS = Symbol('WATCHDOG_OPTIONS');

/**
 * Durables earlier watchdogs read and this one does not: `watchdog_escalations` (handoff events,
 * for `handoff.escalated`), replaced by the events follower the guards already share. Deleted at
 * start so that no cursor is left on the events stream with a pending count that only grows.
 */
export const RETIRED_DURABLES: readonly string[] = ['watchdog_escalations'];

/** The second requeue loop: it walks the handoff-deadline table and sends `expire_deadline`. */
export const DEADLINE_LOOP = Symbol('DEADLINE_LOOP');

/**
 * The one consumer the watchdog's followers of the events stream share: every event is delivered
 * to the watchdog once and handed in process to the guards (every event) and the two deadline
 * tables (handoff events), instead of once per follower.
 */
export { EVENTS_HUB };

/** What every follower of the events stream (deadlines, guards, handoff deadlines) is built with. */
function eventsFollower(runtime: ServiceRuntime, hub: FollowHub, component: string) {
  return {
    js: runtime.nats.js,
    stream: batonStreamNames(runtime.config.BATON_PREFIX).events,
    follow: hub.follow.bind(hub),
    prefix: runtime.config.BATON_PREFIX,
    registry: runtime.registry,
    logger: runtime.logger.child({ component }),
  };
}

/**
 * The watchdog's ledger client (`<prefix>.cmd.ledger.<project>.svc.watchdog.*`: `requeue_expired`
 * and `expire_deadline` are the watchdog's alone): one attempt per call, since its loops retry
 * after WATCHDOG_RETRY_MS.
 */
function watchdogLedger(runtime: ServiceRuntime, config: WatchdogConfig): LedgerClient {
  return new LedgerClient(runtime.nats, runtime.config.BATON_PREFIX, {
    as: Principals.service('watchdog'),
    timeoutMs: config.WATCHDOG_REQUEST_TIMEOUT_MS,
    attempts: 1,
  });
}

/** The loop guards' settings (the guard book's, and what a snapshot's fingerprint covers). */
function guardConfigOf(config: WatchdogConfig): GuardConfig {
  return {
    maxHops: config.WATCHDOG_MAX_HOPS,
    maxAlternations: config.WATCHDOG_MAX_ALTERNATIONS,
    circuitFailures: config.WATCHDOG_CIRCUIT_FAILURES,
    circuitCooldownMs: config.WATCHDOG_CIRCUIT_COOLDOWN_MS,
  };
}

/** The pacing both requeue loops share. */
function loopPacing(config: WatchdogConfig) {
  return { tickMs: config.WATCHDOG_TICK_MS, retryMs: config.WATCHDOG_RETRY_MS, maxInflight: config.WATCHDOG_MAX_INFLIGHT, batch: config.WATCHDOG_BATCH };
}

/**
 * Starts the deadline tracker when the application boots and the requeue loop once the table has
 * caught up with the events stream (requeueing from a half-rebuilt table would only produce
 * refusals); stops both, loop first, when the application closes (before NATS is drained).
 */
@Injectable()
export class WatchdogLifecycle implements OnApplicationBootstrap, OnModuleDestroy {
  private closing = false;

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(DeadlineTracker) private readonly tracker: DeadlineTracker,
    @Inject(RequeueLoop) private readonly loop: RequeueLoop,
    @Inject(GuardRunner) private readonly guards: GuardRunner,
    @Inject(HandoffDeadlineTracker) private readonly deadlines: HandoffDeadlineTracker,
    @Inject(DEADLINE_LOOP) private readonly deadlineLoop: RequeueLoop,
    @Inject(EVENTS_HUB) private readonly hub: FollowHub,
    @Inject(WatchdogSnapshots) private readonly snapshots: WatchdogSnapshots,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const events = batonStreamNames(this.runtime.config.BATON_PREFIX).events;
    const retired = await retireConsumers(
      this.runtime.nats.jsm,
      RETIRED_DURABLES.map((durable) => ({ stream: events, durable })),
    );
    for (const [name, action] of Object.entries(retired))
      if (action === 'deleted') this.runtime.logger.info('retired durable consumer deleted', { consumer: name });
    // The folds as the last snapshot left them (if one fits), then the events after it.
    const startSeq = await this.snapshots.restore();
    // The three followers join the hub, then its one consumer opens.
    await this.guards.start(startSeq);
    await this.deadlines.start(startSeq);
    await this.tracker.start(startSeq);
    await this.hub.start();
    void this.guards.caughtUp().then(() => {
      if (!this.closing) this.snapshots.start();
    });
    void this.deadlines.caughtUp().then(() => {
      if (!this.closing) this.deadlineLoop.start();
    });
    void this.tracker.caughtUp().then(
      () => {
        if (!this.closing) this.loop.start();
      },
      (error: unknown) => this.runtime.logger.error('the deadline table never caught up', error instanceof Error ? error : { error: String(error) }),
    );
  }

  async onModuleDestroy(): Promise<void> {
    this.closing = true;
    await this.snapshots.stop();
    await this.loop.stop();
    await this.deadlineLoop.stop();
    await this.tracker.stop();
    await this.deadlines.stop();
    await this.guards.stop();
    await this.hub.stop();
  }
}

/**
 * The watchdog: lease expiry → `requeue_expired` (deadlines rebuilt at start from its snapshot and
 * the events stream), and `stop_why` escalations → a stop request for the handoff's run.
 */
/**
 * How the watchdog publishes a stop request: under its `Nats-Msg-Id` (`stop:<project>:<packet>`),
 * stored even when another publisher took that id first on another subject (`publishOwned`); such a
 * case is logged.
 */
function inboxPublisher(client: JetStreamClient, runtime: ServiceRuntime): InboxPublisher {
  return async (subject, body, msgId, trace) => {
    const ack = await client.publishOwned(subject, body, msgId, { headers: hopTraceHeaders(trace) });
    if (ack.foreign.length > 0)
      runtime.logger.warn('stop request id taken by another publisher; published under another id', {
        msg_id: msgId,
        stored_as: ack.msgId,
        taken_by: ack.foreign,
      });
    return ack;
  };
}

@Module({})
export class WatchdogModule {
  static forRoot(options: WatchdogModuleOptions): DynamicModule {
    const { config } = options;
    return {
      module: WatchdogModule,
      controllers: [StatusController],
      providers: [
        { provide: WATCHDOG_OPTIONS, useValue: options },
        { provide: WATCHDOG_CONFIG, useValue: config },
        {
          provide: EVENTS_HUB,
          inject: [RUNTIME],
          useFactory: (runtime: ServiceRuntime): FollowHub =>
            followHub({
              js: runtime.nats.js,
              stream: batonStreamNames(runtime.config.BATON_PREFIX).events,
              filterSubject: Subjects.events(runtime.config.BATON_PREFIX),
            }),
        },
        {
          provide: REQUEUE_LEDGER,
          inject: [RUNTIME],
          // One attempt per tick: the loop itself retries after WATCHDOG_RETRY_MS.
          useFactory: (runtime: ServiceRuntime): RequeueLedger => watchdogLedger(runtime, config),
        },
        {
          provide: DeadlineTracker,
          inject: [RUNTIME, EVENTS_HUB],
          useFactory: (runtime: ServiceRuntime, hub: FollowHub) => new DeadlineTracker(eventsFollower(runtime, hub, 'deadlines')),
        },
        {
          provide: RequeueLoop,
          inject: [RUNTIME, DeadlineTracker, REQUEUE_LEDGER, EVENTS_HUB],
          useFactory: (runtime: ServiceRuntime, tracker: DeadlineTracker, ledger: RequeueLedger, hub: FollowHub) =>
            new RequeueLoop({
              table: tracker.table,
              ledger,
              // A lease expiring is acted on once the events stored by then are read (a result among them holds it).
              position: hub,
              logger: runtime.logger.child({ component: 'requeue' }),
              ...loopPacing(config),
              ...(options.onRequeueOutcome ? { onOutcome: options.onRequeueOutcome } : {}),
            }),
        },
        {
          provide: EscalationStopper,
          inject: [RUNTIME],
          useFactory: (runtime: ServiceRuntime) => {
            const client = new JetStreamClient(runtime.nats);
            return new EscalationStopper({
              prefix: runtime.config.BATON_PREFIX,
              store: runtime.store,
              publish: inboxPublisher(client, runtime),
              logger: runtime.logger.child({ component: 'escalation' }),
              actor: WATCHDOG_ACTOR,
            });
          },
        },
        {
          provide: GuardRunner,
          inject: [RUNTIME, EVENTS_HUB, EscalationStopper, DeadlineTracker, HandoffDeadlineTracker, GuardBook],
          useFactory: (
            runtime: ServiceRuntime,
            hub: FollowHub,
            escalations: EscalationStopper,
            leases: DeadlineTracker,
            deadlines: HandoffDeadlineTracker,
            book: GuardBook,
          ) => {
            const client = new JetStreamClient(runtime.nats);
            return new GuardRunner({
              escalations,
              // Both follow one hub in stream order: a claim is in the table before the result that answers it arrives.
              // A recorded result holds the claim's lease and the handoff's deadline alike: the
              // router is closing the handoff with it (docs/handoffs.md rule 4a), so neither a
              // requeue nor a deadline expiry may land first and charge the agent for accepted work.
              onClaimAnswered: (project, answered) => {
                leases.table.answer(project, answered.handoff, answered.claim_id, config.WATCHDOG_ANSWERED_HOLD_MS);
                deadlines.table.answer(project, answered.handoff, DEADLINE_SLOT, config.WATCHDOG_ANSWERED_HOLD_MS);
              },
              ...eventsFollower(runtime, hub, 'guards'),
              book,
              publish: inboxPublisher(client, runtime),
              actor: WATCHDOG_ACTOR,
              lapseSettleMs: config.WATCHDOG_LAPSE_SETTLE_MS,
            });
          },
        },
        { provide: GuardBook, useValue: new GuardBook(guardConfigOf(config)) },
        {
          provide: WatchdogSnapshots,
          inject: [RUNTIME, EVENTS_HUB, GuardBook, GuardRunner, DeadlineTracker, HandoffDeadlineTracker],
          useFactory: (
            runtime: ServiceRuntime,
            hub: FollowHub,
            book: GuardBook,
            runner: GuardRunner,
            leases: DeadlineTracker,
            deadlines: HandoffDeadlineTracker,
          ) =>
            new WatchdogSnapshots({
              store: new SnapshotStore(runtime.nats, runtime.config.BATON_PREFIX, runtime.config.BATON_STREAM_REPLICAS),
              jsm: runtime.nats.jsm,
              eventsStream: batonStreamNames(runtime.config.BATON_PREFIX).events,
              guardConfig: guardConfigOf(config),
              intervalMs: config.WATCHDOG_SNAPSHOT_INTERVAL_MS,
              instance: runtime.instance,
              logger: runtime.logger.child({ component: 'snapshots' }),
              parts: { book, runner, leases: leases.table, deadlines, position: () => hub.lastSeq() },
            }),
        },
        {
          provide: HandoffDeadlineTracker,
          inject: [RUNTIME, EVENTS_HUB],
          useFactory: (runtime: ServiceRuntime, hub: FollowHub) => new HandoffDeadlineTracker(eventsFollower(runtime, hub, 'handoff-deadlines')),
        },
        {
          provide: DEADLINE_LOOP,
          inject: [RUNTIME, HandoffDeadlineTracker, EVENTS_HUB],
          useFactory: (runtime: ServiceRuntime, deadlines: HandoffDeadlineTracker, hub: FollowHub) => {
            const client = watchdogLedger(runtime, config);
            return new RequeueLoop({
              table: deadlines.table,
              position: hub,
              ledger: expireDeadlineLedger((project, command, body) => client.send(project, command, body)),
              logger: runtime.logger.child({ component: 'deadline-expiry' }),
              ...loopPacing(config),
              ...(options.onDeadlineOutcome ? { onOutcome: options.onDeadlineOutcome } : {}),
            });
          },
        },
        WatchdogLifecycle,
      ],
    };
  }
}
