import { runService, type RunningService } from '@baton/platform';
import { loadRouterConfig, RouterConfigSchema } from './config';
import { RouterModule } from './router.module';

/** The router's default HTTP port (health endpoints); `HTTP_PORT` overrides it. */
export const ROUTER_PORT = 7101;

/**
 * MiB of estimated heap the router's folded states may weigh together when `BATON_FOLD_CACHE_MB`
 * is unset. What it folds: the runs it decides on and the handoffs its claim checks read, which
 * are the ones moving now; with 32 MiB the handoffs of finished hops (a few KB each with their
 * contexts) filled the cache and took the router past 140 MB with 100 000 open handoffs
 * (docs/performance.md, fifteenth run).
 */
export const ROUTER_FOLD_CACHE_MB = 16;

/**
 * Start the router service: validate the environment, connect, provision the streams, bind the
 * request/reply subject and the durable consumers (run starts, agent results, operator answers,
 * run events), and serve /health/live and /health/ready. `env` defaults to `process.env`.
 */
export async function startRouter(env?: Record<string, string | undefined>): Promise<RunningService> {
  const config = loadRouterConfig(env ?? process.env);
  // The router keeps nothing in Redis: no connection, and a Redis outage never makes it unready.
  return runService({
    ownSettings: Object.keys(RouterConfigSchema.shape),
    service: 'router',
    defaultPort: ROUTER_PORT,
    defaultCacheMb: ROUTER_FOLD_CACHE_MB,
    redis: false,
    imports: [RouterModule.register(config)],
    ...(env ? { env } : {}),
  });
}
