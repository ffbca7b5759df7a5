import type { Command } from '../command';
import { int, parseCommandArgs, required, str } from '../command';
import { ExitCode } from '../errors';
import { publishAndReport } from './publishing';
import { readJsonFile } from './read-json';
import { idArg, projectArg } from '../timeline';

export const startCommand: Command = {
  name: 'start',
  summary: 'start a workflow run',
  help: `Usage: baton start <workflow> --run <id> --project <p> [--started-by <who>] [options]

Publish a run start (StartRunRequest, docs/schemas) to <prefix>.in.<project>.start with
Nats-Msg-Id = start:<project>:<run id>: starting the same run twice starts it once (the second
prints duplicate: true, with a note on stderr).

Options:
  --run <id>               the workflow run id (required)
  --project <p>            the project (required)
  --started-by <who>       who started it (default: $BATON_OPERATOR or $USER)
  --issue-author <who>     the issue's author, notified when nobody else is known
  --workflow-version <n>   pin a workflow version (default: the newest)
  --input <text>           the run's input (session variable "input")
  --variables <file.json>  session variables (a JSON object)
  --json                   print the publish receipt as JSON
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      {
        run: { type: 'string' },
        project: { type: 'string' },
        'started-by': { type: 'string' },
        'issue-author': { type: 'string' },
        'workflow-version': { type: 'string' },
        input: { type: 'string' },
        variables: { type: 'string' },
        json: { type: 'boolean' },
      },
      { min: 1, max: 1, names: ['<workflow>'] },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const workflow = args.positionals[0]!;
    const runId = idArg(required(args, 'run'), '--run');
    const project = projectArg(required(args, 'project'));
    const version = int(args, 'workflow-version', { min: 1, max: 1_000_000 });
    const variablesFile = str(args, 'variables');
    const variables = variablesFile === undefined ? undefined : ((await readJsonFile(variablesFile)) as Record<string, unknown>);
    const issueAuthor = str(args, 'issue-author');
    const input = str(args, 'input');
    return publishAndReport(
      ctx,
      args,
      { project, agent: 'baton-cli' },
      (client) =>
        client.startRun({
          workflow_run_id: runId,
          workflow,
          started_by: str(args, 'started-by') ?? ctx.operator(),
          ...(issueAuthor !== undefined ? { issue_author: issueAuthor } : {}),
          ...(version !== undefined ? { workflow_version: version } : {}),
          ...(input !== undefined ? { input } : {}),
          ...(variables !== undefined ? { variables } : {}),
        }),
      { workflow_run_id: runId },
    );
  },
};
