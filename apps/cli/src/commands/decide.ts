import { randomUUID } from 'node:crypto';
import { apiErrorText, callApi } from '../api';
import type { Command } from '../command';
import { parseCommandArgs, str } from '../command';
import { ExitCode, UsageError } from '../errors';
import { printJson } from '../output';

export const decideCommand: Command = {
  name: 'decide',
  summary: 'accept a completion handback, or send it back for rework',
  help: `Usage: baton decide <handoff-id> accept|rework [--note text] [--json]

Decide a completion handback through the operator API (POST /v1/handoffs/<id>/decision at
BATON_API_URL). accept completes the parent handoff; rework sends it back to pending with the note
(a rework needs a note saying what to change).

Options:
  --note <text>       the note (required for rework)
  --key <k>           idempotency key (default: a new one; re-use it to retry safely)
  --json              print the API's reply as JSON
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { note: { type: 'string' }, key: { type: 'string' }, json: { type: 'boolean' } }, { min: 2, max: 2 });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const [handoffId, decision] = args.positionals as [string, string];
    if (decision !== 'accept' && decision !== 'rework') throw new UsageError(`the decision is accept or rework, got "${decision}"`);
    const note = str(args, 'note');
    if (decision === 'rework' && (note === undefined || note.trim() === '')) throw new UsageError('a rework needs --note saying what to change');
    const reply = await callApi(ctx, 'POST', `/v1/handoffs/${encodeURIComponent(handoffId)}/decision`, {
      decision,
      ...(note !== undefined ? { note } : {}),
      idempotency_key: str(args, 'key') ?? `cli-${randomUUID()}`,
      actor: ctx.operator(),
    });
    if (args.values['json'] === true) printJson(ctx.io, reply.body);
    if (!reply.ok) {
      ctx.io.stderr.write(`baton: the decision was refused: ${apiErrorText(reply)}\n`);
      return ExitCode.failure;
    }
    if (args.values['json'] !== true) ctx.io.stdout.write(`${decision === 'accept' ? 'accepted' : 'sent back for rework'}: ${handoffId}\n`);
    return ExitCode.ok;
  },
};
