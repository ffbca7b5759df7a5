import type { Command } from '../command';
import { runProjectControl } from './project-control';

export const pauseCommand: Command = {
  name: 'pause',
  summary: 'kill switch: pause dispatch in a project (claims refused, offers held)',
  help: `Usage: baton pause <project> --reason <text> [--key <idempotency key>] [--json]

Pause the project (admin): the ledger refuses claims with project_paused and holds offers until
\`baton resume <project>\`. Results already in flight are still recorded; nothing is lost.
`,
  run(argv, ctx) {
    return runProjectControl('pause', this.help, argv, ctx);
  },
};
