import { createHash } from 'node:crypto';
import {
  EventHeader,
  MsgIds,
  StopRunRequestSchema,
  SubjectTable,
  Subjects,
  type EventEnvelope,
  type EventRegistry,
  type HandoffEventData,
  type StopRunRequest,
} from '@baton/contracts';
import { guardFactOf, type AnsweredClaim, type GuardStop, type HandoffRunRef } from '@baton/domain';
import { decodeEvent, hopTrace, TRACEPARENT_HEADER, TRACESTATE_HEADER, type HopTrace, type NatsJetStream } from '@baton/eventstore';
import type { JsonLogger } from '@baton/platform';
import type { EscalationStopper, InboxPublisher } from '../escalation/escalation-stopper';
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
  /**
   * Turns `handoff.escalated` events with a `stop_why` into stop requests for the handoff's run
   * (none: escalations are left alone).
   */
  escalations?: EscalationStopper;
  /**
   * Told of every claim an accepted agent result or mesh turn answered (`run.result_recorded`,
   * `mesh.turn_recorded`), with that event's project: the lease table holds back the claim's requeue
   * while the router closes the handoff (docs/handoffs.md rule 4a).
   */
  onClaimAnswered?: (project: string, answered: AnsweredClaim) => void;
  /**
   * Delay between attempts to publish a stop request, times the attempt (default 500 ms): a loop
   * guard's stop gets 5 attempts, then is logged; an escalation's is retried until it is stored
   * (at most 30 s apart) or the watchdog stops.
   */
  retryMs?: number;
  /**
   * How long after the lapse a circuit stop that a lease lapse tripped (`GuardStop.settle`) waits
   * before it is requested, ms (default 0: at once). It is dropped if the agent's circuit closed
   * meanwhile: a result stored before the lease ran out was accepted and its completion voided the
   * lapse (docs/handoffs.md rule 4b).
   */
  lapseSettleMs?: number;
}

export interface GuardRunnerStatus extends GuardBookStatus {
  caught_up: boolean;
  last_seq: number;
  stops_requested: number;
  /** Circuit stops a lapse tripped that are waiting for the lapse to settle. */
  stops_settling: number;
  /** Circuit stops dropped because the circuit closed while their lapse settled (a result stored in time voided it). */
  stops_dropped: number;
  /** Stop requests asked for escalated handoffs (stored, duplicates included). */
  escalation_stops_requested: number;
  /** Run and handoff events that did not decode (logged with their rejection code, then skipped). */
  events_rejected: number;
}

/** A loop guard's stop with the trace of the event that tripped it (the stop request continues it). */
interface TracedStop {
  stop: GuardStop;
  trace: HopTrace;
}

/** A `handoff.escalated` event that asks for a stop, with what the book knew when it was applied. */
interface Escalation {
  envelope: EventEnvelope<HandoffEventData<'handoff.escalated'>>;
  trace: HopTrace;
  /** The handoff's run, with its project, as the book had it (undefined: the stopper reads the handoff). */
  run: HandoffRunRef | undefined;
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
    ...(stop.cap !== undefined ? { cap: stop.cap } : {}),
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
 * watchdog was down. A publish failure is logged and retried until the request is stored (the
 * guard, once tripped, asks nothing more until the run resumes).
 *
 * Escalations: a `handoff.escalated` event whose outcome is a `stop_why` (retry cap hit, no lead)
 * asks the {@link EscalationStopper} to stop the handoff's run, whose id and project the book has from the
 * handoff's `handoff.created`. The same replay rule holds (held until caught up, then asked for
 * runs still live), so an escalation stored while no watchdog ran is acted on at the next start,
 * and one already acted on (the run stopped since) is not asked again. These used to arrive on a
 * durable consumer of their own (`watchdog_escalations`), which was delivered every handoff event
 * a second time to act on one type almost no hop has; the follower already delivers them.
 */
export class GuardRunner {
  private follower: StreamFollower | null = null;
  private held: TracedStop[] = [];
  private heldEscalations: Escalation[] = [];
  private requested = 0;
  private settling = 0;
  private dropped = 0;
  private escalationsRequested = 0;
  private rejected = 0;
  /** Wakes the retries waiting between attempts (on stop). */
  private readonly sleepers = new Set<() => void>();
  private readonly inFlight = new Set<Promise<void>>();
  private stopped = false;

  constructor(private readonly opts: GuardRunnerOptions) {}

