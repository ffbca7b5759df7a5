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
 * Deterministic event ids for the events a command produces: `ev<index>-<kind letter>-<cause id>`
 * (clipped with a digest past the id length cap). A redelivered input therefore re-publishes the
 * very same `Nats-Msg-Id`s, and JetStream stores each event once.
 */
export function eventIdsFor(kind: CauseKind, causeId: string): (index: number) => string {
  return (index) => deriveId(`ev${index}-${letter[kind]}`, causeId);
}

/** The router's name as an actor (from_agent of the first handoff of a run, published_by default). */
export const ROUTER_ACTOR = 'baton-router';

/** The current time as ISO text: the router's one clock, read at the edge and passed into commands. */
export function nowIso(): string {
  return new Date().toISOString();
}
