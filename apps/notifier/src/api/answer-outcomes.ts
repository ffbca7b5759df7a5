import { Inject, Injectable } from '@nestjs/common';
import { evolveMesh, initialMeshState, isAnswerRefusal, refusedKindOf, type MeshEvent, type MeshState } from '@baton/domain';
import type { AggregateRef, StoredEvent } from '@baton/eventstore';
import { runViewOf as foldRunView, type RunView } from '@baton/projections';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { NOTIFIER_CONFIG, type NotifierConfig } from '../notifier.config';

/** The aggregate an operator answer is decided on: a workflow run, or a handoff mesh. */
export interface AnswerAggregate {
  project: string;
  kind: 'run' | 'mesh';
  id: string;
}

/** The event that decided an answer. */
export interface DecidingEvent {
  type: string;
  seq: number;
  at: string;
}

/** A mesh as it stands after an answer (the fields an operator needs to see what the answer did). */
export interface MeshSummary {
  mesh_run_id: string;
  project: string;
  status: string;
  speaker: string;
  turns: number;
  max_iterations: number;
  packet_id: string | null;
  stop_status: string | null;
}

/**
 * What became of an answer, as its aggregate's events say:
 * - `applied`: the router appended `run.resumed` / `mesh.stop_answered` for it (with the run's or
 *   mesh's state after the events read so far);
 * - `refused`: the router recorded its refusal (`run.result_rejected` / `mesh.turn_rejected` with
 *   `result_id` = the answer id, agent `operator`), with the refusal's code;
 * - `pending`: neither is in the stream (yet): the router has not decided it, or the answer id
 *   was never published.
 */
export type AnswerOutcome =
  | { outcome: 'applied'; event: DecidingEvent; run?: RunView | null; mesh?: MeshSummary | null }
  | { outcome: 'refused'; event: DecidingEvent; code: string; message: string }
  | { outcome: 'pending' };

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** How long the notifier remembers an answer it sent ({@link AnswerOutcomes.markSent}): seven days. */
export const SENT_ANSWER_TTL_SEC = 7 * 24 * 60 * 60;

/** The longest an applied answer waits for the rest of its command's events (see `settle`). */
const SETTLE_MS = 1000;

/** The event that decided `answerId` among `events`, or null. */
export function decidingEvent(kind: AnswerAggregate['kind'], events: readonly StoredEvent[], answerId: string): StoredEvent | null {
  for (const event of events) {
    const p = event.payload as { answer_id?: unknown; result_id?: unknown };
    if (kind === 'run') {
      if (event.type === 'run.resumed' && p.answer_id === answerId) return event;
      // A refused answer, not a refused result or message of the same id (refusals name their kind; older ones their agent).
      if (event.type === 'run.result_rejected' && p.result_id === answerId && refusedKindOf(event.payload as Parameters<typeof refusedKindOf>[0]) === 'answer')
        return event;
    } else {
      if (event.type === 'mesh.stop_answered' && p.answer_id === answerId) return event;
      if (event.type === 'mesh.turn_rejected' && p.result_id === answerId && isAnswerRefusal(event.payload as Parameters<typeof isAnswerRefusal>[0]))
        return event;
    }
  }
  return null;
}

function runViewOf(events: readonly StoredEvent[]): RunView | null {
  try {
    return foldRunView(events);
  } catch {
    return null;
  }
}

function meshSummaryOf(events: readonly StoredEvent[]): MeshSummary | null {
  try {
    const state = events.reduce<MeshState>((s, e) => evolveMesh(s, { type: e.type, data: e.payload } as MeshEvent), initialMeshState());
    if (state.status === 'none') return null;
    return {
      mesh_run_id: state.mesh_run_id,
      project: state.project,
      status: state.status,
      speaker: state.speaker,
      turns: state.turns,
      max_iterations: state.mesh.max_iterations,
      packet_id: state.packet_id,
      stop_status: state.stop?.status ?? null,
    };
  } catch {
    return null;
  }
}

