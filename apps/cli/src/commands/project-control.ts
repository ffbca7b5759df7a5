import { parseIgnoringUnknownKeys, Principals, ProjectControlReplySchema, ProjectIdSchema, ledgerCommandSubject } from '@baton/contracts';
import type { CliContext } from '../context';
import { parseCommandArgs, str, type ParsedArgs } from '../command';
import { CliError, CliErrorCode, ExitCode, requestError, UsageError } from '../errors';
import { printJson, renderFields } from '../output';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Send `pause` / `resume` for `<project>` to the ledger (request/reply on
 * `<prefix>.cmd.ledger.<project>.op.admin.pause|resume`): the admin connection is admin by its
 * principal, and the body names the operator (`BATON_OPERATOR` or `$USER`) for the record. The
 * idempotency key defaults to one per invocation; pass `--key` to make a retry a no-op.
 */
export async function runProjectControl(name: 'pause' | 'resume', help: string, argv: string[], ctx: CliContext): Promise<ExitCode> {
  const args: ParsedArgs = parseCommandArgs(
    argv,
    { reason: { type: 'string' }, key: { type: 'string' }, json: { type: 'boolean' }, ...(name === 'pause' ? { force: { type: 'boolean' } } : {}) },
    { min: 1, max: 1 },
  );
  if (args.help) {
    ctx.io.stdout.write(help);
    return ExitCode.ok;
  }
  const project = args.positionals[0] as string;
  if (!ProjectIdSchema.safeParse(project).success) throw new UsageError(`"${project}" is not a project key`);
  const reason = str(args, 'reason');
  if (name === 'pause' && !reason) throw new UsageError('--reason is required: a pause says why');
  // Nobody named: the admin connection speaks for itself (the ledger records `admin`).
  const named = ctx.namedOperator();
  const body = {
    ...(named !== undefined ? { actor: named } : {}),
    idempotency_key: str(args, 'key') ?? `${name}-${Date.now()}`,
    ...(reason ? { reason } : {}),
    ...(args.values['force'] === true ? { force: true } : {}),
  };
  const nats = await ctx.nats();
  const subject = ledgerCommandSubject(ctx.config().BATON_PREFIX, project, Principals.operator('admin'), name);
  let raw: Uint8Array;
  try {
    raw = (await nats.connection.request(subject, encoder.encode(JSON.stringify(body)), { timeout: 10_000 })).data;
  } catch (error) {
    throw requestError(error, name, 'ledger', subject, ctx.config().BATON_PREFIX);
  }
  const reply = parseIgnoringUnknownKeys(ProjectControlReplySchema, JSON.parse(decoder.decode(raw)));
  if (!reply.success) throw new CliError(`unexpected reply from the ledger: ${decoder.decode(raw).slice(0, 300)}`, { code: CliErrorCode.badReply });
  if (args.values['json'] === true) printJson(ctx.io, reply.data);
  if (!reply.data.ok) {
    const { code, message, details } = reply.data.error;
    throw new CliError(`the ledger refused ${name}: ${code}: ${message}`, { code, ...(details !== undefined ? { details } : {}) });
  }
  if (args.values['json'] !== true) {
    const p = reply.data.project;
    // A resumed project holds no pause: what it shows is the resume itself (the reason sent with it).
    ctx.io.stdout.write(
      renderFields({
        project: p.project,
        status: p.status,
        pause_id: p.pause_id,
        paused_by: p.paused_by,
        paused_at: p.paused_at,
        reason: name === 'pause' ? p.reason : reason,
        changed: reply.data.events > 0,
      }),
    );
  }
  return ExitCode.ok;
}
