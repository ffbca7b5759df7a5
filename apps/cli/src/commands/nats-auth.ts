import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { AgentNameSchema, ProjectIdSchema, ServiceNameSchema, describePrincipal, type Principal } from '@baton/contracts';
import { ensureTokenKeyFile } from '@baton/platform';
import {
  DeploymentError,
  credsName,
  credsPath,
  ensureServiceCreds,
  isUserPublicKey,
  issueCreds,
  openDeployment,
  permissionsFor,
  readLocalDeployment,
  readAccountLimits,
  readServerConfigSettings,
  revokeUsers,
  usersOfPrincipal,
  writeAccountLimits,
  writeServerConfig,
  AGENT_USER_LIMITS,
  type AuthDeployment,
  type Revocation,
  type RevokedUser,
  type UserLimits,
} from '@baton/eventstore';
import type { Command } from '../command';
import { flag, parseCommandArgs, required, str } from '../command';
import type { CliContext } from '../context';
import { CliError, CliErrorCode, CliWarningCode, ExitCode, UsageError } from '../errors';
import { configuredStreams, reachDeploymentServer, serverStreams, storageNeed, type DeploymentServer, type StreamNeed } from './capacity';

/** The deployment folder: `--dir`, else BATON_NATS_DIR, else ./var/nats-auth. */
function deploymentDir(ctx: CliContext, dir: string | undefined): string {
  return resolve(dir ?? ctx.env['BATON_NATS_DIR'] ?? 'var/nats-auth');
}

/**
 * The deployment in `dir`. `create` (nats-config) makes a new one when the folder holds none.
 * `baton creds` does not, for a folder it was pointed at (`--dir`, BATON_NATS_DIR): it refuses
 * before writing anything, since credentials signed by a new operator and account in a mistyped
 * folder are trusted by no server and would be handed out as if they worked. The default
 * ./var/nats-auth is the folder `npm start` and `baton nats-config` use, so credentials made
 * there first are trusted once the server is configured from it: made, with a warning that says
 * so (and names the folder, which depends on the working directory).
 */
function open(ctx: CliContext, dir: string | undefined, create: boolean): AuthDeployment {
  const folder = deploymentDir(ctx, dir);
  if (!create && !existsSync(join(folder, 'deployment.json'))) {
    const chosen = dir !== undefined ? '--dir' : ctx.env['BATON_NATS_DIR'] !== undefined ? 'BATON_NATS_DIR' : null;
    if (chosen !== null) {
      throw new UsageError(
        `no deployment in ${folder} (${chosen}): it holds no deployment.json. Run \`baton nats-config\` first, or point --dir or BATON_NATS_DIR at the folder it made; nothing was written`,
        false,
        { code: CliErrorCode.usage, details: { dir: folder } },
      );
    }
    ctx.warn(
      CliWarningCode.deploymentCreated,
      `no deployment in ${folder} (the default ./var/nats-auth of this working directory): a new one is made; its credentials are trusted only by a nats-server configured from this folder (npm start, or baton nats-config)`,
    );
  }
  try {
    return openDeployment(folder, ctx.config().BATON_PREFIX);
  } catch (error) {
    if (error instanceof DeploymentError) throw new CliError(error.message, { cause: error });
    const errno = (error as NodeJS.ErrnoException).code;
    // The folder (or one above it) is a file: no deployment can be made or read there.
    if (errno === 'EEXIST' || errno === 'ENOTDIR') {
      const chosen = dir !== undefined ? '--dir' : ctx.env['BATON_NATS_DIR'] !== undefined ? 'BATON_NATS_DIR' : 'the default ./var/nats-auth';
      throw new CliError(`${folder} (${chosen}) is not a folder (it, or a folder above it, is a file): name a folder for the deployment; nothing was written`, {
        cause: error,
        code: CliErrorCode.invalidInput,
        details: { dir: folder },
      });
    }
    throw error;
  }
}

/**
 * A `host:port` option (`--listen`, `--http`) as nats-server takes it: a host (a name, an IPv4
 * address, or an IPv6 one in brackets) and a port from 1 to 65535. Checked before anything is
 * written: a value nats-server refuses would otherwise be written into its configuration.
 */
export function hostPort(option: string, value: string): string {
  const at = value.lastIndexOf(':');
  const host = at > 0 ? value.slice(0, at) : '';
  const port = at > 0 ? value.slice(at + 1) : '';
  const bracketed = host.startsWith('[') && host.endsWith(']') && host.length > 2;
  const hostOk = bracketed || (host.length > 0 && !/[\s:[\]/]/.test(host));
  const portOk = /^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535;
  if (!hostOk || !portOk) throw new UsageError(`--${option} must be host:port with a host and a port from 1 to 65535 (e.g. 127.0.0.1:4222), got "${value}"`);
  return value;
}

const BYTE_UNITS: Readonly<Record<string, number>> = { '': 1, b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3, tib: 1024 ** 4 };

/**
 * A size option (`--max-store`, `--max-payload`): a whole number of bytes, or of KiB, MiB, GiB or
 * TiB (`512MiB`, `20GiB`; any case), from `min` to `max`; `none` (when `none` allows it) is null,
 * for no limit. Anything else is a usage error before anything is written.
 */
export function byteSize(option: string, value: string, bounds: { min: number; max: number; none?: boolean }): number | null {
  if (bounds.none === true && value === 'none') return null;
  const match = /^(\d+)\s*([a-z]*)$/i.exec(value.trim());
  const unit = match ? BYTE_UNITS[match[2]!.toLowerCase()] : undefined;
  const bytes = match && unit !== undefined ? Number(match[1]) * unit : Number.NaN;
  if (!Number.isSafeInteger(bytes) || bytes < bounds.min || bytes > bounds.max) {
    throw new UsageError(
      `--${option} must be a size from ${bounds.min} to ${bounds.max} bytes: digits, optionally with KiB, MiB, GiB or TiB (e.g. 20GiB)${bounds.none === true ? ', or none' : ''}; got "${value}"`,
    );
  }
  return bytes;
}

