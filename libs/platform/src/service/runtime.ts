import type { StartWatch } from './start-watch';
import { hostname } from 'node:os';
import { Global, Module, DynamicModule } from '@nestjs/common';
import { createEventRegistry, EventRegistry, inboxPrefixOf, ServiceNameSchema } from '@baton/contracts';
import {
  batonTopology,
  connectNats,
  JetStreamEventStore,
  natsRefusedCredentials,
  NatsHandle,
  PermissionDenied,
  CredentialsRefused,
  provision,
  type ResumedCommand,
} from '@baton/eventstore';
import { createRedis, RedisHandle } from '@baton/projections';
import { BaseConfig, natsAuthenticated, redactUrl, StartupError, type UnknownVariable } from '../config/config';
import { JsonLogger } from '../logging/logger';
import { watchConnection, type ConnectionWatchOptions } from './connection-watch';

/** Injection token for the {@link ServiceRuntime}. */
export const RUNTIME = Symbol('BATON_RUNTIME');

/**
 * What every Baton service shares: validated configuration, one NATS connection (with JetStream),
 * the event store and registry, Redis when the service needs it, and the JSON logger. Built before
 * Nest starts, so a bad variable or an unreachable server fails the process with a clear message.
 */
export interface ServiceRuntime<C extends BaseConfig = BaseConfig> {
  service: string;
  instance: string;
  config: C;
  nats: NatsHandle;
  registry: EventRegistry;
  store: JetStreamEventStore;
  redis: RedisHandle | null;
  logger: JsonLogger;
}

/** Folded states the event store keeps when neither the service nor `BATON_FOLD_CACHE_SIZE` says otherwise. */
export const DEFAULT_FOLD_CACHE_SIZE = 10_000;

/** MiB of estimated heap the folded states may weigh together when neither the service nor `BATON_FOLD_CACHE_MB` says otherwise. */
export const DEFAULT_FOLD_CACHE_MB = 32;

export interface CreateRuntimeOptions<C extends BaseConfig> {
  service: string;
  /** Variables of the service's own prefix it does not read (`unknownOwnVariables`): logged at once, before anything connects. */
  ignoredVariables?: readonly UnknownVariable[];
  config: C;
  /** Connect to Redis as well (notifier; readiness of every service checks it too). */
  redis?: boolean;
  /** Folded-state cache entries for the event store (default: `BATON_FOLD_CACHE_SIZE`, else `defaultCacheSize`). */
  cacheSize?: number;
  /** The service's folded-state cache size when `BATON_FOLD_CACHE_SIZE` is unset (default {@link DEFAULT_FOLD_CACHE_SIZE}). */
  defaultCacheSize?: number;
  /** MiB the folded states may weigh together (default: `BATON_FOLD_CACHE_MB`, else `defaultCacheMb`). */
  cacheMb?: number;
  /** The service's bound on what its folded states weigh when `BATON_FOLD_CACHE_MB` is unset (default {@link DEFAULT_FOLD_CACHE_MB}). */
  defaultCacheMb?: number;
  /** Wrap the connection before anything uses it (trace propagation, publish metrics: see `instrumentNats`). */
  wrapNats?: (handle: NatsHandle) => NatsHandle;
  /** Also told of every resumed command (after the runtime has logged it): metrics. */
  onResumedCommand?: (resumed: ResumedCommand) => void;
  /**
   * What to do when the NATS client gives up on the connection for good (a service exits), and how
   * to tell a stop on purpose. Lost and restored connections are logged either way ({@link watchConnection}).
   */
  connectionClosed?: Pick<ConnectionWatchOptions, 'stopping' | 'onClosed'>;
  /** Told of each step (connect, streams, Redis) and given the logger, so a slow start says where it waits. */
  startWatch?: StartWatch;
}

/**
 * How often a service pings NATS, ms: after two unanswered pings the connection counts as lost (a
 * server that stopped answering without closing the socket is noticed in 20–30 s, not the client's
 * default 4–6 minutes) and the client reconnects.
 */
export const SERVICE_NATS_PING_MS = 10_000;

/**
 * The log line of a command the store found with its first events already stored: a plain retry
 * at debug, a command a crash cut short and now completed at info, and at error one whose rest
 * could not be appended (a decider that refused or decided otherwise the second time).
 */
