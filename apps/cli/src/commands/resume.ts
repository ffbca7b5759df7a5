import type { Command } from '../command';
import { runProjectControl } from './project-control';

export const resumeCommand: Command = {
  name: 'resume',
  summary: 'kill switch: resume dispatch in a paused project (pending handoffs re-offered)',
  help: `Usage: baton resume <project> [--reason <text>] [--key <idempotency key>] [--json]

Resume a paused project (admin): claims are accepted again and every pending handoff of the
project is offered again, so work continues where it stopped. The resume is recorded as by the
admin connection (resumed_by \`admin\`: the credentials that sent it), on behalf of BATON_OPERATOR,
else $USER (on_behalf_of: a claim these credentials make, shown as such).

Options:
  --reason <text>   why (optional; recorded with the resume)
  --key <k>         idempotency key (default: a new one, named when the ledger does not answer in
                    time); the same key again changes nothing (changed: false)
  --json            print the ledger's reply as JSON: { ok, project, events } (events 0: nothing
                    changed), or its refusal (ok false, error)
`,
  run(argv, ctx) {
    return runProjectControl('resume', this.help, argv, ctx);
  },
};