  /** Start following the stream from `startSeq` (default 1: the whole history; after a restored snapshot, the sequence after it). */
  async start(startSeq = 1): Promise<void> {
    if (this.follower) return;
    this.follower = await followOf(this.opts)({
      filterSubject: Subjects.events(this.opts.prefix),
      startSeq,
      onMessage: (message) => this.onMessage(message),
      onError: (error, message) =>
        this.opts.logger.error('event could not be applied to the guards', { subject: message.subject, seq: message.seq, err: String(error) }),
    });
    void this.follower.caughtUp.then(() => {
      const held = this.held;
      this.held = [];
      for (const heldStop of held) if (this.opts.book.isLive(heldStop.stop.project, heldStop.stop.workflow_run_id)) this.request(heldStop);
      const escalations = this.heldEscalations;
      this.heldEscalations = [];
      // A run the book does not know (no run events seen) is left to the stopper, which reads the handoff.
      for (const escalation of escalations) {
        // The run's project, not the handoff's: a cross-project handoff's run is the source project's.
        if (escalation.run === undefined || this.opts.book.isLive(escalation.run.project, escalation.run.workflow_run_id)) this.escalate(escalation);
      }
      this.opts.logger.info('loop guards caught up with the events stream', {
        last_seq: this.follower?.lastSeq() ?? 0,
        held: held.length,
        held_escalations: escalations.length,
      });
    });
  }

  async caughtUp(): Promise<void> {
    await this.follower?.caughtUp;
  }