/** A count option (`--max-subs`): a whole number from `min` to `max`, or `none` (null: no limit). */
function countOption(option: string, value: string, bounds: { min: number; max: number }): number | null {
  if (value === 'none') return null;
  const n = /^\d+$/.test(value.trim()) ? Number(value.trim()) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < bounds.min || n > bounds.max)
    throw new UsageError(`--${option} must be a whole number from ${bounds.min} to ${bounds.max}, or none; got "${value}"`);
  return n;
}

/** The JetStream storage limit of the deployment's account as the folder keeps it (a file that cannot be read is the CLI's error). */
function accountMaxStore(deployment: AuthDeployment): number | null {
  try {
    return readAccountLimits(deployment.dir).maxStore;
  } catch (error) {
    if (error instanceof DeploymentError) throw new CliError(error.message, { cause: error });
    throw error;
  }
}

/** Whether `value` is a `host:port` {@link hostPort} takes. */
function isHostPort(value: string): boolean {
  try {
    hostPort('listen', value);
    return true;
  } catch {
    return false;
  }
}

/**
 * The settings of a nats-server.conf that nats-server cannot change on a configuration reload: the
 * client listener, the monitoring listener and the JetStream folder. A reload of a file where one
 * of them differs from what the server started with is refused whole ("Failed to reload server
 * configuration: config reload not supported for …"): nothing in it is applied, a revocation
 * included. So `baton nats-config` run again keeps them unless told otherwise.
 */
export interface ListenerSettings {
  listen: string;
  storeDir: string;
  /** The monitoring listener; null for none. */
  http: string | null;
}

/** What a nats-server.conf already in the folder names, as far as it can be read (undefined: the setting could not be read). */
export interface WrittenSettings {
  listen: string | undefined;
  storeDir: string | undefined;
  /** null: the file names no monitoring listener. */
  http: string | null | undefined;
}

/**
 * The listeners and the JetStream folder the nats-server.conf `file` names (`readServerConfigSettings`,
 * beside the writer), kept only in a form nats-config writes: a listener that is not host:port, or
 * an empty folder, cannot be kept. Null when there is no such file.
 */
export function writtenSettings(file: string): WrittenSettings | null {
  const raw = readServerConfigSettings(file);
  if (raw === null) return null;
  return {
    listen: raw.listen !== undefined && isHostPort(raw.listen) ? raw.listen : undefined,
    http: raw.http === null ? null : raw.http !== undefined && isHostPort(raw.http) ? raw.http : undefined,
    storeDir: raw.storeDir !== undefined && raw.storeDir.length > 0 ? raw.storeDir : undefined,
  };
}

/** A setting that differs from the nats-server.conf replaced: a server running from that file must be restarted to take it. */
export interface ChangedSetting {
  setting: 'listen' | 'store_dir' | 'http';
  from: string | null;
  to: string | null;
}

/**
 * The listeners and the JetStream folder nats-config writes: each option given, else what the
 * nats-server.conf in the folder already names (`previous`), else the default. `changed` lists
 * those that differ from a file that was there; `unread` the settings such a file holds in a form
 * that could not be read (the default is written for them).
 */
export function chooseSettings(
  given: { listen?: string; storeDir?: string; http?: string | null },
  previous: WrittenSettings | null,
  defaults: { listen: string; storeDir: string },
): { settings: ListenerSettings; kept: ChangedSetting['setting'][]; changed: ChangedSetting[]; unread: ChangedSetting['setting'][] } {
  const kept: ChangedSetting['setting'][] = [];
  const changed: ChangedSetting[] = [];
  const unread: ChangedSetting['setting'][] = [];
  function pick<T extends string | null>(setting: ChangedSetting['setting'], option: T | undefined, before: T | undefined, fallback: T): T {
    if (option !== undefined) {
      if (previous !== null && before !== undefined && before !== option) changed.push({ setting, from: before, to: option });
      return option;
    }
    if (before !== undefined) {
      if (previous !== null) kept.push(setting);
      return before;
    }
    if (previous !== null) unread.push(setting);
    return fallback;
  }
  const settings: ListenerSettings = {
    listen: pick('listen', given.listen, previous?.listen, defaults.listen),
    storeDir: pick('store_dir', given.storeDir, previous?.storeDir, defaults.storeDir),
    http: pick<string | null>('http', given.http, previous === null ? undefined : previous.http, null),
  };
  return { settings, kept, changed, unread };
}

