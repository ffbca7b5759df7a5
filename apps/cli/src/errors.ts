import {
  EventStoreErrorCode,
  hasNatsCode,
  isNoResponders,
  isPermissionsViolation,
  isTimeout,
  jsErrCode,
  JsErrCode,
  StorageFull,
  StreamNotFound,
} from '@baton/eventstore';
import { redactUrl } from '@baton/platform';
/** Exit codes of the `baton` command. */
export const ExitCode = {
  /** The command did what was asked (for `verify`: the projections match). */
  ok: 0,
  /** The command failed (a failure of another code than those of {@link ExitCode.unavailable}). */
  failure: 1,
  /** `verify`'s verdict: a projection differs from a fold of the stream, or has none (repair with `replay`). */
  differ: 1,
  /** The command line was wrong: unknown command or option, missing argument. */
  usage: 2,
  /**
   * A server did not answer — NATS, JetStream, Redis, the operator API, the router or the ledger
   * (failure codes `unavailable` and `jetstream_unavailable`), or the NATS connection was lost under
   * the command and no server of NATS_URL took it back: nothing was decided, no verdict; running it
   * again once the server is back may succeed. 69 is EX_UNAVAILABLE, what a service exits with when
   * its NATS connection is closed for good.
   */
  unavailable: 69,
  /** `replay` or `verify` stopped by Ctrl-C, SIGTERM or SIGHUP (128 + SIGINT, as shells report it): nothing was swapped in. */
  interrupted: 130,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** A mistake in the command line or the environment. Printed (with the command's usage unless `showUsage` is false); exit code 2. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly showUsage = true,
    /** With `--json`: the code written (default `usage`), and what a script needs to correct the call. */
    readonly typed: { code: string; details?: Record<string, unknown> } = { code: 'usage' },
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * The codes of the CLI's own failures (a refusal by Baton keeps the code Baton answered with).
 * With `--json` a failure is written to stderr as `{"error":{"code","message","issues","details"?}}`.
 */
export const CliErrorCode = {
  /** Anything without a more precise code. */
  failed: 'failed',
  /** The command line was wrong (exit 2). */
  usage: 'usage',
  /** NATS, Redis, the operator API, the router or the ledger could not be reached or did not answer (exit 69). */
  unavailable: 'unavailable',
  /**
   * NATS answered, JetStream did not (exit 69): a cluster without a JetStream meta leader (it lost
   * quorum, or is electing one), or a server without JetStream (`details.reason`: `no_leader`,
   * `no_answer`, `not_enabled`). NATS_URL and the credentials are right; the nodes are not.
   */
  jetstreamUnavailable: 'jetstream_unavailable',
  /**
   * Redis answered and refused a write because it is full (its `maxmemory` reached under
   * `noeviction`): `token create` / `revoke` / `sign-existing`, `replay`'s new generation. Reads
   * still answer. Not a server down (exit 1, as a full JetStream's `storage_full`).
   */
  redisFull: 'redis_full',
  /**
   * NATS was reached and refused the credentials (NATS_CREDS's file rejected, unusable, expired,
   * or none given to a server that requires them): trying again does not help, other credentials do.
   */
  unauthenticated: 'unauthenticated',
  /** A request that may have been carried out timed out: check before sending it again. */
  outcomeUnknown: 'outcome_unknown',
  /** The run, handoff, mesh, dead letter, token or stream asked for does not exist. */
  notFound: 'not_found',
  /**
   * `dlq show <seq>`: the DLQ stream holds a redrive marker at that sequence, not a dead letter
   * (exit 1; `details.kind` `redrive_marker` or `legacy_redrive_marker`, `details.marks_seq`: the
   * letter it marks, `details.redriven_at`, `target_subject`, `target_seq`, `counts`).
   */
  notADeadLetter: 'not_a_dead_letter',
  /** A file or value given to the command is not what it must be. */
  invalidInput: 'invalid_input',
  /** A YAML definition does not compile (`details.diagnostics`). */
  definitionInvalid: 'definition_invalid',
  /** A service answered with something that is not its reply. */
  badReply: 'bad_reply',
  /** `replay` / `verify` stopped by Ctrl-C, SIGTERM or SIGHUP (exit 130): nothing was swapped in, no verdict. */
  interrupted: 'interrupted',
  /**
   * `replay` would swap in a projection at another version of its definition than the live
   * generation's (this baton and the notifier are of two releases): nothing was rebuilt
   * (`details.projections`: each `{ projection, version, live_version }`).
   */
  projectionVersionMismatch: 'projection_version_mismatch',
  /** `token create --name`: a name Baton's own actors use (baton-*, admin, system…; exit 2, `details.name`). */
  tokenNameReserved: 'token_name_reserved',
  /** `token create --name`: an active token has the name (exit 1, `details.token_ids`); `--rotate` revokes it instead. */
  tokenNameTaken: 'token_name_taken',
  /**
   * `token create`, `revoke`, `sign-existing`: no token key to sign the record with — neither
   * `BATON_TOKEN_KEY_FILE` nor local.json names one (exit 2). Nothing was written.
   */
  tokenKeyMissing: 'token_key_missing',
  /** `token create`, `revoke`, `sign-existing`: the token key file cannot be read, or is too short (exit 2, `details.file`, `details.reason`). Nothing was written. */
  tokenKeyUnreadable: 'token_key_unreadable',
  /**
   * A command that writes to Redis (`token create`, `revoke`, `sign-existing`) would write at the
   * built-in default, which may be another deployment's (the cases `default_server_read` warns of
   * for reads; exit 2, the same `details`). Nothing was written.
   */
  defaultServerWrite: 'default_server_write',
  /**
   * `token revoke`, `token create --rotate`, `sign-existing`: the deployment's token revocation log
   * (JetStream, `<PREFIX>_TOKEN_REVOCATIONS`) could not be read or appended to (exit 1,
   * `details.reason`: stream_missing, permission_denied, unavailable, too_many_unsigned). The
   * revocation is recorded there before Redis is written, so nothing was written to Redis.
   */
  tokenRevocationUnrecorded: 'token_revocation_unrecorded',
  /**
   * `nats-config --max-store`: the size asked is below what the account's streams need — their
   * `max_bytes` × replicas reserved (the DLQ's, the inbox's) plus what the streams without a limit
   * store (the events): after a restart nats-server would not load a stream and the services would
   * not start (exit 1; `details`: asked, reserved, stored, required, source, streams, unchecked).
   * Nothing was written; `--allow-below-reserved` writes it anyway.
   */
  maxStoreBelowReserved: 'max_store_below_reserved',
  /** `backup --out`: the folder exists and is not empty (or is not a folder); nothing was written (`details.dir`). */
  backupDirNotEmpty: 'backup_dir_not_empty',
  /** `backup`: JetStream refused or broke off a stream's snapshot (`details.stream`, `details.js_err_code`); the files written were removed. */
  snapshotFailed: 'snapshot_failed',
  /**
   * `restore --from`: the backup's manifest is missing or unreadable, or a file is missing or not the
   * size or sha256 the manifest says (`details.file`, `details.reason`); nothing was restored.
   */
  backupCorrupt: 'backup_corrupt',
  /** `restore`: the backup is of another `BATON_PREFIX` than the CLI's (`details.backup_prefix`, `details.prefix`); nothing was restored. */
  backupPrefixMismatch: 'backup_prefix_mismatch',
  /** `restore`: streams the backup holds exist already in the target NATS (`details.streams`); nothing was restored. */
  streamExists: 'stream_exists',
  /** `restore`: JetStream refused or broke off a stream's restore (`details.stream`, `details.restored`: the streams restored before it). */
  restoreFailed: 'restore_failed',
  /**
   * `restore`: a restored stream's state is not the manifest's (messages, first_seq, last_seq;
   * `details.stream`, `expected`, `actual`, `restored`).
   */
  restoreMismatch: 'restore_mismatch',
} as const;

/**
 * The codes of the CLI's warnings: something a person should know that does not stop the command
 * (a fallback taken, a setting that did not apply). Without `--json` a warning is a line of prose
 * on stderr; with `--json` it is `{ code, message, details? }`, in the one stderr line
 * `{"warnings":[…]}` a command that ends without a failure writes, or in a failure's
 * `details.warnings` (see `CliContext.warn`).
 */
export const CliWarningCode = {
  /** The NATS credentials carry `allow_responses`, as an earlier Baton issued the admin's: reads slow down and stall the services' appends. */
  credsAllowResponses: 'creds_allow_responses',
  /** Redis could not be reached: `run` / `handoff` folded the view from the events stream. */
  projectionsUnavailable: 'projections_unavailable',
  /** The events stream could not be read: `run` / `handoff` show the projected timeline. */
  eventsUnavailable: 'events_unavailable',
  /** An empty `inbox` / `stops` whose projection has no live generation under the keyspace read (never built, or another prefix). */
  projectionNotBuilt: 'projection_not_built',
  /** `start` / `result`: the stream already held a message under this id; nothing new was stored. */
  duplicateMessage: 'duplicate_message',
  /** `dlq list` / `redrive --source` named a source that matched nothing and that Baton does not write (a typo?). */
  unknownDlqSource: 'unknown_dlq_source',
  /**
   * `restore`: a stream came back with another creation time than the backed-up one (its server had
   * restarted since the stream was made; `details.streams`); for the events stream, what recorded
   * the old one was moved to the new one where it holds the same history, the rest is reread or
   * rebuilt (`details.watchdog_snapshot`, `details.projections`).
   */
  streamIdentityChanged: 'stream_identity_changed',
  /**
   * `BATON_PREFIX` is set and differs from the prefix of the platform npm start runs, whose
   * local.json the CLI connects through (NATS_URL unset): the CLI uses `BATON_PREFIX`, whose
   * streams that platform may not have (`details`: baton_prefix, local_prefix, local_json).
   */
  prefixMismatch: 'prefix_mismatch',
  /** A warning of a definition that compiles (`publish-definition`; `details.diagnostic`). */
  definitionWarning: 'definition_warning',
  /** `replay` / `verify` skipped an event the registry cannot decode. */
  undecodableEvent: 'undecodable_event',
  /** `replay` / `verify` could not lower its CPU priority to `BATON_REBUILD_NICE`; it ran as started. */
  niceRefused: 'nice_refused',
  /** `replay` / `verify` heard Ctrl-C, SIGTERM or SIGHUP: the message says what it does about it. */
  signal: 'signal',
  /**
   * `replay --allow-version-change` of a projection another release built while a notifier is
   * applying the projections (its consumer has pull requests waiting): a notifier of that release
   * rebuilds it back at its next check (`details`: projections, waiting).
   */
  notifierRunning: 'notifier_running',
  /** `replay`: projections were built from another events stream (it was recreated): they are replaced. */
  streamRecreated: 'stream_recreated',
  /** `replay`: deleting a swapped-out generation failed (its keys stay behind). */
  cleanupFailed: 'cleanup_failed',
  /** `creds` found no deployment in the default folder and made a new one. */
  deploymentCreated: 'deployment_created',
  /** `nats-config` changed the listen, http or store_dir of nats-server.conf: a server running from it must be restarted, not reloaded. */
  restartRequired: 'restart_required',
  /** `nats-config` could not read a listen, http or store_dir of the nats-server.conf it replaced: the default was written. */
  serverConfigUnread: 'server_config_unread',
  /** `creds … --rotate` / `creds revoke`: the nats-server.conf holds no trust block Baton wrote and was not changed. */
  serverConfigNotUpdated: 'server_config_not_updated',
  /** `creds` issued new credentials without `--rotate`: the principal's earlier ones stay valid. */
  earlierCredsValid: 'earlier_creds_valid',
  /** `creds revoke`, `creds … --rotate`: local.json names npm start's nats-server at a pid where none runs (`details`: pid, log). */
  localServerNotRunning: 'local_server_not_running',
  /**
   * The CLI read NATS, Redis or the operator API at its built-in default while the deployment folder
   * holds a deployment whose local.json is gone (npm start is not running): the default may be
   * another deployment's server (`details`: server, url, setting, deployment_dir, found, local_json).
   */
  defaultServerRead: 'default_server_read',
  /**
   * `token list`: active tokens share a name (any case), made before names were checked: the name is
   * all a recorded answer says of who answered, so their answers read as one person's
   * (`details`: name, token_ids).
   */
  tokenNameShared: 'token_name_shared',
  /**
   * `nats-config --max-store ... --allow-below-reserved`: the size written is below what the
   * account's streams need (`details` as the failure `max_store_below_reserved`'s).
   */
  maxStoreBelowReserved: 'max_store_below_reserved',
  /**
   * `nats-config --max-store`: the deployment's nats-server could not be read (not running, or
   * refusing the folder's admin credentials), so the size was checked against the limits the
   * services' settings give Baton's streams only (`details`: server_url, reason, unchecked).
   */
  maxStoreUnverified: 'max_store_unverified',
} as const;
export type CliWarningCode = (typeof CliWarningCode)[keyof typeof CliWarningCode];

/** A warning as `--json` writes it: a stable {@link CliWarningCode}, the text a person reads, and (for some codes) what a script needs. */
export interface CliWarning {
  code: CliWarningCode;
  message: string;
  details?: Record<string, unknown>;
}

/** One offending field, as Baton's rejections name them. */
export interface CliIssue {
  path: string;
  message: string;
}

/**
 * A failure the user can act on (server unreachable, not found, refused). Printed as is (with its
 * issues); exit code 1. `code` is stable: a {@link CliErrorCode}, or the code Baton refused with.
 */
export class CliError extends Error {
  readonly code: string;
  readonly issues: readonly CliIssue[];
  readonly details: Record<string, unknown> | undefined;
  /** The exit code (default 1). */
  readonly exitCode: ExitCode;
  constructor(
    message: string,
    options?: { cause?: unknown; code?: string; issues?: readonly CliIssue[]; details?: Record<string, unknown>; exitCode?: ExitCode },
  ) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'CliError';
    this.code = options?.code ?? CliErrorCode.failed;
    this.issues = options?.issues ?? [];
    this.details = options?.details;
    this.exitCode = options?.exitCode ?? exitCodeOf(this.code);
  }
}

/** The exit code of a failure of `code` that says nothing else: {@link ExitCode.unavailable} for a server that did not answer, else 1. */
export function exitCodeOf(code: string): ExitCode {
  return code === CliErrorCode.unavailable || code === CliErrorCode.jetstreamUnavailable ? ExitCode.unavailable : ExitCode.failure;
}

/**
 * The typed fields an error of the SDK or the event store carries besides its code, as a CLI
 * failure's `details` (docs/errors.md): `storage_full`'s `limit` (`stream_bytes`,
 * `stream_messages`, `account_storage`) and `subject`. Undefined for an error without any.
 */
export function eventStoreDetails(error: unknown): Record<string, unknown> | undefined {
  if (error instanceof StorageFull) return { limit: error.limit, subject: error.subject };
  return undefined;
}

/** JetStream's API error "JetStream system temporarily unavailable" (`JSClusterNotAvailErr`): no meta leader, or no stream leader. */
const JS_CLUSTER_NOT_AVAILABLE = 10008;

/**
 * Why JetStream did not answer on a NATS connection that is up, from a failure of the client
 * (or what it wraps): `no_leader` — the server answered "JetStream system temporarily unavailable"
 * (10008): a cluster without a meta leader (quorum lost) or a stream without one; `no_answer` — a
 * JetStream request timed out, as every one does on a cluster that has just lost its meta leader,
 * for seconds before the 10008 answers begin; `not_enabled` — nothing serves the JetStream API
 * (no responders): the server runs without JetStream, or the account has none. Null: not these.
 * `timeouts` says whether a timeout counts (only where every request was JetStream's).
 */
export function jetStreamTrouble(error: unknown, timeouts: boolean): 'no_leader' | 'no_answer' | 'not_enabled' | null {
  const chain: unknown[] = [];
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 6; e = (e as { cause?: unknown }).cause, depth++) chain.push(e);
  if (chain.some((e) => jsErrCode(e) === JS_CLUSTER_NOT_AVAILABLE)) return 'no_leader';
  if (chain.some((e) => jsErrCode(e) !== undefined)) return null;
  if (chain.some((e) => isNoResponders(e))) return 'not_enabled';
  if (timeouts && chain.some((e) => isTimeout(e))) return 'no_answer';
  return null;
}

