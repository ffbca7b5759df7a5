import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { createEventRegistry, EventHeader, SubjectTable, parseSubject } from '@baton/contracts';
import {
  DlqHeader,
  ambientTracing,
  contextFromHeaders,
  type ConsumedMessage,
  type FoldCacheStats,
  type JetStreamPublished,
  type MessageOutcome,
  type NatsHandle,
  type RunnerIdentity,
  type RunnerInstrumentation,
  type StorageLimit,
} from '@baton/eventstore';
import { context as otelContext } from '@opentelemetry/api';

/** Metric names Baton exposes at `GET /metrics` (every series also carries `service`). */
export const MetricName = {
  eventsHandled: 'baton_events_handled_total',
  handlerDuration: 'baton_handler_duration_seconds',
  consumerPending: 'baton_consumer_pending_messages',
  consumerAckPending: 'baton_consumer_ack_pending_messages',
  consumerRedelivered: 'baton_consumer_redelivered_messages',
  consumerWaiting: 'baton_consumer_waiting_pulls',
  deadLetters: 'baton_dead_letters_total',
  commandsResumed: 'baton_commands_resumed_total',
  foldCacheEntries: 'baton_fold_cache_entries',
  foldCacheBytes: 'baton_fold_cache_bytes',
  foldCacheMaxBytes: 'baton_fold_cache_max_bytes',
  foldCacheEvictions: 'baton_fold_cache_evictions_total',
  openHandoffs: 'baton_open_handoffs',
  inboxOpenItems: 'baton_inbox_open_items',
  httpDuration: 'baton_http_request_duration_seconds',
  edgeMessages: 'baton_edge_messages_total',
  ledgerRequestsShed: 'baton_ledger_requests_shed_total',
  storageFull: 'baton_storage_full',
  storageFullRefused: 'baton_storage_full_refused_total',
  redisFull: 'baton_redis_full',
  redisFullRefused: 'baton_redis_full_refused_total',
} as const;

/** A metric of {@link MetricName}, by its key. */
export type MetricKey = keyof typeof MetricName;

/**
 * The metrics of {@link BatonMetrics} only some services expose, and which: what they count
 * happens in those services alone (the ledger sheds requests and relays agent edge messages; the
 * router and the ledger decide commands on their aggregates; the notifier writes the Redis
 * projections, which a full Redis refuses). Every other service leaves them out
 * of its registry — neither a sample nor a HELP line on its `/metrics`, so no dashboard sums a
 * router's constant 0 into the ledger's sheds. A metric not named here is every service's
 * (consumers, dead letters, the fold cache, HTTP), except the notifier's projection gauges
 * (`baton_open_handoffs`, `baton_inbox_open_items`), which the notifier alone registers
 * (`registerProjectionGauges`).
 */
export const SERVICE_METRICS: Readonly<Partial<Record<MetricKey, readonly string[]>>> = {
  ledgerRequestsShed: ['ledger'],
  edgeMessages: ['ledger'],
  commandsResumed: ['router', 'ledger'],
  redisFull: ['notifier'],
  redisFullRefused: ['notifier'],
};

/** Whether `service` exposes `metric` ({@link SERVICE_METRICS}). */
export function exposesMetric(service: string, metric: MetricKey): boolean {
  const only = SERVICE_METRICS[metric];
  return only === undefined || only.includes(service);
}

/**
 * Outcome label values of `baton_events_handled_total`: the runner's outcome kinds, and
 * `suppressed` for a message given up on whose refusal has no letter of its own (counted in its
 * sender's `refusals_suppressed` letter) — `dead_lettered` is a message with a letter of its own.
 */
export type HandledOutcome = MessageOutcome['kind'] | 'suppressed';

/** The `outcome` label of one runner outcome. */
export function handledOutcome(outcome: MessageOutcome): HandledOutcome {
  return outcome.kind === 'dead_lettered' && outcome.suppressed ? 'suppressed' : outcome.kind;
}

export interface BatonMetricsOptions {
  service: string;
  /** Also collect prom-client's default process metrics (`baton_process_*`, `baton_nodejs_*`; default true). */
  defaultMetrics?: boolean;
}

/**
 * One service's Prometheus metrics: a prom-client registry of its own (never the global one, so
 * several services in one test process do not mix their series) with `service` as a default label.
 */
