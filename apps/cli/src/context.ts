import { z } from 'zod';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createEventRegistry, inboxPrefixOf, type EventRegistry, type Principal } from '@baton/contracts';
import {
  CredentialsRefused,
  JetStreamEventStore,
  connectNats,
  credsGrantResponses,
  deploymentDir,
  hasNatsCode,
  natsRefusedCredentials,
  principalOfCreds,
  readLocalDeployment,
  stoppedDeployment,
  type LocalDeployment,
  type NatsHandle,
} from '@baton/eventstore';
import { createProjectionStore, createRedis, type ProjectionStore, type RedisHandle } from '@baton/projections';
import { BaseConfigSchema, ConfigError, envInt, loadConfig, redactUrl } from '@baton/platform';
import { CliError, CliErrorCode, CliWarningCode, jetStreamTrouble, jetStreamUnavailable, UsageError, type CliWarning } from './errors';
import type { CliIo } from './output';

/**
 * The environment the CLI reads: NATS_URL, REDIS_URL, REDIS_COMMAND_TIMEOUT_MS, BATON_PREFIX (as
 * every service) and BATON_API_URL; with NATS_URL unset, what of them is unset is taken from npm
 * start's local.json when it names it ({@link settingsOf}).
 */
export const CliConfigSchema = BaseConfigSchema.pick({
  NATS_URL: true,
  REDIS_URL: true,
  REDIS_COMMAND_TIMEOUT_MS: true,
  BATON_PREFIX: true,
  NATS_CREDS: true,
}).extend({
  /** The notifier's operator API (answers, handback decisions and abandons go through it). */
  BATON_API_URL: z
    .string()
    .regex(/^https?:\/\//, 'must start with http:// or https://')
    .default('http://127.0.0.1:7100'),
  /** Who the operator is, for answers and decisions (default: $USER). */
  BATON_OPERATOR: z.string().min(1).max(200).optional(),
  /** Operator API token (`baton token create`); sent as `Authorization: Bearer`. */
  BATON_TOKEN: z.string().min(1).max(500).optional(),
  /** Key prefix of the projections in Redis (default `<BATON_PREFIX>:proj`, as the notifier uses). */
  BATON_PROJECTION_PREFIX: z.string().min(1).optional(),
  /**
   * The CPU niceness `replay` and `verify` run at (0–19; `baton` run as its own process sets 10
   * when this is unset, see `DEFAULT_REBUILD_NICE`; unset in-process: as started): on a machine the
   * live services share, they take what the services leave instead of starving them.
   */
  BATON_REBUILD_NICE: envInt(0, 19).optional(),
  /**
   * The deployment's token key file (`<deployment folder>/token.key`), which `token create`,
   * `revoke` and `sign-existing` sign token records with; unset: the one local.json names while
   * NATS_URL is not set (npm start). Read only by those commands.
   */
  BATON_TOKEN_KEY_FILE: z.string().min(1).optional(),
});
export type CliConfig = z.infer<typeof CliConfigSchema>;

/**
 * What a command runs with: its output streams, validated configuration, and connections opened
 * on first use (a command that needs only Redis never connects to NATS). `close()` releases them.
 */
export interface CliContext {
  readonly io: CliIo;
  readonly env: Record<string, string | undefined>;
  config(): CliConfig;
  nats(): Promise<NatsHandle>;
  /** Whom the NATS credentials name (an agent's for `baton result`; the admin when they name no one Baton issued). */
  natsPrincipal(): Principal;
  /** The NATS URL(s) the CLI connects to (local.json's while NATS_URL is not set and npm start runs, else NATS_URL or its default). */
  natsUrl(): string;
  /**
   * Say, once per server, when the CLI is about to read `server` at its built-in default while a
   * deployment folder holds a deployment whose local.json is gone (npm start stopped): the default
   * may be another deployment's server ({@link CliWarningCode.defaultServerRead}).
   */
  noteServer(server: DefaultedServer): void;
  /**
   * Refuse, before a command writes to `server`, when it would write at the built-in default that
   * {@link noteServer} warns of when read: a usage error `default_server_write` naming the setting
   * to set (`command`: what would have written, e.g. `token create`; `options.doing` what it does
   * with the server when not writing to it, `options.fix` what to do instead of the usual advice).
   */
  requireNamedServer(server: DefaultedServer, command: string, options?: { doing?: string; fix?: string }): void;
  /** Whether `server` is this deployment's as far as the CLI can tell: {@link requireNamedServer} would not refuse it. */
  namedServer(server: DefaultedServer): boolean;
  /**
   * The token key file the command signs with: `BATON_TOKEN_KEY_FILE`, else (NATS_URL not set) the
   * one the local deployment's local.json names; null when neither names one.
   */
  tokenKeyFile(): { file: string; from: 'BATON_TOKEN_KEY_FILE' | 'local.json' } | null;
  redis(): Promise<RedisHandle>;
  /** The projection store over Redis at the notifier's key prefix. */
  projections(): Promise<ProjectionStore>;
  /** The event store (read-only use: timelines, replays). */
  eventStore(): Promise<JetStreamEventStore>;
  registry(): EventRegistry;
  /** The operator's name for answers and decisions (`BATON_OPERATOR`, else `$USER`, else `operator`). */
  operator(): string;
  /** The person `BATON_OPERATOR` or `$USER` names, or undefined when neither names anyone. */
  namedOperator(): string | undefined;
  /** `fetch` for the operator API (tests may replace it). */
  fetch: typeof fetch;
  /**
   * Whether the command was asked for `--json` (or `--json-page`): set by `execute` from the command
   * line. Then stderr holds nothing but JSON lines a script can parse whole: a failure's one line,
   * or (a command that ends without failing) its warnings' one line: see {@link CliContext.warn}.
   */
  json: boolean;
  /**
   * Say something a person should know that does not stop the command (a fallback taken, a
   * projection never built), under a stable `code`: `baton: warning: <text>` on stderr (or `prose`,
   * written as is). With `--json` nothing is written at once: the warning is kept as
   * `{ code, message: text, details? }`, and `execute` writes the kept ones when the command ends —
   * a failure in its `details.warnings`, else as the one stderr line `{"warnings":[…]}` (none when
   * there are none), so stdout's JSON stays as documented.
   */
  warn(code: CliWarningCode, text: string, prose?: string, details?: Record<string, unknown>): void;
  /** The warnings {@link CliContext.warn} kept (with `--json`), in order. */
  warnings(): readonly CliWarning[];
  /**
   * The warnings kept, forgotten as they are returned: whoever writes them (a failure line, the
   * warnings line) takes them, so none is written twice.
   */
  takeWarnings(): readonly CliWarning[];
  close(): Promise<void>;
}

export interface CliContextOptions {
  io: CliIo;
  env?: Record<string, string | undefined>;
  fetch?: typeof fetch;
  /** Reuse open connections (tests); they are not closed by `close()`. */
  nats?: NatsHandle;
  redis?: RedisHandle;
}

/**
 * The platform `npm start` runs, as `<BATON_NATS_DIR or ./var/nats-auth>/local.json` describes it
 * (`readLocalDeployment`): the CLI finds it with no settings. Used only when NATS_URL is not set.
 */
export function localDeployment(env: Record<string, string | undefined>): LocalDeployment | null {
  return readLocalDeployment(deploymentDir(env));
}

/** The servers the CLI reads, each with the setting that names it. */
export const DEFAULTED_SERVERS = {
  nats: { what: 'NATS', setting: 'NATS_URL' },
  redis: { what: 'Redis', setting: 'REDIS_URL' },
  api: { what: 'the operator API', setting: 'BATON_API_URL' },
} as const;
export type DefaultedServer = keyof typeof DEFAULTED_SERVERS;

/**
 * The CLI's settings: the environment, and — when neither NATS_URL nor REDIS_URL is set — the
 * local deployment's Redis, so that the commands that read projections read the running
 * platform's, not whatever answers on the default port; when neither NATS_URL nor BATON_API_URL is
 * set, its operator API (npm start may have moved it with NOTIFIER_HTTP_PORT); when neither
 * NATS_URL nor BATON_PREFIX is set, its subject prefix (the services' BATON_PREFIX: the streams,
 * subjects and projection keys the CLI reads are that prefix's).
 */
function settingsOf(env: Record<string, string | undefined>, local: () => ReturnType<typeof localDeployment>): Record<string, string | undefined> {
  if (env['NATS_URL'] !== undefined) return env;
  const found = env['REDIS_URL'] === undefined || env['BATON_API_URL'] === undefined || env['BATON_PREFIX'] === undefined ? local() : null;
  return {
    ...env,
    ...(env['BATON_PREFIX'] === undefined && found?.prefix !== undefined ? { BATON_PREFIX: found.prefix } : {}),
    ...(env['REDIS_URL'] === undefined && found?.redis !== undefined ? { REDIS_URL: found.redis } : {}),
    ...(env['BATON_API_URL'] === undefined && found?.api !== undefined ? { BATON_API_URL: found.api } : {}),
  };
}

/** The default projection key prefix for a subject prefix (the notifier's). */
export function projectionPrefixFor(prefix: string): string {
  return `${prefix}:proj`;
}

/** How long the CLI waits for NATS: to connect, and for each JetStream request. */
export const NATS_TIMEOUT_MS = 5000;
/**
 * How many times in a row the CLI dials each server of a NATS_URL that names several (a cluster)
 * after its connection dropped, before it gives up and the command fails `unavailable` (exit 69):
 * a node that goes is left for another at once; with every node gone the client tries each again
 * every 2 s, so the command ends about 6 s later. A NATS_URL of one server is not redialled: the
 * command fails as soon as its server goes.
 */
export const NATS_RECONNECT_ATTEMPTS = 3;
/**
 * How long `close()` waits for each connection to drain or close: a server that stopped answering
 * must not hold a command that has already printed its result.
 */
export const CLOSE_WAIT_MS = 2000;

/** `promise` settled (its failure ignored), or nothing after `ms` (the timer does not keep the process alive). */
async function within(ms: number, promise: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  await Promise.race([promise.catch(() => undefined), late]);
  clearTimeout(timer);
}

export function createCliContext(options: CliContextOptions): CliContext {
  const env = options.env ?? process.env;
  let config: CliConfig | null = null;
  let nats: Promise<NatsHandle> | null = options.nats ? Promise.resolve(options.nats) : null;
  // The local deployment file (the settings and the NATS target both read it) is read once.
  let localRead: { value: ReturnType<typeof localDeployment> } | null = null;
  const local = () => (localRead ??= { value: localDeployment(env) }).value;
  // Where NATS is and whose credentials speak there: the creds file is read once too.
  let target: { credsFile: string | undefined; principal: Principal; grantsResponses: boolean } | null = null;
  const natsTarget = () =>
    (target ??= (() => {
      const credsFile = ctx.config().NATS_CREDS ?? (env['NATS_URL'] === undefined ? local()?.admin : undefined);
      const creds = credsTextOf(credsFile);
      return {
        credsFile,
        principal: (creds === null ? null : principalOfCreds(creds)) ?? { kind: 'op' as const, relay: 'admin' as const },
        grantsResponses: creds !== null && credsGrantResponses(creds),
      };
    })());
  let redis: Promise<RedisHandle> | null = options.redis ? Promise.resolve(options.redis) : null;
  let registry: EventRegistry | null = null;
  const owned: (() => Promise<void>)[] = [];
  const warnings: CliWarning[] = [];
  const noted = new Set<DefaultedServer>();

  /**
   * Why `server` would be reached at its built-in default that may be another deployment's, or
   * null: its setting is not in the environment (nor, for Redis and the API, taken from local.json)
   * and either the deployment folder holds a deployment whose local.json is gone (npm start
   * stopped), or — Redis — NATS_URL is set (so no local.json is read) and REDIS_URL is not.
   */
  const defaulted = (server: DefaultedServer): { url: string; why: string; fix: string; details: Record<string, unknown> } | null => {
    const { setting } = DEFAULTED_SERVERS[server];
    // Set in the environment (or, for Redis and the API, taken from local.json): not a default.
    if (env[setting] !== undefined) return null;
    const cfg = ctx.config();
    const url = redactUrl(server === 'nats' ? cfg.NATS_URL : server === 'redis' ? cfg.REDIS_URL : cfg.BATON_API_URL);
    const stopped = stoppedDeployment(env, local());
    if (stopped !== null) {
      const why =
        stopped.localJson === 'missing'
          ? `no local.json: npm start is not running (it removes local.json when it stops)`
          : `its local.json is not one npm start wrote`;
      return {
        url,
        why: `${stopped.dir} holds a deployment (${stopped.found.join(', ')}) but ${why}`,
        fix: `Start the platform (npm start), or set ${setting}${server === 'nats' ? ' and NATS_CREDS' : ''} to the one meant`,
        details: { server, url, setting, deployment_dir: stopped.dir, found: stopped.found, local_json: stopped.localJson },
      };
    }
    // NATS_URL names the deployment, and Redis is left at 127.0.0.1:6379: whichever Redis answers
    // there on this machine (another deployment's, a developer's) would be read, or written to.
    if (server === 'redis' && env['NATS_URL'] !== undefined) {
      return {
        url,
        why: 'NATS_URL is set (so no local.json is read) and REDIS_URL is not',
        fix: "Set REDIS_URL to the deployment's Redis (the notifier's)",
        details: { server, url, setting, nats_url: redactUrl(cfg.NATS_URL) },
      };
    }
    return null;
  };

  const ctx: CliContext = {
    io: options.io,
    env,
    fetch: options.fetch ?? fetch,
    json: false,
    warn(code, text, prose, details) {
      if (ctx.json) warnings.push({ code, message: text, ...(details !== undefined ? { details } : {}) });
      else ctx.io.stderr.write(prose ?? `baton: warning: ${text}\n`);
    },
    warnings() {
      return [...warnings];
    },
    takeWarnings() {
      return warnings.splice(0);
    },
    config() {
      if (config) return config;
      try {
        config = loadConfig(CliConfigSchema, settingsOf(env, local));
      } catch (error) {
        if (error instanceof ConfigError) throw new UsageError(error.message, false);
        throw error;
      }
      // BATON_PREFIX set, and the platform the CLI reaches through local.json runs with another:
      // BATON_PREFIX is used (it was asked for), and said, since that platform may have none of its streams.
      const found = env['NATS_URL'] === undefined && env['BATON_PREFIX'] !== undefined ? local() : null;
      if (found?.prefix !== undefined && found.prefix !== config.BATON_PREFIX) {
        const localJson = join(deploymentDir(env), 'local.json');
        ctx.warn(
          CliWarningCode.prefixMismatch,
          `BATON_PREFIX is ${config.BATON_PREFIX}, and the platform npm start runs (${localJson}, NATS at ${found.url}) runs with the prefix ${found.prefix}: using ${config.BATON_PREFIX}, whose streams that platform may not have. Unset BATON_PREFIX to use its own, or set NATS_URL to the platform meant`,
          undefined,
          { baton_prefix: config.BATON_PREFIX, local_prefix: found.prefix, local_json: localJson },
        );
      }
      return config;
    },
    natsPrincipal() {
      return natsTarget().principal;
    },
    natsUrl() {
      const found = env['NATS_URL'] === undefined ? local() : null;
      return found !== null ? found.url : ctx.config().NATS_URL;
    },
    noteServer(server) {
      if (noted.has(server)) return;
      noted.add(server);
      const found = defaulted(server);
      if (found === null) return;
      const { what } = DEFAULTED_SERVERS[server];
      ctx.warn(
        CliWarningCode.defaultServerRead,
        `reading ${what} at ${found.url}, the default: ${found.why}, so this may be another deployment's server. ${found.fix}`,
        undefined,
        found.details,
      );
    },
    requireNamedServer(server, command, options = {}) {
      const found = defaulted(server);
      if (found === null) return;
      const { what } = DEFAULTED_SERVERS[server];
      throw new UsageError(
        `${command} ${options.doing ?? 'writes to'} ${what} and would ${options.doing === undefined ? 'write to' : 'use'} ${found.url}, the default: ${found.why}, so this may be another deployment's server; nothing was written. ${options.fix ?? found.fix}`,
        false,
        { code: CliErrorCode.defaultServerWrite, details: found.details },
      );
    },
    namedServer(server) {
      return defaulted(server) === null;
    },
    tokenKeyFile() {
      const given = ctx.config().BATON_TOKEN_KEY_FILE;
      if (given !== undefined) return { file: given, from: 'BATON_TOKEN_KEY_FILE' };
      const found = env['NATS_URL'] === undefined ? local() : null;
      return found?.tokenKey !== undefined ? { file: found.tokenKey, from: 'local.json' } : null;
    },
    nats() {
      nats ??= (async () => {
        // The reply inbox the credentials may subscribe to is their principal's (an agent's creds
        // for `baton result`), the admin's when they name none Baton wrote; an agent may not ask
        // the JetStream API for its account info either.
        const { credsFile, principal, grantsResponses } = natsTarget();
        const url = ctx.natsUrl();
        ctx.noteServer('nats');
        const servers = url.split(',');
        // Several servers (a cluster): a node that goes under a command is left for another, and
        // the command goes on (its stream reads resume where they were); every one gone for the
        // attempts allowed ends it `unavailable`. One server: nothing to fail over to, fail at once.
        const failover = servers.length > 1;
        try {
          const handle = await connectNats({
            servers,
            name: 'baton-cli',
            reconnect: failover,
            ...(failover ? { maxReconnectAttempts: NATS_RECONNECT_ATTEMPTS } : {}),
            timeoutMs: NATS_TIMEOUT_MS,
            // The first connection too: a port that accepts TCP and never speaks NATS would
            // otherwise hold the command for the library's default of 20 s.
            connectTimeoutMs: NATS_TIMEOUT_MS,
            ...(credsFile !== undefined ? { credsFile } : {}),
            inboxPrefix: inboxPrefixOf(ctx.config().BATON_PREFIX, principal),
            checkJetStream: principal.kind !== 'agent',
          });
          owned.push(() => handle.drain());
          if (grantsResponses) {
            ctx.warn(
              CliWarningCode.credsAllowResponses,
              `the credentials in ${credsFile} carry allow_responses, as admin credentials issued by an earlier Baton did: on nats-server 2.9 they make every stream read of this command (replay, verify) slower as it goes and stall the services' appends meanwhile. Issue new ones: baton nats-config (the deployment folder's own file) or baton creds admin --rotate`,
            );
          }
          return handle;
        } catch (error) {
          if (natsRefusedCredentials(error) || error instanceof CredentialsRefused) throw credentialsRefused(url, error, ctx.config().NATS_CREDS, credsFile);
          // Connected, and the account's JetStream info did not come: NATS_URL is right, JetStream is not there.
          const trouble = jetStreamCheckFailed(error);
          if (trouble !== null) throw jetStreamUnavailable(error, trouble, url, 'its JetStream account info request');
          throw new CliError(
            `cannot reach NATS at ${url}: ${(error as Error).message} (set NATS_URL, and NATS_CREDS to the admin credentials: baton nats-config)`,
            { cause: error, code: CliErrorCode.unavailable },
          );
        }
      })();
      return nats;
    },
    redis() {
      redis ??= (async () => {
        const url = ctx.config().REDIS_URL;
        ctx.noteServer('redis');
        const handle = createRedis(url, { maxRetriesPerRequest: 1, retryStrategy: () => null, commandTimeout: ctx.config().REDIS_COMMAND_TIMEOUT_MS });
        owned.push(() => handle.close());
        try {
          await handle.ping(3000);
        } catch (error) {
          throw new CliError(`cannot reach Redis at ${redactUrl(url)}: ${(error as Error).message} (set REDIS_URL)`, {
            cause: error,
            code: CliErrorCode.unavailable,
          });
        }
        return handle;
      })();
      return redis;
    },
    async projections() {
      const handle = await ctx.redis();
      const cfg = ctx.config();
      return createProjectionStore({ redis: handle.client, prefix: cfg.BATON_PROJECTION_PREFIX ?? projectionPrefixFor(cfg.BATON_PREFIX) });
    },
    async eventStore() {
      const handle = await ctx.nats();
      return new JetStreamEventStore({ js: handle.js, jsm: handle.jsm, prefix: ctx.config().BATON_PREFIX, registry: ctx.registry() });
    },
    registry() {
      registry ??= createEventRegistry();
      return registry;
    },
    operator() {
      return ctx.namedOperator() ?? 'operator';
    },
    namedOperator() {
      // An empty BATON_OPERATOR or USER names nobody: the next one.
      return [ctx.config().BATON_OPERATOR, env['USER']].find((name) => name !== undefined && name.trim() !== '');
    },
    async close() {
      for (const close of owned.splice(0).reverse()) await within(CLOSE_WAIT_MS, close());
    },
  };
  return ctx;
}

/**
 * `unauthenticated`: NATS at `url` refused the credentials the CLI presented — NATS_CREDS's file,
 * the local deployment's admin file, or none (NATS_CREDS unset against a server that requires
 * them) — or the file is no credentials file the client can use, or cannot be read. The message names which, and
 * what to do; `details.nats_creds` is the file (null: none).
 */
function credentialsRefused(url: string, error: unknown, natsCreds: string | undefined, credsFile: string | undefined): CliError {
  const said = (error as Error).message;
  const file =
    natsCreds !== undefined
      ? `the credentials file in NATS_CREDS (${natsCreds})`
      : `the admin credentials of the local deployment (${credsFile ?? ''}, named by var/nats-auth/local.json; NATS_CREDS is not set)`;
  const what =
    natsCreds === undefined && credsFile === undefined
      ? `NATS at ${url} requires credentials, and NATS_CREDS is not set (${said})`
      : error instanceof CredentialsRefused && error.reason === 'unreadable'
        ? `${file} cannot be read (${said})`
        : hasNatsCode(error, 'BAD_CREDS')
          ? `${file} is not a NATS credentials file the client can use (${said})`
          : `NATS at ${url} refused ${file} (${said}: unknown to this server, expired, or another deployment's)`;
  return new CliError(
    `${what}. Set NATS_CREDS to a credentials file this deployment issued: the admin's (\`baton creds admin\`, or the file your admin gave you) ` +
      "for admin and SRE commands, the agent's (`baton creds agent --project <p> --agent <name>`) for `baton result`",
    { cause: error, code: CliErrorCode.unauthenticated, details: { nats_url: url, nats_creds: natsCreds ?? credsFile ?? null } },
  );
}

/**
 * Why the JetStream check `connectNats` makes once connected (the account's info) failed, or null
 * when `error` is no such failure: the client's own error (a refused or timed-out connection) is
 * thrown as it is, the check's failure wrapped around the client's answer to it.
 */
function jetStreamCheckFailed(error: unknown): ReturnType<typeof jetStreamTrouble> {
  if (!(error instanceof Error) || error.name === 'NatsError') return null;
  const answer = (error as { cause?: unknown }).cause;
  if (!(answer instanceof Error) || answer.name !== 'NatsError') return null;
  return jetStreamTrouble(answer, true);
}

/** A credentials file's text (null: none given, or unreadable — connecting says why). */
function credsTextOf(path: string | undefined): string | null {
  if (path === undefined) return null;
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}
