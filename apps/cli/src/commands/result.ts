import { EventStoreErrorCode } from '@baton/eventstore';
import type { Command } from '../command';
import { parseCommandArgs } from '../command';
import { CliError, CliErrorCode, ExitCode } from '../errors';
import { publishAndReport } from './publishing';
import { readJsonFile } from './read-json';

export const resultCommand: Command = {
  name: 'result',
  summary: 'publish an agent result (as an agent would)',
  help: `Usage: baton result <file.json> [--json]

Validate an AgentResult (docs/schemas/agent-result.json) and publish it to
<prefix>.in.<project>.result.<agent> (with an agent's credentials through its edge,
<prefix>.edge.<project>.result.<agent>, which the ledger relays) with Nats-Msg-Id =
result:<project>:<workflow_run_id>/<result_id>: publishing
the same result twice stores it once (the second prints duplicate: true, with a note on stderr).
A result for a run that is on a handoff must carry that handoff_id and the claim_id its agent
holds on it (docs/runs.md), or the router refuses it. produced_at defaults to now. Use - to read
stdin.

Options:
  --json   print the publish receipt as JSON
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { json: { type: 'boolean' } }, { min: 1, max: 1, names: ['<file.json> (the result; - for stdin)'] });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const file = args.positionals[0]!;
    const body = await readJsonFile(file);
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw new CliError(`${file}: an agent result is a JSON object`, { code: CliErrorCode.invalidInput });
    const { project, agent } = body as { project?: unknown; agent?: unknown };
    if (typeof project !== 'string' || typeof agent !== 'string')
      throw new CliError(`${file}: the result must name its project and agent`, { code: CliErrorCode.invalidInput });
    return publishAndReport(ctx, args, { project, agent, what: file }, (client) =>
      client.publishResult(body as Parameters<typeof client.publishResult>[0]),
    ).catch((error: unknown) => {
      // Another agent's credentials (or a service's): a result is published as its own agent, or by the admin.
      if (error instanceof CliError || (error as { code?: unknown }).code !== EventStoreErrorCode.permissionDenied) throw error;
      throw new CliError(
        `${(error as Error).message}: publish it with agent ${agent}'s own credentials (\`baton creds agent --project ${project} --agent ${agent}\`) or the admin's (\`baton creds admin\`)`,
        { cause: error, code: EventStoreErrorCode.permissionDenied },
      );
    });
  },
};
