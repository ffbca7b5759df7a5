import { Limits, RouteCause } from '@baton/contracts';

/**
 * A deterministic id derived from another id: `<prefix>-<source>`, or, when that would exceed the
 * id length cap, a clipped source plus an FNV-1a digest of the whole source (still unique per
 * source in practice, and the same on every call). This is how a redelivered result or answer
 * produces the very same handoff / notice / stop ids, so downstream writes stay idempotent.
 */
export function deriveId(prefix: string, source: string): string {
  const plain = `${prefix}-${source}`;
  if (plain.length <= Limits.maxIdLength) return plain;
  const digest = fnv1a32(source);
  const room = Limits.maxIdLength - prefix.length - digest.length - 2;
  return `${prefix}-${source.slice(0, room)}-${digest}`;
}

/** One letter per cause kind, so a result id and an answer id that happen to be equal never collide. */
const causeLetter: Record<RouteCause['kind'], string> = { start: 's', result: 'r', resume: 'a', stop: 'x', message: 'm', handoff_failed: 'f' };

/** The prefixes of a mesh's handoff ids: its entry (`mh-s-<mesh_run_id>`) and each turn's (`mh-r-<result_id>`). */
export const MeshHandoffPrefix = { entry: 'mh-s', turn: 'mh-r' } as const;

/**
 * Every prefix of the handoff ids the router derives (a run's routes, `ho-<cause letter>`, and a
 * mesh's): only the router may create an id that starts with one and a dash (`reserved_id`).
 */
export const ROUTER_HANDOFF_ID_PREFIXES: readonly string[] = [
  ...Object.values(causeLetter).map((letter) => `ho-${letter}`),
  ...Object.values(MeshHandoffPrefix),
];

/** The handoff the router asks the ledger to create for a route caused by `cause` (`ho-r-<result_id>`). */
export const handoffIdFor = (cause: RouteCause): string => deriveId(`ho-${causeLetter[cause.kind]}`, cause.id);
/** The one notice of a stop-for-a-human outcome caused by `cause` (`nt-r-<result_id>`). */
export const noticeIdFor = (cause: RouteCause): string => deriveId(`nt-${causeLetter[cause.kind]}`, cause.id);
/** The stop packet the router opens when `cause` stopped the run or could not be routed. */
export const stopIdFor = (cause: RouteCause): string => deriveId(`stop-${causeLetter[cause.kind]}`, cause.id);

function fnv1a32(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, '0');
}
