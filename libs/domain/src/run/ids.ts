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

/**
 * The id `<prefix>-<scope>:<id>` of something caused by `id` within `scope` (a workflow run, a mesh
 * run): the sender chose `id` unique only within its run, so the run's id names it together with
 * it. A scope that holds a `:` itself, or a pair too long for the cap, takes the clipped form with a
 * digest of both parts (so runs `a:b` + `c` and `a` + `b:c` never meet), the same on every call.
 */
export function deriveScopedId(prefix: string, scope: string, id: string): string {
  const source = `${scope}:${id}`;
  const plain = `${prefix}-${source}`;
  if (plain.length <= Limits.maxIdLength && !scope.includes(':')) return plain;
  const digest = fnv1a32(`${scope.length}:${source}`);
  const room = Limits.maxIdLength - prefix.length - digest.length - 2;
  return `${prefix}-${source.slice(0, room)}-${digest}`;
}

/** One letter per cause kind, so a result id and an answer id that happen to be equal never collide. */
const causeLetter: Record<RouteCause['kind'], string> = { start: 's', result: 'r', resume: 'a', stop: 'x', message: 'm', handoff_failed: 'f' };

/**
 * The causes whose id its sender need keep unique only within the run: an agent's result, a
 * customer's message and an operator's answer. What they cause is named by the run and the id
 * together (`ho-r-<run>:<result_id>`). A start (the run's own id), a stop request (a packet id) and
 * a failed handoff (a handoff id) carry ids already unique within the project and name alone.
 */
const RUN_SCOPED_CAUSES: ReadonlySet<RouteCause['kind']> = new Set(['result', 'message', 'resume']);

function deriveFromCause(kindPrefix: string, runId: string, cause: RouteCause): string {
  const prefix = `${kindPrefix}-${causeLetter[cause.kind]}`;
  return RUN_SCOPED_CAUSES.has(cause.kind) ? deriveScopedId(prefix, runId, cause.id) : deriveId(prefix, cause.id);
}

/** The prefixes of a mesh's handoff ids: its entry (`mh-s-<mesh_run_id>`) and each turn's (`mh-r-<mesh_run_id>:<result_id>`). */
export const MeshHandoffPrefix = { entry: 'mh-s', turn: 'mh-r' } as const;

/**
 * Every prefix of the handoff ids the router derives (a run's routes, `ho-<cause letter>`, and a
 * mesh's): only the router may create an id that starts with one and a dash (`reserved_id`).
 */
export const ROUTER_HANDOFF_ID_PREFIXES: readonly string[] = [
  ...Object.values(causeLetter).map((letter) => `ho-${letter}`),
  ...Object.values(MeshHandoffPrefix),
];

/** The handoff the router asks the ledger to create for a route of run `runId` caused by `cause` (`ho-r-<run>:<result_id>`, `ho-s-<run>`). */
export const handoffIdFor = (runId: string, cause: RouteCause): string => deriveFromCause('ho', runId, cause);
/** The one notice of a stop-for-a-human outcome of run `runId` caused by `cause` (`nt-r-<run>:<result_id>`). */
export const noticeIdFor = (runId: string, cause: RouteCause): string => deriveFromCause('nt', runId, cause);
/** The stop packet the router opens when `cause` stopped run `runId` or could not be routed (`stop-r-<run>:<result_id>`). */
export const stopIdFor = (runId: string, cause: RouteCause): string => deriveFromCause('stop', runId, cause);

function fnv1a32(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, '0');
}
