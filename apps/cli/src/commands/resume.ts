import type { Command } from '../command';
import { runProjectControl } from './project-control';

export const resumeCommand: Command = {
  name: 'resume',
  summary: 'kill switch: resume dispatch in a paused project (pending handoffs re-offered)',
  help: `Usage: baton resume <project> [--reason <text>] [--key <idempotency key>] [--json]

Resume a paused project (admin): claims are accepted again and every pending handoff of the
project is offered again, so work continues where it stopped.
`,
  run(argv, ctx) {
    return runProjectControl('resume', this.help, argv, ctx);
  },
};