export const natsConfigCommand: Command = {
  name: 'nats-config',
  summary: 'make the NATS operator, account and service credentials and write a nats-server configuration',
  help: `Usage: baton nats-config [--dir <folder>] [--listen <host:port>] [--store-dir <folder>] [--http <host:port>] [--max-store <size>|none [--allow-below-reserved]] [--json]

Set up NATS authentication for a Baton deployment (decentralized JWT auth, works on
nats-server 2.9 and newer). The first run creates an operator key, the BATON account (JetStream
on) and a system account in <folder>, then credentials for the four services and the admin;
later runs keep them. It (re)writes <folder>/nats-server.conf, which trusts the operator with a
memory resolver: no user is listed in it and no client connects without credentials. Each
principal may publish and read only its own subjects (see docs/identity.md).

Start the server with:   nats-server -c <folder>/nats-server.conf
and each service with:   NATS_CREDS=<folder>/creds/<service>.creds
When a nats-server of the deployment runs already (npm start's local.json names its pid, or one
answers at the listen with the folder's admin credentials), it says to reload it instead, with its
pid and the command (nats-server --signal reload=<pid>); to restart it when a listener or the
JetStream folder changed (--json: running_server, apply, apply_command).
Agents get their own file from \`baton creds agent\`.

The *.seed files are secrets (mode 0600): whoever holds account.seed can issue credentials.
So is <folder>/token.key (0600, made once): the operator API's token authority — baton token
create signs token records with it, and a notifier given it (BATON_TOKEN_KEY_FILE) refuses any
record not signed with it.

Run again, it keeps the keys, the operator JWT already written and the revocations, and the
listeners and JetStream folder the nats-server.conf in <folder> names (npm start's port and
var/nats included): an option not given keeps that file's value, and only without such a file
are the defaults below written. nats-server refuses a reload of a file whose listen, http or
store_dir changed — and applies nothing of it, revocations included — so an option that changes
one warns: restart a server running from the folder, do not reload it (--json: changed).

Options:
  --dir <folder>        deployment folder (default BATON_NATS_DIR or ./var/nats-auth)
  --listen <host:port>  client listener (default: kept, else 127.0.0.1:4222; keep loopback unless
                        TLS is set up)
  --store-dir <folder>  JetStream storage (default: kept, else <folder>/jetstream)
  --http <host:port>    monitoring listener (default: kept, else none; "none" removes it)
  --max-store <size>    most bytes the BATON account's JetStream streams may hold together on disk
                        (account-limits.json; e.g. 200GiB; "none" removes it; default: kept, else
                        none). The server refuses a publish past it ("resource limits exceeded for
                        account": storage_full to a client) and a stream whose max_bytes, with the
                        others', do not fit (the services' DLQ and inbox limits: docs/sre.md,
                        Capacity). A running server takes it on a reload, as a revocation.
                        A size below what the account's streams need is refused
                        (max_store_below_reserved, nothing written): their max_bytes x replicas
                        reserved (BATON_DLQ_MAX_BYTES, BATON_INBOX_MAX_BYTES, BATON_STREAM_REPLICAS
                        as the services are given them, or larger limits the server's streams have)
                        plus what streams without a limit store (the events). Read from the
                        deployment's nats-server when it answers; else the settings only, with a
                        warning (max_store_unverified) naming what was not checked
  --allow-below-reserved  write such a --max-store anyway (warns max_store_below_reserved). RISK:
                        after its next restart nats-server does not load a stream that does not fit
                        (the DLQ first) and no service starts until the limit is raised
  --json                print the paths as JSON ({ dir, prefix, server_config, listen, store_dir,
                        http, max_store, max_store_check, account, creds, token_key, kept, changed,
                        running_server, apply, apply_command })
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      {
        dir: { type: 'string' },
        listen: { type: 'string' },
        'store-dir': { type: 'string' },
        http: { type: 'string' },
        'max-store': { type: 'string' },
        'allow-below-reserved': { type: 'boolean' },
        json: { type: 'boolean' },
      },
      { min: 0, max: 0 },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    // The listeners first: nothing is written for a command line that is wrong.
    const listenGiven = str(args, 'listen');
    const httpGiven = str(args, 'http');
    const storeGiven = str(args, 'store-dir');
    const given = {
      ...(listenGiven !== undefined ? { listen: hostPort('listen', listenGiven) } : {}),
      ...(httpGiven !== undefined ? { http: httpGiven === 'none' ? null : hostPort('http', httpGiven) } : {}),
      ...(storeGiven !== undefined ? { storeDir: resolve(storeGiven) } : {}),
    };
    const maxStoreGiven = str(args, 'max-store');
    const maxStore =
      maxStoreGiven !== undefined ? byteSize('max-store', maxStoreGiven, { min: 1024 * 1024, max: Number.MAX_SAFE_INTEGER, none: true }) : undefined;
    if (flag(args, 'allow-below-reserved') && (maxStore === undefined || maxStore === null))
      throw new UsageError('--allow-below-reserved goes with --max-store <size>: it writes a size below what the streams reserve');
    const deployment = open(ctx, str(args, 'dir'), true);
    const existing = join(deployment.dir, 'nats-server.conf');
    // What the configuration there names already: a server running from it cannot take another
    // listen, http or store_dir on a reload.
    const { settings, kept, changed, unread } = chooseSettings(given, writtenSettings(existing), {
      listen: '127.0.0.1:4222',
      storeDir: resolve(deployment.dir, 'jetstream'),
    });
    // The deployment's nats-server, when one runs: --max-store is checked against its streams, and
    // the operator is told to reload it rather than start it.
    const server = await reachDeploymentServer(settings.listen, credsPath(deployment, { kind: 'op', relay: 'admin' }), deployment.prefix);
    let maxStoreCheck: MaxStoreCheck | null = null;
    try {
      if (maxStore !== undefined && maxStore !== null)
        maxStoreCheck = await checkMaxStore(ctx, maxStore, server, deployment.prefix, flag(args, 'allow-below-reserved'));
    } finally {
      if (server.reached) await server.handle.close().catch(() => undefined);
    }
    // Kept in the folder: every account JWT signed from it (this one, a revocation's) carries it.
    if (maxStore !== undefined) writeAccountLimits(deployment, { maxStore });
    const maxStoreInForce = accountMaxStore(deployment);
    const creds = ensureServiceCreds(deployment);
    // The operator API's token authority, beside the admin's credentials (made once, kept).
    const tokenKey = ensureTokenKeyFile(deployment.dir).key.file;
    const config = writeServerConfig(deployment, {
      listen: settings.listen,
      storeDir: settings.storeDir,
      ...(settings.http !== null ? { http: settings.http } : {}),
    });
    if (changed.length > 0) {
      const what = changed.map((change) => `${change.setting} from ${change.from ?? 'none'} to ${change.to ?? 'none'}`).join(', ');
      const data = changed.some((change) => change.setting === 'store_dir') ? ' (its JetStream data stays in the former store_dir: move it first)' : '';
      ctx.warn(
        CliWarningCode.restartRequired,
        `${config}: ${what}. A nats-server running from it must be restarted to take this${data}: a reload (nats-server --signal reload, kill -HUP) is refused — "Failed to reload server configuration" in its log — and applies nothing, revocations included`,
      );
    }
    if (unread.length > 0) {
      const written = { listen: settings.listen, store_dir: settings.storeDir, http: settings.http ?? 'none' };
      ctx.warn(
        CliWarningCode.serverConfigUnread,
        `${existing} named no ${unread.join(', ')} nats-config could read: the default is written (${unread.map((setting) => `${setting} ${written[setting]}`).join(', ')}); a nats-server running from it with another must be restarted, not reloaded`,
      );
    }
    const running = runningServer(deployment.dir, server);
    const apply = applyOf(config, running, changed.length > 0);
    const summary = {
      dir: deployment.dir,
      prefix: deployment.prefix,
      server_config: config,
      listen: settings.listen,
      store_dir: settings.storeDir,
      http: settings.http,
      max_store: maxStoreInForce,
      max_store_check: maxStoreCheck,
      account: deployment.account.publicKey,
      creds,
      token_key: tokenKey,
      kept,
      changed,
      running_server: running,
      apply: apply.apply,
      apply_command: apply.command,
    };
    if (flag(args, 'json')) {
      ctx.io.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
      return ExitCode.ok;
    }
    const keptNote = kept.length > 0 ? ` (kept from the configuration it replaced: ${kept.join(', ')})` : '';
    ctx.io.stdout.write(
      [
        `deployment ${deployment.dir} (prefix ${deployment.prefix}, account ${deployment.account.publicKey})`,
        `server configuration: ${config}`,
        `  listen ${settings.listen}, store_dir ${settings.storeDir}, http ${settings.http ?? 'none'}${keptNote}`,
        `  JetStream storage of the account: ${maxStoreInForce !== null ? `at most ${maxStoreInForce} bytes (--max-store)` : 'no limit (--max-store sets one)'}`,
        `  ${apply.prose}`,
        ...Object.entries(creds).map(([name, file]) => `credentials of ${name}: ${file}`),
        `token key (the notifier's and baton token's BATON_TOKEN_KEY_FILE): ${tokenKey}`,
        '',
      ].join('\n'),
    );
    return ExitCode.ok;
  },
};

/** What `nats-config --max-store` checked the size against (`--json`: max_store_check; the details of `max_store_below_reserved`). */
export interface MaxStoreCheck {
  asked: number;
  /** Σ max_bytes × replicas of the streams with a limit. */
  reserved: number;
  /** Σ bytes × replicas the streams without a limit store; null: not read (the server could not be). */
  stored: number | null;
  /** reserved + stored: the least --max-store that holds them. */
  required: number;
  /** `server`: the server's streams were read (with the services' settings for Baton's own); `configured`: the settings only. */
  source: 'server' | 'configured';
  server_url: string;
  streams: StreamNeed[];
  /** What was not checked (the server not read): `stored` (what the events hold), `other_streams`, `server_limits` (limits set on the server by hand). */
  unchecked: string[];
}

/**
 * Check `--max-store` (`asked` bytes) against what the account's streams need ({@link storageNeed}):
 * the deployment's server's streams when it was reached, else the limits the services' settings give
 * Baton's streams (warning \`max_store_unverified\`). Below it: the failure \`max_store_below_reserved\`
 * (nothing written), or with `allow` the warning of that code.
 */
async function checkMaxStore(ctx: CliContext, asked: number, server: DeploymentServer, prefix: string, allow: boolean): Promise<MaxStoreCheck> {
  let configured: StreamNeed[];
  try {
    configured = configuredStreams(prefix, ctx.env);
  } catch (error) {
    throw new UsageError(`--max-store is checked against the services' stream settings, which are not valid here: ${(error as Error).message}`, false);
  }
  let onServer: StreamNeed[] | null = null;
  let why = server.reached ? '' : server.detail;
  if (server.reached) {
    try {
      onServer = await serverStreams(server.handle.jsm);
    } catch (error) {
      why = `listing the streams at ${server.url} failed (${(error as Error).message})`;
    }
  }
  const need = storageNeed(configured, onServer);
  const check: MaxStoreCheck = {
    asked,
    reserved: need.reserved,
    stored: need.stored,
    required: need.required,
    source: onServer !== null ? 'server' : 'configured',
    server_url: server.url,
    streams: need.streams,
    unchecked: onServer !== null ? [] : ['stored', 'other_streams', 'server_limits'],
  };
  if (onServer === null) {
    ctx.warn(
      CliWarningCode.maxStoreUnverified,
      `the deployment's nats-server could not be read (${why}): --max-store ${asked} was checked only against the limits the services' settings give Baton's streams (${need.reserved} bytes reserved: BATON_DLQ_MAX_BYTES, BATON_INBOX_MAX_BYTES x BATON_STREAM_REPLICAS as set here). Not checked: what the events stream stores, other streams of the account, limits set on the server's streams by hand — run it again while the server runs to check them`,
      undefined,
      { server_url: server.url, reason: server.reached ? 'failed' : server.reason, unchecked: check.unchecked },
    );
  }
  if (asked < need.required) {
    const limited = need.streams.filter((s) => s.max_bytes !== null).map((s) => `${s.stream} ${s.max_bytes} x ${s.replicas}`);
    const unlimited = need.streams.filter((s) => s.max_bytes === null && s.bytes !== null).map((s) => `${s.stream} ${s.bytes} x ${s.replicas}`);
    const sum =
      `${need.reserved} bytes reserved (max_bytes x replicas: ${limited.join(', ') || 'none'})` +
      (need.stored !== null
        ? ` + ${need.stored} bytes stored by streams without a limit (${unlimited.join(', ') || 'none'}) = ${need.required}`
        : ' (what the events stream stores not read)');
    const source = onServer !== null ? `read from the nats-server at ${server.url}` : "from the services' settings";
    const risk =
      'nats-server reserves each stream\'s max_bytes x replicas against the account\'s limit: after its next restart it does not load a stream that does not fit (the DLQ first: "insufficient storage resources available") and no service starts, and until then every publish past the limit is refused (storage_full)';
    if (!allow) {
      throw new CliError(
        `--max-store ${asked} bytes is below what the account's streams need: ${sum}, ${source}. ${risk}. The limit was not written: ask for at least ${need.required} bytes (with room for the events to grow), or pass --allow-below-reserved to write it anyway (docs/sre.md, Capacity)`,
        { code: CliErrorCode.maxStoreBelowReserved, details: { ...check } },
      );
    }
    ctx.warn(
      CliWarningCode.maxStoreBelowReserved,
      `--max-store ${asked} bytes (written: --allow-below-reserved) is below what the account's streams need: ${sum}, ${source}. ${risk}; raise it before the server restarts`,
      undefined,
      { ...check },
    );
  }
  return check;
}

