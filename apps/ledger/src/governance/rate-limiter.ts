/** The refusal of a claim over the cap: when to try again. */
export interface RateRefusal {
  limit: number;
  retry_after_ms: number;
}

/**
 * Claims per minute per agent (a sliding one-minute window per `<project>/<agent>`). `check` says
 * whether one more claim fits; `record` counts a claim that was granted. The window lives in this
 * ledger instance: with N instances behind the queue group an agent gets at most N × the cap
 * (documented in docs/governance.md).
 */
export class ClaimRateLimiter {
  private readonly windows = new Map<string, number[]>();

  constructor(
    private readonly perMinute: number,
    private readonly perAgent: Readonly<Record<string, number>> = {},
    private readonly windowMs = 60_000,
  ) {}

  /** The cap for `agent` (0 = none). */
  capOf(agent: string): number {
    return this.perAgent[agent] ?? this.perMinute;
  }

  /** Null when a claim by `agent` now fits under its cap, else the refusal with `retry_after_ms`. */
  check(project: string, agent: string, now: number): RateRefusal | null {
    const limit = this.capOf(agent);
    if (limit <= 0) return null;
    const times = this.prune(`${project}/${agent}`, now);
    if (times.length < limit) return null;
    return { limit, retry_after_ms: Math.max(1, (times[0] as number) + this.windowMs - now) };
  }

  /** Count a granted claim. */
  record(project: string, agent: string, now: number): void {
    if (this.capOf(agent) <= 0) return;
    const key = `${project}/${agent}`;
    this.windows.set(key, [...this.prune(key, now), now]);
  }

  private prune(key: string, now: number): number[] {
    const times = (this.windows.get(key) ?? []).filter((t) => t > now - this.windowMs);
    if (times.length === 0) this.windows.delete(key);
    else this.windows.set(key, times);
    return times;
  }
}
