import 'reflect-metadata';
import { DynamicModule, ExceptionFilter, Global, INestApplication, Module, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { z } from 'zod';
import { BaseConfigSchema, checkNatsAuth, ConfigError, envInt, loadConfig, unknownOwnVariables } from '../config/config';
import { HealthController, HealthModule } from '../health/health';
import { JetStreamProbe } from '../health/jetstream-probe';
import { JsonLogger } from '../logging/logger';
import { installTracing, instrumentNats, instrumentRunners } from '@baton/eventstore';
import { JetStreamConsumerBinding, JetStreamServer } from '../transport/jetstream.server';
import { httpMetricsMiddleware } from '../observability/http-metrics';
import { BatonMetrics, runnerInstrumentation } from '../observability/metrics';
import { MetricsModule } from '../observability/metrics.module';
import { StorageFullWatch } from '../observability/storage-full';
import { HybridExceptionFilter } from '../transport/hybrid-exception.filter';
import { createRuntime, RuntimeModule, ServiceRuntime } from './runtime';
import { StartWatch } from './start-watch';
import { securityHeaders } from './security-headers';
import { deferBodyErrors } from './deferred-body-error';
import { requireUtf8Body } from './utf8-body';
import { RefusedLetterCap } from '../refusals/refused-letter-cap';
import { INBOX_REFUSED_LETTERS, inboxLetterGate, RefusedLetters } from '../refusals/refused-letters';

export const ServiceConfigSchema = BaseConfigSchema.extend({
  HTTP_PORT: envInt(0, 65535),
  HTTP_HOST: z.string().min(1).default('127.0.0.1'),
});
export type ServiceConfig = z.infer<typeof ServiceConfigSchema>;

/** A service's exit code when the NATS client gave up on its connection for good (EX_UNAVAILABLE). */
export const EXIT_NATS_CLOSED = 69;

export interface RunServiceOptions {
  /** `router`, `ledger`, `watchdog` or `notifier`. */
  service: string;
  /** Default HTTP port (health, metrics, and the operator API on the notifier). */
  defaultPort: number;
  /** The service's feature module(s). */
  imports: Array<Type<unknown> | DynamicModule>;
  /** Durable consumers that serve several `@EventPattern`s each. */
  consumers?: (runtime: ServiceRuntime<ServiceConfig>) => JetStreamConsumerBinding[];
  /** Connect to Redis (default true: readiness checks it on every service). */
  redis?: boolean;
  /** Folded states the event store keeps when `BATON_FOLD_CACHE_SIZE` is unset (default `DEFAULT_FOLD_CACHE_SIZE`). */
  defaultCacheSize?: number;
  /** MiB its folded states may weigh together when `BATON_FOLD_CACHE_MB` is unset (default `DEFAULT_FOLD_CACHE_MB`). */
  defaultCacheMb?: number;
  /** Called after everything listens (e.g. start timers). */
  afterStart?: (app: INestApplication, runtime: ServiceRuntime<ServiceConfig>) => Promise<void> | void;
  env?: Record<string, string | undefined>;
  /**
   * The names of the service's own settings (its `<SERVICE>_*` variables): any other variable of
   * that prefix in the environment is logged at start as ignored (a misspelt name), with the
   * nearest known name. Absent: the service reads none of its own (the router).
   */
  ownSettings?: readonly string[];
  /** The service's HTTP exception filter; it also sees errors raised before a controller runs (body parsing). */
  httpExceptionFilter?: ExceptionFilter;
  /**
   * Paths whose routes authenticate their callers: a body reader's refusal there is kept on the
   * request for the route's guard to raise once the caller is authenticated (`raiseDeferredBodyError`),
   * so that an unauthenticated caller is answered 401 first.
   */
  deferBodyErrors?: (path: string) => boolean;
  /** Register service-specific metrics (e.g. the notifier's projection gauges) once the app is built. */
  metrics?: (metrics: BatonMetrics, app: INestApplication, runtime: ServiceRuntime<ServiceConfig>) => void;
}

export interface RunningService {
  app: INestApplication;
  runtime: ServiceRuntime<ServiceConfig>;
  /** The service's Prometheus registry and metrics (served at GET /metrics). */
  metrics: BatonMetrics;
  /** Stop in order: stop pulling and finish in-flight messages, close HTTP, drain NATS, quit Redis. */
  stop(): Promise<void>;
}

/**
 * Start a Baton service: validate configuration, connect, provision streams, start the Nest HTTP
 * app (health endpoints included) and the JetStream transport, and install SIGTERM / SIGINT
 * handlers that shut down in order. Exits the process with a clear message on a bad configuration.
 */
export async function runService(opts: RunServiceOptions): Promise<RunningService> {
  let config: ServiceConfig;
  // An in-process service given its own variables still inherits this process's NATS auth mode
  // (an explicit BATON_NATS_AUTH=none in a test run, say) unless the variables set it.
  const env = { HTTP_PORT: String(opts.defaultPort), BATON_NATS_AUTH: process.env['BATON_NATS_AUTH'], ...(opts.env ?? process.env) };
  try {
    config = loadConfig(ServiceConfigSchema, env);
    checkNatsAuth(config, `${opts.service} service`);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`baton ${opts.service}: ${error.message}\n`);
      process.exit(78);
    }
    throw error;
  }
  installTracing();
  // A start slower than START_WATCH_EVERY_MS says which step it waits in, every so often, until ready.
  const startWatch = new StartWatch(opts.service);
  try {
    return await startService(opts, config, env, startWatch);
  } finally {
    startWatch.done();
  }
}

