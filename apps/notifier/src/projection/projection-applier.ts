import { BeforeApplicationShutdown, Inject, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { Subjects } from '@baton/contracts';
import { batonStreamNames, PoisonError, provision, runConsumer, type ConsumedMessage, type ConsumerRunner } from '@baton/eventstore';
import { jetStreamReplaySource, type BatonProjector, type SequencedEvent } from '@baton/projections';
import { RUNTIME, traceIdFromHeaders, type ServiceConfig, type ServiceRuntime } from '@baton/platform';
import { AppliedEvents } from './applied-events';
import { NoticePublisher } from './notice-publisher';
import { BATON_PROJECTOR, PROJECTION_DURABLE } from './tokens';

const decoder = new TextDecoder();

/**
 * Keeps the Redis projections up to date with the events stream.
 *
 * At start (before the HTTP API serves): every projection with no active generation, or built by
 * another version of its definition, is rebuilt from the stream into a shadow generation and
 * swapped in. Then a durable pull consumer on `<prefix>.ev.>` applies every event to every
 * projection. The consumer has `max_ack_pending: 1` and one handler at a time, so events are
 * applied in stream order even across retries (a nak'd event blocks the ones after it instead of
 * being overtaken, which the projections' seq guard would otherwise turn into a lost event).
 * Each projection apply is idempotent by stream sequence, so redeliveries change nothing. An event
 * that does not decode is dead-lettered (the rebuild skips it the same way). A failing apply
 * (Redis down) is retried with the runner's backoff and dead-lettered after BATON_MAX_DELIVER.
 *
 * Run ONE notifier per deployment: the seq guard assumes a single ordered applier.
 */
@Injectable()
export class ProjectionApplier implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private runner: ConsumerRunner | null = null;
  private started: Promise<void> | null = null;

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime<ServiceConfig>,
    @Inject(BATON_PROJECTOR) private readonly projector: BatonProjector,
    private readonly notices: NoticePublisher,
    private readonly applied: AppliedEvents,
  ) {}

  onApplicationBootstrap(): Promise<void> {
    this.started ??= this.start();
    return this.started;
  }

  private async start(): Promise<void> {
    const { config, nats, registry, logger } = this.runtime;
    const prefix = config.BATON_PREFIX;
    const source = jetStreamReplaySource({
      nats,
      prefix,
      registry,
      onUndecodable: (seq, subject, rejection) => logger.warn('rebuild skipped an undecodable event', { seq, subject, code: rejection.code, reason: rejection.message }),
    });
    for (const rebuilt of await this.projector.ensureCurrent(source)) {
      logger.info('projection rebuilt at start', { projection: rebuilt.projection, reason: rebuilt.reason, status: rebuilt.result.status, ...(rebuilt.result.status === 'swapped' ? { last_seq: rebuilt.result.lastSeq } : {}) });
    }
    const stream = batonStreamNames(prefix).events;
    await provision(nats.jsm, {
      consumers: [
        { stream, durable: PROJECTION_DURABLE, filterSubject: Subjects.events(prefix), deliverFrom: 'all', ackWaitMs: 30_000, maxAckPending: 1, description: 'notifier: Redis projections and human action notices' },
      ],
    });
    this.runner = runConsumer({
      js: nats.js,
      stream,
      durable: PROJECTION_DURABLE,
      prefix,
      source: PROJECTION_DURABLE,
      maxDeliver: config.BATON_MAX_DELIVER,
      concurrency: 1,
      batch: 1,
      pullExpiresMs: 1000,
      handler: (msg) => this.handle(msg),
      onOutcome: (outcome) => {
        if (outcome.kind !== 'acked') logger.warn(`projection event ${outcome.kind}`, { seq: outcome.msg.seq, subject: outcome.msg.subject, error: String('error' in outcome ? outcome.error : '') });
      },
      onError: (error) => logger.error('projection consumer pull failed', { error: String(error) }),
    });
    logger.info('projection consumer started', { stream, durable: PROJECTION_DURABLE });
  }

  /**
   * Decode, apply to every projection (publishing a notice before `notices` records it), tell the
   * live listeners (the inbox's event stream), then the runner acks.
   */
  private async handle(msg: ConsumedMessage): Promise<void> {
    let raw: unknown;
    try {
      raw = JSON.parse(decoder.decode(msg.data));
    } catch (error) {
      throw new PoisonError(`stored event #${msg.seq} is not JSON`, 'malformed_json', { cause: error });
    }
    const decoded = this.runtime.registry.decode(raw);
    if (!decoded.ok) throw new PoisonError(`stored event #${msg.seq} does not decode: ${decoded.rejection.message}`, decoded.rejection.code);
    const traceId = traceIdFromHeaders(msg.headers);
    const event: SequencedEvent = { ...decoded.value, seq: msg.seq, ...(traceId ? { traceId } : {}) };
    await this.projector.apply(event, {
      beforeApply: async (projection) => {
        if (projection === 'notices') await this.notices.publishIfNew(event);
      },
    });
    const failed = this.applied.publish(event);
    if (failed > 0) this.runtime.logger.warn('an applied-event listener threw', { seq: event.seq, event_id: event.id, listeners: failed });
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.started?.catch(() => undefined);
    await this.runner?.stop();
    this.runner = null;
  }
}
