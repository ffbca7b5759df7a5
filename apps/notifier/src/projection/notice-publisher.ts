import { Inject, Injectable } from '@nestjs/common';
import { HumanActionNoticeSchema, Subjects, type HumanActionNotice } from '@baton/contracts';
import type { SequencedEvent } from '@baton/projections';
import { continueTrace, headersFrom, hopTraceHeaders } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { WebhookHeaders } from '@baton/sdk';

const encoder = new TextEncoder();

/**
 * A notice message's headers: `Baton-Notice-Id` and `Baton-Project` (the names of the webhook
 * headers, so one receiver helper, @baton/sdk `webhookDedupeKey`, reads both), and the trace of
 * the event that carries it when it has one (the notice continues that trace).
 */
function noticeHeaders(event: SequencedEvent, notice: HumanActionNotice): { headers: ReturnType<typeof headersFrom> } {
  return {
    headers: headersFrom({
      [WebhookHeaders.noticeId]: notice.notice_id,
      [WebhookHeaders.project]: notice.project,
      ...(event.traceId ? hopTraceHeaders(continueTrace(event.traceId)) : {}),
    }),
  };
}

/** The events that carry a human action notice: a run's, and a handoff mesh's stop notice (seed 004). */
const NOTICE_EVENTS: ReadonlySet<string> = new Set(['run.notice_emitted', 'mesh.notice_emitted']);

/** Does an event of this type carry a human action notice (one the notifier publishes)? */
export function carriesNotice(type: string): boolean {
  return NOTICE_EVENTS.has(type);
}

/**
 * Publishes human action notices on `<prefix>.notice.<project>` (core NATS) as their
 * `run.notice_emitted` / `mesh.notice_emitted` events are applied.
 *
 * Delivery is AT LEAST ONCE: a notice is published only while its event's stream sequence is
 * above the `notices` projection's last applied sequence, and the projection records it right
 * after (in the same projector pass). So replays, redeliveries of an event already applied, and
 * rebuilds never publish a notice again; only a crash between the publish and the projection's
 * commit publishes it twice. A `notices` projection Redis lost is never re-applied from the
 * stream's start here: it is rebuilt (publishing nothing) up to what was published before the
 * loss, and the applier publishes from there (`ProjectionApplier`). Subscribers dedupe on the pair (`project`, `notice_id`) — notice ids
 * repeat across projects — which each message carries in its body and in its `Baton-Project` and
 * `Baton-Notice-Id` headers.
 */
@Injectable()
export class NoticePublisher {
  constructor(@Inject(RUNTIME) private readonly runtime: ServiceRuntime) {}

  /**
   * Publish the notices among `events`: events the `notices` projection has not applied yet and is
   * about to commit (the range applier passes exactly those, above the projection's last applied
   * sequence: the at-least-once rule above). Throws if NATS refuses.
   */
  async publishUnapplied(events: readonly SequencedEvent[]): Promise<number> {
    let published = 0;
    for (const event of events) {
      if (!NOTICE_EVENTS.has(event.type)) continue;
      this.send(event);
      published++;
    }
    if (published > 0) await this.runtime.nats.connection.flush();
    return published;
  }

  /** Publish the notice `event` carries on `<prefix>.notice.<project>` (core NATS; the caller flushes). */
  private send(event: SequencedEvent): void {
    const notice = HumanActionNoticeSchema.parse((event.payload as { notice: unknown }).notice);
    const subject = Subjects.notice(this.runtime.config.BATON_PREFIX, notice.project);
    this.runtime.nats.connection.publish(subject, encoder.encode(JSON.stringify(notice)), noticeHeaders(event, notice));
    this.runtime.logger.info('notice published', {
      project: notice.project,
      notice_id: notice.notice_id,
      workflow_run_id: notice.workflow_run_id,
      event_id: event.id,
      subject,
    });
  }
}
