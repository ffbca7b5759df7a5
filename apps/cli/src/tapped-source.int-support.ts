/**
 * An event source (what `rebuildMany` and `buildScratch` read from) with a test's hooks in it:
 * `each` runs before every event is passed on (given the sequence the read started from), `end` once
 * the source is read to its end. Where a test acts in the middle of a rebuild's read — Redis loses
 * its data, a second rebuild races, Ctrl-C arrives — without copying the generator each time.
 */
export function tapped<T>(
  source: (from: number) => AsyncIterable<T>,
  hooks: { each?: (event: T, from: number) => void | Promise<void>; end?: () => void },
): (from: number) => AsyncIterable<T> {
  return (from) =>
    (async function* () {
      for await (const event of source(from)) {
        await hooks.each?.(event, from);
        yield event;
      }
      hooks.end?.();
    })();
}
