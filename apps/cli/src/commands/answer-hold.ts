import { HoldAnswerActionSchema, RouteCauseSchema, type RouteCause } from '@baton/contracts';
import { ANSWER_OPTIONS, answerBasics, postAnswer } from '../api';
import type { Command } from '../command';
import { parseCommandArgs, required, str } from '../command';
import { ExitCode, UsageError } from '../errors';
import { idFromArgument } from '../inbox-item';

/** `baton answer-hold`: the CLI's way to answer a held run (the inbox's hold items), as `baton answer` answers a stop packet. */
export const answerHoldCommand: Command = {
  name: 'answer-hold',
  summary: 'answer a held run: continue on its pending edge, reroute to a step, agent or role, or terminate',
  help: `Usage: baton answer-hold <run-id | hold item id> --action continue|reroute|terminate [--target t] [--hold-cause kind:id] [--project p] [options]

Answer a held run (an inbox item of kind hold: an agent's hold, a human gate, a no-action hold)
through the operator API (POST /v1/projects/<p>/runs/<id>/answer at BATON_API_URL). The API waits
for the router's decision and says what happened, as for \`baton answer\`: applied (exit 0, with
the run's new status), refused (exit 1, with the code: nothing_to_continue when the hold has no
edge to continue on, resume_target_unknown for a target that names nothing, run_not_held,
stale_answer when --hold-cause names a hold the run is no longer in), or not decided yet (exit 0
with a note and the status link). Run ids are unique only within a project:
without --project the id must be held by one of the token's projects only.
<run-id> is the workflow_run_id, or the inbox item id baton inbox prints
(hold:<seq>:<project>:<run>), which names the project too; another kind's item id (stop:…,
handback:…) is a usage error (exit 2) naming the command that answers it.

Options:
  --project <p>      the run's project (required when several projects hold <run-id>)
  --action <a>       continue, reroute or terminate (required)
  --target <t>       the step, agent or role to reroute to (with --action reroute)
  --hold-cause <k:i> the hold you are answering, as \`baton run\` or the inbox item shows its cause
                     (kind:id, e.g. result:r-7): refused stale_answer if the run was held again since
  --note <text>      a note for the record
  --answer-id <id>   idempotency key (default: a new one, named when the API does not answer in
                     time; re-use it to retry safely)
  --json             print the API's reply as JSON (with the run's project)
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      {
        action: { type: 'string' },
        target: { type: 'string' },
        'hold-cause': { type: 'string' },
        ...ANSWER_OPTIONS,
      },
      { min: 1, max: 1, names: ['<run-id>'] },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    // The inbox item id `baton inbox` prints (hold:<seq>:<project>:<run>) names the run and its
    // project; another kind's item id (a stop's, a handback's) is a usage error naming its command.
    const named = idFromArgument(args.positionals[0]!, 'hold', 'a held run', str(args, 'project'));
    const runId = named.id;
    if (named.project !== undefined) args.values['project'] = named.project;
    const action = HoldAnswerActionSchema.safeParse(required(args, 'action'));
    if (!action.success) throw new UsageError('--action must be continue, reroute or terminate (a stop packet: use `baton answer`)');
    const target = str(args, 'target');
    if (action.data === 'reroute' && target === undefined) throw new UsageError('--action reroute needs --target <step, agent or role>');
    if (action.data !== 'reroute' && target !== undefined) throw new UsageError('--target goes with --action reroute only');
    const holdCause = holdCauseOf(str(args, 'hold-cause'));
    const { note, project, answerId, json } = answerBasics(args);
    return postAnswer(
      ctx,
      { kind: 'runs', what: 'run', id: runId, project },
      {
        answer_id: answerId,
        action: action.data,
        ...(target !== undefined ? { target } : {}),
        ...(note !== undefined ? { note } : {}),
        ...(holdCause !== undefined ? { hold_cause: holdCause } : {}),
      },
      json,
    );
  },
};

/** `--hold-cause kind:id` (the id may hold `:`): the cause of the hold the answer is for. */
function holdCauseOf(value: string | undefined): RouteCause | undefined {
  if (value === undefined) return undefined;
  const at = value.indexOf(':');
  const parsed = RouteCauseSchema.safeParse(at > 0 ? { kind: value.slice(0, at), id: value.slice(at + 1) } : null);
  if (!parsed.success) {
    throw new UsageError(
      `--hold-cause takes kind:id with kind one of ${RouteCauseSchema.shape.kind.options.join(', ')} (as the run's hold shows its cause); got ${JSON.stringify(value)}`,
    );
  }
  return parsed.data;
}
