import { ConfigError, exitOnStartFailure, registerProjectionGauges, runService, type RunningService } from '@baton/platform';
import { PROJECTION_STORE } from './projection/tokens';
import { ApiExceptionFilter } from './api/http';
import { NotifierModule } from './notifier.module';
import { NotifierConfigSchema } from './notifier.config';
import { isApiPath } from './http/private-responses';

/** The notifier's default HTTP port (operator API, OpenAPI document, health). */
export const NOTIFIER_PORT = 7100;

/**
 * Start the notifier: connect, provision the streams, rebuild stale projections from the events
 * stream, start applying events (and publishing notices, to NATS and to webhooks), then serve the
 * operator API and the web inbox. Notifier settings (NOTIFIER_*) are validated first.
 * `env` overrides `process.env` (tests pass a random BATON_PREFIX and HTTP_PORT 0).
 */
export async function startNotifier(env?: Record<string, string | undefined>): Promise<RunningService> {
  let notifier;
  try {
    notifier = NotifierModule.register(env ?? process.env);
  } catch (error) {
    if (error instanceof ConfigError && env === undefined) {
      process.stderr.write(`baton notifier: ${error.message}\n`);
      process.exit(78);
    }
    throw error;
  }
  return runService({
    ownSettings: Object.keys(NotifierConfigSchema.shape),
    service: 'notifier',
    defaultPort: NOTIFIER_PORT,
    imports: [notifier],
    redis: true,
    httpExceptionFilter: new ApiExceptionFilter(),
    // The JSON API authenticates every route: an unreadable body is refused after the 401 check.
    deferBodyErrors: isApiPath,
    // Inbox size and open handoffs by status, read from the projections this service keeps.
    metrics: (metrics, app) => registerProjectionGauges(metrics, app.get(PROJECTION_STORE)),
    ...(env ? { env } : {}),
  });
}

if (require.main === module) {
  startNotifier().catch(exitOnStartFailure('notifier'));
}
