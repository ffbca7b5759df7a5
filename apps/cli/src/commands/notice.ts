import { z } from 'zod';
import { apiErrorOf, callApi, replyOf, throwRefusal, type ApiReply } from '../api';
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

/** `{ <id>: <name> }` of the webhooks a reply names (a notifier before names answers without it). */
const WebhookNamesShape = z.record(z.string(), z.string()).default({});

/** A webhook as the lines say it: `<name> [<id>]`, or the id alone when the reply gives no name. */
const labelOf = (names: Record<string, string>, id: string): string => (Object.hasOwn(names, id) ? `${names[id]} [${id}]` : id);

/** The `details` of a redelivery's 502 (`webhook_delivery_failed`, `webhook_partially_delivered`): which webhooks took it, which did not and why. */
const WebhookRefusalShape = z.object({
  delivered: z.array(z.string()).default([]),
  skipped: z.array(z.string()).default([]),
  busy: z.array(z.string()).default([]),
  failed: z.array(z.object({ target: z.string(), name: z.string().optional(), reason: z.string().optional(), error: z.string() })).default([]),
  webhook_names: WebhookNamesShape,
});

/** The API's codes of a redelivery some webhook did not take. */
const PARTIAL = 'webhook_partially_delivered';
const FAILED = 'webhook_delivery_failed';

/**
 * One line per webhook of a redelivery some webhook did not take (text output): which took it now,
 * which had it, which another sender is delivering it to, and which failed, with the reason. Empty
 * for any other refusal, or details the command cannot read.
 */
function webhookLines(reply: ApiReply, noticeId: string, project: string): string {
  const error = apiErrorOf(reply.body);
  if (error === null || (error.code !== PARTIAL && error.code !== FAILED)) return '';
  const details = WebhookRefusalShape.safeParse(error.details ?? {});
  if (!details.success) return '';
  const { delivered, skipped, busy, failed, webhook_names: names } = details.data;
  const label = (id: string) => labelOf(names, id);
  const all = delivered.length + skipped.length + busy.length + failed.length;
  const lines = [
    `notice ${noticeId} (project ${project}): ${delivered.length} of ${all} webhook(s) took it now, ${failed.length} failed`,
    ...delivered.map((target) => `  delivered  ${label(target)}`),
    ...skipped.map((target) => `  had it     ${label(target)}`),
    ...busy.map((target) => `  busy       ${label(target)} (another sender is delivering it)`),
    ...failed.map(
      (f) => `  failed     ${f.name !== undefined ? `${f.name} [${f.target}]` : label(f.target)}  ${f.reason !== undefined ? `${f.reason}: ` : ''}${f.error}`,
    ),
  ];
  return `${lines.join('\n')}\n`;
}

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
API's code:
  webhook_partially_delivered  some webhooks took it now, another still failed: a partial
                               success (run it again once that receiver is fixed: those that
                               took it are skipped)
  webhook_delivery_failed      no webhook took it now, and one still failed
  delivery_in_progress         another sender is delivering it to a webhook this moment
  no_webhooks, not_found, role_forbidden
For the first two, one line per webhook says which took it (delivered), had it, and failed with
the reason (connection_refused, connection_reset, dns_failed, tls_failed, timeout, http_status…
see docs/errors.md) and what happened; --json prints the API's reply, error.details.delivered and
error.details.failed[] { target, name, reason, error, status? }. Webhooks are named <name> [<id>]:
the name NOTIFIER_WEBHOOKS gives it (or one derived from its URL: host and path), the id the first
16 hex digits of the SHA-256 of its URL (error.details.webhook_names maps each id to its name).

Options:
  --project <p>   the notice's project (required: notice ids are unique only within a project)
  --json          print the API's reply: { outcome, project, notice_id, delivered, skipped, webhook_names }
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
    const reply = await callApi(
      ctx,
      'POST',
      `/v1/projects/${encodeURIComponent(project)}/notices/${encodeURIComponent(noticeId)}/redeliver`,
      {},
      {
        unsent: `the redelivery of notice ${noticeId} was not asked for`,
      },
    );
    if (!reply.ok) {
      if (!json) ctx.io.stdout.write(webhookLines(reply, noticeId, project));
      const partial = apiErrorOf(reply.body)?.code === PARTIAL;
      throwRefusal(
        ctx,
        reply,
        json,
        'notice',
        noticeId,
        partial ? `notice ${noticeId} was redelivered only in part` : `notice ${noticeId} was not redelivered`,
      );
    }
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
