/**
 * What the folded states a projection keeps in memory may weigh, in estimated heap bytes
 * (`heapWeight`), besides their count: a projection's states hold what events carry (a handoff's
 * context, a stop packet), so a count alone lets large ones fill any heap.
 */

/** Per projection, for the live applier's cache (ranges, or single events): 4 MiB, ~2 000 typical states. */
export const PROJECTION_CACHE_BYTES = 4 * 1024 * 1024;

/** Per projection, for each of a rebuild's two caches (fold states, item documents): 6 MiB, ~4 000 typical entries. */
export const REBUILD_CACHE_BYTES = 6 * 1024 * 1024;
