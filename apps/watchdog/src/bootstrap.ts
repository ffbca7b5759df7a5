import { runService, type RunningService } from '@baton/platform';
import { loadWatchdogConfig, WatchdogConfigSchema } from './config';
import type { RequeueOutcome } from './requeue/requeue-loop';
import { WatchdogModule } from './watchdog.module';

export interface StartWatchdogOptions {
  /** The environment to read (default `process.env`). */
  env?: Record<string, string | undefined>;
  /** Observe every requeue outcome (tests; metrics later). */
  onRequeueOutcome?: (outcome: RequeueOutcome) => void;
  /** Observe every `expire_deadline` outcome (tests). */
  onDeadlineOutcome?: (outcome: RequeueOutcome) => void;
}

/** The watchdog's default HTTP port (health and `/watchdog/status`). */
export const WATCHDOG_DEFAULT_PORT = 7103;

/**
 * Start the watchdog service: validate its settings (throws `ConfigError` naming each bad
 * variable), then `runService` (connect, provision, HTTP health). The deadline tables and loop
 * guards are restored from the last snapshot that fits and brought up to date from the events
 * stream (all of it without one: `WatchdogSnapshots`); requeueing begins once they have caught up. The watchdog does not use Redis. Call `stop()` on the result to shut down in order.
 */
export async function startWatchdog(opts: StartWatchdogOptions = {}): Promise<RunningService> {
  const env = opts.env ?? process.env;
  const config = loadWatchdogConfig(env);
  return runService({
    ownSettings: Object.keys(WatchdogConfigSchema.shape),
    service: 'watchdog',
    defaultPort: WATCHDOG_DEFAULT_PORT,
    redis: false,
    imports: [
      WatchdogModule.forRoot({
        config,
        ...(opts.onRequeueOutcome ? { onRequeueOutcome: opts.onRequeueOutcome } : {}),
        ...(opts.onDeadlineOutcome ? { onDeadlineOutcome: opts.onDeadlineOutcome } : {}),
      }),
    ],
    env,
  });
}
