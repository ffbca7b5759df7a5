import { ProjectionError } from './errors';

/**
 * The keyspace of one projection:
 *
 * - `<prefix>:<projection>:active`        the active generation number (a string integer)
 * - `<prefix>:<projection>:gens`          the generation counter (INCR allocates a new generation)
 * - `<prefix>:<projection>:rebuilds`      hash: the rebuilds running (generation → JSON progress and lease)
 * - `<prefix>:<projection>:g<gen>:<key>`  every key the projection writes, `<key>` as the ops name it
 * - `<prefix>:<projection>:g<gen>:~meta`  hash: `seq` (last applied stream sequence), `version`, and for
 *                                          a rebuild's shadow `owner` (the token of the rebuild that created it);
 *                                          `stream`: the identity of the events stream it was built from
 *                                          (its creation time), written once it is known (`adoptStream`)
 * - `<prefix>:<projection>:g<gen>:~items:<store>:...` the indexed item stores
 * - `<prefix>:<projection>:g<gen>:~tmp:<n>` scratch keys of the query script (deleted in-script)
 * - `<prefix>:<projection>:g<scratch>:~tmp:frozen:<key>` copies of live keys a verify took at one sequence
 *                                          (`ScratchPass.freeze`; deleted with the scratch generation)
 *
 * Names starting with `~` are reserved for the engine; projection ops cannot address them.
 * The scripts compute key names from the active pointer, so this layout targets a single Redis
 * (or a primary with replicas), not Redis Cluster.
 */
export const PREFIX_PATTERN = /^[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)*$/;
export const NAME_PATTERN = /^[a-z][a-z0-9_-]{0,63}$/;
export const MAX_KEY_LENGTH = 512;

export function assertPrefix(prefix: string): void {
  if (!PREFIX_PATTERN.test(prefix) || prefix.length > 128) {
    throw new ProjectionError(`invalid key prefix "${prefix}": letters, digits, _ . - separated by ':'`);
  }
}

/** Projection and item-store names: lowercase, they become key segments and must hold no glob characters. */
export function assertName(kind: 'projection' | 'store', name: string): void {
  if (!NAME_PATTERN.test(name)) {
    throw new ProjectionError(`invalid ${kind} name "${name}": lowercase letters, digits, _ and -, starting with a letter`);
  }
}

export function projectionBase(prefix: string, projection: string): string {
  return `${prefix}:${projection}`;
}

export function activeKey(base: string): string {
  return `${base}:active`;
}

export function generationCounterKey(base: string): string {
  return `${base}:gens`;
}

/**
 * The hash of the rebuilds running on a projection: generation → JSON progress (who, since when,
 * how far, until when its lease holds). Outside every generation, so reads of the projection never
 * see it; the API reports it, and a rebuild whose lease ran out (its process died) is cleaned up.
 */
export function rebuildsKey(base: string): string {
  return `${base}:rebuilds`;
}

/**
 * The set of generations a swap retired and whose keys may not be deleted yet: the swap adds the
 * one it replaced (atomically with the swap), the deletion removes it once done. A rebuilding
 * process that dies between the two leaves it here, and the next collection of abandoned work
 * deletes it.
 */
export function retiredKey(base: string): string {
  return `${base}:retired`;
}

/**
 * How many keys of retired generation `gen` its deleters have removed so far, together (kept an
 * hour after the last one): outside the generation's namespace, so its own deletion never scans it.
 */
export function droppedCountKey(base: string, gen: number): string {
  return `${base}:g${gen}~dropped`;
}

export function generationNamespace(base: string, gen: number): string {
  return `${base}:g${gen}:`;
}

export const META_KEY = '~meta';
export const TMP_PREFIX = '~tmp:';
/** Where a scratch generation keeps the copies of live keys `ScratchPass.freeze` took (under {@link TMP_PREFIX}: never compared or counted as its own). */
export const FROZEN_PREFIX = `${TMP_PREFIX}frozen:`;
export const ITEMS_PREFIX = '~items:';
