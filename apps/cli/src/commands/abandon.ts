import { randomUUID } from 'node:crypto';
import { hasVisibleText } from '@baton/contracts';
import { postHandoffAction } from '../api';
import type { Command } from '../command';
import { parseCommandArgs, str } from '../command';
import { ExitCode, UsageError } from '../errors';
import { projectArg } from '../timeline';

export const abandonCommand: Command = {
  name: 'abandon',
  summary: 'withdraw an open handoff (pending, claimed or returned), saying why',
  help: `Usage: baton abandon <handoff-id> --reason <text> [--project p] [--key k] [--json]

Withdraw a handoff that is still open through the operator API (POST
/v1/projects/<p>/handoffs/<id>/abandon at BATON_API_URL): the ledger records it abandoned by the
token's name, with the reason; it is not worked, requeued or offered again. A workflow run waiting
on it sees handoff_abandoned (a returnable child's route applies its ON_FAILURE; the handoff of
the run's current agent holds the run for a person). The ledger decides at once: exit 0 when the
abandon was applied, exit 1 with the refusal's code when it was refused (handoff_not_open: it had
ended already). An abandon sent again with the same --key and reason changes nothing: it says
already abandoned (--json: events 0). Handoff ids are unique only within a project: without --project the id must be
held by one of the token's projects only (otherwise a usage error names them).

Options:
  --reason <text>     why it is withdrawn (required)
  --project <p>       the handoff's project (required when several projects hold <handoff-id>)
  --key <k>           idempotency key (default: a new one, named when the API does not answer in
                      time; re-use it with the same reason to retry safely)
  --json              print the API's reply as JSON: { project, outcome, handoff, events } (events
                      0: this key had been applied before)
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      { reason: { type: 'string' }, key: { type: 'string' }, project: { type: 'string' }, json: { type: 'boolean' } },
      { min: 1, max: 1, names: ['<handoff-id>'] },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const [handoffId] = args.positionals as [string];
    const reason = str(args, 'reason');
    if (reason === undefined || !hasVisibleText(reason)) throw new UsageError('--reason is required: an abandon says why');
    const given = str(args, 'project');
    const project = given !== undefined ? projectArg(given) : undefined;
    const key = str(args, 'key') ?? `cli-${randomUUID()}`;
    const json = args.values['json'] === true;
    const acted = await postHandoffAction(ctx, {
      handoffId,
      project,
      action: 'abandon',
      body: { reason },
      key,
      json,
      refused: 'the abandon was refused',
      unsent: 'the abandon was not sent',
    });
    // No event stored: this key's abandon had been applied before (a retry), as pause says `changed: false`.
    if (!json)
      ctx.io.stdout.write(
        acted.events > 0
          ? `abandoned: ${handoffId} (project ${acted.handoff.project})\n`
          : `already abandoned: ${handoffId} (project ${acted.handoff.project}): this key (${key}) was applied before; nothing new was done\n`,
      );
    return ExitCode.ok;
  },
};
