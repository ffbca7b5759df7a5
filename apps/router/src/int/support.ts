// Shared pieces of the router's integration tests (real NATS): polling for an effect and removing
// a test's streams.
import { batonStreamNames, type NatsHandle } from '@baton/eventstore';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Poll `probe` every `everyMs` until it gives a value (undefined or false mean "not yet"); reject
 * with `timed out waiting for <what>` after `timeoutMs`.
 */
export async function waitFor<T>(probe: () => Promise<T | undefined> | T | undefined, what: string, timeoutMs = 10_000, everyMs = 40): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Delete the events, inbox and dead-letter streams of `prefix` (their consumers go with them). */
export async function deleteStreams(nats: NatsHandle, prefix: string): Promise<void> {
  const names = batonStreamNames(prefix);
  for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
}
