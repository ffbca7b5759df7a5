import { randomUUID } from 'node:crypto';
import type { Command } from '../command';
import { parseCommandArgs, required, str } from '../command';
import { ExitCode } from '../errors';
import { publishAndReport } from './publishing';

export const messageCommand: Command = {
  name: 'message',
  summary: "send a customer's message to a conversation run",
  help: `Usage: baton message <workflow_run_id> --project <p> --text <text> [--id <message id>] [--from <who>] [--json]

Publish a customer message (SessionMessage, docs/schemas) to <prefix>.in.<project>.message with
Nats-Msg-Id = message:<project>:<workflow_run_id>/<message_id>. The router records it on the run and evaluates the active agent's
routes before any model runs. While an agent is still working the message is queued and delivered
when the run next waits for the customer; a message the run refuses (the run is held, stopped or
has ended, or 20 are already queued) is recorded on the run as run.result_rejected — see it with
\`baton run <id>\`.

Options:
  --project <p>   the project (required)
  --text <text>   what the customer wrote (required)
  --id <id>       the message id (default: a new one); sending the same id again sends nothing new
  --from <who>    the customer's handle
  --json          print the publish receipt as JSON
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      {
        project: { type: 'string' },
        text: { type: 'string' },
        id: { type: 'string' },
        from: { type: 'string' },
        json: { type: 'boolean' },
      },
      { min: 1, max: 1 },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const runId = args.positionals[0]!;
    const project = required(args, 'project');
    const text = required(args, 'text');
    const messageId = str(args, 'id') ?? `msg-${randomUUID()}`;
    const from = str(args, 'from');
    return publishAndReport(
      ctx,
      args,
      { project, agent: 'baton-cli' },
      (client) => client.sendMessage({ workflow_run_id: runId, message_id: messageId, text, ...(from !== undefined ? { sent_by: from } : {}) }),
      { workflow_run_id: runId, message_id: messageId },
    );
  },
};