/** The deployment's nats-server that runs now, as `nats-config --json` prints it (`running_server`); null when none was found. */
export interface RunningServer {
  /** Where it answered with the folder's admin credentials (null: not reached, only npm start's local.json names it). */
  url: string | null;
  /** Its pid, from npm start's local.json (null: a server answered, its pid is not known here). */
  pid: number | null;
  /** Its log (npm start's), or null. */
  log: string | null;
}

/** The deployment's nats-server that runs now: npm start's (local.json, a live nats-server pid), or one that answered at the listen with the folder's admin credentials. */
function runningServer(dir: string, server: DeploymentServer): RunningServer | null {
  const local = localServerOf(dir).running;
  if (local === null && !server.reached) return null;
  return { url: server.reached ? server.url : null, pid: local?.pid ?? null, log: local?.log ?? null };
}

/** How to make a nats-server take the configuration written: start one, reload the one running, or restart it (a listener or store_dir changed). */
function applyOf(config: string, running: RunningServer | null, restart: boolean): { apply: 'start' | 'reload' | 'restart'; command: string; prose: string } {
  const start = `nats-server -c ${config}`;
  if (running === null) return { apply: 'start', command: start, prose: `start it with: ${start}` };
  const pid = running.pid !== null ? String(running.pid) : '<pid>';
  const which =
    running.pid !== null
      ? `pid ${running.pid}${running.log !== null ? `, npm start's; its log: ${running.log}` : ''}`
      : `answering at ${running.url ?? '?'}; pgrep -a nats-server finds its pid`;
  if (restart) {
    return {
      apply: 'restart',
      command: start,
      prose: `a nats-server of this deployment runs (${which}): a listener or store_dir changed, so restart it (a reload is refused): stop it (kill ${pid}), then ${start} (npm start's: stop npm start and start it again)`,
    };
  }
  const command = `nats-server --signal reload=${pid}`;
  return {
    apply: 'reload',
    command,
    prose: `a nats-server of this deployment runs (${which}): reload it to apply this: ${command} (or kill -HUP ${pid}); its log then says "Reloaded server configuration"`,
  };
}

