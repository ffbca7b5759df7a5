import { runService, type RunningService } from '@baton/platform';
import { RouterModule } from './router.module';

/** The router's default HTTP port (health endpoints); `HTTP_PORT` overrides it. */
export const ROUTER_PORT = 7101;

/**
 * Start the router service: validate the environment, connect, provision the streams, bind the
 * request/reply subject and the durable consumers (run starts, agent results, operator answers,
 * run events), and serve /health/live and /health/ready. `env` defaults to `process.env`.
 */
export function startRouter(env?: Record<string, string | undefined>): Promise<RunningService> {
  return runService({ service: 'router', defaultPort: ROUTER_PORT, imports: [RouterModule], ...(env ? { env } : {}) });
}
