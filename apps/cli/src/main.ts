#!/usr/bin/env node
import { API_COMMANDS } from './api';
import { commands } from './commands';
import type { Command } from './command';
import { createCliContext, type CliContext, type CliContextOptions } from './context';
import { EventStoreErrorCode } from '@baton/eventstore';
import { RedisFullError, RedisUnavailableError } from '@baton/projections';
import { CliError, CliErrorCode, eventStoreDetails, ExitCode, exitCodeOf, jetStreamTrouble, jetStreamUnavailable, UsageError, type CliIssue } from './errors';
import { processIo, type CliIo } from './output';

/** The commands under each heading of `baton help`, by name (a test holds every command to one heading). */
export const HELP_GROUPS: ReadonlyArray<readonly [string, readonly string[]]> = [
  ['Operators', ['inbox', 'stops', 'handoff', 'run', 'mesh', 'answer', 'answer-hold', 'decide', 'abandon']],
  ['Admins', ['pause', 'resume', 'project', 'token', 'nats-config', 'creds']],
  ['Agents and integrations', ['start', 'message', 'result', 'publish-definition', 'validate', 'schemas']],
  ['SREs', ['replay', 'verify', 'streams', 'backup', 'restore', 'dlq', 'notice']],
];

const helpLines = (names: readonly string[]) =>
  names
    .map((name) => commands.find((c) => c.name === name))
    .filter((c) => c !== undefined)
    .map((c) => `  ${c.name.padEnd(20)} ${c.summary}`)
    .join('\n');

/** The commands that call the operator API, as a sentence names them: `answer, …, abandon and notice redeliver`. */
const API_COMMAND_LIST = `${API_COMMANDS.slice(0, -1).join(', ')} and ${API_COMMANDS.at(-1)}`;

const GLOBAL_HELP = `Usage: baton <command> [options]      (baton <command> --help for details)

${HELP_GROUPS.map(([heading, names]) => `${heading}:\n${helpLines(names)}`).join('\n\n')}

Environment:
  NATS_URL        NATS with JetStream (default nats://127.0.0.1:4222)
  REDIS_URL       Redis holding the projections and the API tokens (default: local.json's under npm start, else
                  redis://127.0.0.1:6379 — with NATS_URL set and REDIS_URL not, reads warn default_server_read and
                  token writes are refused, default_server_write); a password as redis://:<password>@host:port
  BATON_PREFIX    subject / stream / key prefix of the deployment (default baton)
  BATON_API_URL   the notifier's operator API, which ${API_COMMAND_LIST} call
                  (default: the api local.json names under npm start, else http://127.0.0.1:7100)
  BATON_TOKEN_KEY_FILE
                  the deployment's token key, which token create, revoke and sign-existing sign with (default:
                  the one local.json names under npm start; <deployment folder>/token.key)
  BATON_TOKEN     the operator API token ${API_COMMAND_LIST} send
                  (unset: they send nothing and fail unauthenticated)
  NATS_CREDS      this principal's NATS credentials file (default: the admin's of the local deployment,
                  named by <BATON_NATS_DIR>/local.json when npm start made it)
  BATON_NATS_DIR  the deployment folder baton nats-config and creds write, and local.json's (default var/nats-auth);
                  when it holds a deployment but no local.json (npm start stopped), a command that reads a
                  server at its default warns default_server_read, naming it: it may be another deployment's
  REDIS_COMMAND_TIMEOUT_MS
                  how long one Redis command may wait for its reply (default 1000)
  BATON_PROJECTION_PREFIX
                  the projections' key prefix, when it is not the deployment's (default <BATON_PREFIX>:proj)
  BATON_REBUILD_NICE
                  the CPU niceness replay and verify run at, 0-19 (default 10: the live services come first)
  BATON_OPERATOR  who you are (default $USER): pause, resume and publish-definition record it as on_behalf_of,
                  a claim beside the actor admin (the credentials that sent them); start sends it as
                  started_by; answers, decisions and abandons record the API token's name

Every read command takes --json; with --json stderr holds JSON lines only: a failure's one line,
{"error":{"code","message","issues","details"?}}, its warnings in details.warnings (a refusal's
reply stays on stdout); a command that does not fail writes its warnings, if any, as the one line
{"warnings":[{"code","message","details"?}]}.
Exit codes: 0 ok, 1 failure (verify: a difference), 2 usage, 69 a server did not answer (NATS, JetStream, Redis, the API:
unavailable, jetstream_unavailable), 130 replay or verify stopped by Ctrl-C, SIGTERM or SIGHUP.
`;

