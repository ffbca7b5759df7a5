import { z } from 'zod';
import { loadConfig } from '@baton/platform';

/**
 * The watchdog's own settings (the shared ones, NATS_URL, BATON_PREFIX..., are read by
 * `runService`). Every value has a default; a malformed one stops the process at start.
 */
export const WatchdogConfigSchema = z.object({
  /** How often the requeue loop looks for expired leases, in ms. */
  WATCHDOG_TICK_MS: z.coerce.number().int().min(10).max(60_000).default(500),
  /** How long to wait before asking again about a lease whose requeue was refused or failed, in ms. */
  WATCHDOG_RETRY_MS: z.coerce.number().int().min(10).max(600_000).default(5_000),
  /** Most `requeue_expired` requests in flight at once. */
  WATCHDOG_MAX_INFLIGHT: z.coerce.number().int().min(1).max(1_000).default(32),
  /** Most expired leases handled in one tick (the rest wait for the next tick). */
  WATCHDOG_BATCH: z.coerce.number().int().min(1).max(100_000).default(2_000),
  /** Timeout of one request to the ledger, in ms. */
  WATCHDOG_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5_000),
});
export type WatchdogConfig = z.infer<typeof WatchdogConfigSchema>;

/** Read the watchdog's settings from `env`; throws `ConfigError` naming every bad variable. */
export function loadWatchdogConfig(env: Record<string, string | undefined> = process.env): WatchdogConfig {
  return loadConfig(WatchdogConfigSchema, env);
}

/** Injection token for the {@link WatchdogConfig}. */
export const WATCHDOG_CONFIG = Symbol('WATCHDOG_CONFIG');