export function logResumedCommand(logger: JsonLogger, resumed: ResumedCommand): void {
  const fields = {
    subject: resumed.subject,
    event_id: resumed.firstEventId,
    outcome: resumed.outcome,
    stored: resumed.storedTypes,
    decided: resumed.decidedTypes,
    appended: resumed.appended,
    ...(resumed.error !== undefined ? { refusal: resumed.error } : {}),
  };
  if (resumed.outcome === 'already_complete') logger.debug('command retried: its events were stored already', fields);
  else if (resumed.outcome === 'completed') logger.info('command completed: the events a crash cut short were appended', fields);
  else
    logger.error(
      resumed.outcome === 'refused'
        ? 'command left incomplete: deciding it again refused it, so only its stored events stand'
        : 'command left incomplete: deciding it again gave other events than the stored ones',
      fields,
    );
}

/** How long a service waits at start for Redis to answer before it gives up, ms. */
const REDIS_START_WAIT_MS = 5_000;

/**
 * Why a service could not connect to NATS at start, naming the variable to look at: NATS_CREDS
 * when the credentials file could not be read or the server refused it (or asked for one and
 * none was given), NATS_URL when the server could not be reached or has no JetStream.
 */
export function natsStartupError(config: Pick<BaseConfig, 'NATS_URL' | 'NATS_CREDS' | 'NATS_USER'>, error: unknown): StartupError {
  const said = error instanceof Error ? error.message : String(error);
  const url = redactUrl(config.NATS_URL);
  const credentials =
    config.NATS_CREDS !== undefined
      ? `the credentials file ${config.NATS_CREDS}`
      : config.NATS_USER !== undefined
        ? `user ${config.NATS_USER}`
        : 'no credentials';
  if (error instanceof PermissionDenied || (error instanceof CredentialsRefused && error.reason === 'unreadable')) {
    return new StartupError(`${said} (NATS_CREDS)`, 'NATS_CREDS', { cause: error });
  }
  if (natsRefusedCredentials(error)) {
    const what =
      config.NATS_CREDS === undefined && config.NATS_USER === undefined
        ? `NATS at ${url} requires credentials and none were given (${said}): set NATS_CREDS to this service's credentials file (\`baton nats-config\`)`
        : `NATS at ${url} refused ${credentials} (${said}): unknown to this server, revoked, expired, or another deployment's`;
    return new StartupError(`${what} (NATS_CREDS)`, 'NATS_CREDS', { cause: error });
  }
  return new StartupError(`cannot reach NATS at ${url}: ${said} (NATS_URL)`, 'NATS_URL', { cause: error });
}

/**
 * A process's name when `BATON_INSTANCE` is unset: `<service>-<host>-<pid>`. The host's first label
 * (letters, digits, `_` and `-` kept, at most 40 characters) tells replicas apart where every
 * process has the same pid — each container's service runs as pid 1 — and the pid tells apart the
 * processes of one host.
 */
export function defaultInstance(service: string, host: string = hostname(), pid: number = process.pid): string {
  // The first label: everything before the first dot (a host name, not a subject).
  const label = (/^[^.]*/.exec(host)?.[0] ?? '').replace(/[^A-Za-z0-9_-]/g, '').slice(0, 40);
  return label === '' ? `${service}-${pid}` : `${service}-${label}-${pid}`;
}

/**
 * Connect to NATS (and Redis), provision Baton's streams idempotently and build the event store.
 * Safe to run from several instances at once.
 */