/**
 * The CLI's error for JetStream not answering on NATS at `url` ({@link jetStreamTrouble}'s
 * `reason`): `jetstream_unavailable`, exit 69, saying what it means for the cluster instead of
 * sending the SRE to NATS_URL, which was reached (`details.nats_url`; null when not known here).
 * `what` names the request that failed.
 */
export function jetStreamUnavailable(error: unknown, reason: 'no_leader' | 'no_answer' | 'not_enabled', url: string | null, what: string): CliError {
  const natsUrl = url === null ? null : redactUrl(url);
  const said = (error as Error).message;
  const why =
    reason === 'no_leader'
      ? `JetStream has no leader ("JetStream system temporarily unavailable"): the cluster lost quorum (fewer than half of its nodes up, or they cannot reach one another) or is electing a leader; nothing can be appended or read until it has one`
      : reason === 'no_answer'
        ? `JetStream did not answer in time (${said}): a cluster that lost its JetStream meta leader (quorum lost, or an election under way) answers nothing for a while, and a server too busy to answer looks the same`
        : `nothing serves the JetStream API there (${said}: no responders): the server runs without JetStream (nats-server -js, or a jetstream block in its configuration), or the account has none`;
  return new CliError(
    `NATS${natsUrl === null ? '' : ` at ${natsUrl}`} answered, but ${what} failed: ${why}. NATS_URL and the credentials are right; look at the nats-server nodes (their logs, \`/jsz\` on the monitoring port) and run it again once JetStream answers`,
    { cause: error, code: CliErrorCode.jetstreamUnavailable, details: { nats_url: natsUrl, reason } },
  );
}

