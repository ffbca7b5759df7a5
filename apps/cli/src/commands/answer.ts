import { OperatorAnswerActionSchema, type PendingToolCall } from '@baton/contracts';
import { callSummary, clip } from '@baton/domain';
import { ANSWER_OPTIONS, answerBasics, apiRefusal, callApi, postAnswer, recordPath, replyOf, StopReplyShape, throwIfAmbiguous } from '../api';
import type { Command } from '../command';
import { parseCommandArgs, required, str } from '../command';
import { CliError, ExitCode, UsageError } from '../errors';
import { idFromArgument } from '../inbox-item';

export const answerCommand: Command = {
  name: 'answer',
  summary: "answer a stop packet's form (approve, deny, type the intent, raise a cap, acknowledge)",
  help: `Usage: baton answer <stop-id> --action approve|deny|intent|raise_cap|acknowledge [--project p] [options]

Answer a stopped run through the operator API (POST /v1/projects/<p>/stops/<id>/answer at
BATON_API_URL, default http://127.0.0.1:7100). The answer must be one of the buttons of the
packet's form. The API waits (a few seconds, NOTIFIER_ANSWER_WAIT_MS) for the router's decision
and says what happened: applied (exit 0, with the run's new status), refused (exit 1, with the
refusal's code: e.g. run_not_stopped when another operator's answer was applied first), or not
decided yet (exit 0 with a note and the status link to read the outcome later). Approving runs
the frozen call exactly as the packet holds it, so approve names the call you looked at: --digest
with its pending_digest (baton stops --json, GET /v1/projects/<p>/stops/<id>). Without --digest
approve sends nothing: it prints the frozen call and its digest to approve it with (exit 2); a
digest of another call than the one frozen now is refused stale_answer (exit 1).
<stop-id> is the packet id, or the inbox item id baton inbox prints (stop:<project>:<packet>),
which names the project too; another kind's item id (hold:…, handback:…) is a usage error (exit 2)
naming the command that answers it.
Stop packet ids are unique only within a project: without --project the id must be held by one
of the token's projects only (otherwise a usage error names them).

Options:
  --project <p>      the packet's project (required when several projects hold <stop-id>)
  --action <a>       approve, deny, intent, raise_cap or acknowledge (required)
  --intent <kind>    the request kind (with --action intent)
  --cap <n>          the new, higher cap (with --action raise_cap)
  --digest <d>       the pending_digest of the frozen call you approve (with --action approve)
  --note <text>      a note for the record
  --answer-id <id>   idempotency key (default: a new one, named when the API does not answer in
                     time; re-use it to retry safely)
  --json             print the API's reply as JSON (with the packet's project)
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      {
        action: { type: 'string' },
        intent: { type: 'string' },
        cap: { type: 'string' },
        digest: { type: 'string' },
        ...ANSWER_OPTIONS,
      },
      { min: 1, max: 1, names: ['<stop-id>'] },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    // An inbox item id (`stop:<project>:<packet_id>`, as `baton inbox` prints it) names the project
    // too; another kind's item id (a hold's, a handback's) is a usage error naming its command.
    const named = idFromArgument(args.positionals[0]!, 'stop', 'a stop packet', str(args, 'project'));
    const stopId = named.id;
    if (named.project !== undefined) args.values['project'] = named.project;
    const action = OperatorAnswerActionSchema.safeParse(required(args, 'action'));
    if (!action.success || action.data === 'accept' || action.data === 'rework') {
      throw new UsageError('--action must be approve, deny, intent, raise_cap or acknowledge (accept / rework: use `baton decide`)');
    }
    const intent = str(args, 'intent');
    if (action.data === 'intent' && intent === undefined) throw new UsageError('--action intent needs --intent <kind>');
    const capText = str(args, 'cap');
    const cap = capText === undefined ? undefined : Number(capText);
    if (action.data === 'raise_cap' && (cap === undefined || !Number.isFinite(cap) || cap <= 0))
      throw new UsageError('--action raise_cap needs --cap <positive number>');
    const { note, project, answerId, json } = answerBasics(args);

    const pendingDigest = str(args, 'digest');
    if (pendingDigest !== undefined && action.data !== 'approve') throw new UsageError('--digest goes with --action approve');
    if (pendingDigest !== undefined && pendingDigest.trim() === '') throw new UsageError('--digest needs the pending_digest of the call you approve');
    if (action.data === 'approve' && pendingDigest === undefined) {
      // Fail closed: an approval names the call a person saw. Show the frozen call, send nothing.
      const current = await callApi(ctx, 'GET', recordPath('stops', stopId, project), undefined, { unsent: `stop ${stopId} was not read` });
      throwIfAmbiguous(current, 'stop packet', stopId);
      if (!current.ok) throw apiRefusal(current, `cannot read stop ${stopId}`);
      const { stop } = replyOf(current, StopReplyShape) as { stop: { status: string; pending?: PendingToolCall | null; pending_digest?: string | null } };
      if (stop.status === 'answered') {
        throw new CliError(`stop ${stopId} was already answered: there is nothing to approve`, { code: 'stop_already_answered' });
      }
      if (!stop.pending || typeof stop.pending_digest !== 'string') {
        throw new UsageError(`stop ${stopId} freezes no call: there is nothing to approve (its form offers other answers)`);
      }
      throw new UsageError(
        `approve runs the frozen call exactly as shown; name it with --digest:\n  call: ${clip(callSummary(stop.pending), 1_000)}\n  baton answer ${stopId}${project !== undefined ? ` --project ${project}` : ''} --action approve --digest ${stop.pending_digest}`,
      );
    }
    return postAnswer(
      ctx,
      { kind: 'stops', what: 'stop packet', id: stopId, project },
      {
        answer_id: answerId,
        action: action.data,
        ...(intent !== undefined ? { intent } : {}),
        ...(cap !== undefined ? { cap } : {}),
        ...(note !== undefined ? { note } : {}),
        ...(pendingDigest !== undefined ? { pending_digest: pendingDigest } : {}),
      },
      json,
    );
  },
};
