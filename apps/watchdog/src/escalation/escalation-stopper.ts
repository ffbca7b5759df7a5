import { Limits, MsgIds, type EventEnvelope, type HandoffEvent, type HandoffEventData } from '@baton/contracts';
import { evolveHandoff, handoffRun, initialHandoffState, type HandoffRunRef, type HandoffState } from '@baton/domain';
import type { EventStore, HopTrace } from '@baton/eventstore';
import type { JsonLogger } from '@baton/platform';
import { StopRunRequestSchema, stopPacketId, stopRequestSubject, type StopRunRequest } from './stop-request';

/**
 * Publishes into the inbox stream and resolves once stored; idempotent on `msgId`. `trace` is the
 * hop the message continues (sent as `traceparent`).
 */
export type InboxPublisher = (subject: string, body: unknown, msgId: string, trace?: HopTrace) => Promise<{ duplicate: boolean }>;

export interface EscalationStopperOptions {
  prefix: string;
  /** Reads the escalated handoff, for its workflow run when the caller does not know it. */
  store: Pick<EventStore, 'read'>;
  publish: InboxPublisher;
  logger: JsonLogger;
  /** Who asks for the stop (default `baton-watchdog`). */
  actor?: string;
}

/** What the stopper did with one event. */
export type EscalationResult = { kind: 'stop_requested'; request: StopRunRequest; duplicate: boolean } | { kind: 'no_run'; handoffId: string };

/**
 * Turns `handoff.escalated` events (retry cap hit) into a stop request for the handoff's workflow
 * run, why `guard_failed`: with no lead anywhere the outcome is `{ stop_why, detail }`; with a lead
 * the ledger has made the lead a consult (`{ escalate_to, consult_handoff_id }`) but the run's
 * handoff is `failed` all the same, and nothing the lead does reaches the run — without the stop it
 * would wait forever on a failed handoff, with nothing an operator could answer. Published on
 * `<prefix>.in.<run project>.stop`. The run's project is the handoff's own, except on a
 * cross-project handoff: that one lives in the target project and its run is the source project's
 * (`source_project`), so the request names, and goes to, the source project. The request's `packet_id` (and `Nats-Msg-Id`, `stop:<project>:<packet id>`) is derived from the
 * event id, so replays and concurrent watchdogs ask for the same stop and the run stops once.
 * A handoff without a workflow run has nothing to stop: that is logged (warn) and left, the handoff
 * itself is already `failed` with the reason (and a lead's consult is the ledger's business).
 * The caller that follows the events stream knows the handoff's run, with its project, from its
 * `handoff.created` (`knownRun`); without it the handoff's events are read.
 * Throws whatever reading the handoff or publishing throws: the caller retries.
 */
export class EscalationStopper {
  private readonly actor: string;

  constructor(private readonly opts: EscalationStopperOptions) {
    this.actor = opts.actor ?? 'baton-watchdog';
  }

  async handle(envelope: EventEnvelope<HandoffEventData<'handoff.escalated'>>, trace?: HopTrace, knownRun?: HandoffRunRef): Promise<EscalationResult> {
    const escalation = envelope.payload;
    const handoffId = envelope.aggregate.id;
    const outcome = escalation.outcome;
    const stop =
      'stop_why' in outcome
        ? outcome
        : {
            stop_why: 'guard_failed' as const,
            detail: `handoff ${handoffId} reached its retry cap after ${escalation.cause} and was escalated to ${outcome.escalate_to} (consult ${outcome.consult_handoff_id}); the run cannot go on without it`,
          };
    const log = this.opts.logger.child({ handoff_id: handoffId, project: envelope.project, event_id: envelope.id });

    const run = knownRun ?? (await this.runOf(envelope.project, handoffId));
    if (run === undefined) {
      log.warn('handoff escalated but belongs to no workflow run; nothing to stop', { stop_why: stop.stop_why });
      return { kind: 'no_run', handoffId };
    }

    const request: StopRunRequest = StopRunRequestSchema.parse({
      packet_id: stopPacketId(envelope.id),
      workflow_run_id: run.workflow_run_id,
      project: run.project,
      why: stop.stop_why,
      detail: stop.detail.slice(0, Limits.maxShortText),
      tried: [`handoff ${handoffId}: ${escalation.attempted_retry - 1} retries after ${escalation.cause}`.slice(0, 200)],
      requested_by: this.actor,
      cause: {
        kind: 'handoff_escalated',
        handoff_id: handoffId,
        event_id: envelope.id,
        ...(envelope.project !== run.project ? { project: envelope.project } : {}),
        ...('consult_handoff_id' in outcome ? { consult_handoff_id: outcome.consult_handoff_id } : {}),
      },
    });
    const ack = await this.opts.publish(stopRequestSubject(this.opts.prefix, run.project), request, MsgIds.stop(run.project, request.packet_id), trace);
    log.child({ workflow_run_id: run.workflow_run_id, run_project: run.project }).info('stop requested for the run of an escalated handoff', {
      packet_id: request.packet_id,
      why: request.why,
      duplicate: ack.duplicate,
    });
    return { kind: 'stop_requested', request, duplicate: ack.duplicate };
  }

  /** The workflow run of a handoff, with its project, read from its events (undefined: it has none). */
  private async runOf(project: string, handoffId: string): Promise<HandoffRunRef | undefined> {
    const { events } = await this.opts.store.read({ project, kind: 'handoff', id: handoffId });
    const state = events.reduce<HandoffState>((s, e) => evolveHandoff(s, { type: e.type, data: e.payload } as HandoffEvent), initialHandoffState());
    return state.status === 'absent' ? undefined : (handoffRun(state) ?? undefined);
  }
}
