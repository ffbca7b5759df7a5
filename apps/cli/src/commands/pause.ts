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
`,
  run(argv, ctx) {
    return runProjectControl('pause', this.help, argv, ctx);
  },
};