/** `--max-payload` and `--max-subs` of `baton creds agent` (-1 for `none`); refused for another principal. */
function agentLimits(args: ReturnType<typeof parseCommandArgs>, principal: Principal): Partial<UserLimits> {
  const payload = str(args, 'max-payload');
  const subs = str(args, 'max-subs');
  if (principal.kind !== 'agent') {
    if (payload !== undefined || subs !== undefined)
      throw new UsageError('--max-payload and --max-subs are for baton creds agent: services and the admin are not limited');
    return {};
  }
  const payloadBytes = payload !== undefined ? byteSize('max-payload', payload, { min: 1024, max: 64 * 1024 * 1024, none: true }) : undefined;
  const subsCount = subs !== undefined ? countOption('max-subs', subs, { min: 1, max: 1_000_000 }) : undefined;
  return {
    ...(payloadBytes !== undefined ? { payload: payloadBytes ?? -1 } : {}),
    ...(subsCount !== undefined ? { subs: subsCount ?? -1 } : {}),
  };
}

/** The service named `name`; `usage` is how the command line names it, for the error. */
function servicePrincipal(name: string | undefined, usage: string): Principal {
  const parsed = ServiceNameSchema.safeParse(name);
  if (!parsed.success) throw new UsageError(`${usage} <router|ledger|watchdog|notifier>, got "${name ?? ''}"`);
  return { kind: 'svc', service: parsed.data };
}

function principalOf(kind: string, args: ReturnType<typeof parseCommandArgs>): Principal {
  switch (kind) {
    case 'agent': {
      const project = required(args, 'project');
      const agent = required(args, 'agent');
      if (!ProjectIdSchema.safeParse(project).success) throw new UsageError(`--project "${project}" is not a project key (lowercase letters, digits, _ and -)`);
      if (!AgentNameSchema.safeParse(agent).success) throw new UsageError(`--agent "${agent}" is not an agent name (letters, digits, _ and -)`);
      return { kind: 'agent', project, agent };
    }
    case 'service':
      return servicePrincipal(args.positionals[1], 'baton creds service');
    case 'admin':
      return { kind: 'op', relay: 'admin' };
    default:
      throw new UsageError(`baton creds agent|service|admin, got "${kind}"`);
  }
}

const isoOf = (seconds: number | null): string | null => (seconds === null ? null : new Date(seconds * 1000).toISOString());

