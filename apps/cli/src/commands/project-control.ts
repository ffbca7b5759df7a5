import { LedgerErrorCode, Principals, ProjectIdSchema, ledgerCommandSubject } from '@baton/contracts';
import { LedgerClient } from '@baton/eventstore';
import type { CliContext } from '../context';
import { parseCommandArgs, str, type ParsedArgs } from '../command';
import { CliError, CliErrorCode, ExitCode, UsageError } from '../errors';
import { printJson, renderFields } from '../output';
import { onBehalfOfText } from './project';

/**
 * Send `pause` / `resume` for `<project>` to the ledger through the `LedgerClient` (request/reply on
 * `<prefix>.cmd.ledger.<project>.op.admin.pause|resume`, two attempts of 5 s with the same body):
 * the admin connection is admin by its principal and is the actor the ledger records (`admin`); the
 * client names the operator (`BATON_OPERATOR` or `$USER`), whom the ledger records beside it as
 * `on_behalf_of` — a claim, never the actor. The idempotency key defaults to one per invocation;
 * pass `--key` to make a retry a no-op.
 */
export async function runProjectControl(name: 'pause' | 'resume', help: string, argv: string[], ctx: CliContext): Promise<ExitCode> {
  const args: ParsedArgs = parseCommandArgs(
    argv,
    { reason: { type: 'string' }, key: { type: 'string' }, json: { type: 'boolean' }, ...(name === 'pause' ? { force: { type: 'boolean' } } : {}) },
    { min: 1, max: 1, names: ['<project>'] },
  );
  if (args.help) {
    ctx.io.stdout.write(help);
    return ExitCode.ok;
  }
  const project = args.positionals[0] as string;
  if (!ProjectIdSchema.safeParse(project).success) throw new UsageError(`"${project}" is not a project key`);
  const reason = str(args, 'reason');
  if (name === 'pause' && !reason) throw new UsageError('--reason is required: a pause says why');
  const key = str(args, 'key') ?? `${name}-${Date.now()}`;
  // The ledger records `admin` as the actor either way; whom this names is `on_behalf_of` (a claim).
  const named = ctx.namedOperator();
  const prefix = ctx.config().BATON_PREFIX;
  const subject = ledgerCommandSubject(prefix, project, Principals.operator('admin'), name);
  // The one client of the ledger: a retry sends the same body (the same key), so it is applied once.
  const ledger = new LedgerClient(await ctx.nats(), prefix, {
    as: Principals.operator('admin'),
    ...(named !== undefined ? { operator: { name: named } } : {}),
    timeoutMs: 5_000,
    attempts: 2,
  });
  const reply =
    name === 'pause'
      ? await ledger.pause(project, { idempotency_key: key, reason: reason!, ...(args.values['force'] === true ? { force: true } : {}) })
      : await ledger.resume(project, { idempotency_key: key, ...(reason ? { reason } : {}) });
  // --json prints the ledger's reply, a refusal too (stderr then has the error); a failure on the
  // client's side (no answer, nobody listening, not permitted) is no reply and prints nothing.
  const clientSide = !reply.ok && CLIENT_SIDE.has(reply.error.code);
  if (args.values['json'] === true && !clientSide) printJson(ctx.io, reply);
  if (!reply.ok) throw refusal(name, subject, prefix, key, str(args, 'key') === undefined, reply.error);
  if (args.values['json'] !== true) {
    const p = reply.project;
    // A resumed project holds no pause: what it shows is the resume itself (the reason sent with it).
    ctx.io.stdout.write(
      renderFields({
        project: p.project,
        status: p.status,
        pause_id: p.pause_id,
        paused_by: p.paused_by,
        on_behalf_of: onBehalfOfText(p.on_behalf_of),
        paused_at: p.paused_at,
        reason: name === 'pause' ? p.reason : reason,
        changed: reply.events > 0,
      }),
    );
  }
  return ExitCode.ok;
}

const CLIENT_SIDE: ReadonlySet<string> = new Set([
  LedgerErrorCode.timeout,
  LedgerErrorCode.noResponders,
  LedgerErrorCode.permissionDenied,
  LedgerErrorCode.badReply,
]);

/**
 * The CLI error for a `pause` / `resume` the ledger did not carry out: no answer after every
 * attempt is `outcome_unknown` (it may have been applied; the key it sent makes a retry safe, so the
 * error names it when the CLI made it up), nobody listening `unavailable`, credentials that may not
 * publish there `permission_denied`; a refusal keeps the ledger's code, message and details.
 */
function refusal(
  name: 'pause' | 'resume',
  subject: string,
  prefix: string,
  key: string,
  generatedKey: boolean,
  error: { code: string; message: string; details?: Record<string, unknown> | undefined },
): CliError {
  switch (error.code) {
    case LedgerErrorCode.timeout: {
      const safely = ` (sending it again with --key ${key} is safe: it is carried out once)`;
      return new CliError(`${name}: no answer from the ledger on ${subject} in time; it may have been applied: look before sending it again${safely}`, {
        code: CliErrorCode.outcomeUnknown,
        ...(generatedKey ? { details: { idempotency_key: key } } : {}),
      });
    }
    case LedgerErrorCode.noResponders:
      return new CliError(`${name} failed: no ledger is listening on ${subject} (is the ledger running with BATON_PREFIX=${prefix}?)`, {
        code: CliErrorCode.unavailable,
      });
    case LedgerErrorCode.permissionDenied:
      return new CliError(`${name} failed: these credentials may not publish to ${subject}: use the admin's`, { code: LedgerErrorCode.permissionDenied });
    default:
      return new CliError(`the ledger refused ${name}: ${error.code}: ${error.message}`, {
        code: error.code,
        ...(error.details !== undefined ? { details: error.details } : {}),
      });
  }
}