export class BatonMetrics {
  readonly registry = new Registry();
  readonly eventsHandled: Counter<'consumer' | 'type' | 'outcome'>;
  readonly handlerDuration: Histogram<'consumer' | 'type'>;
  readonly consumerPending: Gauge<'stream' | 'consumer'>;
  readonly consumerAckPending: Gauge<'stream' | 'consumer'>;
  readonly consumerRedelivered: Gauge<'stream' | 'consumer'>;
  readonly consumerWaiting: Gauge<'stream' | 'consumer'>;
  readonly deadLetters: Counter<'source' | 'reason'>;
  /** Exposed by the router and the ledger alone ({@link SERVICE_METRICS}). */
  readonly commandsResumed: Counter<'outcome'>;
  /** Exposed by the ledger alone ({@link SERVICE_METRICS}). */
  readonly edgeMessages: Counter<'route' | 'outcome'>;
  /** Exposed by the ledger alone ({@link SERVICE_METRICS}). */
  readonly ledgerRequestsShed: Counter;
  /** JetStream publishes of this service a storage limit refused (`storage_full`), by limit: every service's. */
  readonly storageFullRefused: Counter<'limit'>;
  /** Projection writes a full Redis refused (maxmemory, noeviction). Exposed by the notifier alone ({@link SERVICE_METRICS}). */
  readonly redisFullRefused: Counter;
  /** Whether Redis refuses the service's writes now, when scraped (see {@link watchRedis}). */
  private redisFull: (() => boolean) | null = null;
  /** Whether a storage limit refuses this service's publishes now, when scraped (see {@link watchStorage}). */
  private storageFull: ((limit: StorageLimit) => boolean) | null = null;
  /** What the event store's fold cache reports when scraped (see {@link watchFoldCache}). */
  private foldCache: (() => FoldCacheStats) | null = null;
  readonly httpDuration: Histogram<'method' | 'route' | 'status_code'>;