/** A revoked user as `--json` prints it (snake_case, ISO times). */
function revokedJson(entry: RevokedUser): Record<string, unknown> {
  return {
    user: entry.user,
    principal: entry.principal,
    issued_at: isoOf(entry.issuedAt),
    revoked_at: isoOf(entry.revokedAt),
    already_revoked: entry.alreadyRevoked,
  };
}

/** How a revocation reaches the servers, in one sentence for `--json` and in lines for people. */
const APPLY =
  'reload every nats-server configured from this folder (copy auth.conf to each node of a cluster first): nats-server --signal reload=<pid>, or kill -HUP <pid>';

/** The nats-server `npm start` runs from the deployment folder, as its local.json names it. */
export interface LocalServer {
  pid: number;
  log: string;
}

/**
 * The nats-server `npm start` runs from the deployment folder, as its local.json names it: `running`
 * null when none is (no local.json, or one without a server); `stale` when local.json names a pid
 * where no nats-server runs any more (the server was stopped or restarted by hand, or npm start was
 * killed and the pid is gone or another process's now).
 */
export function localServerOf(dir: string): { running: LocalServer | null; stale: LocalServer | null } {
  const server = readLocalDeployment(dir)?.natsServer;
  if (server === undefined) return { running: null, stale: null };
  const { pid, log } = server;
  const stale = { running: null, stale: { pid, log } };
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it runs, as another user.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return stale;
  }
  // A local.json left behind by an npm start that was killed may name a pid another process has
  // now: where /proc says what runs under it, only a nats-server is named.
  try {
    if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== 'nats-server') return stale;
  } catch {
    // No /proc (not Linux): the pid alone.
  }
  return { running: { pid, log }, stale: null };
}

/** The running nats-server npm start's local.json names, or null; warns (`local_server_not_running`) when it names one that is gone. */
function localServer(ctx: CliContext, dir: string): LocalServer | null {
  const { running, stale } = localServerOf(dir);
  if (stale !== null) {
    ctx.warn(
      CliWarningCode.localServerNotRunning,
      `${join(dir, 'local.json')} names npm start's nats-server as pid ${stale.pid}, and no nats-server runs at that pid (stopped or restarted by hand since npm start wrote it): reload the nats-server that runs now from this folder (pgrep -a nats-server finds its pid), or restart npm start`,
      undefined,
      { pid: stale.pid, log: stale.log },
    );
  }
  return running;
}

/** What a revocation printed for people: the users, the files, and how to apply it. */
function revocationProse(outcome: Revocation, afterwards: string, local: { pid: number; log: string } | null): string {
  const files = [outcome.authConf, ...(outcome.serverConfig !== null ? [outcome.serverConfig] : [])];
  return [
    ...outcome.revoked.map((entry) => {
      const who = entry.principal !== null ? ` (${entry.principal})` : ' (not in the record)';
      const issued = entry.issuedAt !== null ? `issued ${isoOf(entry.issuedAt)}, ` : '';
      const state = entry.alreadyRevoked ? 'already revoked as of' : 'revoked as of';
      return `  user ${entry.user}${who}: ${issued}${state} ${isoOf(entry.revokedAt)}`;
    }),
    ...outcome.removedFiles.map((file) => `removed ${file} (its user is revoked)`),
    `wrote the account's revocation list into ${files.join(' and ')}`,
    `apply it: ${APPLY}`,
    ...(local !== null ? [`  npm start runs this folder's nats-server: nats-server --signal reload=${local.pid} (its log: ${local.log})`] : []),
    '  (docker compose: docker compose kill -s HUP nats). The reload refuses the revoked users and closes their',
    "  open connections: Baton's services and the SDK reconnect with what their credentials file holds by then",
    '  (they read it again at every reconnect); refused again, the client gives up and a service exits (69) for',
    '  its supervisor to restart it. nats-server 2.9 also closes every other client once; they reconnect by',
    '  themselves. The server logs "Reloaded server configuration"; one that logs "Failed to reload',
    '  server configuration: config reload not supported for …" (another operator JWT, listen, http or store_dir',
    '  than it started with) applied nothing, the revocation included: restart it instead (docs/identity.md,',
    '  "Revoking an agent\'s credentials").',
    afterwards,
    '',
  ].join('\n');
}

/** What `creds … --rotate` tells people after the reload instructions: where the new file is, and who picks it up. */
function rotatedAfterwards(file: string): string {
  return [
    `The new credentials are in ${file}, where the earlier ones were. A Baton service or SDK client given this path`,
    '(NATS_CREDS, natsCreds) reads it again at every reconnect: after the reload it is back with the new key by',
    'itself, no restart. A process given another file (a copy elsewhere) is refused from the reload on: copy the new',
    'file over its file before the reload, or restart it with the new one.',
  ].join('\n');
}

/** The warning for a nats-server.conf that holds no trust block Baton wrote, left as it was. */
function warnUnchangedServerConfig(ctx: CliContext, outcome: Revocation): void {
  if (outcome.serverConfigNotUpdated !== null) {
    ctx.warn(
      CliWarningCode.serverConfigNotUpdated,
      `${outcome.serverConfigNotUpdated} holds no trust block baton nats-config wrote and was not changed: unless it includes ${outcome.authConf}, copy the block from that file into it`,
    );
  }
}

