import { z } from 'zod';
import { envInt, loadServiceSettings } from '@baton/platform';
import { setOwn } from '@baton/contracts';

/** Settings only the ledger reads (the shared ones are in `ServiceConfigSchema`). */
export const LedgerConfigSchema = z.object({
  /** Lease a claim or heartbeat gets when the command names none, ms. */
  LEDGER_LEASE_MS: envInt(1_000, 24 * 60 * 60 * 1000).default(60_000),
  /**
   * Requests one ledger instance works on at once. One more is answered at once `overloaded`
   * (kind `unavailable`, retryable with the same key after `details.retry_after_ms`) instead of
   * waiting in memory: when the store slows down, callers time out and send again, and requests
   * kept without a bound would outgrow the heap.
   */
  LEDGER_MAX_INFLIGHT: envInt(1, 100_000).default(256),
  /** How long a project's definition (roster, lead, roles) is reused before it is re-checked, ms. */
  LEDGER_DEFINITION_TTL_MS: envInt(0, 10 * 60 * 1000).default(5_000),
  /**
   * Rate cap: claims per minute per agent (0 = no cap). One count per agent and project for all
   * ledger instances of the prefix, kept in the `<PREFIX>_CLAIM_RATES` KV bucket (see ClaimRateStore).
   */
  LEDGER_CLAIMS_PER_MINUTE: envInt(0, 1_000_000).default(0),
  /** Per-agent overrides of the rate cap: `agent=claims,agent2=claims` (0 = no cap for that agent). */
  LEDGER_AGENT_CLAIM_CAPS: z
    .string()
    .default('')
    .transform((raw, ctx) => {
      const caps: Record<string, number> = {};
      for (const part of raw
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean)) {
        const [agent, value] = part.split('=');
        const n = Number(value);
        if (!agent || !Number.isInteger(n) || n < 0) {
          ctx.addIssue({ code: 'custom', message: `"${part}" is not agent=<claims per minute>` });
          return z.NEVER;
        }
        setOwn(caps, agent.trim(), n);
      }
      return caps;
    }),
});
export type LedgerConfig = z.infer<typeof LedgerConfigSchema>;

/** Injection token for the {@link LedgerConfig}. */
export const LEDGER_CONFIG = Symbol('LEDGER_CONFIG');

/** Validate the ledger's own variables; throws `ConfigError` naming each bad one. */
export function loadLedgerConfig(env: Record<string, string | undefined>): LedgerConfig {
  return loadServiceSettings(LedgerConfigSchema, env);
}
