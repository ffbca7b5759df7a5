import { createHash } from 'node:crypto';
import { deriveId } from '@baton/domain';

/** What caused a command: a run start, an agent result or an operator answer, or the recorded refusal of one. */
export type CauseKind = 'start' | 'result' | 'result_refused' | 'answer' | 'answer_refused' | 'stop' | 'message' | 'message_refused' | 'handoff_failed';

const letter: Record<CauseKind, string> = {
  start: 's',
  result: 'r',
  result_refused: 'j',
  answer: 'a',
  answer_refused: 'k',
  stop: 'x',
  message: 'm',
  message_refused: 'n',
  handoff_failed: 'f',
};

/**
 * The key a start's event ids derive from: its id and a digest of what makes it that start (the
 * workflow or mesh, the people, the input…). A retry of the same start keeps its ids, so its
 * events are found at the aggregate's tail and completed; another start under the same id gets
 * other ids, so it is decided on the started aggregate (and refused as already started) instead
 * of being taken for the first while that first's events are still the tail.
 */
export function startEventKey(id: string, parts: ReadonlyArray<string | null | undefined>): string {
  const digest = createHash('sha256')
    .update(JSON.stringify(parts.map((part) => part ?? null)))
    .digest('hex')
    .slice(0, 16);
  return `${id}@${digest}`;
}

/** The aggregate an event id belongs to (an `AggregateRef`): event ids are scoped by it. */
export interface EventScope {
  project: string;
  kind: string;
  id: string;
}

/**
 * Deterministic event ids for the events a command produces, scoped by the aggregate they are
 * appended to: `ev<index>-<cause letter>-<project>:<aggregate kind>:<aggregate id>:<cause id>`
 * (clipped with a digest of the whole past the id length cap). A redelivered input therefore
 * re-publishes the very same ids (and `Nats-Msg-Id`s, `MsgIds.event`), and JetStream stores each
 * event once; the same cause id in another project or on another run is another event.
 */
export function eventIdsFor(scope: EventScope, kind: CauseKind, causeId: string): EventIds {
  return derivedEventIds('ev', letter[kind], `${scope.project}:${scope.kind}:${scope.id}:${causeId}`);
}

/** A command's event ids and their inverse, as the event store's `CommandMeta` takes them (`eventId`, `eventIndex`). */
export interface EventIds {
  eventId: (index: number) => string;
  eventIndex: (eventId: string) => number | null;
}

/**
 * Ids `<tag><index>-<letter>-<source>` (`deriveId`: clipped with a digest past the id length cap)
 * and their inverse: the index read back from the digits after the tag, then checked by building
 * that one id — so the event store learns whether an aggregate's last event is this command's
 * without building every id the command could give.
 */
export function derivedEventIds(tag: string, letter: string, source: string): EventIds {
  const eventId = (index: number) => deriveId(`${tag}${index}-${letter}`, source);
  return {
    eventId,
    eventIndex: (id) => {
      if (!id.startsWith(tag)) return null;
      const dash = id.indexOf('-', tag.length);
      if (dash <= tag.length) return null;
      const digits = id.slice(tag.length, dash);
      const index = Number(digits);
      return Number.isSafeInteger(index) && index >= 0 && String(index) === digits && eventId(index) === id ? index : null;
    },
  };
}

/**
 * The actor of what a run or mesh start on the project's shared subject causes
 * (`<prefix>.in.<project>.start`, `…mesh_start`): that subject names no speaker — any agent of the
 * project, or the admin, may publish it — so the events say what the subject proves, a client of
 * the project. A start on `…start.<agent>` records that agent (`startActorOf`). Either way the
 * body's `started_by` (and `issue_author`, `trigger_author`) is who the run notifies, data and
 * never the actor.
 */
export const START_CLIENT_ACTOR = 'project-client';

/** The router's name as an actor (from_agent of the first handoff of a run, published_by default). */
export const ROUTER_ACTOR = 'baton-router';

/** The current time as ISO text: the router's one clock, read at the edge and passed into commands. */
export function nowIso(): string {
  return new Date().toISOString();
}
