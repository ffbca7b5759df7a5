import { z } from 'zod';
import { callApi, replyOf, throwRefusal } from '../api';
import type { Command } from '../command';
import { parseCommandArgs, str } from '../command';
import { ExitCode, UsageError } from '../errors';
import { printJson } from '../output';
import { projectArg } from '../timeline';

/** The fields of the redelivery reply the command reads (the notifier's NoticeRedeliveryReplySchema). */
const RedeliveryReplyShape = z.object({
  outcome: z.enum(['delivered', 'already_delivered']),
  project: z.string(),
  notice_id: z.string(),
  delivered: z.array(z.string()),
  skipped: z.array(z.string()),
});

export const noticeCommand: Command = {
  name: 'notice',
  summary: "send a human action notice to the project's webhooks again (one whose delivery was given up on)",
  help: `Usage: baton notice redeliver <notice-id> --project <p> [--json]

Send a human action notice to the webhooks of NOTIFIER_WEBHOOKS that serve its project again,
through the operator API (POST /v1/projects/<p>/notices/<notice-id>/redeliver at BATON_API_URL,
an operator or admin token). For a notice the notifier gave up delivering (dead-lettered on
<prefix>.dlq.notifier-webhooks or notifier-mesh-webhooks, reason max_deliveries): its event stays
in the events stream and is never published again, so \`baton dlq redrive\` skips it; once the
receiver is fixed, this delivers it, signed as the notifier signs every delivery. A webhook that
already took the notice is not called again, so running it twice is harmless.

Exit 0: delivered now, or already delivered to every webhook serving the project. Exit 1 with the
API's code: webhook_delivery_failed (a webhook still failed: --json prints which and why),
no_webhooks (no webhook serves the project), not_found, role_forbidden.

Options:
  --project <p>   the notice's project (required: notice ids are unique only within a project)
  --json          print the API's reply: { outcome, project, notice_id, delivered, skipped }
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { project: { type: 'string' }, json: { type: 'boolean' } }, { min: 2, max: 2, names: ['redeliver', '<notice-id>'] });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const [sub, noticeId] = args.positionals as [string, string];
    if (sub !== 'redeliver') throw new UsageError(`unknown notice command "${sub}": baton notice redeliver <notice-id> --project <p>`);
    const given = str(args, 'project');
    if (given === undefined) throw new UsageError('--project is required: a notice id is unique only within its project');
    const project = projectArg(given);
    const json = args.values['json'] === true;
    const reply = await callApi(ctx, 'POST', `/v1/projects/${encodeURIComponent(project)}/notices/${encodeURIComponent(noticeId)}/redeliver`, {});
    if (!reply.ok) throwRefusal(ctx, reply, json, 'notice', noticeId, `notice ${noticeId} was not redelivered`);
    const sent = replyOf(reply, RedeliveryReplyShape);
    if (json) printJson(ctx.io, reply.body);
    else
      ctx.io.stdout.write(
        sent.outcome === 'delivered'
          ? `redelivered: notice ${noticeId} (project ${project}) to ${sent.delivered.length} webhook(s)${sent.skipped.length > 0 ? `; ${sent.skipped.length} had it already` : ''}\n`
          : `already delivered: notice ${noticeId} (project ${project}) had reached every webhook serving the project; none was called\n`,
      );
    return ExitCode.ok;
  },
};
