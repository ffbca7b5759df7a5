import { createHash } from 'node:crypto';
import { MsgIds, StopRunRequestSchema, SubjectTable, Subjects, type EventRegistry, type StopRunRequest } from '@baton/contracts';
import type { GuardStop } from '@baton/domain';
import { decodeEvent, type NatsJetStream } from '@baton/eventstore';
import type { JsonLogger } from '@baton/platform';
import type { InboxPublisher } from '../escalation/escalation-stopper';
import { followOf, type Follow, type FollowedMessage, type StreamFollower } from '../stream/stream-follower';
import { GuardBook, type GuardBookStatus } from './guard-book';

export interface GuardRunnerOptions {
  js: NatsJetStream;
  /** How to follow the events stream (default: a consumer of its own on `stream`; the service passes a hub's share). */
  follow?: Follow;
  /** The events stream (`<PREFIX>_EVENTS`). */
  stream: string;
  prefix: string;
  registry: EventRegistry;
  book: GuardBook;
  publish: InboxPublisher;
  logger: JsonLogger;
  actor: string;
  /** Delay between attempts to publish a stop request (default 500 ms; 5 attempts, then logged). */
  retryMs?: number;
}

export interface GuardRunnerStatus extends GuardBookStatus {
  caught_up: boolean;
  last_seq: number;
  stops_requested: number;
}

/**
 * The stop packet id for a guard trip: `wd-guard:<32 hex of sha256(packet seed)>`. The seed is
 * `<guard>:<trigger event id>`, so every watchdog instance and every replay asks for the same stop
 * (Nats-Msg-Id de-duplication, and the run decider applies a packet id once).
 */
export function guardPacketId(seed: string): string {
  return `wd-guard:${createHash('sha256').update(seed).digest('hex').slice(0, 32)}`;
}

/** The stop request for one guard trip (validated against `StopRunRequestSchema`). */
export function guardStopRequest(stop: GuardStop, actor: string): StopRunRequest {
  return StopRunRequestSchema.parse({
    packet_id: guardPacketId(stop.packet_seed),
    workflow_run_id: stop.workflow_run_id,
    project: stop.project,
    why: stop.why,
    detail: stop.detail,
    tried: stop.tried.map((t) => t.slice(0, 200)),
    requested_by: actor,
    cause: { kind: 'loop_guard', guard: stop.guard, event_id: stop.trigger_event_id, ...(stop.agent !== undefined ? { agent: stop.agent } : {}) },
  });
}

/**
 * Runs the loop guards (hop budget, ping-pong, circuit per agent) over every run and handoff event.
 *
 * Why an ordered consumer replayed from the start (like the deadline table) and not a shared
 * durable: the guards fold state ACROSS aggregates (an agent's circuit spans runs and handoffs), so
 * every instance must see every event in order; a shared durable would split the events between
 * instances. Each instance folds the same state and asks for the same stops with the same
 * deterministic packet ids, so two watchdogs stop a run once (JetStream `Nats-Msg-Id` dedupe plus
 * the run decider's idempotency on `packet_id`).
 *
 * Replay: stops decided while replaying history are held until the replay has caught up and are
 * sent only for runs that are still live then (a run that halted or ended after the trip needs
 * nothing), so a restart neither floods the router nor loses a trip that happened while the
 * watchdog was down. A publish failure is retried a few times and then logged (the next trip of
 * the same run asks again).
 */
export class GuardRunner {
  private follower: StreamFollower | null = null;
  private held: GuardStop[] = [];
  private requested = 0;
  private readonly inFlight = new Set<Promise<void>>();
  private stopped = false;

  constructor(private readonly opts: GuardRunnerOptions) {}

  async start(): Promise<void> {
    if (this.follower) return;
    this.follower = await followOf(this.opts)({
      filterSubject: Subjects.events(this.opts.prefix),
      onMessage: (message) => this.onMessage(message),
      onError: (error, message) =>
        this.opts.logger.error('event could not be applied to the guards', { subject: message.subject, seq: message.seq, err: String(error) }),
    });
    void this.follower.caughtUp.then(() => {
      const held = this.held;
      this.held = [];
      for (const stop of held) if (this.opts.book.isLive(stop.project, stop.workflow_run_id)) this.request(stop);
      this.opts.logger.info('loop guards caught up with the events stream', { last_seq: this.follower?.lastSeq() ?? 0, held: held.length });
    });
  }

  async caughtUp(): Promise<void> {
    await this.follower?.caughtUp;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.follower?.stop();
    await Promise.allSettled([...this.inFlight]);
  }

  status(): GuardRunnerStatus {
    return {
      ...this.opts.book.status(),
      caught_up: this.follower?.isCaughtUp() ?? false,
      last_seq: this.follower?.lastSeq() ?? 0,
      stops_requested: this.requested,
    };
  }

  private onMessage(message: FollowedMessage): void {
    const kind = SubjectTable.event.parse(this.opts.prefix, message.subject)?.kind;
    if (kind !== 'run' && kind !== 'handoff') return;
    // An event the store stamped with this build's schema is not validated again (decodeEvent).
    const decoded = decodeEvent(this.opts.registry, message.data, (name) => message.header(name));
    if (!decoded.ok) throw new Error(`event does not decode: ${decoded.rejection.message}`);
    const stops = this.opts.book.apply(decoded.envelope);
    if (stops.length === 0) return;
    if (this.follower?.isCaughtUp() ?? false) stops.forEach((stop) => this.request(stop));
    else this.held.push(...stops);
  }

  private request(stop: GuardStop): void {
    const request = guardStopRequest(stop, this.opts.actor);
    const log = this.opts.logger.child({ project: stop.project, workflow_run_id: stop.workflow_run_id, packet_id: request.packet_id });
    const task = (async () => {
      const retryMs = this.opts.retryMs ?? 500;
      for (let attempt = 1; attempt <= 5 && !this.stopped; attempt++) {
        try {
          const ack = await this.opts.publish(Subjects.stopRequest(this.opts.prefix, stop.project), request, MsgIds.stop(stop.project, request.packet_id));
          this.requested++;
          log.info('loop guard tripped; stop requested', { guard: stop.guard, why: stop.why, detail: stop.detail, duplicate: ack.duplicate });
          return;
        } catch (error) {
          log.warn('cannot publish the stop request; retrying', { attempt, err: String(error) });
          await new Promise((resolve) => setTimeout(resolve, retryMs * attempt));
        }
      }
      log.error('stop request for a loop guard was not published', { guard: stop.guard });
    })();
    this.inFlight.add(task);
    void task.finally(() => this.inFlight.delete(task));
  }
}