async function startService(
  opts: RunServiceOptions,
  config: ServiceConfig,
  env: Record<string, string | undefined>,
  startWatch: StartWatch,
): Promise<RunningService> {
  let stopping: Promise<void> | null = null;
  const metrics = new BatonMetrics({ service: opts.service });
  // A storage limit refusing the service's publishes (a full inbox or account): said once, not per
  // publish; counted, and shown on readiness (docs/sre.md, Capacity). Logged once the runtime exists.
  let storage: StorageFullWatch | null = null;
  const runtime = await createRuntime({
    service: opts.service,
    config,
    startWatch,
    redis: opts.redis ?? true,
    ...(opts.defaultCacheSize !== undefined ? { defaultCacheSize: opts.defaultCacheSize } : {}),
    ...(opts.defaultCacheMb !== undefined ? { defaultCacheMb: opts.defaultCacheMb } : {}),
    wrapNats: (handle) =>
      instrumentNats(handle, {
        onJetStreamPublish: (published) => {
          metrics.recordPublish(published, config.BATON_PREFIX);
          storage?.stored(published.stream);
        },
        onJetStreamPublishError: (subject, error) => storage?.refused(subject, error),
      }),
    onResumedCommand: (resumed) => metrics.commandsResumed.inc({ outcome: resumed.outcome }),
    // Named before anything connects: a start that then fails still says them.
    ignoredVariables: unknownOwnVariables(opts.service, opts.ownSettings ?? [], env),
    // A connection the client gave up on (credentials revoked or refused on reconnect) leaves the
    // service unable to do anything: the error line is written, and the process exits for its
    // supervisor (npm start, docker compose, systemd) to notice and start it again.
    connectionClosed: { stopping: () => stopping !== null, onClosed: () => process.exit(EXIT_NATS_CLOSED) },
  });
  metrics.watchFoldCache(() => runtime.store.foldCache());
  storage = new StorageFullWatch(runtime.logger, { prefix: config.BATON_PREFIX, onRefused: (limit) => metrics.storageFullRefused.inc({ limit }) });
  const storageWatch = storage;
  metrics.watchStorage((limit) => storageWatch.full(limit));
  const logger: JsonLogger = runtime.logger;
  // Every consumer runner on this connection: trace context per message, latency, outcomes, lag.
  const runners = runnerInstrumentation(metrics, { jsm: runtime.nats.jsm, prefix: config.BATON_PREFIX });
  instrumentRunners(runtime.nats.js, runners);

  // Connected is not enough: a cluster without a JetStream leader keeps the connection while no
  // append can succeed. Asked at most once per JETSTREAM_PROBE_CACHE_MS, whatever polls readiness.
  const jetstream = new JetStreamProbe(runtime.nats.connection);

  // What an agent publishes (results, starts, messages, mesh results and starts) and a consumer
  // refuses for itself is lettered under a per-sender budget: an agent refused in a loop cannot fill
  // the shared DLQ. A letter redrive would republish (an acknowledged start of a workflow not
  // published yet…) is always written, and every other letter — events, operators, services — as before.
  // One instance per service, provided to its modules (`INBOX_REFUSED_LETTERS`): what the router
  // records on a run or mesh instead of a letter (`RefusalBudget`) spends the same budget.
  const refusedInputs = new RefusedLetters(runtime, new RefusedLetterCap(config.BATON_REFUSED_LETTERS_PER_MINUTE), 'agent inbox messages');
  @Global()
  @Module({ providers: [{ provide: INBOX_REFUSED_LETTERS, useValue: refusedInputs }], exports: [INBOX_REFUSED_LETTERS] })
  class InboxRefusalsModule {}

  @Module({
    imports: [
      RuntimeModule.forRoot(runtime),
      InboxRefusalsModule,
      MetricsModule.forRoot(metrics),
      HealthModule.register(
        [
          { name: 'nats', check: async () => !runtime.nats.connection.isClosed() && (await runtime.nats.connection.rtt()) >= 0 },
          { name: 'jetstream', check: () => jetstream.available() },
          ...(runtime.redis ? [{ name: 'redis', check: async () => (await runtime.redis!.ping(900), true) }] : []),
        ],
        // Never a failed check: a full disk is no reason to take a healthy service out (docs/sre.md, Health).
        [{ name: 'storage', details: () => Promise.resolve(storageWatch.status()) }],
      ),
      ...opts.imports,
    ],
  })
  class AppModule {}

  startWatch.enter('modules');
  const app = await NestFactory.create(AppModule, { logger, bodyParser: true, abortOnError: false });
  // Paths are case-sensitive, as the documents name them (`/v1/INBOX` is no route). The adapter made
  // Express's router already (with the default, insensitive), and the router reads the flag when a
  // route or middleware is added: set before any is, and Nest's route matching reads it from there.
  const express = app.getHttpAdapter().getInstance() as { router?: { caseSensitive?: boolean } };
  if (express.router) express.router.caseSensitive = true;
  // JSON and form bodies must be UTF-8: bytes that are not are refused (invalid_utf8), never decoded
  // with replacement characters. Registered before Nest's defaults, which then stay out.
  const parsers = app as unknown as { useBodyParser(type: 'json' | 'urlencoded', options: Record<string, unknown>): unknown };
  // Before the body parsers, so that a response they refuse (malformed JSON, too large…) has them too.
  app.use(securityHeaders);
  // `strict: false`: any JSON value is read, so `null` or `1` is a schema's refusal (schema_violation), not "not JSON".
  parsers.useBodyParser('json', { verify: requireUtf8Body, strict: false });
  parsers.useBodyParser('urlencoded', { extended: true, verify: requireUtf8Body });
  if (opts.deferBodyErrors) app.use(deferBodyErrors(opts.deferBodyErrors));
  app.use(httpMetricsMiddleware(metrics));
  opts.metrics?.(metrics, app, runtime);
  // Before anything initialises, so the JetStream handlers inherit it (see HybridExceptionFilter).
  app.useGlobalFilters(new HybridExceptionFilter(app.getHttpAdapter(), opts.httpExceptionFilter));
  const server = new JetStreamServer({
    name: opts.service,
    letterGate: inboxLetterGate(config.BATON_PREFIX, refusedInputs),
    instance: runtime.instance,
    prefix: config.BATON_PREFIX,
    connection: runtime.nats,
    consumer: { maxDeliver: config.BATON_MAX_DELIVER, ackWaitMs: config.BATON_ACK_WAIT_MS },
    consumers: opts.consumers?.(runtime) ?? [],
    // Reactor tables (`ctx.react`) fold through the runtime's event store: one fold cache per service.
    events: { registry: runtime.registry, store: runtime.store },
  });
  app.connectMicroservice({ strategy: server }, { inheritAppConfig: true });
  startWatch.enter('consumers');
  await app.startAllMicroservices();
  // What `listen` would do first, apart so that a slow start names it: onModuleInit and
  // onApplicationBootstrap hooks (subscriptions flushed to the server, buckets opened).
  startWatch.enter('hooks');
  await app.init();
  startWatch.enter('http');
  await app.listen(config.HTTP_PORT, config.HTTP_HOST);
  const url = await app.getUrl();
  // "ready" only when /health/ready would say so: a notifier that rebuilds, or stands back from a
  // newer release's projections, is up but not ready, and its start line names what it waits on.
  const readiness = await app.get(HealthController).readiness();
  if (readiness.ready) logger.info(`${opts.service} ready`, { http: url, prefix: config.BATON_PREFIX });
  else
    logger.info(`${opts.service} started, not ready yet: ${notReady(readiness.checks).join(', ')} (GET /health/ready says when it is)`, {
      http: url,
      prefix: config.BATON_PREFIX,
      not_ready: notReady(readiness.checks),
    });
  startWatch.enter('after_start');
  if (opts.afterStart) await opts.afterStart(app, runtime);

  const stop = () =>
    (stopping ??= (async () => {
      // A service stopped in process (tests, the debug platform) leaves no handler behind.
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      logger.info(`${opts.service} stopping`);
      await app.close(); // closes the microservice first: stop pulling, finish in-flight, then HTTP
      await refusedInputs.stop(); // the summaries of windows still open, before the connection drains
      storageWatch.stop();
      runners.stop();
      instrumentRunners(runtime.nats.js, null);
      await runtime.nats.drain().catch(() => undefined);
      await runtime.redis?.close().catch(() => undefined);
      logger.info(`${opts.service} stopped`);
    })());
  const onSignal = () => {
    void stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  return { app, runtime, metrics, stop };
}

/** The names of the readiness checks that did not pass. */
const notReady = (checks: Record<string, boolean>): string[] =>
  Object.entries(checks)
    .filter(([, ok]) => !ok)
    .map(([name]) => name);
