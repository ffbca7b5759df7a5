/*
 * The one poll-until-ready helper of Baton's tests. No dependencies (not even Node modules), so
 * any project's tests may import it without a cycle in the project graph; eslint.config.js
 * refuses it outside test files (libs/testing re-exports it for test/, bench/ and the demo).
 */

/** What a probe gives while the thing it waits for is not there yet. */
export type NotYet = undefined | null | false;

/** What `waitFor` resolves with: the probe's value, never a "not yet". */
export type Ready<T> = Exclude<T, NotYet>;

export interface WaitOptions {
  /** Give up after this long, in ms (default {@link DEFAULT_WAIT_TIMEOUT_MS}). */
  timeoutMs?: number;
  /** Pause between two probes, in ms (default {@link DEFAULT_WAIT_EVERY_MS}). */
  everyMs?: number;
}

export const DEFAULT_WAIT_TIMEOUT_MS = 10_000;
export const DEFAULT_WAIT_EVERY_MS = 50;

/**
 * Call `probe` every `everyMs` until it gives a value other than `undefined`, `null` or `false`
 * (directly or through a promise) and resolve with that value. A probe that throws or rejects
 * counts as "not yet" (a stream or consumer not there yet): the wait goes on. After `timeoutMs`
 * reject with `timed out waiting for <what> (<timeoutMs> ms); last value: …` or `…; last error: …`,
 * naming what the last probe gave (the error as `cause`). The probe runs at least once.
 */
export async function waitFor<T>(probe: () => T | PromiseLike<T>, what: string, options: WaitOptions = {}): Promise<Ready<T>> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_WAIT_TIMEOUT_MS;
  const everyMs = options.everyMs ?? DEFAULT_WAIT_EVERY_MS;
  const deadline = Date.now() + timeoutMs;
  let last: { value: unknown } | { error: unknown };
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) return value as Ready<T>;
      last = { value };
    } catch (error) {
      last = { error };
    }
    const left = deadline - Date.now();
    if (left <= 0) {
      const seen = 'error' in last ? `last error: ${describeError(last.error)}` : `last value: ${describe(last.value)}`;
      throw new Error(`timed out waiting for ${what} (${timeoutMs} ms); ${seen}`, 'error' in last ? { cause: last.error } : undefined);
    }
    await new Promise<void>((resolve) => setTimeout(resolve, Math.min(everyMs, left)));
  }
}

const MAX_SHOWN = 300;

function describe(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text;
}

function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : describe(error);
}