export async function createRuntime<C extends BaseConfig>(opts: CreateRuntimeOptions<C>): Promise<ServiceRuntime<C>> {
  const { config, service } = opts;
  const instance = config.BATON_INSTANCE ?? defaultInstance(service);
  const logger = new JsonLogger(service, config.LOG_LEVEL, { instance });
  opts.startWatch?.attach(logger);
  opts.startWatch?.enter('nats');
  if (opts.ignoredVariables !== undefined && opts.ignoredVariables.length > 0) {
    logger.warn(`variables of the ${service}'s own prefix that it does not read are ignored (a misspelt name keeps the default)`, {
      variables: opts.ignoredVariables.map((u) => (u.nearest !== undefined ? `${u.variable} (did you mean ${u.nearest}?)` : u.variable)),
    });
  }
  if (!natsAuthenticated(config)) {
    logger.warn(
      'NATS authentication is off (BATON_NATS_AUTH=none): any client that reaches the server can speak as any service, agent or operator. Use this only with a development server; see `baton nats-config`.',
    );
  }
  // Each service replies, receives publish acks and pulls messages on its own inbox prefix, which
  // its credentials alone may subscribe to.
  const principal = ServiceNameSchema.safeParse(service);
  let connected: NatsHandle;
  try {
    connected = await connectNats({
      servers: config.NATS_URL.split(',').map((url) => url.trim()),
      name: `baton-${instance}`,
      pingIntervalMs: SERVICE_NATS_PING_MS,
      ...(config.NATS_CREDS !== undefined ? { credsFile: config.NATS_CREDS } : {}),
      ...(principal.success ? { inboxPrefix: inboxPrefixOf(config.BATON_PREFIX, { kind: 'svc', service: principal.data }) } : {}),
      ...(config.NATS_USER !== undefined ? { user: config.NATS_USER } : {}),
      ...(config.NATS_PASSWORD !== undefined ? { pass: config.NATS_PASSWORD } : {}),
    });
  } catch (error) {
    throw natsStartupError(config, error);
  }
  watchConnection(connected, logger, {
    stopping: opts.connectionClosed?.stopping ?? (() => false),
    onClosed: opts.connectionClosed?.onClosed ?? (() => undefined),
  });
  const nats = opts.wrapNats ? opts.wrapNats(connected) : connected;
  const topology = batonTopology(config.BATON_PREFIX, {
    replicas: config.BATON_STREAM_REPLICAS,
    dlqMaxAgeMs: config.BATON_DLQ_MAX_AGE_MS,
    dlqMaxBytes: config.BATON_DLQ_MAX_BYTES,
    inboxMaxBytes: config.BATON_INBOX_MAX_BYTES,
  });
  // A cluster still electing its meta leader, or busy placing replicas, answers late: retried (a minute per stream).
  opts.startWatch?.enter('streams');
  try {
    await provision(
      nats.jsm,
      { streams: topology.streams },
      {
        onRetry: (what, err, attempt) => logger.warn(`${what}: ${String(err)}; asking again (attempt ${attempt + 1})`),
        // A limit lowered below what a stream holds would drop its oldest messages: kept, and said.
        onLimitKept: (kept) =>
          logger.warn(`stream ${kept.stream}: ${kept.detail}`, { stream: kept.stream, held_bytes: kept.heldBytes, wanted_max_bytes: kept.wantedMaxBytes }),
      },
    );
  } catch (error) {
    // A start that fails leaves nothing open behind it: an in-process caller (a test, the debug
    // platform) that catches the error would otherwise keep a connection reconnecting forever.
    await nats.close().catch(() => undefined);
    throw error;
  }
  const registry = createEventRegistry();
  const store = new JetStreamEventStore({
    js: nats.js,
    jsm: nats.jsm,
    prefix: config.BATON_PREFIX,
    registry,
    cacheSize: opts.cacheSize ?? config.BATON_FOLD_CACHE_SIZE ?? opts.defaultCacheSize ?? DEFAULT_FOLD_CACHE_SIZE,
    cacheBytes: (opts.cacheMb ?? config.BATON_FOLD_CACHE_MB ?? opts.defaultCacheMb ?? DEFAULT_FOLD_CACHE_MB) * 1024 * 1024,
    onResumedCommand: (resumed) => {
      logResumedCommand(logger, resumed);
      opts.onResumedCommand?.(resumed);
    },
  });
  const redis = opts.redis === false ? null : createRedis(config.REDIS_URL, { commandTimeout: config.REDIS_COMMAND_TIMEOUT_MS });
  if (redis !== null) {
    opts.startWatch?.enter('redis');
    try {
      await redis.ping(REDIS_START_WAIT_MS);
    } catch (error) {
      await redis.close().catch(() => undefined);
      await nats.drain().catch(() => undefined);
      throw new StartupError(`cannot reach Redis at ${redactUrl(config.REDIS_URL)}: ${(error as Error).message} (REDIS_URL)`, 'REDIS_URL', { cause: error });
    }
  }
  return { service, instance, config, nats, registry, store, redis, logger };
}

/** Makes the runtime injectable everywhere as `@Inject(RUNTIME)`. */
@Global()
@Module({})
export class RuntimeModule {
  static forRoot(runtime: ServiceRuntime): DynamicModule {
    return { module: RuntimeModule, providers: [{ provide: RUNTIME, useValue: runtime }], exports: [RUNTIME] };
  }
}
