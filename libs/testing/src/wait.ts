/**
 * Poll `probe` every `everyMs` until it gives a value (undefined means "not yet"; a probe that
 * throws fails the wait); reject with `timed out waiting for <what>` after `timeoutMs`.
 */
export async function waitFor<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 15_000, everyMs = 100): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise<void>((resolve) => setTimeout(resolve, everyMs));
  }
}
