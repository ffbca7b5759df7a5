import { HttpStatus, Inject, Injectable } from '@nestjs/common';
import { HumanActionNoticeSchema } from '@baton/contracts';
import type { Principal } from '../auth/roles';
import type { BatonViews } from '@baton/projections';
import { assertCanAnswer, assertVisible } from '../auth/scope';
import { WebhookDelivery } from '../notices/webhook-delivery';
import { WebhookStatus } from '../notices/webhook-status';
import { NOTIFIER_CONFIG, type NotifierConfig } from '../notifier.config';
import { BATON_VIEWS } from '../projection/tokens';
import { ApiError, notFound } from './http';

/** What a redelivery did: the webhooks of the notice's project it reached now, and those it had reached before. */
export interface NoticeRedeliveryReply {
  outcome: 'delivered' | 'already_delivered';
  project: string;
  notice_id: string;
  /** Webhooks (by id: a hash of the URL) that answered 2xx to this request. */
  delivered: string[];
  /** Webhooks that had answered 2xx before (their delivery mark is kept 30 days): not called again. */
  skipped: string[];
  /** `{ <id>: <name> }` of the webhooks this reply names (their configured `name`, or derived from the URL). */
  webhook_names: Record<string, string>;
}

/**
 * Sends a human action notice to the webhooks again, on an operator's request: a notice whose
 * delivery the notifier gave up on (`max_deliveries`, dead-lettered on `notifier-webhooks` /
 * `notifier-mesh-webhooks`) is not a redrive's to repair — its event stays in the events stream and
 * is never published again — so this is how it reaches the webhook once the receiver is fixed.
 * The notice is read from the `notices` projection and delivered exactly as the consumer delivers
 * it (signed, `Baton-Delivery-Attempt` one past NOTIFIER_WEBHOOK_MAX_ATTEMPTS); a webhook that
 * already answered 2xx for it is skipped, so a repeated request is harmless. Refusals: 404
 * `not_found` (no such notice in a project the token may see), 403 `role_forbidden` (a viewer: `details.required_role` operator),
 * 409 `no_webhooks` (no webhook serves the project), 409 `delivery_in_progress` (another sender is
 * delivering it to a webhook this moment: one sender per notice and webhook at a time), 502
 * `webhook_delivery_failed` (no webhook took it now and one still failed) or 502
 * `webhook_partially_delivered` (some took it now, one still failed): `details` names the webhooks
 * that took it (`delivered`), had it (`skipped`), are being sent it elsewhere (`busy`) and failed
 * (`failed`, each with its `name`, `reason` code, `error` text and `status` for an HTTP answer), by
 * id, and `webhook_names` the name of each. What it did is recorded in the webhooks' status
 * (`GET /v1/projects/:project/webhooks`), as the consumer's deliveries are.
 */
@Injectable()
export class NoticeRedelivery {
  constructor(
    @Inject(BATON_VIEWS) private readonly views: BatonViews,
    @Inject(NOTIFIER_CONFIG) private readonly config: NotifierConfig,
    private readonly delivery: WebhookDelivery,
    private readonly status: WebhookStatus,
  ) {}

  async redeliver(project: string, noticeId: string, caller: Principal): Promise<NoticeRedeliveryReply> {
    assertVisible(caller, project, 'notice', noticeId);
    assertCanAnswer(caller, 'redelivering a notice');
    const sender = this.delivery.webhookSender;
    if (sender === null || sender.targetsFor(project).length === 0) {
      throw new ApiError(
        HttpStatus.CONFLICT,
        'no_webhooks',
        `no webhook serves project ${project} (NOTIFIER_WEBHOOKS): a notice is redelivered to webhooks only`,
      );
    }
    const stored = await this.views.notice(project, noticeId);
    if (stored === null) throw notFound('notice', noticeId);
    // In the notice's own field order, as the consumer sends it (the projection keeps keys sorted).
    const notice = HumanActionNoticeSchema.parse(stored);
    const report = await sender.deliver(notice, this.config.NOTIFIER_WEBHOOK_MAX_ATTEMPTS + 1);
    await this.status.record(notice, report);
    // Webhooks are named `<name> [<id>]` in words; `webhook_names` gives each id's name.
    const names = this.status.names;
    const labels = (ids: readonly string[]) => ids.map((id) => names.label(id)).join(', ');
    const webhookNames = names.namesOf([...report.delivered, ...report.skipped, ...report.busy, ...report.failed.map((f) => f.target)]);
    // What else came of it, after the refusal's own words.
    const also = [
      ...(report.skipped.length > 0 ? [`; ${labels(report.skipped)} had it already`] : []),
      ...(report.busy.length > 0 ? [`; ${labels(report.busy)} being sent it right now by another sender`] : []),
    ].join('');
    if (report.failed.length > 0) {
      const failed = report.failed.map((f) => names.failureText(f)).join(', ');
      const details = {
        failed: report.failed.map((f) => names.named(f)),
        delivered: report.delivered,
        skipped: report.skipped,
        busy: report.busy,
        webhook_names: webhookNames,
      };
      // Some webhook took it now: a partial success, its own code, so a client tells it from nothing delivered.
      if (report.delivered.length > 0)
        throw new ApiError(
          HttpStatus.BAD_GATEWAY,
          'webhook_partially_delivered',
          `notice ${noticeId} of ${project} reached ${labels(report.delivered)} now, but not ${failed}${also}; ask again once the receiver is fixed (the webhooks that took it are skipped)`,
          [],
          details,
        );
      throw new ApiError(HttpStatus.BAD_GATEWAY, 'webhook_delivery_failed', `notice ${noticeId} of ${project} did not reach ${failed}${also}`, [], details);
    }
    if (report.busy.length > 0) {
      const reached = report.delivered.length > 0 ? `; it reached ${labels(report.delivered)} now` : '';
      throw new ApiError(
        HttpStatus.CONFLICT,
        'delivery_in_progress',
        `notice ${noticeId} of ${project} is being delivered to ${labels(report.busy)} right now (by the notifier or another request): not sent twice; ask again to see whether it took${reached}`,
        [],
        { busy: report.busy, delivered: report.delivered, skipped: report.skipped, webhook_names: webhookNames },
      );
    }
    return {
      outcome: report.delivered.length > 0 ? 'delivered' : 'already_delivered',
      project,
      notice_id: noticeId,
      delivered: report.delivered,
      skipped: report.skipped,
      webhook_names: webhookNames,
    };
  }
}
