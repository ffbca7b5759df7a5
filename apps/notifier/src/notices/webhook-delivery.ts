import { BeforeApplicationShutdown, Inject, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { HumanActionNoticeSchema, Subjects } from '@baton/contracts';
import {
  batonStreamNames,
  decodeEvent,
  headerOf,
  DlqSources,
  provision,
  runConsumer,
  TransientError,
  type ConsumedMessage,
  type ConsumerRunner,
  deadLetterLogFields,
} from '@baton/eventstore';
import { RUNTIME, type ServiceConfig, type ServiceRuntime } from '@baton/platform';
import { NOTIFIER_CONFIG, webhookBackoff, webhookRetryWindowMs, type NotifierConfig } from '../notifier.config';
import type { WebhookNames } from './webhook-names';
import { WebhookStatus } from './webhook-status';
import { WebhookSender, type DeliveryFailure } from './webhook-sender';

/** The notifier's durable consumer that delivers run notices to webhooks. */
export const WEBHOOK_DURABLE = 'notifier_webhooks';
/** The one that delivers mesh notices (a second consumer: nats-server 2.9 takes one filter per consumer). */
export const MESH_WEBHOOK_DURABLE = 'notifier_webhooks_mesh';

/**
 * Most notices of each consumer delivered and not yet taken by every webhook at once: those waiting
 * for their next try count (a naked message stays pending until NATS delivers it again), so a
 * receiver down for the whole retry window holds up to this many before new notices wait too.
 */
export const WEBHOOK_MAX_ACK_PENDING = 10_000;

/**
 * A delivery some webhook did not take: retried by the consumer, each failure with its reason and
 * the webhook's name (`<name> [<id>] (<reason>: <text>)`: the log lines and the dead letter's detail).
 */
export class WebhookDeliveryError extends TransientError {
  /** Each failure with the webhook's name. */
  readonly failures: ReadonlyArray<DeliveryFailure & { name: string }>;

  constructor(
    /** The notice that did not reach them. */
    readonly notice: { project: string; notice_id: string },
    failures: readonly DeliveryFailure[],
    names: WebhookNames,
  ) {
    super(`webhook delivery failed for ${failures.map((f) => names.failureText(f)).join(', ')}`);
    this.failures = failures.map((f) => names.named(f));
  }
}

/** The aggregate kinds whose notices reach webhooks, each with its consumer and notice event. */
const NOTICE_SOURCES = [
  { kind: 'run', durable: WEBHOOK_DURABLE, source: DlqSources.notifierWebhooks, type: 'run.notice_emitted' },
  { kind: 'mesh', durable: MESH_WEBHOOK_DURABLE, source: DlqSources.notifierMeshWebhooks, type: 'mesh.notice_emitted' },
] as const;

/**
 * Delivers human action notices to the webhooks of NOTIFIER_WEBHOOKS (they are still published on
 * `<prefix>.notice.<project>` by the projection applier). Durable consumers on the run events
 * (`<prefix>.ev.*.run.*`) and on the mesh events (`<prefix>.ev.*.mesh.*`), created to start at
 * new events, read each `run.notice_emitted` and `mesh.notice_emitted`; the
 * {@link WebhookSender} posts it, signed, to each matching webhook. When a webhook fails the
 * message is naked with exponential backoff (NOTIFIER_WEBHOOK_BACKOFF_MS doubling up to
 * NOTIFIER_WEBHOOK_BACKOFF_MAX_MS) and redelivered; webhooks that already answered 2xx are
 * skipped (deduplicated by project and notice id). The delay is NATS's (a nak with a delay): no
 * message is held in process while it waits, so a delay of minutes never runs into the ack wait,
 * and a restart keeps the schedule; a call in progress sends in-progress signals (the runner's).
 * After NOTIFIER_WEBHOOK_MAX_ATTEMPTS deliveries — {@link webhookRetryWindowMs} after the first, over
 * an hour with the defaults — the message is dead-lettered (`<prefix>.dlq.notifier-webhooks`, or
 * `notifier-mesh-webhooks`, reason `max_deliveries`), its detail naming each webhook that failed
 * with its reason (`connection_refused`, `http_status`…). The consumer survives restarts, so a
 * notice whose delivery was cut short by a crash is delivered after it. With no webhooks
 * configured nothing is created.
 */
@Injectable()
export class WebhookDelivery implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private runners: ConsumerRunner[] = [];
  private sender: WebhookSender | null = null;

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime<ServiceConfig>,
    @Inject(NOTIFIER_CONFIG) private readonly config: NotifierConfig,
    private readonly status: WebhookStatus,
  ) {}

  /** The sender (null when no webhook is configured). */
  get webhookSender(): WebhookSender | null {
    return this.sender;
  }

  async onApplicationBootstrap(): Promise<void> {
    const targets = this.config.NOTIFIER_WEBHOOKS;
    if (targets.length === 0) return;
    const { config, nats, redis, logger } = this.runtime;
    if (!redis) throw new Error('webhook delivery needs Redis (REDIS_URL)');
    const prefix = config.BATON_PREFIX;
    this.sender = new WebhookSender({ targets, redis: redis.client, prefix, timeoutMs: this.config.NOTIFIER_WEBHOOK_TIMEOUT_MS });
    const stream = batonStreamNames(prefix).events;
    await provision(nats.jsm, {
      consumers: NOTICE_SOURCES.map(({ kind, durable }) => ({
        stream,
        durable,
        filterSubject: Subjects.aggregateKind(prefix, kind),
        deliverFrom: 'new' as const,
        ackWaitMs: Math.max(30_000, this.config.NOTIFIER_WEBHOOK_TIMEOUT_MS * 3),
        maxAckPending: WEBHOOK_MAX_ACK_PENDING,
        description: `notifier: human action notices of ${kind} aggregates to webhooks`,
      })),
    });
    this.runners = NOTICE_SOURCES.map(({ durable, source, type }) =>
      runConsumer({
        js: nats.js,
        stream,
        durable,
        prefix,
        source,
        maxDeliver: this.config.NOTIFIER_WEBHOOK_MAX_ATTEMPTS,
        backoffMs: webhookBackoff(this.config),
        concurrency: 8,
        batch: 8,
        pullExpiresMs: 1000,
        handler: (msg) => this.handle(msg, type),
        onOutcome: (outcome) => {
          if (outcome.kind === 'retry')
            logger.warn('webhook delivery will be retried', {
              durable,
              seq: outcome.msg.seq,
              attempt: outcome.msg.deliveryCount,
              delay_ms: outcome.delayMs,
              error: String(outcome.error),
              ...(outcome.error instanceof WebhookDeliveryError ? { failures: outcome.error.failures } : {}),
            });
          // The services' one dead-letter line (docs/sre.md): source, reason, project, trace and the ids the notice names.
          if (outcome.kind === 'dead_lettered') {
            // Counted per webhook and project for GET /v1/projects/:project/webhooks (never throws).
            if (outcome.error instanceof WebhookDeliveryError)
              void this.status.deadLettered(
                outcome.error.notice,
                outcome.error.failures.map((f) => f.target),
              );
            logger.error('webhook delivery gave up (dead-lettered)', {
              ...deadLetterLogFields({
                prefix,
                source,
                durable,
                reason: outcome.reason,
                error: outcome.error,
                subject: outcome.msg.subject,
                seq: outcome.msg.seq,
                headers: outcome.msg.headers,
                data: outcome.msg.data,
              }),
              ...(outcome.error instanceof WebhookDeliveryError ? { failures: outcome.error.failures } : {}),
            });
          }
        },
        onError: (error) => logger.error('webhook consumer pull failed', { durable, error: String(error) }),
        onConsumerLost: (event) =>
          (event.outcome === 'failed' ? logger.error : logger.warn).call(logger, `webhook consumer lost: ${event.outcome}`, {
            durable,
            ack_floor: event.ackFloor,
            ...(event.startSeq !== undefined ? { start_seq: event.startSeq } : {}),
            ...(event.error !== undefined ? { error: String(event.error) } : {}),
          }),
      }),
    );
    logger.info('webhook delivery started', {
      webhooks: targets.length,
      // Each webhook as operators name it (`name`, or derived from its URL) beside its id.
      webhook_names: this.status.names.namesOf(this.status.names.list().map((webhook) => webhook.id)),
      durables: NOTICE_SOURCES.map((source) => source.durable),
      max_attempts: this.config.NOTIFIER_WEBHOOK_MAX_ATTEMPTS,
      retry_window_ms: webhookRetryWindowMs(this.config),
    });
  }

  private async handle(msg: ConsumedMessage, noticeType: (typeof NOTICE_SOURCES)[number]['type']): Promise<void> {
    // Strict: an event whose bytes are not UTF-8 or JSON is never delivered with replaced text
    // (the projection applier dead-letters undecodable events; nothing to deliver here).
    const decoded = decodeEvent(this.runtime.registry, msg.data, headerOf(msg.headers));
    if (!decoded.ok || decoded.envelope.type !== noticeType) return;
    const notice = HumanActionNoticeSchema.parse((decoded.envelope.payload as { notice: unknown }).notice);
    const report = await (this.sender as WebhookSender).deliver(notice, msg.deliveryCount);
    await this.status.record(notice, report);
    const names = this.status.names;
    const log = {
      project: notice.project,
      notice_id: notice.notice_id,
      workflow_run_id: notice.workflow_run_id,
      event_id: decoded.envelope.id,
      attempt: msg.deliveryCount,
    };
    if (report.delivered.length > 0)
      this.runtime.logger.info('notice delivered to webhooks', {
        ...log,
        webhooks: report.delivered,
        skipped: report.skipped,
        webhook_names: names.namesOf([...report.delivered, ...report.skipped]),
      });
    if (report.failed.length > 0) throw new WebhookDeliveryError(notice, report.failed, names);
    // Another sender is delivering it to these right now (an operator's redelivery): look again
    // later, and call them then only if that delivery did not take.
    if (report.busy.length > 0) throw new TransientError(`webhook delivery under way elsewhere for ${report.busy.map((id) => names.label(id)).join(', ')}`);
  }

  async beforeApplicationShutdown(): Promise<void> {
    const runners = this.runners;
    this.runners = [];
    await Promise.all(runners.map((runner) => runner.stop()));
  }
}
