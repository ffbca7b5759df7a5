/** Small measurement helpers: percentiles, rates, rounding. */

/** The `p`-th percentile (0–100) of `values` by nearest rank; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

/** Median of `values` (NaN when empty). */
export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** Round to `digits` decimals (keeps JSON and the report readable). */
export function round(value: number, digits = 2): number {
  if (!Number.isFinite(value)) return value;
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** Milliseconds since an arbitrary origin, with sub-millisecond resolution. */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Latency summary in ms. */
export interface LatencySummary {
  count: number;
  p50_ms: number;
  p95_ms: number;
  p99_ms: number;
  max_ms: number;
}

export function summarize(latencies: readonly number[]): LatencySummary {
  return {
    count: latencies.length,
    p50_ms: round(percentile(latencies, 50), 3),
    p95_ms: round(percentile(latencies, 95), 3),
    p99_ms: round(percentile(latencies, 99), 3),
    max_ms: round(latencies.length === 0 ? Number.NaN : Math.max(...latencies), 3),
  };
}
