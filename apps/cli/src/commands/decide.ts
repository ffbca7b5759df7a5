import { randomUUID } from 'node:crypto';
import { hasVisibleText } from '@baton/contracts';
import { postHandoffAction } from '../api';
import type { Command } from '../command';
import { parseCommandArgs, str } from '../command';
import { ExitCode, UsageError } from '../errors';
import { idFromArgument } from '../inbox-item';
import { projectArg } from '../timeline';

export const decideCommand: Command = {
  name: 'decide',
  summary: 'accept a completion handback, or send it back for rework',
  help: `Usage: baton decide <handoff-id> accept|rework [--project p] [--note text] [--key k] [--json]

Decide a completion handback through the operator API (POST /v1/projects/<p>/handoffs/<id>/decision
at BATON_API_URL). accept completes the parent handoff; rework sends it back to pending with the
note (a rework needs a note saying what to change). The ledger decides at once: exit 0 when the
decision was applied, exit 1 with the refusal's code when it was refused (e.g. another operator
decided the handback first); sent again with the same --key it changes nothing and says already
(--json: events 0). Handoff ids are unique only within a project:
without --project the id must be held by one of the token's projects only (otherwise a usage error
names them). <handoff-id> is the handback's handoff id, or the inbox item id baton inbox prints
(handback:<project>:<handoff>), which names the project too; another kind's item id (stop:…,
hold:…, escalation:…) is a usage error (exit 2) naming what answers it.

Options:
  --project <p>       the handback's project (required when several projects hold <handoff-id>)
  --note <text>       the note (required for rework)
  --key <k>           idempotency key (default: a new one, named when the API does not answer in
                      time; re-use it to retry safely)
  --json              print the API's reply as JSON: { project, outcome, handoff, events } (events
                      0: this key had been applied before)
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      { note: { type: 'string' }, key: { type: 'string' }, project: { type: 'string' }, json: { type: 'boolean' } },
      { min: 2, max: 2, names: ['<handoff-id>', 'the decision, accept or rework'] },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const [argument, decision] = args.positionals as [string, string];
    if (decision !== 'accept' && decision !== 'rework') throw new UsageError(`the decision is accept or rework, got "${decision}"`);
    const note = str(args, 'note');
    if (decision === 'rework' && (note === undefined || !hasVisibleText(note))) throw new UsageError('a rework needs --note saying what to change');
    const given = str(args, 'project');
    // The inbox item id `baton inbox` prints (handback:<project>:<handoff>) names the handoff and its
    // project; another kind's item id (a stop's, a hold's) is a usage error naming its command.
    const named = idFromArgument(argument, 'handback', 'a handback', given !== undefined ? projectArg(given) : undefined);
    const handoffId = named.id;
    const project = named.project;
    const key = str(args, 'key') ?? `cli-${randomUUID()}`;
    const json = args.values['json'] === true;
    const acted = await postHandoffAction(ctx, {
      handoffId,
      project,
      action: 'decision',
      body: { decision, ...(note !== undefined ? { note } : {}) },
      key,
      json,
      refused: 'the decision was refused',
      unsent: 'the decision was not sent',
    });
    const done = `${decision === 'accept' ? 'accepted' : 'sent back for rework'}: ${handoffId} (project ${acted.handoff.project})`;
    // No event stored: this key's decision had been applied before (a retry).
    if (!json) ctx.io.stdout.write(acted.events > 0 ? `${done}\n` : `already ${done}: this key (${key}) was applied before; nothing new was done\n`);
    return ExitCode.ok;
  },
};