/** The outcome `deciding` says, with the aggregate's state after `events` for an applied answer. */
export function outcomeOf(kind: AnswerAggregate['kind'], deciding: StoredEvent, events: readonly StoredEvent[]): AnswerOutcome {
  const event: DecidingEvent = { type: deciding.type, seq: deciding.seq, at: deciding.occurredAt };
  if (deciding.type === 'run.result_rejected' || deciding.type === 'mesh.turn_rejected') {
    const p = deciding.payload as { code: string; message: string };
    return { outcome: 'refused', event, code: p.code, message: p.message };
  }
  return kind === 'run' ? { outcome: 'applied', event, run: runViewOf(events) } : { outcome: 'applied', event, mesh: meshSummaryOf(events) };
}

/**
 * Reads what the router decided about an operator answer from the run's (or mesh's) own events,
 * through the event store: the router appends one event per answer id, applied or refused, so the
 * answer id is enough to find it. `wait` polls the aggregate (only its new events after the first
 * read) until that event appears or `NOTIFIER_ANSWER_WAIT_MS` passes.
 */
@Injectable()
export class AnswerOutcomes {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(NOTIFIER_CONFIG) private readonly config: NotifierConfig,
  ) {}

  /** How long `wait` waits by default. */
  get waitMs(): number {
    return this.config.NOTIFIER_ANSWER_WAIT_MS;
  }

  /**
   * One look: the outcome, or null when the aggregate has no events (it does not exist in this
   * project). Read failures are thrown.
   */
  async check(aggregate: AnswerAggregate, answerId: string): Promise<AnswerOutcome | null> {
    return (await this.checkWithEvent(aggregate, answerId))?.outcome ?? null;
  }

  /** {@link check}, with the deciding event itself (null while pending): a retry compares the answer it recorded. */
  async checkWithEvent(aggregate: AnswerAggregate, answerId: string): Promise<{ outcome: AnswerOutcome; deciding: StoredEvent | null } | null> {
    const { events } = await this.runtime.store.read(this.ref(aggregate));
    if (events.length === 0) return null;
    const deciding = decidingEvent(aggregate.kind, events, answerId);
    return deciding ? { outcome: outcomeOf(aggregate.kind, deciding, events), deciding } : { outcome: { outcome: 'pending' }, deciding: null };
  }

  /**
   * Wait, at most `waitMs`, for the router's decision on `answerId` to appear in the aggregate's
   * stream. `pending` when it did not in time — or when the stream could not be read (the answer
   * was published; its outcome is then read with the status link).
   */
  async wait(aggregate: AnswerAggregate, answerId: string, waitMs = this.waitMs): Promise<AnswerOutcome> {
    if (waitMs <= 0) return { outcome: 'pending' };
    const deadline = Date.now() + waitMs;
    const ref = this.ref(aggregate);
    const events: StoredEvent[] = [];
    let after = 0;
    let delay = 20;
    try {
      for (;;) {
        const read = await this.runtime.store.read(ref, { afterSeq: after });
        events.push(...read.events);
        after = Math.max(after, read.lastSeq, ...read.events.map((e) => e.seq));
        const deciding = decidingEvent(aggregate.kind, read.events, answerId);
        if (deciding) {
          if (deciding.type === 'run.resumed' || deciding.type === 'mesh.stop_answered') await this.settle(ref, events, answerId, after);
          return outcomeOf(aggregate.kind, deciding, events);
        }
        const left = deadline - Date.now();
        if (left <= 0) return { outcome: 'pending' };
        await sleep(Math.min(delay, left));
        delay = Math.min(delay * 2, 200);
      }
    } catch (error) {
      this.runtime.logger.warn('cannot read the outcome of an answer; answering 202 pending', {
        ...aggregate,
        answer_id: answerId,
        error: (error as Error).message,
      });
      return { outcome: 'pending' };
    }
  }

  /**
   * An applied answer is one command's events, appended one by one: `run.resumed` (or
   * `mesh.stop_answered`) and what it caused (`run.routed`, `run.terminated`, `mesh.handed_off`…),
   * all with the answer id as their causation. Read on until the answer's follow-up is there and
   * a short quiet read brings nothing more of it (at most SETTLE_MS), so the state shown is the
   * one after the whole decision. Appends `events`; returns the last sequence read.
   */
  private async settle(ref: AggregateRef, events: StoredEvent[], answerId: string, after: number): Promise<number> {
    const until = Date.now() + SETTLE_MS;
    const caused = () => events.filter((e) => e.causationId === answerId).length;
    let seen = caused();
    let quiet = false;
    while (Date.now() < until) {
      await sleep(seen > 1 ? 30 : 15);
      const read = await this.runtime.store.read(ref, { afterSeq: after });
      events.push(...read.events);
      after = Math.max(after, read.lastSeq, ...read.events.map((e) => e.seq));
      const now = caused();
      if (now > 1 && now === seen) {
        if (quiet) break;
        quiet = true;
      } else quiet = false;
      seen = now;
    }
    return after;
  }

  /**
   * Remember that an answer was sent (its publish acknowledged, or found already stored): until the
   * router decides it, its status is `pending`; an id never sent is not found (a client polling the
   * status of an answer the API refused before sending it, or of a mistyped id, is told so instead
   * of `pending` forever). Kept {@link SENT_ANSWER_TTL_SEC} in Redis, shared by every notifier of the
   * deployment, with the id of the token that sent it. A failure to remember is logged, not
   * thrown: the answer was sent.
   */
  async markSent(aggregate: AnswerAggregate, answerId: string, tokenId: string): Promise<void> {
    const redis = this.runtime.redis;
    if (!redis) return;
    try {
      // The first sender stands: the id is that token's answer (see {@link sentBy}).
      await redis.client.set(this.sentKey(aggregate, answerId), tokenId, 'EX', SENT_ANSWER_TTL_SEC, 'NX');
    } catch (error) {
      this.runtime.logger.warn('cannot remember a sent answer; its status reads not found until the router decides it', {
        ...aggregate,
        answer_id: answerId,
        error: (error as Error).message,
      });
    }
  }

  /**
   * The id of the token that sent the answer first ({@link markSent}), or null when it is not
   * remembered (never sent, past its seven days, or remembered before senders were: `1`). An
   * answer id is its sender's: the same body from another token — even one with the same name —
   * is another answer (409 `answer_id_reused`).
   */
  async sentBy(aggregate: AnswerAggregate, answerId: string): Promise<string | null> {
    const redis = this.runtime.redis;
    if (!redis) return null;
    const value = await redis.client.get(this.sentKey(aggregate, answerId));
    return value === null || value === '1' ? null : value;
  }

  /** Whether {@link markSent} remembers the answer (Redis errors are thrown: the API answers 503). */
  async wasSent(aggregate: AnswerAggregate, answerId: string): Promise<boolean> {
    const redis = this.runtime.redis;
    if (!redis) return true;
    return (await redis.client.exists(this.sentKey(aggregate, answerId))) === 1;
  }

  /** `<prefix>:answers:<kind>:<project>:<id length>:<id>:<answer id>` (ids may hold `:`; the length keeps the key unambiguous). */
  private sentKey(aggregate: AnswerAggregate, answerId: string): string {
    return `${this.runtime.config.BATON_PREFIX}:answers:${aggregate.kind}:${aggregate.project}:${aggregate.id.length}:${aggregate.id}:${answerId}`;
  }

  private ref(aggregate: AnswerAggregate): AggregateRef {
    return { project: aggregate.project, kind: aggregate.kind, id: aggregate.id };
  }
}

/** The status link of an answer: `GET /v1/projects/<p>/{runs|meshes}/<id>/answers/<answer_id>`. */
export function answerStatusPath(aggregate: AnswerAggregate, answerId: string): string {
  return `/v1/projects/${aggregate.project}/${aggregate.kind === 'run' ? 'runs' : 'meshes'}/${encodeURIComponent(aggregate.id)}/answers/${encodeURIComponent(answerId)}`;
}
