import { DlqAdmin, StreamNotFound, type DeadLetterRecord } from '@baton/eventstore';
import type { Command, ParsedArgs } from '../command';
import { flag, int, parseCommandArgs, str } from '../command';
import { CliError, ExitCode, UsageError } from '../errors';
import type { CliContext } from '../context';
import { printJson, renderFields, renderTable } from '../output';

const decoder = new TextDecoder('utf-8', { fatal: true });

/** The bytes as UTF-8 text, or null when they are not valid UTF-8. */
function textOf(data: Uint8Array): string | null {
  try {
    return decoder.decode(data);
  } catch {
    return null;
  }
}

/** The JSON shape of one dead letter (`--json`): the bytes as text when they are UTF-8, always as base64. */
function letterJson(letter: DeadLetterRecord): Record<string, unknown> {
  const text = textOf(letter.data);
  return {
    seq: letter.seq,
    reason: letter.reason,
    detail: letter.detail ?? null,
    source: letter.source,
    subject: letter.subject,
    dlq_subject: letter.dlqSubject,
    original_stream: letter.originalStream ?? null,
    original_seq: letter.originalSeq ?? null,
    deliveries: letter.deliveries ?? null,
    consumer: letter.consumer ?? null,
    at: letter.at ?? null,
    redriven: letter.redriven,
    headers: letter.headers,
    bytes: letter.data.length,
    data_text: text,
    data_base64: Buffer.from(letter.data).toString('base64'),
  };
}

async function admin(ctx: CliContext): Promise<DlqAdmin> {
  const nats = await ctx.nats();
  return new DlqAdmin({ js: nats.js, jsm: nats.jsm, prefix: ctx.config().BATON_PREFIX });
}

async function guarded<T>(ctx: CliContext, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof StreamNotFound) throw new CliError(`no dead-letter stream for prefix ${ctx.config().BATON_PREFIX} (nothing was ever dead-lettered, or the platform was never started)`, { cause: error });
    throw error;
  }
}

const HELP = `Usage: baton dlq list [--source s] [--reason r] [--json]
       baton dlq show <seq> [--json]
       baton dlq redrive [--until <seq>] [--source s] [--reason r] [--dry-run] [--json]

Inspect and redrive the dead letters in <PREFIX>_DLQ: messages a consumer gave up on, each kept
with its reason, original subject, original headers and original bytes.

  list      one line per dead letter (seq, reason, source, original subject, size, redriven)
  show      one dead letter in full: reason, detail, original subject and headers, the bytes as
            text (or base64 when they are not UTF-8)
  redrive   republish each dead letter not yet redriven to its original subject with its original
            headers; the publish carries Nats-Msg-Id redrive:<stream>:<seq>, and a marker on
            <prefix>.dlq.redriven records the seq, so running it again republishes nothing

Options:
  --source <s>    only dead letters from this consumer (e.g. router-results)
  --reason <r>    only dead letters with this reason (e.g. malformed_json, schema_violation)
  --until <seq>   redrive only dead letters up to this DLQ sequence
  --dry-run       list what redrive would republish; change nothing
  --json          machine-readable output
`;

function filterOf(args: ParsedArgs) {
  return { source: str(args, 'source'), reason: str(args, 'reason'), untilSeq: int(args, 'until', { min: 1, max: Number.MAX_SAFE_INTEGER }) };
}

