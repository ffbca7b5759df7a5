import type { Command } from '../command';
import { runProjectControl } from './project-control';

export const pauseCommand: Command = {
  name: 'pause',
  summary: 'kill switch: pause dispatch in a project (claims refused, offers held)',
  help: `Usage: baton pause <project> --reason <text> [--key <idempotency key>] [--force] [--json]

Pause the project (admin): the ledger refuses claims with project_paused and holds offers until
\`baton resume <project>\`. Results already in flight are still recorded; nothing is lost.
A project with no published definition is refused (project_unknown: most likely a misspelt key);
--force pauses it anyway, e.g. before it is set up. \`baton project <project>\` shows the state.
The pause is recorded as by the admin connection (paused_by \`admin\`: the credentials that sent it),
on behalf of BATON_OPERATOR, else $USER (on_behalf_of: a claim these credentials make, shown as such).

Options:
  --reason <text>   why (required; recorded with the pause)
  --key <k>         idempotency key (default: a new one, named when the ledger does not answer in
                    time); the same key and reason again changes nothing (changed: false)
  --force           pause a project that has no published definition
  --json            print the ledger's reply as JSON: { ok, project, events } (events 0: nothing
                    changed), or its refusal (ok false, error)
`,
  run(argv, ctx) {
    return runProjectControl('pause', this.help, argv, ctx);
  },
};