  /**
   * Nothing owed: caught up, no stop or escalation held or being asked for. Only then is the book
   * saved (the watchdog's snapshot): a stop still owed when the book was saved would be lost by a
   * restart from it, since the book says the guard has tripped.
   */
  idle(): boolean {
    return (this.follower?.isCaughtUp() ?? false) && this.held.length === 0 && this.heldEscalations.length === 0 && this.inFlight.size === 0;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const wake of this.sleepers) wake();
    await this.follower?.stop();
    await Promise.allSettled([...this.inFlight]);
  }

  status(): GuardRunnerStatus {
    return {
      ...this.opts.book.status(),
      caught_up: this.follower?.isCaughtUp() ?? false,
      last_seq: this.follower?.lastSeq() ?? 0,
      stops_requested: this.requested,
      stops_settling: this.settling,
      stops_dropped: this.dropped,
      escalation_stops_requested: this.escalationsRequested,
      events_rejected: this.rejected,
    };
  }

  private onMessage(message: FollowedMessage): void {
    const kind = SubjectTable.event.parse(this.opts.prefix, message.subject)?.kind;
    // Of a mesh's events only a recorded turn matters here (the claim it answered).
    const turn = kind === 'mesh' && this.opts.onClaimAnswered !== undefined && message.header(EventHeader.type) === 'mesh.turn_recorded';
    if (kind !== 'run' && kind !== 'handoff' && !turn) return;
    // An event the store stamped with this build's schema is not validated again (decodeEvent).
    const decoded = decodeEvent(this.opts.registry, message.data, (name) => message.header(name));
    if (!decoded.ok) {
      this.rejected++;
      throw new Error(`event does not decode (${decoded.rejection.code}): ${decoded.rejection.message}`);
    }
    const envelope = decoded.envelope;
    // Before the book applies it: an escalation ends the handoff, and the book forgets its run.
    const escalation = this.opts.escalations && envelope.type === 'handoff.escalated' ? this.escalationOf(envelope, message) : null;
    const fact = guardFactOf(envelope);
    if ((fact?.kind === 'result_recorded' || fact?.kind === 'turn_recorded') && fact.answered !== undefined) {
      this.opts.onClaimAnswered?.(envelope.project, fact.answered);
    }
    const stops = fact !== null ? this.opts.book.applyFact(fact) : [];
    const caughtUp = this.follower?.isCaughtUp() ?? false;
    if (escalation) {
      if (caughtUp) this.escalate(escalation);
      else this.heldEscalations.push(escalation);
    }
    if (stops.length === 0) return;
    // The stop request continues the trace of the event that tripped the guard: the packet links it.
    const trace = traceOf(message);
    const traced = stops.map((stop) => ({ stop, trace }));
    if (caughtUp) traced.forEach((t) => this.request(t));
    else this.held.push(...traced);
  }

  /** The escalation an event asks to act on: every escalation stops the run of its handoff (see EscalationStopper). */
  private escalationOf(envelope: EventEnvelope, message: FollowedMessage): Escalation {
    const escalated = envelope as EventEnvelope<HandoffEventData<'handoff.escalated'>>;
    return {
      envelope: escalated,
      trace: traceOf(message),
      run: this.opts.book.runOfHandoff(envelope.project, envelope.aggregate.id),
    };
  }

  /**
   * Ask for an escalation's stop until it is stored (the packet id is the event's, so a repeat is
   * de-duplicated by the inbox and ignored by the run) or the watchdog stops; a failure to read
   * or publish is logged and retried, at most 30 s apart.
   */
  private escalate({ envelope, trace, run }: Escalation): void {
    const stopper = this.opts.escalations;
    if (!stopper) return;
    const log = this.opts.logger.child({ project: envelope.project, handoff_id: envelope.aggregate.id, event_id: envelope.id });
    this.retrying(
      async () => {
        if ((await stopper.handle(envelope, trace, run)).kind === 'stop_requested') this.escalationsRequested++;
      },
      (attempt, error) => {
        const fields = { attempt, err: String(error) };
        if (attempt % 5 === 0) log.error('cannot request the stop for an escalated handoff; still retrying', fields);
        else log.warn('cannot request the stop for an escalated handoff; retrying', fields);
      },
    );
  }

  /**
   * Ask for a loop guard's stop until it is stored or the watchdog stops, like an escalation's: the
   * guard is tripped once and asks no more until the run resumes, so a request given up on during
   * an inbox outage would let the looping run go on (the packet id is the trip's, so a repeat is
   * de-duplicated by the inbox). A circuit stop a lease lapse tripped waits for the lapse to settle
   * first (`lapseSettleMs`) and is dropped if the circuit closed meanwhile or the run halted or ended.
   */
  private request(traced: TracedStop): void {
    const { stop } = traced;
    const settleMs = this.opts.lapseSettleMs ?? 0;
    if (stop.settle === undefined || settleMs <= 0) {
      this.publishStop(traced);
      return;
    }
    const agentProject = stop.settle.agent_project;
    const settled = async () => {
      // The lapse the stop waits on: the one that tripped it, then any that re-opened the circuit
      // since (a voided lapse closed it, and new lapses landed before this one settled — lapses of
      // a router's backlog come in waves). Each may be voided the same way, so the stop waits for
      // the latest to settle before it judges.
      let lapseAt = stop.settle!.lapse_at;
      for (;;) {
        const wait = Date.parse(lapseAt) + settleMs - Date.now();
        this.settling++;
        try {
          if (wait > 0) await this.pause(wait);
        } finally {
          this.settling--;
        }
        if (this.stopped) return;
        const circuit = this.opts.book.circuitOf(agentProject, stop.agent ?? '');
        // A success of the agent since (the completion that voided the lapse, or any other) closed it.
        if (circuit === undefined || circuit.status === 'closed' || !this.opts.book.isLive(stop.project, stop.workflow_run_id)) {
          this.dropped++;
          this.opts.logger.info('circuit stop dropped: the lapse that tripped it settled with the circuit closed or the run no longer live', {
            project: stop.project,
            workflow_run_id: stop.workflow_run_id,
            agent: stop.agent,
            lapse_at: lapseAt,
            circuit: circuit?.status ?? 'closed',
          });
          return;
        }
        const reopenedBy = circuit.status === 'open' ? circuit.lapse_at : undefined;
        if (reopenedBy === undefined || Date.parse(reopenedBy) <= Date.parse(lapseAt)) break;
        lapseAt = reopenedBy;
      }
      this.publishStop(traced);
    };
    this.track(settled());
  }

  /** Publish a loop guard's stop request (see {@link request}). */
  private publishStop({ stop, trace }: TracedStop): void {
    const request = guardStopRequest(stop, this.opts.actor);
    const log = this.opts.logger.child({ project: stop.project, workflow_run_id: stop.workflow_run_id, packet_id: request.packet_id });
    this.retrying(
      async () => {
        const ack = await this.opts.publish(Subjects.stopRequest(this.opts.prefix, stop.project), request, MsgIds.stop(stop.project, request.packet_id), trace);
        this.requested++;
        log.info('loop guard tripped; stop requested', { guard: stop.guard, why: stop.why, detail: stop.detail, duplicate: ack.duplicate });
      },
      (attempt, error) => {
        const fields = { attempt, err: String(error), guard: stop.guard };
        if (attempt % 5 === 0) log.error('cannot publish the stop request of a loop guard; still retrying', fields);
        else log.warn('cannot publish the stop request; retrying', fields);
      },
    );
  }

  /**
   * Run `task` in the background until it resolves, waiting `retryMs` × the attempt (at most 30 s)
   * after each failure; a stop ends the wait and the attempts. Tracked, so `stop()` waits for it.
   */
  private retrying(task: () => Promise<void>, failed: (attempt: number, error: unknown) => void): void {
    const retryMs = this.opts.retryMs ?? 500;
    const run = (async () => {
      for (let attempt = 1; !this.stopped; attempt++) {
        try {
          await task();
          return;
        } catch (error) {
          failed(attempt, error);
          await this.pause(Math.min(30_000, retryMs * attempt));
        }
      }
    })();
    this.track(run);
  }

  /** Keep `task` among the work `stop()` waits for until it settles. */
  private track(task: Promise<void>): void {
    this.inFlight.add(task);
    void task.finally(() => this.inFlight.delete(task));
  }

  /** Wait `ms`, or less if the runner stops meanwhile. */
  private pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.sleepers.add(wake);
    });
  }
}

/** The hop of a followed event: its `traceparent`'s trace continued, or a new trace when it has none. */
function traceOf(message: FollowedMessage): HopTrace {
  return hopTrace({ [TRACEPARENT_HEADER]: message.header(TRACEPARENT_HEADER), [TRACESTATE_HEADER]: message.header(TRACESTATE_HEADER) });
}
