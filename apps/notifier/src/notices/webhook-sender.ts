import { createHash, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { HumanActionNotice } from '@baton/contracts';
import { projectRef } from '@baton/projections';
import { signWebhookPayload, WebhookHeaders } from '@baton/sdk';
import type { WebhookTarget } from '../notifier.config';

/** How long a delivered notice is remembered per webhook (so replays and redeliveries skip it). */
export const DELIVERED_TTL_SEC = 30 * 24 * 3600;

/** What one delivery pass did, per webhook (by target id). */
export interface DeliveryReport {
  delivered: string[];
  /** Already delivered earlier (deduplicated by project and notice id). */
  skipped: string[];
  /** Being delivered by another sender right now (the consumer, another notifier, a redelivery): not called twice at once. */
  busy: string[];
  failed: Array<{ target: string; error: string }>;
}

/** Deletes a webhook's in-flight lock only when this sender still holds it (its token). */
const RELEASE_LOCK = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/** A webhook's stable id: a hash of its URL (never the secret); it keys the dedupe records. */
export function targetId(target: Pick<WebhookTarget, 'url'>): string {
  return createHash('sha256').update(target.url).digest('hex').slice(0, 16);
}

export interface WebhookSenderOptions {
  targets: readonly WebhookTarget[];
  redis: Redis;
  /** The deployment prefix (dedupe keys are `<prefix>:webhooks:delivered:<target>:<project>:<notice_id>`). */
  prefix: string;
  timeoutMs: number;
  /** Clock in Unix seconds (tests). */
  nowSec?: () => number;
}

/**
 * Sends one human action notice to every webhook whose `projects` include the notice's project.
 * The body is the notice JSON; headers carry `Baton-Timestamp`, `Baton-Signature` (HMAC-SHA256
 * over `"<timestamp>.<body>"`, see @baton/sdk `verifyWebhookSignature`), `Baton-Notice-Id`,
 * `Baton-Project` and `Baton-Delivery-Attempt`. Deduplicated by project and notice id (notice ids
 * are derived from cause ids, which repeat across projects): a webhook that answered 2xx is
 * recorded in Redis and never called again for that project's notice. Does not retry by itself:
 * it reports failures and the caller (the durable consumer) retries with backoff.
 */
export class WebhookSender {
  private readonly nowSec: () => number;

  constructor(private readonly options: WebhookSenderOptions) {
    this.nowSec = options.nowSec ?? (() => Math.floor(Date.now() / 1000));
  }

  /** The webhooks a notice of `project` goes to. */
  targetsFor(project: string): WebhookTarget[] {
    return this.options.targets.filter((t) => t.projects === undefined || t.projects.includes(project));
  }

  /**
   * The delivery mark of one project's notice at one webhook: `<prefix>:webhooks:delivered:<target>:<project>:<notice_id>`,
   * the project ref last (see `projectRef`). The marks of earlier versions
   * (`<prefix>:webhooks:sent:<target>:<notice_id>`, no project) are not read: they cannot say
   * which project's notice was delivered, so honouring one would skip another project's notice
   * of the same id; they expire on their own (DELIVERED_TTL_SEC).
   */
  private deliveredKey(target: WebhookTarget, notice: Pick<HumanActionNotice, 'project' | 'notice_id'>): string {
    return `${this.options.prefix}:webhooks:delivered:${targetId(target)}:${projectRef(notice.project, notice.notice_id)}`;
  }

  /**
   * Deliver `notice` to each of its webhooks not yet delivered; never throws for a failing webhook.
   * A webhook is called by one sender at a time for one notice: each call holds a lock in Redis
   * (`…:sending`, expiring a few seconds past the timeout), and a sender that finds it held reports
   * the webhook `busy` instead of calling it too — two notifiers, or the consumer and an operator's
   * redelivery, never send one notice to one webhook twice at once.
   */
  async deliver(notice: HumanActionNotice, attempt: number): Promise<DeliveryReport> {
    const report: DeliveryReport = { delivered: [], skipped: [], busy: [], failed: [] };
    const body = JSON.stringify(notice);
    const token = `${process.pid}:${randomUUID()}`;
    await Promise.all(
      this.targetsFor(notice.project).map(async (target) => {
        const id = targetId(target);
        const key = this.deliveredKey(target, notice);
        if ((await this.options.redis.exists(key)) === 1) {
          report.skipped.push(id);
          return;
        }
        const lock = `${key}:sending`;
        if ((await this.options.redis.set(lock, token, 'PX', this.options.timeoutMs + 5_000, 'NX')) === null) {
          report.busy.push(id);
          return;
        }
        try {
          // Delivered by the sender that held the lock just before: nothing to send.
          if ((await this.options.redis.exists(key)) === 1) {
            report.skipped.push(id);
            return;
          }
          await this.send(target, notice, body, attempt, key, report);
        } finally {
          await this.options.redis.eval(RELEASE_LOCK, 1, lock, token).catch(() => undefined);
        }
      }),
    );
    return report;
  }

  /** One POST of the notice to one webhook, recorded in `report`; the delivery mark on a 2xx. */
  private async send(target: WebhookTarget, notice: HumanActionNotice, body: string, attempt: number, key: string, report: DeliveryReport): Promise<void> {
    const id = targetId(target);
    const timestamp = this.nowSec();
    try {
      const response = await fetch(target.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'baton-notifier',
          [WebhookHeaders.timestamp]: String(timestamp),
          [WebhookHeaders.signature]: signWebhookPayload(body, target.secret, timestamp),
          [WebhookHeaders.noticeId]: notice.notice_id,
          [WebhookHeaders.project]: notice.project,
          'Baton-Delivery-Attempt': String(attempt),
        },
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      await response.arrayBuffer().catch(() => undefined);
      if (response.status < 200 || response.status >= 300) {
        report.failed.push({ target: id, error: `HTTP ${response.status}` });
        return;
      }
      await this.options.redis.set(key, String(timestamp), 'EX', DELIVERED_TTL_SEC);
      report.delivered.push(id);
    } catch (error) {
      report.failed.push({ target: id, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
    }
  }
}