/** `baton creds revoke`: the principal or the user keys named, revoked in the deployment. */
function revoke(args: ReturnType<typeof parseCommandArgs>, ctx: CliContext): ExitCode {
  const users = ((args.values['user'] as string[] | undefined) ?? []).map((user) => user.trim());
  const byAgent = str(args, 'project') !== undefined || str(args, 'agent') !== undefined;
  const service = str(args, 'service');
  const selectors = [byAgent, service !== undefined, flag(args, 'admin'), users.length > 0].filter(Boolean).length;
  if (selectors !== 1) throw new UsageError('baton creds revoke takes one of: --project and --agent, --service <name>, --admin, or --user <U…> (repeatable)');
  if (flag(args, 'rotate')) throw new UsageError('--rotate is for issuing (baton creds agent|service|admin --rotate), not for revoke');
  if (args.positionals.length > 1)
    throw new UsageError(`unexpected argument "${args.positionals[1]}": name what to revoke with --project and --agent, --service, --admin or --user`);
  const wrong = users.filter((user) => !isUserPublicKey(user));
  if (wrong.length > 0)
    throw new UsageError(
      `--user must be a user public key (U followed by 55 characters, as baton creds prints it), got ${wrong.map((user) => `"${user}"`).join(', ')}`,
    );
  const principal = byAgent
    ? principalOf('agent', args)
    : service !== undefined
      ? servicePrincipal(service, 'baton creds revoke --service')
      : flag(args, 'admin')
        ? principalOf('admin', args)
        : null;

  // Never a new deployment: revoking in a folder that holds none would only make one that no server trusts.
  const folder = deploymentDir(ctx, str(args, 'dir'));
  if (!existsSync(join(folder, 'deployment.json'))) {
    throw new UsageError(
      `no deployment in ${folder}: it holds no deployment.json, so there is nothing to revoke; point --dir or BATON_NATS_DIR at the folder baton nats-config made`,
      false,
      {
        code: CliErrorCode.usage,
        details: { dir: folder },
      },
    );
  }
  const deployment = open(ctx, str(args, 'dir'), false);
  const keys = principal !== null ? usersOfPrincipal(deployment, principal).map((user) => user.user) : users;
  if (principal !== null && keys.length === 0) {
    throw new CliError(
      `no credentials of ${describePrincipal(principal)} are known in ${deployment.dir} (none in its user record, no ${credsName(principal)} credentials file): nothing was revoked. Credentials issued elsewhere are revoked by their user key (--user)`,
      { code: CliErrorCode.notFound, details: { dir: deployment.dir, principal } },
    );
  }
  const outcome = revokeUsers(deployment, keys);
  warnUnchangedServerConfig(ctx, outcome);
  const local = localServer(ctx, deployment.dir);
  if (flag(args, 'json')) {
    ctx.io.stdout.write(
      `${JSON.stringify(
        {
          dir: deployment.dir,
          principal,
          revoked: outcome.revoked.map(revokedJson),
          removed_files: outcome.removedFiles,
          auth_conf: outcome.authConf,
          server_config: outcome.serverConfig,
          apply: APPLY,
          local_server: local,
        },
        null,
        2,
      )}\n`,
    );
    return ExitCode.ok;
  }
  const afterwards =
    principal === null
      ? 'Issue new credentials for whoever held these keys (baton creds) and give them the new file.'
      : principal.kind === 'agent'
        ? `Issue new ones with baton creds agent --project ${principal.project} --agent ${principal.agent} when the agent may connect again.`
        : 'Issue new ones with baton nats-config (it issues every missing service and admin file), then restart the processes that used them.';
  const fresh = outcome.revoked.filter((entry) => !entry.alreadyRevoked).length;
  const what = principal !== null ? describePrincipal(principal) : 'the users named';
  ctx.io.stdout.write(
    `revoked ${what} in ${deployment.dir}: ${fresh} user key(s) newly revoked, ${outcome.revoked.length - fresh} revoked before\n${revocationProse(outcome, afterwards, local)}`,
  );
  return ExitCode.ok;
}

