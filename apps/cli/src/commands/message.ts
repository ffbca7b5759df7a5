import { randomUUID } from 'node:crypto';
import { decodeInbound, InboxBodySchemas } from '@baton/contracts';
import type { RunEvent } from '@baton/domain';
import { PermissionDenied, streamReader, type EventStore } from '@baton/eventstore';
import type { PublishReceipt } from '@baton/sdk';
import type { Command } from '../command';
import { int, parseCommandArgs, required, str } from '../command';
import type { CliContext } from '../context';
import { ExitCode, streamReadError } from '../errors';
import { publishAndReport, type Settled } from './publishing';
import { idArg, projectArg } from '../timeline';

export const messageCommand: Command = {
  name: 'message',
  summary: "send a customer's message to a conversation run",
  help: `Usage: baton message <workflow_run_id> --project <p> --text <text> [--id <message id>] [--from <who>] [--wait-ms <ms>] [--json]

Publish a customer message (SessionMessage, docs/schemas) to <prefix>.in.<project>.message with
Nats-Msg-Id = message:<project>:<workflow_run_id>/<message_id>. The router records it on the run and evaluates the active agent's
routes before any model runs. While an agent is still working the message is queued and delivered
when the run next waits for the customer; a message the run refuses (the run is held, stopped or
has ended, or 20 are already queued) is recorded on the run as run.result_rejected.

Options:
  --project <p>   the project (required)
  --text <text>   what the customer wrote (required)
  --id <id>       the message id (default: a new one); sending the same id again sends nothing new
  --from <who>    the customer's handle
  --wait-ms <ms>  how long to wait for the run to record it (default 5000; 0: do not wait)
  --json          print the publish receipt (and the outcome) as JSON

It then says what the run did with it: outcome delivered (to the agent, with its name) or queued
(with its place), exit 0; refused (the run's code: run_not_awaiting_input, message_queue_full…),
message_id_reused (the id is already a message with other text, one the run took or refused: this
text was not stored) or not_found (no such run: the router dead-letters it), exit 1; pending (not
recorded within --wait-ms), exit 0.
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      {
        project: { type: 'string' },
        text: { type: 'string' },
        id: { type: 'string' },
        from: { type: 'string' },
        'wait-ms': { type: 'string' },
        json: { type: 'boolean' },
      },
      { min: 1, max: 1, names: ['<run> (the workflow_run_id)'] },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const runId = idArg(args.positionals[0]!, 'the run');
    const project = projectArg(required(args, 'project'));
    const text = required(args, 'text');
    const given = str(args, 'id');
    const messageId = given !== undefined ? idArg(given, '--id') : `msg-${randomUUID()}`;
    const from = str(args, 'from');
    const waitMs = int(args, 'wait-ms', { min: 0, max: 600_000 }) ?? DEFAULT_MESSAGE_WAIT_MS;
    return publishAndReport(
      ctx,
      args,
      { project, agent: 'baton-cli' },
      (client) => client.sendMessage({ workflow_run_id: runId, message_id: messageId, text, ...(from !== undefined ? { sent_by: from } : {}) }),
      { workflow_run_id: runId, message_id: messageId },
      waitMs === 0
        ? undefined
        : async (receipt) =>
            settled(await messageOutcome(await ctx.eventStore(), { project, runId, messageId, text }, waitMs, await heldText(ctx, receipt)), {
              project,
              runId,
              messageId,
            }),
    );
  },
};

/** How long `baton message` waits for the router to record the message (`--wait-ms`). */
export const DEFAULT_MESSAGE_WAIT_MS = 5_000;

/** What became of a customer message, read from its run's events. */
export type MessageOutcome =
  | { kind: 'delivered'; agent: string }
  | { kind: 'queued'; agent: string; position: number }
  | { kind: 'refused'; code: string; message: string }
  | { kind: 'id_reused' }
  | { kind: 'no_run' }
  | { kind: 'pending' };

interface MessageRef {
  project: string;
  runId: string;
  messageId: string;
  text: string;
}

/**
 * What the stream holds under the message's id when it dropped this publish as a duplicate
 * (`receipt.duplicate`: the message stored at `receipt.seq`): that message's text, or null when
 * what is stored there is not a customer message (another publisher's body under the id).
 * Undefined when this publish was stored, or when these credentials may not read the inbox stream
 * (an agent's: then only the run's record of the id can tell).
 */
export async function heldText(ctx: CliContext, receipt: PublishReceipt): Promise<string | null | undefined> {
  if (!receipt.duplicate) return undefined;
  let stored;
  try {
    stored = await streamReader(await ctx.nats(), receipt.stream).message(receipt.seq);
  } catch (error) {
    if (error instanceof PermissionDenied) return undefined;
    throw streamReadError(error, receipt.stream, ctx.config().BATON_PREFIX, ctx.natsUrl());
  }
  if (stored === null) return undefined;
  const decoded = decodeInbound(stored.data, InboxBodySchemas.message);
  return decoded.ok ? decoded.value.text : null;
}

/**
 * Wait (at most `waitMs`) for the run to record the message: delivered to its agent
 * (`run.message_received`), queued while an agent works (`run.message_queued`), or refused
 * (`run.result_rejected`, `refused: message`) — from the run's events, the first read the whole
 * history (a message sent before, under the same id, was recorded already), then only what came
 * after. The id held with other text is `id_reused` — this text was not stored, whatever became of
 * the first: held by the stream (`heldByStream`, {@link heldText}: the message it kept when it dropped
 * this one as a duplicate — the only record of the text when the run refused that message, since a
 * refusal records none) or by the run (the text its `run.message_received` / `queued` recorded,
 * when the stream stored this one again after its duplicate window). A run with no events at the
 * end is `no_run` (the router dead-letters the message); nothing yet, `pending`.
 */
export async function messageOutcome(store: Pick<EventStore, 'read'>, ref: MessageRef, waitMs: number, heldByStream?: string | null): Promise<MessageOutcome> {
  const deadline = Date.now() + waitMs;
  const aggregate = { project: ref.project, kind: 'run', id: ref.runId } as const;
  // The text the id is held with (null: something that is not a customer message), once known.
  let held = heldByStream;
  let afterSeq = 0;
  for (;;) {
    const { events, lastSeq } = await store.read(aggregate, { afterSeq });
    let recorded: MessageOutcome | undefined;
    for (const stored of events) {
      const event = { type: stored.type, data: stored.payload } as RunEvent;
      if ((event.type === 'run.message_received' || event.type === 'run.message_queued') && event.data.message_id === ref.messageId) {
        held ??= event.data.text;
        recorded =
          event.type === 'run.message_received'
            ? { kind: 'delivered', agent: event.data.agent }
            : { kind: 'queued', agent: event.data.agent, position: event.data.position };
        break;
      }
      if (event.type === 'run.result_rejected' && event.data.refused === 'message' && event.data.result_id === ref.messageId) {
        recorded = { kind: 'refused', code: event.data.code, message: event.data.message };
        break;
      }
    }
    if (held !== undefined && held !== ref.text) return { kind: 'id_reused' };
    if (recorded !== undefined) return recorded;
    afterSeq = Math.max(afterSeq, lastSeq);
    if (Date.now() >= deadline) return afterSeq === 0 ? { kind: 'no_run' } : { kind: 'pending' };
    await new Promise<void>((resolve) => setTimeout(resolve, Math.min(100, Math.max(0, deadline - Date.now()))));
  }
}

/** The receipt fields, exit code and stderr line of an outcome. */
function settled(outcome: MessageOutcome, ref: { project: string; runId: string; messageId: string }): Settled {
  switch (outcome.kind) {
    case 'delivered':
      return { fields: { outcome: 'delivered', agent: outcome.agent }, code: ExitCode.ok };
    case 'queued':
      return { fields: { outcome: 'queued', agent: outcome.agent, position: outcome.position }, code: ExitCode.ok };
    case 'refused':
      return {
        fields: { outcome: 'refused', code: outcome.code },
        code: ExitCode.failure,
        error: { code: outcome.code, message: `run ${ref.runId} refused message ${ref.messageId} (${outcome.code}): ${outcome.message}` },
      };
    case 'id_reused':
      return {
        fields: { outcome: 'refused', code: 'message_id_reused' },
        code: ExitCode.failure,
        error: {
          code: 'message_id_reused',
          message: `message ${ref.messageId} of run ${ref.runId} was sent before with other text: this text was not stored (send it under a new --id)`,
        },
      };
    case 'no_run':
      return {
        fields: { outcome: 'not_found', code: 'not_found' },
        code: ExitCode.failure,
        error: { code: 'not_found', message: `project ${ref.project} has no run ${ref.runId}: the router dead-letters the message (baton dlq list)` },
      };
    case 'pending':
      return {
        fields: { outcome: 'pending' },
        code: ExitCode.ok,
        note: `sent; the run has not recorded message ${ref.messageId} yet (see baton run ${ref.runId})`,
      };
  }
}