  constructor(readonly options: BatonMetricsOptions) {
    const registers = [this.registry];
    /**
     * The registry for a metric of some services only ({@link SERVICE_METRICS}): none in another
     * service, where the metric still exists (its code may be shared) but is never exposed.
     */
    const registersOf = (metric: MetricKey) => (exposesMetric(options.service, metric) ? registers : []);
    this.registry.setDefaultLabels({ service: options.service });
    this.eventsHandled = new Counter({
      name: MetricName.eventsHandled,
      help: "Messages handled by JetStream consumers, by message type and outcome (acked, retry, dead_lettered: given up on with a dead letter of its own; suppressed: given up on past its sender's budget, counted in its refusals_suppressed letter; dead_letter_failed).",
      labelNames: ['consumer', 'type', 'outcome'],
      registers,
    });
    this.handlerDuration = new Histogram({
      name: MetricName.handlerDuration,
      help: 'Time a consumer handler took for one message (whatever its outcome), seconds.',
      labelNames: ['consumer', 'type'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    const consumerGauge = (name: string, help: string) => new Gauge({ name, help, labelNames: ['stream', 'consumer'], registers });
    this.consumerPending = consumerGauge(
      MetricName.consumerPending,
      'Messages not yet delivered to the consumer (num_pending: its lag), sampled from consumer info.',
    );
    this.consumerAckPending = consumerGauge(MetricName.consumerAckPending, 'Messages delivered and not yet acknowledged (num_ack_pending), sampled.');
    this.consumerRedelivered = consumerGauge(
      MetricName.consumerRedelivered,
      'Messages delivered more than once and not yet acknowledged (num_redelivered), sampled.',
    );
    this.consumerWaiting = consumerGauge(MetricName.consumerWaiting, 'Pull requests waiting on the consumer (num_waiting), sampled.');
    this.deadLetters = new Counter({
      name: MetricName.deadLetters,
      help: 'Dead letters this service published to <prefix>.dlq.<source>, by source and reason (duplicates not counted).',
      labelNames: ['source', 'reason'],
      registers,
    });
    this.commandsResumed = new Counter({
      name: MetricName.commandsResumed,
      help: 'Commands found with their first events already stored (a retry), by outcome: already_complete, completed (a crash had cut it short), refused or diverged (left incomplete: alert on these).',
      labelNames: ['outcome'],
      registers: registersOf('commandsResumed'),
    });
    this.edgeMessages = new Counter({
      name: MetricName.edgeMessages,
      help: "Agent edge messages the ledger's relay handled, by route (input, api, ack; none when the subject stands for nothing) and outcome (relayed; refused, recorded as a dead letter; suppressed, counted in its sender's refusals_suppressed letter).",
      labelNames: ['route', 'outcome'],
      registers: registersOf('edgeMessages'),
    });
    this.ledgerRequestsShed = new Counter({
      name: MetricName.ledgerRequestsShed,
      help: 'Ledger requests answered overloaded without being worked on: the instance had LEDGER_MAX_INFLIGHT requests in flight (the caller sends again).',
      registers: registersOf('ledgerRequestsShed'),
    });
    this.storageFullRefused = new Counter({
      name: MetricName.storageFullRefused,
      help: "JetStream publishes (appends, offers, letters) of this service refused by a storage limit (storage_full), by limit: stream_bytes (a full inbox, BATON_INBOX_MAX_BYTES), stream_messages, account_storage (the account's --max-store).",
      labelNames: ['limit'],
      registers,
    });
    const storageFullNow = () => this.storageFull;
    new Gauge({
      name: MetricName.storageFull,
      help: "1 while a storage limit refuses this service's publishes (from the first refusal until a publish it refused is stored again), by limit; else 0.",
      labelNames: ['limit'],
      registers,
      collect: function (this: Gauge<'limit'>) {
        const full = storageFullNow();
        for (const limit of STORAGE_LIMITS) this.set({ limit }, full?.(limit) ? 1 : 0);
      },
    });
    this.redisFullRefused = new Counter({
      name: MetricName.redisFullRefused,
      help: "Projection writes Redis refused because it is full (maxmemory reached under noeviction: 'OOM command not allowed'); each waits and is retried, nothing acknowledged is lost.",
      registers: registersOf('redisFullRefused'),
    });
    const redisFullNow = () => this.redisFull;
    new Gauge({
      name: MetricName.redisFull,
      help: '1 while Redis refuses the projection writes for being full (from the first refusal until a write goes through again); else 0.',
      registers: registersOf('redisFull'),
      collect: function (this: Gauge) {
        this.set(redisFullNow()?.() ? 1 : 0);
      },
    });
    const foldCacheNow = () => this.foldCache?.() ?? null;
    const foldCache = (pick: (stats: FoldCacheStats) => number | null) =>
      function (this: Gauge) {
        const stats = foldCacheNow();
        const value = stats ? pick(stats) : null;
        if (value === null) this.reset();
        else this.set(value);
      };
    new Gauge({
      name: MetricName.foldCacheEntries,
      help: "Aggregates whose folded state the service's event store keeps in memory.",
      registers,
      collect: foldCache((stats) => stats.entries),
    });
    new Gauge({
      name: MetricName.foldCacheBytes,
      help: 'What the kept folded states weigh together, estimated heap bytes.',
      registers,
      collect: foldCache((stats) => stats.bytes),
    });
    new Gauge({
      name: MetricName.foldCacheMaxBytes,
      help: 'Most the kept folded states may weigh together (BATON_FOLD_CACHE_MB), bytes.',
      registers,
      collect: foldCache((stats) => stats.maxBytes),
    });
    new Counter({
      name: MetricName.foldCacheEvictions,
      help: 'Folded states evicted to keep the cache within its count and byte bounds (the next use of one reads its aggregate again).',
      registers,
      collect: function (this: Counter) {
        const stats = foldCacheNow();
        this.reset();
        if (stats) this.inc(stats.evicted);
      },
    });
    this.httpDuration = new Histogram({
      name: MetricName.httpDuration,
      help: 'HTTP request duration by method, matched route and status code, seconds.',
      labelNames: ['method', 'route', 'status_code'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'baton_' });
  }

  /** Report whether a storage limit refuses the service's publishes (`baton_storage_full`) at every scrape. */
  watchStorage(full: (limit: StorageLimit) => boolean): void {
    this.storageFull = full;
  }

  /** Report whether Redis refuses the service's writes for being full (`baton_redis_full`) at every scrape. */
  watchRedis(full: () => boolean): void {
    this.redisFull = full;
  }

  /** Report the event store's fold cache (entries, estimated bytes, bound, evictions) at every scrape. */
  watchFoldCache(stats: () => FoldCacheStats): void {
    this.foldCache = stats;
  }

  /** The exposition text and its content type (what `GET /metrics` answers). */
  async expose(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** Count a dead letter from its publish (called by the instrumented NATS handle for `<prefix>.dlq.>`). */
  recordPublish(published: JetStreamPublished, prefix: string): void {
    const letter = SubjectTable.deadLetter.parse(prefix, published.subject);
    if (published.duplicate || letter === null) return;
    const source = published.header(DlqHeader.source) ?? letter.source;
    const reason = published.header(DlqHeader.reason) ?? 'unknown';
    this.deadLetters.inc({ source, reason });
  }
}

/** The `limit` label values of the storage metrics: every limit a publish may meet ({@link StorageLimit}). */
const STORAGE_LIMITS: readonly StorageLimit[] = ['stream_bytes', 'stream_messages', 'account_storage'];

/** Every event type of the catalogue: the only `Baton-Event-Type` values a label may take. */
const KNOWN_EVENT_TYPES = new Set(createEventRegistry().types());

/**
 * The type label of a consumed message: the event type of a stored event (an events-stream
 * subject whose `Baton-Event-Type` the catalogue knows), otherwise the inbox message kind of a
 * subject the table knows (`<prefix>.in.<project>.<kind>...` → `in.<kind>`), otherwise `other`.
 * Bounded cardinality: the header is the sender's — on an inbox subject any agent sets it — so
 * its value becomes a label only when the catalogue names it; every label series lives as long
 * as the process.
 */
export function messageTypeOf(msg: Pick<ConsumedMessage, 'headers' | 'subject'>, prefix: string): string {
  // Events are most of what is consumed (twice per message: timed, then counted): their subject's
  // area is read without parsing the whole subject.
  if (msg.subject.startsWith(prefix) && msg.subject.startsWith('.ev.', prefix.length)) {
    const type = msg.headers[EventHeader.type]?.[0];
    return type !== undefined && KNOWN_EVENT_TYPES.has(type) ? type : 'other';
  }
  const parsed = parseSubject(prefix, msg.subject);
  if (parsed === null || parsed.name === 'unknown') return 'other';
  const kind = SubjectTable[parsed.name].inboxKind;
  return kind !== undefined ? `in.${kind}` : 'other';
}

export interface ConsumerSamplerOptions {
  jsm: NatsHandle['jsm'];
  /** The deployment's subject prefix (`BATON_PREFIX`), to read message kinds from subjects. */
  prefix: string;
  /** Sampling period, ms (default 5000). */
  intervalMs?: number;
}

/**
 * The runner instrumentation of one service: each consumed message runs inside the trace
 * context its headers carry (a new trace when none), its handler is timed, its outcome counted;
 * the consumers' info (lag, ack pending, redeliveries, waiting pulls) is sampled every few
 * seconds while runners are running. `stop()` ends the sampling.
 */
export function runnerInstrumentation(
  metrics: BatonMetrics,
  options: ConsumerSamplerOptions,
): RunnerInstrumentation & { stop(): void; sampleNow(): Promise<void> } {
  const running = new Map<string, RunnerIdentity>();
  const keyOf = (r: RunnerIdentity) => `${r.stream}/${r.durable}`;
  let timer: NodeJS.Timeout | null = null;
  let sampling: Promise<void> | null = null;

  const sampleNow = () =>
    (sampling ??= (async () => {
      for (const runner of [...running.values()]) {
        const labels = { stream: runner.stream, consumer: runner.durable };
        try {
          const info = await options.jsm.consumers.info(runner.stream, runner.durable);
          metrics.consumerPending.set(labels, info.num_pending);
          metrics.consumerAckPending.set(labels, info.num_ack_pending);
          metrics.consumerRedelivered.set(labels, info.num_redelivered);
          metrics.consumerWaiting.set(labels, info.num_waiting);
        } catch {
          // Connection trouble or the consumer is gone: keep the last sample until the next one.
        }
      }
    })().finally(() => (sampling = null)));

  return {
    onStart(runner) {
      running.set(keyOf(runner), runner);
      if (!timer) {
        timer = setInterval(() => void sampleNow(), options.intervalMs ?? 5000);
        timer.unref();
      }
      void sampleNow();
    },
    onStop(runner) {
      running.delete(keyOf(runner));
    },
    around(msg, runner, run) {
      const end = metrics.handlerDuration.startTimer({ consumer: runner.durable, type: messageTypeOf(msg, options.prefix) });
      // With an ambient context manager (installTracing({ ambientContext: true }), or an
      // OpenTelemetry SDK's) the handler also runs inside the message's trace context.
      return (ambientTracing() ? otelContext.with(contextFromHeaders(msg.headers), run) : run()).finally(() => end());
    },
    async aroundBatch(msgs, runner, run) {
      const started = process.hrtime.bigint();
      try {
        return await run();
      } finally {
        // A batch handler (the notifier's projection applier) takes its messages together: each is
        // counted with an even share of the batch's time, so the histogram stays per message.
        const seconds = Number(process.hrtime.bigint() - started) / 1e9 / Math.max(1, msgs.length);
        // On the projection applier's hot path: the labelled series is looked up once per type in
        // the batch, not once per message.
        const perType = new Map<string, number>();
        for (const msg of msgs) {
          const type = messageTypeOf(msg, options.prefix);
          perType.set(type, (perType.get(type) ?? 0) + 1);
        }
        for (const [type, count] of perType) {
          const series = metrics.handlerDuration.labels({ consumer: runner.durable, type });
          for (let i = 0; i < count; i++) series.observe(seconds);
        }
      }
    },
    onOutcome(outcome, runner) {
      metrics.eventsHandled.inc({ consumer: runner.durable, type: messageTypeOf(outcome.msg, options.prefix), outcome: handledOutcome(outcome) });
    },
    stop() {
      if (timer) clearInterval(timer);
      timer = null;
      running.clear();
    },
    sampleNow,
  };
}