export const credsCommand: Command = {
  name: 'creds',
  summary: 'issue, rotate or revoke NATS credentials for an agent, a service or the admin',
  help: `Usage: baton creds agent --project <p> --agent <name> [--max-payload <size>] [--max-subs <n>] [--rotate] [--dir <folder>] [--json]
       baton creds service <router|ledger|watchdog|notifier> [--rotate] [--dir <folder>] [--json]
       baton creds admin [--rotate] [--dir <folder>] [--json]
       baton creds revoke (--project <p> --agent <name> | --service <name> | --admin | --user <U…>...) [--dir <folder>] [--json]

Issue a new credentials file (a user JWT signed by the deployment's account key, plus the user's
nkey seed) for one principal, written under <folder>/creds/ with mode 0600. The server needs no
change: it trusts every user the account signs. An agent's credentials let it publish, on its
edge (<prefix>.edge.<p>.…, relayed by the ledger to <prefix>.in.<p>.…), its own results
(.result.<agent>), runs and meshes started as itself (.start.<agent>, .mesh_start.<agent>) or on the
project's shared start subjects, its mesh turns and messages in its project; pull and acknowledge
its own offers durable through its edge (<prefix>.edge.<p>.offers.<agent>.…); call the ledger as
itself (<prefix>.cmd.ledger.<p>.agent.<agent>.*); and read replies on its own inbox prefix —
nothing else, and nothing JetStream reads directly (docs/identity.md, "The agent edge").

Every issue makes a new user key, recorded (public key, principal, time) in <folder>/users.jsonl.
Credentials issued before for the same principal STAY VALID until revoked: the command warns and
names their keys. --rotate issues the new file and revokes every earlier key of the principal in
the same step (apply it with a reload, below). The new file is written where the earlier one was:
Baton's services and the SDK read their credentials file again at every reconnect, so a process
given that path comes back with the new key after the reload; one given a copy elsewhere is refused.

An agent's user JWT also carries limits the server enforces on its connections: its largest
message, headers and body together (--max-payload, default ${AGENT_USER_LIMITS.payload} bytes: the 256 KiB
body any entry point takes, plus 16 KiB of headers) — past it the server closes the connection
("Maximum Payload Violation"; nats.js refuses such a publish itself, MAX_PAYLOAD_EXCEEDED) — and
its subscriptions (--max-subs, default ${AGENT_USER_LIMITS.subs}). Issued again (--rotate too), the defaults
apply unless given again. Services and the admin are not limited.

Give the file to the agent microservice as NATS_CREDS (the SDK's natsCreds option). Run
\`baton nats-config\` first: a folder named by --dir or BATON_NATS_DIR that holds no deployment
(no deployment.json) is refused (exit 2) and nothing is written, since credentials from a new
operator would be trusted by no server. In the default ./var/nats-auth (of the working directory)
a deployment is made, with a warning: npm start and nats-config then configure the server from it.

revoke adds user keys to the BATON account's revocation list: every key the principal was issued
(--project/--agent, --service, --admin; as recorded in users.jsonl, plus the key of its current
file), or the keys given with --user. It signs the account JWT again with the operator key,
rewrites the trust block in <folder>/auth.conf and <folder>/nats-server.conf, and removes the
folder's credentials files that hold a revoked key. Running servers apply it on a configuration
reload (nats-server --signal reload=<pid>, or kill -HUP <pid>; copy auth.conf to every node of a
cluster first): the revoked users' open connections are closed and new ones refused. Check the
server's log (npm start's: var/nats-server.log; revoke names its pid): "Reloaded server
configuration" applied it, "Failed to reload server configuration" applied nothing — restart that
server. A key stays revoked; new credentials for the same principal get a new key and connect. A
principal with no known credentials is not_found (exit 1); the folder must hold a deployment.

Options:
  --project <p>     the agent's project        --agent <name>  the agent's name
  --max-payload <size>  an agent's largest message (bytes, or with KiB/MiB; 1 KiB to 64 MiB, or none)
  --max-subs <n>    an agent's most subscriptions (1 to 1000000, or none)
  --rotate          issue, then revoke the principal's earlier keys (issuing only)
  --service <name>  revoke: a service's credentials   --admin  revoke: the admin's
  --user <U…>       revoke: this user public key (repeat for several)
  --dir <folder>    deployment folder (default BATON_NATS_DIR or ./var/nats-auth)
  --json            print the file, principal and permissions as JSON (revoke: what was revoked,
                    { dir, principal, revoked: [{ user, principal, issued_at, revoked_at,
                    already_revoked }], removed_files, auth_conf, server_config, apply,
                    local_server: { pid, log } of npm start's nats-server, or null; a local.json
                    naming a pid where no nats-server runs warns local_server_not_running)
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      {
        project: { type: 'string' },
        agent: { type: 'string' },
        service: { type: 'string' },
        admin: { type: 'boolean' },
        user: { type: 'string', multiple: true },
        rotate: { type: 'boolean' },
        dir: { type: 'string' },
        json: { type: 'boolean' },
        'max-payload': { type: 'string' },
        'max-subs': { type: 'string' },
      },
      { min: 1, max: 2, names: ['what to do: agent, service or admin (issue), or revoke'] },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    if (args.positionals[0] === 'revoke') return revoke(args, ctx);
    for (const option of ['service', 'admin', 'user'] as const) {
      if (args.values[option] !== undefined) throw new UsageError(`--${option} is for baton creds revoke`);
    }
    const principal = principalOf(args.positionals[0] ?? '', args);
    const limits = agentLimits(args, principal);
    const deployment = open(ctx, str(args, 'dir'), false);
    const earlier = usersOfPrincipal(deployment, principal).filter((user) => user.revokedAt === null);
    const issued = issueCreds(deployment, principal, new Date(), limits);
    const rotated =
      flag(args, 'rotate') && earlier.length > 0
        ? revokeUsers(
            deployment,
            earlier.map((user) => user.user),
          )
        : null;
    const stillValid = flag(args, 'rotate') ? [] : earlier.map((user) => user.user);
    if (rotated !== null) warnUnchangedServerConfig(ctx, rotated);
    const local = rotated !== null ? localServer(ctx, deployment.dir) : null;
    if (stillValid.length > 0) {
      ctx.warn(
        CliWarningCode.earlierCredsValid,
        `the earlier credentials of ${describePrincipal(principal)} stay valid until revoked (user ${stillValid.join(', ')}): revoke them with baton creds revoke --user <key>, or issue with --rotate next time`,
      );
    }
    if (flag(args, 'json')) {
      const permissions = permissionsFor(deployment.prefix, principal);
      const rotation =
        rotated !== null
          ? { revoked: rotated.revoked.map(revokedJson), auth_conf: rotated.authConf, server_config: rotated.serverConfig, apply: APPLY, local_server: local }
          : {};
      ctx.io.stdout.write(
        `${JSON.stringify({ principal, name: credsName(principal), file: issued.file, user: issued.userPublicKey, permissions, limits: issued.limits, still_valid: stillValid, ...rotation }, null, 2)}\n`,
      );
      return ExitCode.ok;
    }
    ctx.io.stdout.write(`${describePrincipal(principal)}: ${issued.file}\n  user ${issued.userPublicKey}; give it to the process as NATS_CREDS\n`);
    if (principal.kind === 'agent') {
      const { payload, subs } = issued.limits;
      ctx.io.stdout.write(`  limits: largest message ${payload < 0 ? 'no limit' : `${payload} bytes`}, subscriptions ${subs < 0 ? 'no limit' : subs}\n`);
    }
    if (rotated !== null) {
      ctx.io.stdout.write(
        `rotated: the earlier user key(s) of ${describePrincipal(principal)} are revoked\n${revocationProse(rotated, rotatedAfterwards(issued.file), local)}`,
      );
    } else if (flag(args, 'rotate')) {
      ctx.io.stdout.write('rotated: no earlier credentials of it were valid, nothing to revoke\n');
    }
    return ExitCode.ok;
  },
};