/** `baton dlq list|show|redrive`. */
export const dlqCommand: Command = {
  name: 'dlq',
  summary: 'list, show and redrive dead letters (idempotent redrive)',
  help: HELP,
  async run(argv, ctx) {
    const [sub, ...rest] = argv;
    if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
      ctx.io.stdout.write(HELP);
      return sub === undefined ? ExitCode.usage : ExitCode.ok;
    }
    switch (sub) {
      case 'list': {
        const args = parseCommandArgs(rest, { source: { type: 'string' }, reason: { type: 'string' }, json: { type: 'boolean' } }, { min: 0, max: 0 });
        if (args.help) return help(ctx);
        const dlq = await admin(ctx);
        const letters = await guarded(ctx, () => dlq.list(filterOf(args)));
        if (flag(args, 'json')) {
          printJson(ctx.io, letters.map(letterJson));
          return ExitCode.ok;
        }
        ctx.io.stdout.write(
          renderTable(
            letters,
            [
              { header: 'seq', value: (l) => l.seq },
              { header: 'reason', value: (l) => l.reason, max: 28 },
              { header: 'source', value: (l) => l.source, max: 24 },
              { header: 'subject', value: (l) => l.subject, max: 50 },
              { header: 'bytes', value: (l) => l.data.length },
              { header: 'at', value: (l) => l.at },
              { header: 'redriven', value: (l) => (l.redriven ? 'yes' : 'no') },
            ],
            '(no dead letters)',
          ),
        );
        return ExitCode.ok;
      }
      case 'show': {
        const args = parseCommandArgs(rest, { json: { type: 'boolean' } }, { min: 1, max: 1 });
        if (args.help) return help(ctx);
        const seq = Number(args.positionals[0]);
        if (!Number.isInteger(seq) || seq < 1) throw new UsageError(`<seq> must be a positive integer, got "${args.positionals[0]}"`);
        const dlq = await admin(ctx);
        const letter = await guarded(ctx, () => dlq.show(seq));
        if (letter === null) throw new CliError(`no dead letter at seq ${seq} in ${dlq.stream}`);
        const json = letterJson(letter);
        if (flag(args, 'json')) {
          printJson(ctx.io, json);
          return ExitCode.ok;
        }
        ctx.io.stdout.write(
          renderFields({
            seq: letter.seq,
            reason: letter.reason,
            detail: letter.detail,
            source: letter.source,
            subject: letter.subject,
            'original stream': letter.originalStream,
            'original seq': letter.originalSeq,
            deliveries: letter.deliveries,
            at: letter.at,
            redriven: letter.redriven ? 'yes' : 'no',
            headers: letter.headers,
            bytes: letter.data.length,
          }),
        );
        const text = json['data_text'];
        ctx.io.stdout.write(typeof text === 'string' ? `--- data (text) ---\n${text}\n` : `--- data (base64) ---\n${String(json['data_base64'])}\n`);
        return ExitCode.ok;
      }
      case 'redrive': {
        const args = parseCommandArgs(
          rest,
          { until: { type: 'string' }, source: { type: 'string' }, reason: { type: 'string' }, 'dry-run': { type: 'boolean' }, json: { type: 'boolean' } },
          { min: 0, max: 0 },
        );
        if (args.help) return help(ctx);
        const dlq = await admin(ctx);
        const report = await guarded(ctx, () => dlq.redrive(filterOf(args), { dryRun: flag(args, 'dry-run') }));
        if (flag(args, 'json')) {
          printJson(ctx.io, report);
          return ExitCode.ok;
        }
        for (const item of report.items) {
          ctx.io.stdout.write(`${item.seq}\t${item.status}\t${item.subject}${item.targetSeq !== undefined ? `\t(seq ${item.targetSeq})` : ''}\n`);
        }
        const planned = report.items.filter((i) => i.status === 'planned').length;
        ctx.io.stdout.write(
          flag(args, 'dry-run')
            ? `dry run: ${planned} would be republished, ${report.skipped} already redriven\n`
            : `${report.republished} republished, ${report.duplicates} duplicates, ${report.skipped} already redriven\n`,
        );
        return ExitCode.ok;
      }
      default:
        throw new UsageError(`unknown dlq command "${sub}" (list, show, redrive)`);
    }
  },
};

function help(ctx: CliContext): ExitCode {
  ctx.io.stdout.write(HELP);
  return ExitCode.ok;
}
