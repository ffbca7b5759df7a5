import { z } from 'zod';
import { envInt, loadServiceSettings } from '@baton/platform';

/** Settings only the router reads (the shared ones, NATS_URL, BATON_PREFIX..., are read by `runService`). */
export const RouterConfigSchema = z.object({
  /**
   * Most refused results of one agent a run records (`run.result_rejected`) while it waits for
   * another agent (0 = no cap). An agent may publish a result naming any run of its project: each
   * such refusal recorded is an event on someone else's run. Past the cap the result is
   * dead-lettered `foreign_refusals_spent` instead (under its sender's budget of letters,
   * `BATON_REFUSED_LETTERS_PER_MINUTE`), and the run is left as it was. Counted in the run's own
   * events, so every router instance holds a run to the same cap. The same cap holds the run's own
   * agent's refused results while the run waits for no result (held, stopped, finished, waiting
   * for the customer): past it `idle_refusals_spent`. Its refusals on its own running turn are
   * always recorded (the circuit reads them).
   */
  ROUTER_FOREIGN_REFUSALS_PER_RUN: envInt(0, 1_000_000).default(3),
});
export type RouterConfig = z.infer<typeof RouterConfigSchema>;

/** Injection token for the {@link RouterConfig}. */
export const ROUTER_CONFIG = Symbol('ROUTER_CONFIG');

/** Validate the router's own variables; throws `ConfigError` naming each bad one. */
export function loadRouterConfig(env: Record<string, string | undefined> = process.env): RouterConfig {
  return loadServiceSettings(RouterConfigSchema, env);
}
