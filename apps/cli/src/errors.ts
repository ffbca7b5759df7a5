import { EventStoreErrorCode, isNoResponders, isPermissionsViolation, isTimeout, jsErrCode, JsErrCode, StreamNotFound } from '@baton/eventstore';
import { redactUrl } from '@baton/platform';
/** Exit codes of the `baton` command. */
export const ExitCode = {
  /** The command did what was asked (for `verify`: the projections match). */
  ok: 0,
  /** The command failed, or (verify) found a difference. */
  failure: 1,
  /** The command line was wrong: unknown command or option, missing argument. */
  usage: 2,
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
 * With `--json` a failure is written to stderr as `{"error":{"code","message","issues"?,"details"?}}`.
 */
export const CliErrorCode = {
  /** Anything without a more precise code. */
  failed: 'failed',
  /** The command line was wrong (exit 2). */
  usage: 'usage',
  /** NATS, Redis, the operator API, the router or the ledger could not be reached or did not answer. */
  unavailable: 'unavailable',
  /**
   * NATS was reached and refused the credentials (NATS_CREDS's file rejected, unusable, expired,
   * or none given to a server that requires them): trying again does not help, other credentials do.
   */
  unauthenticated: 'unauthenticated',
  /** A request that may have been carried out timed out: check before sending it again. */
  outcomeUnknown: 'outcome_unknown',
  /** The run, handoff, mesh, dead letter, token or stream asked for does not exist. */
  notFound: 'not_found',
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
  /** A warning of a definition that compiles (`publish-definition`; `details.diagnostic`). */
  definitionWarning: 'definition_warning',
  /** `replay` / `verify` skipped an event the registry cannot decode. */
  undecodableEvent: 'undecodable_event',
  /** `replay` / `verify` could not lower its CPU priority to `BATON_REBUILD_NICE`; it ran as started. */
  niceRefused: 'nice_refused',
  /** `replay` / `verify` heard Ctrl-C, SIGTERM or SIGHUP: the message says what it does about it. */
  signal: 'signal',
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
    this.exitCode = options?.exitCode ?? ExitCode.failure;
  }
}

/**
 * The CLI's error for a stream it could not read, typed by why: `not_found` when the stream does not
 * exist (another NATS server than the platform's — named in the message and `details.nats_url` —,
 * another `BATON_PREFIX`, or a platform never started), `permission_denied` when the
 * credentials may not read it (an agent's, not the admin's), else `unavailable`.
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
  return new CliError(`cannot read stream ${stream}: ${message}`, { cause: error, code: CliErrorCode.unavailable });
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
