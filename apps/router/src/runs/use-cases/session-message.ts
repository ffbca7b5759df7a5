import type { HopTrace } from '@baton/eventstore';
import { Inject, Injectable } from '@nestjs/common';
import { InboxBodySchemas } from '@baton/contracts';
import { CUSTOMER } from '@baton/domain';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { nowIso } from '../../shared/ids';
import { decodeForSubject } from '../../shared/inbound';
import type { InboundOrigin } from '../../shared/refusal-budget';
import { publishingAgentOf } from '../../shared/subjects';
import { RunCommands, runRef } from '../run-commands';

/** The `agent` a refused customer message is recorded under in `run.result_rejected`. */
export const MESSAGE_REFUSAL_AGENT = CUSTOMER.actor;

/**
 * Deliveries of a message for a run that does not exist (yet) before it is dead-lettered
 * `not_found`: a message sent right after its run's start may be read before the start (separate
 * consumers); the first redeliveries wait about 1 s and 5 s for it.
 */
export const MESSAGE_WAITS_FOR_START_DELIVERIES = 3;

/**
 * Use case: a customer turn of a conversation run from `<prefix>.in.<project>.message`, or
 * `…message.<agent>` relayed by that agent (recorded as `relayed_by`) (seed 001). Decodes a `SessionMessageSchema` (size cap, JSON, schema, the subject's
 * project), then runs `session_message` on the run over its pinned definition: the message is
 * recorded (`run.message_received`) and the active agent's WHEN routes are evaluated before any
 * model runs — a route fires (`run.handoff` + `run.routed`), a child hands back, or the message
 * goes to the active agent (`run.routed`, rule `message`). While an agent works the message is
 * queued (`run.message_queued`) and delivered the next time the run waits for the customer. Bad
 * input is dead-lettered, and so is a message for an unknown run once it has waited a few seconds
 * for the run's start (`MESSAGE_WAITS_FOR_START_DELIVERIES`); a refused message (the run is held, stopped or
 * finished, is not a conversation, or its queue is full: `message_queue_full`) is recorded as
 * `run.result_rejected` (`result_id` = message id, agent `customer`) while the sender's budget of
 * refusals lasts (`RefusalBudget`: the subject's project, or `<project>/<agent>` that relayed it);
 * past it the refusal is only counted in its `refusals_suppressed` letter. Idempotent per `message_id`.
 */
@Injectable()
export class SessionMessageUseCase {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly runs: RunCommands,
  ) {}

  /** @param stored the message's stream and sequence and the consumer's source: its refusal is recorded under its sender's budget. */
  async execute(subject: string, bytes: Uint8Array, trace: HopTrace, deliveryCount = 1, stored?: InboundOrigin): Promise<void> {
    const message = decodeForSubject(this.runtime.config.BATON_PREFIX, subject, bytes, InboxBodySchemas.message);
    const log = this.runtime.logger.child({
      trace_id: trace.traceId,
      project: message.project,
      workflow_run_id: message.workflow_run_id,
      message_id: message.message_id,
    });
    const now = nowIso();
    // The actor is the customer whose words it carries, never the body's `sent_by`, which stays data
    // on the message. The agent that relayed it is known only from an agent-named subject.
    const { actor, origin } = CUSTOMER;
    const relayedBy = publishingAgentOf(this.runtime.config.BATON_PREFIX, subject);
    const outcome = await this.runs.applyInbound(
      runRef(message.project, message.workflow_run_id),
      (definitions) => ({
        kind: 'message',
        message: {
          message_id: message.message_id,
          text: message.text,
          ...(message.sent_by !== undefined ? { sent_by: message.sent_by } : {}),
          ...(relayedBy !== null ? { relayed_by: relayedBy } : {}),
        },
        definitions,
        metadata: { now, actor },
      }),
      { kind: 'message', id: message.message_id, actor, origin, workflowRunId: message.workflow_run_id, now, trace },
      {
        kind: 'message_refused',
        agent: MESSAGE_REFUSAL_AGENT,
        describe: (reason) => `customer message ${message.message_id}: ${reason}`,
        ...(stored !== undefined ? { origin: stored } : {}),
      },
      { waitForStart: deliveryCount < MESSAGE_WAITS_FOR_START_DELIVERIES },
    );
    if (outcome.applied)
      log.info(outcome.events.length > 0 ? 'customer message applied' : 'customer message already applied', { events: outcome.events.map((e) => e.type) });
    else
      log.warn(outcome.recorded ? 'customer message rejected' : 'customer message rejected, over its sender`s budget: not recorded on the run', {
        code: outcome.code,
        reason: outcome.message,
      });
  }
}