/**
 * The CLI's error for a failure of NATS under a command that read or asked JetStream (`what`):
 * `jetstream_unavailable` when JetStream did not answer ({@link jetStreamTrouble}, a timeout
 * included), `unavailable` when the connection closed for good under it — every server of
 * NATS_URL gone for the reconnect attempts the CLI makes — both exit 69; null for any other
 * failure, which keeps its own code.
 */
export function natsReadFailure(error: unknown, url: string, what: string): CliError | null {
  if (error instanceof CliError) return null;
  // Closed first: requests that timed out while the client was still redialling are not JetStream's doing.
  if (hasNatsCode(error, 'CONNECTION_CLOSED') || hasNatsCode(error, EventStoreErrorCode.connectionClosed)) {
    return new CliError(
      `${what} failed: the connection to NATS closed under the command (${(error as Error).message}) and no server of NATS_URL (${redactUrl(url)}) took it back: is NATS up? Run it again once it is`,
      { cause: error, code: CliErrorCode.unavailable, details: { nats_url: redactUrl(url) } },
    );
  }
  const trouble = jetStreamTrouble(error, true);
  return trouble === null ? null : jetStreamUnavailable(error, trouble, url, what);
}

/**
 * The CLI's error for a stream it could not read, typed by why: `not_found` when the stream does not
 * exist (another NATS server than the platform's — named in the message and `details.nats_url` —,
 * another `BATON_PREFIX`, or a platform never started), `permission_denied` when the
 * credentials may not read it (an agent's, not the admin's), `jetstream_unavailable` when JetStream
 * did not answer (no leader, a timeout: {@link natsReadFailure}), else `unavailable`.
 */
