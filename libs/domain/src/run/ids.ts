import { Limits, RouteCause } from '@baton/contracts';
import { sha256Hex } from '../sha256';

/*
 * Derived ids are injective: two different inputs never give the same id, whatever the inputs
 * (any valid ids, with `:` anywhere, of any length up to the cap), so a client choosing its ids
 * cannot make two runs share a stop packet, a notice or a handoff. Each derivation has a plain form,
 * kept exactly as Baton has always written it, and a sealed form for the inputs the plain form
 * cannot tell apart or cannot fit; the two never meet, and sealed forms meet only if 128 bits of
 * SHA-256 collide:
 *
 * - `deriveId(prefix, source)`: plain `<prefix>-<source>` when it is shorter than the cap,
 *   otherwise exactly the cap long (the plain text clipped, `-`, the digest). Lengths tell them apart.
 * - `deriveScopedId(prefix, scope, id)`: plain `<prefix>-<scope>:<id>` when neither part holds a `:`
 *   and it is shorter than the cap (so a plain id holds exactly one `:`, and it splits one way),
 *   otherwise `<prefix>-<scope>:<id clipped to fit>::<digest>` (at least two `:`, never plain).
 *
 * The digest is the first 32 hex digits (128 bits) of SHA-256 over the JSON array of the form's
 * name, the prefix and the unclipped parts: JSON writes every array of strings differently, so two
 * different inputs give two different digest texts.
 */

/** Hex digits of a sealed id's digest: 128 bits of SHA-256. */
const DERIVED_DIGEST_HEX = 32;

/** The first 128 bits of SHA-256 of the JSON of `parts`, as 32 lowercase hex digits. */
function digestOf(parts: ReadonlyArray<string | number>): string {
  return sha256Hex(JSON.stringify(parts)).slice(0, DERIVED_DIGEST_HEX);
}

/**
 * An id exactly the cap long: `shown` clipped (or filled with `_`) to the room left, `-`, the
 * digest. Only plain forms are shorter than the cap, so a plain form never takes this shape.
 */
function fullLengthId(shown: string, digest: string): string {
  const room = Limits.maxIdLength - 1 - digest.length;
  return `${shown.slice(0, room).padEnd(room, '_')}-${digest}`;
}

/**
 * A deterministic id derived from another id: `<prefix>-<source>` while that is shorter than the id
 * length cap, otherwise exactly the cap long: the start of that text, `-` and a 128-bit digest of the
 * prefix and the whole source. This is how a redelivered result or answer produces the very same
 * handoff / notice / stop ids, so downstream writes stay idempotent.
 */
export function deriveId(prefix: string, source: string): string {
  const plain = `${prefix}-${source}`;
  if (plain.length < Limits.maxIdLength) return plain;
  return fullLengthId(plain, digestOf(['id', prefix, source]));
}

/**
 * The id `<prefix>-<scope>:<id>` of something caused by `id` within `scope` (a workflow run, a mesh
 * run): the sender chose `id` unique only within its run, so the run's id names it together with
 * it. When either part holds a `:` (so the text could be split another way: run `a:b` + `c` and
 * run `a` + `b:c`), or the id would not be shorter than the cap, it takes the sealed form
 * `<prefix>-<scope>:<id, clipped to fit>::<digest>` — 128 bits of SHA-256 of the prefix and both
 * unclipped parts — which holds `::` and is therefore never a plain form. The same on every call.
 */
export function deriveScopedId(prefix: string, scope: string, id: string): string {
  const source = `${scope}:${id}`;
  const plain = `${prefix}-${source}`;
  if (!scope.includes(':') && !id.includes(':') && plain.length < Limits.maxIdLength) return plain;
  const digest = digestOf(['scoped', prefix, scope, id]);
  const room = Math.max(0, Limits.maxIdLength - prefix.length - 1 - 2 - digest.length);
  return `${prefix}-${source.slice(0, room)}::${digest}`;
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
export const MeshHandoffPrefix = { entry: 'mh-s', turn: 'mh-r', answer: 'mh-a' } as const;

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

/**
 * The handoff of the `n`-th route one cause decides in one decision (counted from 1). The first is
 * `handoffIdFor`. A later one must meet no first one: appending to the first (`ho-r-<run>:<id>-2`)
 * would be the first route of result `<id>-2`, and `ho-s-<run>-2` the start of run `<run>-2`. So it
 * takes the one shape no first route can take whatever the ids: exactly the cap long, ending in `-`
 * and a 128-bit digest of its own kind (`route`, the prefix, the run, the cause id and `n`). A
 * `deriveId` that long carries a digest of another kind, and a scoped sealed id ends in `::<digest>`.
 */
export function routeHandoffIdFor(runId: string, cause: RouteCause, n: number): string {
  if (n <= 1) return handoffIdFor(runId, cause);
  const prefix = `ho-${causeLetter[cause.kind]}`;
  const shown = RUN_SCOPED_CAUSES.has(cause.kind) ? `${prefix}-${runId}:${cause.id}:${n}` : `${prefix}-${cause.id}:${n}`;
  return fullLengthId(shown, digestOf(['route', prefix, runId, cause.id, n]));
}