/**
 * How long the process may live on after the command has printed its result and closed its
 * connections (see {@link main}).
 */
export const EXIT_GRACE_MS = 500;

/**
 * End the process with `code` once its output is written: checked every {@link EXIT_GRACE_MS} by
 * a timer that does not itself keep the process alive, so a process with nothing left open exits
 * on its own first. Output still queued for a slow reader (a pipe is asynchronous on some systems)
 * is waited for, not cut off; a stream that was closed (EPIPE) has nothing left to wait for.
 */
function exitOnceWritten(code: ExitCode): void {
  const pending = (stream: NodeJS.WriteStream) => !stream.destroyed && stream.writableLength > 0;
  setInterval(() => {
    if (!pending(process.stdout) && !pending(process.stderr)) process.exit(code);
  }, EXIT_GRACE_MS).unref();
}

/**
 * Run `baton <argv>` in-process and resolve with the exit code. Never throws: usage mistakes print
 * the command's help (exit 2), failures print one line (exit 1). With `io` given (tests, callers
 * that want the text) it never exits the process. Without it (bin/baton.js: the process's own
 * streams) the process ends once the command is done, whatever sockets are still open: a peer
 * that accepted a connection and never answered (a NATS_URL port that does not speak NATS)
 * would otherwise keep it alive until the peer hangs up.
 */
export async function main(argv: string[], options: Partial<CliContextOptions> = {}): Promise<ExitCode> {
  const code = await runCommand(argv, options);
  if (options.io === undefined) exitOnceWritten(code);
  return code;
}

async function runCommand(argv: string[], options: Partial<CliContextOptions>): Promise<ExitCode> {
  const io: CliIo = options.io ?? processIo();
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    const topic = name === 'help' ? rest[0] : undefined;
    const command = topic === undefined ? undefined : commands.find((c) => c.name === topic);
    if (topic !== undefined && command === undefined) {
      io.stderr.write(`baton: unknown command "${topic}"\n\n${GLOBAL_HELP}`);
      return ExitCode.usage;
    }
    io.stdout.write(command ? command.help : GLOBAL_HELP);
    return name === undefined ? ExitCode.usage : ExitCode.ok;
  }
  const command = commands.find((c) => c.name === name);
  const json = rest.includes('--json') || rest.includes('--json-page');
  if (!command) {
    const message = `unknown command "${name}"; baton help lists the commands`;
    if (json) io.stderr.write(`${JSON.stringify({ error: { code: CliErrorCode.usage, message, issues: [] } })}\n`);
    else io.stderr.write(`baton: unknown command "${name}"\n\n${GLOBAL_HELP}`);
    return ExitCode.usage;
  }
  const ctx = createCliContext({ ...options, io });
  try {
    return await execute(command, rest, ctx);
  } finally {
    await ctx.close();
  }
}

/**
 * Run `command` and settle its failure as `baton` does: written to stderr (one JSON line with
 * `--json`, carrying the warnings the command kept in `details.warnings`; else prose with the
 * command's usage for a usage error) and turned into its exit code. With `--json` a command that
 * ends without throwing (exit 0, or a verdict such as verify's difference) has the warnings it kept
 * written after its output as one stderr line, `{"warnings":[{ code, message, details? }]}`.
 */
export async function execute(command: Command, argv: string[], ctx: CliContext): Promise<ExitCode> {
  const io = ctx.io;
  const json = argv.includes('--json') || argv.includes('--json-page');
  // With --json, stderr holds JSON lines only: warnings are kept and written here, as JSON.
  ctx.json = json;
  let code: ExitCode;
  try {
    code = await command.run(argv, ctx);
  } catch (error) {
    const failure = failureOf(error);
    const warnings = ctx.takeWarnings();
    if (json && warnings.length > 0) failure.details = { ...failure.details, warnings };
    if (json) io.stderr.write(`${JSON.stringify({ error: failure })}\n`);
    else if (error instanceof UsageError) io.stderr.write(`baton ${command.name}: ${error.message}\n${error.showUsage ? `\n${command.help}` : ''}`);
    else io.stderr.write(`baton ${command.name}: ${failure.message}\n${failure.issues.map((issue) => `  ${issue.path}: ${issue.message}\n`).join('')}`);
    return error instanceof UsageError ? ExitCode.usage : error instanceof CliError ? error.exitCode : exitCodeOf(failure.code);
  }
  const warnings = ctx.takeWarnings();
  if (json && warnings.length > 0) io.stderr.write(`${JSON.stringify({ warnings })}\n`);
  return code;
}

