import { Global, Module } from '@nestjs/common';
import { Principals } from '@baton/contracts';
import { createBatonProjector, createBatonViews, createProjectionStore, type ProjectionStore } from '@baton/projections';
import { METRICS, READINESS_DETAILS, RedisFullWatch, RUNTIME, type BatonMetrics, type ServiceRuntime } from '@baton/platform';
import { LedgerClient } from '@baton/eventstore';
import { AppliedEvents } from './applied-events';
import { NoticePublisher } from './notice-publisher';
import { ProjectionApplier } from './projection-applier';
import { ProjectionStatus, projectionReadiness } from './projection-status';
import { StandingBack } from './stand-back';
import { BATON_PROJECTOR, BATON_VIEWS, LEDGER_CLIENT, PROJECTION_STORE, projectionPrefix } from './tokens';

/**
 * The projection store on the runtime's Redis, the projector and its applier, the read side, the
 * ledger client, the projections' status (rebuilds and their progress), the watch of a full Redis,
 * whether this notifier stands back from a newer release's projections. Global, so that the
 * platform's `/health/ready` finds the readiness details it provides.
 */
@Global()
@Module({
  providers: [
    {
      provide: PROJECTION_STORE,
      inject: [RUNTIME],
      useFactory: (runtime: ServiceRuntime): ProjectionStore => {
        if (!runtime.redis) throw new Error('the notifier needs Redis (REDIS_URL)');
        return createProjectionStore({ redis: runtime.redis.client, prefix: projectionPrefix(runtime.config.BATON_PREFIX) });
      },
    },
    { provide: BATON_PROJECTOR, inject: [PROJECTION_STORE], useFactory: (store: ProjectionStore) => createBatonProjector({ store }) },
    { provide: BATON_VIEWS, inject: [PROJECTION_STORE], useFactory: (store: ProjectionStore) => createBatonViews(store) },
    {
      provide: LEDGER_CLIENT,
      inject: [RUNTIME],
      // `op.notifier`: each call names the operator its token authenticated (name and role).
      useFactory: (runtime: ServiceRuntime) =>
        new LedgerClient(runtime.nats, runtime.config.BATON_PREFIX, { as: Principals.operator('notifier'), attempts: 2 }),
    },
    {
      // A full Redis (maxmemory, noeviction) said once, counted and shown (docs/sre.md, What fills Redis).
      provide: RedisFullWatch,
      inject: [RUNTIME, METRICS],
      useFactory: (runtime: ServiceRuntime, metrics: BatonMetrics) => {
        const watch = new RedisFullWatch(runtime.logger, { onRefused: () => metrics.redisFullRefused.inc() });
        metrics.watchRedis(() => watch.full());
        return watch;
      },
    },
    NoticePublisher,
    AppliedEvents,
    ProjectionApplier,
    StandingBack,
    ProjectionStatus,
    { provide: READINESS_DETAILS, inject: [ProjectionStatus, RedisFullWatch], useFactory: projectionReadiness },
  ],
  exports: [PROJECTION_STORE, BATON_PROJECTOR, BATON_VIEWS, LEDGER_CLIENT, AppliedEvents, ProjectionStatus, RedisFullWatch, StandingBack, READINESS_DETAILS],
})
export class ProjectionModule {}