export function streamReadError(error: unknown, stream: string, prefix: string, url: string): CliError {
  const natsUrl = redactUrl(url);
  const message = (error as Error).message;
  if (error instanceof StreamNotFound || jsErrCode(error) === JsErrCode.streamNotFound)
    return new CliError(
      `no stream ${stream} on NATS at ${natsUrl}: is this the platform's NATS, is BATON_PREFIX=${prefix} right, and was the platform started?`,
      {
        cause: error,
        code: CliErrorCode.notFound,
        details: { stream, prefix, nats_url: natsUrl },
      },
    );
  if (isPermissionsViolation(error))
    return new CliError(`these credentials may not read stream ${stream} (${message}): use the admin's`, {
      cause: error,
      code: EventStoreErrorCode.permissionDenied,
    });
  return (
    natsReadFailure(error, url, `reading stream ${stream}`) ??
    new CliError(`cannot read stream ${stream}: ${message}`, { cause: error, code: CliErrorCode.unavailable })
  );
}

/**
 * The CLI's error for a request to a service (`what` it asked, `service` that serves `subject`)
 * that got no reply, typed by why: `permission_denied` when the credentials may not publish there
 * (an agent's or a service's, not the admin's), `unavailable` when nobody serves the subject,
 * `outcome_unknown` when the request went out and no answer came in time (it may have been
 * applied: look before sending it again), else `unavailable`.
 */
export function requestError(error: unknown, what: string, service: string, subject: string, prefix: string): CliError {
  const message = (error as Error).message;
  if (isPermissionsViolation(error))
    return new CliError(`${what} failed: these credentials may not publish to ${subject}: use the admin's`, {
      cause: error,
      code: EventStoreErrorCode.permissionDenied,
    });
  if (isNoResponders(error))
    return new CliError(`${what} failed: no ${service} is listening on ${subject} (is the ${service} running with BATON_PREFIX=${prefix}?)`, {
      cause: error,
      code: CliErrorCode.unavailable,
    });
  if (isTimeout(error))
    return new CliError(`${what}: no answer from the ${service} on ${subject} in time; it may have been applied: look before sending it again`, {
      cause: error,
      code: CliErrorCode.outcomeUnknown,
    });
  return new CliError(`${what} failed: ${message}`, { cause: error, code: CliErrorCode.unavailable });
}
