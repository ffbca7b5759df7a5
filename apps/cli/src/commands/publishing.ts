import { createBatonClient, DuplicateMessageError, InvalidInputError, type BatonAgent, type PublishReceipt } from '@baton/sdk';
import type { ParsedArgs } from '../command';
import type { CliContext } from '../context';
import { CliError, CliWarningCode, ExitCode } from '../errors';
import { printJson, renderFields } from '../output';

/**
 * What a command learned after its message was stored: fields for the receipt, its exit code, and
 * either a refusal (`error`: on stderr as text, or with `--json` as the one JSON error line) or a
 * note for a person (`note`: stderr, text output only).
 */
export interface Settled {
  fields: Record<string, string | number>;
  code: ExitCode;
  error?: { code: string; message: string };
  note?: string;
}

/**
 * What the publishing commands (`baton start`, `baton message`, `baton result`) share: publish
 * through an SDK client of `project` / `agent` (validated there, deduplicated by the message's id,
 * `<kind>:<project>:<id>`), print the receipt with `fields` (as JSON with `--json`), and turn the
 * SDK's validation refusal into its issues on stderr and exit 1. Nothing is sent when the input is
 * refused. Each command is a fresh client, so the SDK cannot tell a person's re-run of the same
 * command from another publisher's message under the same id (`DuplicateMessageError`): the
 * receipt says `duplicate: true` (exit 0, as a retry does) and stderr says which message the stream
 * already held, so a collision is not mistaken for a new message. `settle`, when given, waits for
 * what became of the stored message and adds it to the receipt and the exit code.
 */
export async function publishAndReport(
  ctx: CliContext,
  args: ParsedArgs,
  client: { project: string; agent: string; what?: string },
  publish: (agent: BatonAgent) => Promise<PublishReceipt>,
  fields: Record<string, string> = {},
  settle?: (receipt: PublishReceipt) => Promise<Settled>,
): Promise<ExitCode> {
  // The CLI is no agent (it speaks with whatever credentials it holds, the admin's as a rule): its
  // starts go to the project's shared subject, recorded as `project-client`, never as `client.agent`.
  const agent = await createBatonClient({
    nats: await ctx.nats(),
    prefix: ctx.config().BATON_PREFIX,
    project: client.project,
    agent: client.agent,
    publishesAs: 'project',
    // With an agent's credentials it may publish only on its edge (the ledger relays it).
    edge: ctx.natsPrincipal().kind === 'agent',
  });
  try {
    const receipt = await publish(agent).catch((error: unknown) => {
      if (!(error instanceof DuplicateMessageError)) throw error;
      // A command that waits for the outcome says what the stored message was (the same, or another
      // under this id); the others warn.
      if (settle === undefined) {
        const text = `the stream already held ${error.msgId} (seq ${error.seq}): nothing new was stored. If this command did not send it before, another publisher used the same id.`;
        // With --json the receipt's `duplicate: true` says it too.
        ctx.warn(CliWarningCode.duplicateMessage, text, `baton: ${text}\n`);
      }
      return { seq: error.seq, duplicate: true, stream: error.stream } satisfies PublishReceipt;
    });
    // What happened to it, when the command waits to say (`baton message`).
    const settled: Settled = settle ? await settle(receipt) : { fields: {}, code: ExitCode.ok };
    const json = args.values['json'] === true;
    if (json) printJson(ctx.io, { ...fields, ...receipt, ...settled.fields });
    else ctx.io.stdout.write(renderFields({ ...fields, stream: receipt.stream, seq: receipt.seq, duplicate: receipt.duplicate, ...settled.fields }));
    if (settled.error !== undefined) {
      // With --json the refusal is the command's one failure line: it carries the warnings kept, as `execute`'s do.
      const warnings = json ? ctx.takeWarnings() : [];
      if (json)
        ctx.io.stderr.write(`${JSON.stringify({ error: { ...settled.error, issues: [], ...(warnings.length > 0 ? { details: { warnings } } : {}) } })}\n`);
      else ctx.io.stderr.write(`baton: ${settled.error.message}\n`);
    } else if (settled.note !== undefined && !json) ctx.io.stderr.write(`baton: ${settled.note}\n`);
    return settled.code;
  } catch (error) {
    if (!(error instanceof InvalidInputError)) throw error;
    // The SDK's code: the first issue's own code when its check has one (`claim_required`,
    // `no_notice_recipient`), as the router would record it — one code for one refusal.
    throw new CliError(`${client.what !== undefined ? `${client.what}: ` : ''}${error.message}`, {
      code: error.code,
      issues: error.rejection.issues,
    });
  } finally {
    await agent.close();
  }
}
