import { z } from 'zod';
import { HOP_CAP_MAX } from '@baton/domain';
import { envInt, loadServiceSettings } from '@baton/platform';

/**
 * The watchdog's own settings (the shared ones, NATS_URL, BATON_PREFIX..., are read by
 * `runService`). Every value has a default; a malformed one stops the process at start.
 */
export const WatchdogConfigSchema = z.object({
  /** How often the requeue loop looks for expired leases, in ms. */
  WATCHDOG_TICK_MS: envInt(10, 60_000).default(500),
  /** How long to wait before asking again about a lease whose requeue was refused or failed, in ms. */
  WATCHDOG_RETRY_MS: envInt(10, 600_000).default(5_000),
  /**
   * How long past its expiry a lease answered by an accepted result (or mesh turn) waits for the
   * router's completion before the watchdog requeues it anyway, in ms (docs/handoffs.md rule 4a).
   * Five minutes: the run has the result already, so a requeue only has the work done twice; a
   * router behind by more than 30 s (an overload round measured 9 000 events of backlog) had a
   * third of its reviews re-offered and worked again with the 30 s of earlier builds.
   */
  WATCHDOG_ANSWERED_HOLD_MS: envInt(0, 3_600_000).default(300_000),
  /**
   * How long after a lease lapse a circuit stop that lapse tripped waits before it is requested, in
   * ms: a result the inbox stored before the lease ran out may still be accepted (docs/handoffs.md
   * rule 4b) and its completion, voiding the lapse, closes the circuit again — the stop is then
   * dropped. 0: no wait.
   */
  WATCHDOG_LAPSE_SETTLE_MS: envInt(0, 600_000).default(10_000),
  /** Most `requeue_expired` requests in flight at once. */
  WATCHDOG_MAX_INFLIGHT: envInt(1, 1_000).default(32),
  /** Most expired leases handled in one tick (the rest wait for the next tick). */
  WATCHDOG_BATCH: envInt(1, 100_000).default(2_000),
  /** Timeout of one request to the ledger, in ms. */
  WATCHDOG_REQUEST_TIMEOUT_MS: envInt(100, 60_000).default(5_000),
  /** Loop guard: most hops a run may take before it stops with why `budget` (an operator's raise is held to the same most). */
  WATCHDOG_MAX_HOPS: envInt(1, HOP_CAP_MAX).default(50),
  /** Loop guard: most direction changes on one edge (A→B→A…) within a run before it stops with why `thrash`. */
  WATCHDOG_MAX_ALTERNATIONS: envInt(1, 10_000).default(4),
  /** Loop guard: consecutive failures of one agent that open its circuit (why `circuit_open`). */
  WATCHDOG_CIRCUIT_FAILURES: envInt(1, 10_000).default(3),
  /** Loop guard: how long an open circuit waits before one probe dispatch goes through, ms. */
  WATCHDOG_CIRCUIT_COOLDOWN_MS: envInt(0, 24 * 60 * 60 * 1000).default(60_000),
  /**
   * How often the watchdog saves its folds of the events stream (guard book, lease and deadline
   * tables) to the `<PREFIX>_WATCHDOG` stream, in ms; a restart restores the last snapshot and
   * reads only the events after it. 0: never saved nor restored (every start reads the whole
   * events stream).
   */
  WATCHDOG_SNAPSHOT_INTERVAL_MS: envInt(0, 24 * 60 * 60 * 1000).default(300_000),
});
export type WatchdogConfig = z.infer<typeof WatchdogConfigSchema>;

/** Read the watchdog's settings from `env`; throws `ConfigError` naming every bad variable. */
export function loadWatchdogConfig(env: Record<string, string | undefined> = process.env): WatchdogConfig {
  return loadServiceSettings(WatchdogConfigSchema, env);
}

/** Injection token for the {@link WatchdogConfig}. */
export const WATCHDOG_CONFIG = Symbol('WATCHDOG_CONFIG');