/** What to do about credentials that may not do what a command does. */
const USE_THE_ADMINS = "use the admin's credentials (NATS_CREDS set to the admin's file: `baton creds admin`)";

/** A failure as `--json` writes it (and the prose names): a stable code, the message, the offending fields. */
interface Failure {
  code: string;
  message: string;
  issues: readonly CliIssue[];
  details?: Record<string, unknown>;
}

/**
 * What a command's failure was: a {@link CliError} or usage error as it says; an error of the SDK
 * or the event store (a publish the server refused, a timeout…) with its own `code` — its
 * `permission_denied` (credentials that may not read or publish where the command does: an agent's
 * or a service's) saying what to do, as the CLI's own do; the NATS client's own (a connection closed
 * or lost under the command) `unavailable`; anything else `failed`, named by its class.
 */
export function failureOf(error: unknown): Failure {
  if (error instanceof UsageError)
    return { code: error.typed.code, message: error.message, issues: [], ...(error.typed.details ? { details: error.typed.details } : {}) };
  if (error instanceof CliError)
    return { code: error.code, message: error.message, issues: error.issues, ...(error.details ? { details: error.details } : {}) };
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    if (code === EventStoreErrorCode.permissionDenied) return { code, message: `${error.message}: ${USE_THE_ADMINS}`, issues: [] };
    // The NATS client's own errors (its connection closed or lost under a command, a server that went
    // away): NATS did not answer, which the CLI calls unavailable, as when it cannot connect at all.
    // JetStream answering that it has no leader (a cluster that lost quorum) is not NATS being down.
    if (error.name === 'NatsError' && jetStreamTrouble(error, false) === 'no_leader')
      return failureOf(jetStreamUnavailable(error, 'no_leader', null, 'a JetStream request'));
    if (error.name === 'NatsError' && typeof code === 'string')
      return { code: CliErrorCode.unavailable, message: `NATS: ${error.message} (${code}); is the server up, and NATS_URL right?`, issues: [] };
    // Redis answered and refused a write for being full: said in words and code, not its OOM reply.
    if (RedisFullError.of(error) !== null)
      return {
        code: CliErrorCode.redisFull,
        message:
          'Redis is full (its maxmemory reached under noeviction) and refused the write: what the command was writing there was not written. Make room or raise maxmemory (docs/sre.md, What fills Redis), then run it again',
        issues: [],
      };
    // Redis stopped answering under the command (a command past REDIS_COMMAND_TIMEOUT_MS, the
    // connection lost): unavailable too, saying which setting bounds the wait.
    const redis = RedisUnavailableError.of(error);
    if (redis !== null)
      return {
        code: CliErrorCode.unavailable,
        message: `Redis did not answer: ${redis.message} (a busy Redis may need a longer REDIS_COMMAND_TIMEOUT_MS, default 1000 ms)`,
        issues: [],
      };
    const details = eventStoreDetails(error);
    return typeof code === 'string' && /^[a-z][a-z0-9_]*$/.test(code)
      ? { code, message: error.message, issues: [], ...(details !== undefined ? { details } : {}) }
      : { code: CliErrorCode.failed, message: `${error.name}: ${error.message}`, issues: [] };
  }
  return { code: CliErrorCode.failed, message: String(error), issues: [] };
}

/**
 * `BATON_REBUILD_NICE` when the environment leaves it unset and `baton` runs as its own process:
 * `replay` and `verify` yield the CPU to the live services (`yieldCpuToServices`). Run in another
 * process (tests, a tool embedding the commands) they keep that process's priority.
 */
export const DEFAULT_REBUILD_NICE = '10';

if (require.main === module) {
  main(process.argv.slice(2), { env: { BATON_REBUILD_NICE: DEFAULT_REBUILD_NICE, ...process.env } }).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`baton: ${String(error)}\n`);
      process.exitCode = ExitCode.failure;
    },
  );
}
