import {
  DlqAdmin,
  DlqSources,
  LEGACY_DLQ_SOURCES,
  noticeRedeliverCommand,
  RedriveSkip,
  REFUSED_MESSAGE_REASONS,
  StreamNotFound,
  type DeadLetterRecord,
  type DlqEntry,
  type DlqFilter,
} from '@baton/eventstore';
import type { Command, ParsedArgs } from '../command';
import { flag, int, parseCommandArgs, str } from '../command';
import { CliError, CliErrorCode, CliWarningCode, ExitCode, UsageError } from '../errors';
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
    source_name: letter.sourceName,
    subject: letter.subject,
    // The project of the original subject: what --project matches (null for a subject that names none).
    project: letter.project ?? null,
    dlq_subject: letter.dlqSubject,
    original_stream: letter.originalStream ?? null,
    original_seq: letter.originalSeq ?? null,
    deliveries: letter.deliveries ?? null,
    consumer: letter.consumer ?? null,
    at: letter.at ?? null,
    redriven: letter.redriven,
    // A webhook letter's notice (null for every other letter): the command that sends it again.
    notice: letter.notice ? { project: letter.notice.project, notice_id: letter.notice.noticeId, redeliver: noticeRedeliverCommand(letter.notice) } : null,
    digest: letter.digest,
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
    if (error instanceof StreamNotFound)
      throw new CliError(
        `no dead-letter stream for prefix ${ctx.config().BATON_PREFIX} on NATS at ${ctx.natsUrl()} (nothing was ever dead-lettered, the platform was never started, or this is not the platform's NATS)`,
        { cause: error, code: CliErrorCode.notFound, details: { prefix: ctx.config().BATON_PREFIX, nats_url: ctx.natsUrl() } },
      );
    throw error;
  }
}

/** `words` joined with commas into lines of at most `width` characters, each after `indent`. */
function wrapped(words: readonly string[], indent: string, width: number): string {
  const lines: string[] = [];
  let line = '';
  words.forEach((word, i) => {
    const item = i < words.length - 1 ? `${word},` : word;
    if (line !== '' && indent.length + line.length + 1 + item.length > width) {
      lines.push(line);
      line = item;
    } else line = line === '' ? item : `${line} ${item}`;
  });
  if (line !== '') lines.push(line);
  return lines.map((l) => `${indent}${l}`).join('\n');
}

const HELP = `Usage: baton dlq list [--source s] [--reason r] [--project p] [--run id] [--handoff id] [--json]
       baton dlq show <seq> [--json]
       baton dlq redrive [--until <seq>] [--source s] [--reason r] [--project p]
                         [--run id] [--handoff id] [--dry-run] [--include-refused]
                         [--allow-missing-original] [--json]

Inspect and redrive the dead letters in <PREFIX>_DLQ: messages a consumer gave up on, each kept
with its reason, original subject, original headers and original bytes, on <prefix>.dlq.<source>.

Sources name the consumer that gave up:
  router-starts, router-agent-starts, router-results, router-messages,
  router-agent-messages, router-stops,
  router-answers, router-mesh-starts, router-agent-mesh-starts, router-mesh-turns,
  router-mesh-answers               the router's inbox consumers
  router-dispatch, router-handoff-deadlines, router-mesh-reactor   the router's event reactors
  router-definitions, ledger        refused publish_definition / ledger requests (core NATS)
  ledger-edge                       agent edge messages relayed nowhere (never redriven)
  ledger-handoff-reactor, ledger-project-reactor, watchdog-escalations (earlier watchdogs),
  notifier-projections, notifier-webhooks, notifier-mesh-webhooks
Letters written before these names carry the consumer's durable name (e.g.
router__prefix__in_any_result_any_4f0c0a3d for router-results): list shows the readable name,
and --source with either name finds both.

  list      one line per dead letter (seq, reason, source, original subject, size, redriven, the
            project of the original subject — what --project matches, - when it names none;
            --json: project, null then; for a letter of notifier-webhooks /
            notifier-mesh-webhooks — a notice a webhook never took — the notice's id; --json:
            notice {project, notice_id, redeliver}, null for other letters)
  show      one dead letter in full: reason, detail, original subject and headers, the bytes as
            text (or base64 when they are not UTF-8); for a notice a webhook never took, the
            command that sends it again: baton notice redeliver <notice> --project <project>.
            A seq that holds a redrive marker, not a letter: exit 1 not_a_dead_letter, naming the
            letter it marks and when (details: kind, marks_seq, redriven_at, target_subject,
            target_seq, counts); a seq that holds nothing: exit 1 not_found
  redrive   republish the dead letters that may be redriven, each to its original subject, and
            report every letter: redriven, duplicate, or skipped with its reason. A letter is
            republished only when
              - it is a letter of its own, not a refusals_suppressed summary of refusals past
                the sender's budget (skipped as summary_letter, even with --include-refused; its
                detail says where the messages it sums up are), and
              - its subject is an inbox subject its recorded source consumes (never an event
                <prefix>.ev.>, an operator answer <prefix>.in.*.answer / mesh_answer, or a core
                request <prefix>.cmd.>: skipped as event_subject, operator_answer, core_request,
                unknown_source, subject_not_consumed), and
              - its reason does not say the message itself was refused (skipped as
                message_refused unless --include-refused is given: the same bytes would be
                refused again; fix the sender and publish a corrected message):
${wrapped(Object.keys(REFUSED_MESSAGE_REASONS), '                  ', 94)}, and
              - the original it names is still in <PREFIX>_INBOX at that sequence with the same
                subject and bytes (else original_mismatch, or original_gone when it aged out);
                it is republished with the headers the inbox stored.
            The publish carries Nats-Msg-Id redrive:<stream>:<seq>; a marker on
            <prefix>.dlq._redriven (admin only) names the letter's seq and digest, so running it
            again republishes nothing (already_redriven). Markers anywhere else are ignored.
            A letter that cannot be republished is reported and the rest go on.

Filters (list and redrive; given together, a letter must match every one). They are applied
here, to every letter of the stream: the whole <PREFIX>_DLQ is read, no paging.
  --source <s>               only dead letters from this consumer (e.g. router-results; its old
                             durable name works too)
  --reason <r>               only dead letters with this reason (e.g. malformed_json, schema_violation)
  --project <p>              only dead letters whose original subject is in project p
                             (<prefix>.in.<p>.…, .ev.<p>.…, .cmd.<service>.<p>.…, .edge.<p>.…)
  --run <id>                 only dead letters whose original body names this run: its
                             workflow_run_id, or mesh_run_id for a mesh (a stored event: its run
                             or mesh aggregate, or its payload's ids)
  --handoff <id>             only dead letters whose original body names this handoff (handoff_id;
                             a handoff event's aggregate; an offer's id)
                             --run and --handoff read the body's top-level ids: a body that is not
                             a JSON object (malformed_json, invalid_utf8), or over 256 KiB, or cut
                             short in its letter, names none and never matches
  --until <seq>              redrive only dead letters up to this DLQ sequence

Options:
  --dry-run                  report what redrive would do; change nothing
  --include-refused          also redrive letters whose message itself was refused (message_refused
                             above), unchanged: only when the refusal was Baton's mistake, since
                             fixed (a schema relaxed, a limit raised)
  --allow-missing-original   also redrive letters whose original aged out of the inbox, trusting
                             the letter's bytes and headers (look at them with show first)
  --json                     machine-readable output (list: one object per letter; redrive:
                             {items, redriven, duplicates, skipped, planned})
`;

/**
 * Whether `source` is one this build knows Baton writes: a readable source, an older durable
 * name, or an agent's offers durable (`offers-…`). Unknown sources are still searched (a newer
 * service may write one this CLI does not know), with a warning when nothing matched.
 */
export function knownDlqSource(source: string): boolean {
  return (Object.values(DlqSources) as string[]).includes(source) || Object.hasOwn(LEGACY_DLQ_SOURCES, source) || source.startsWith('offers-');
}

/** A `--source` that matched nothing and is no source this build knows: most likely a typo; say so. */
function warnUnknownSource(ctx: CliContext, args: ParsedArgs, matched: number): void {
  const source = str(args, 'source');
  if (source === undefined || matched > 0 || knownDlqSource(source)) return;
  const text = `no dead letter has source "${source}", which is not a source Baton writes (see baton dlq --help: ${Object.values(DlqSources).slice(0, 3).join(', ')}, …; offers-<n>-<project>-<agent>)`;
  ctx.warn(CliWarningCode.unknownDlqSource, text);
}

/** The filter options list and redrive share. */
const FILTER_OPTIONS = {
  source: { type: 'string' },
  reason: { type: 'string' },
  project: { type: 'string' },
  run: { type: 'string' },
  handoff: { type: 'string' },
} as const;

/** A filter option's value; an empty one is a usage error (it would match nothing, silently). */
function filterValue(args: ParsedArgs, name: string): string | undefined {
  const value = str(args, name);
  if (value === '') throw new UsageError(`--${name} needs a value`);
  return value;
}

function filterOf(args: ParsedArgs): DlqFilter {
  const filter: DlqFilter = {};
  for (const name of ['source', 'reason', 'project', 'run', 'handoff'] as const) {
    const value = filterValue(args, name);
    if (value !== undefined) filter[name] = value;
  }
  const untilSeq = int(args, 'until', { min: 1, max: Number.MAX_SAFE_INTEGER });
  if (untilSeq !== undefined) filter.untilSeq = untilSeq;
  return filter;
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
        const args = parseCommandArgs(rest, { ...FILTER_OPTIONS, json: { type: 'boolean' } }, { min: 0, max: 0 });
        if (args.help) return help(ctx);
        const dlq = await admin(ctx);
        const letters = await guarded(ctx, () => dlq.list(filterOf(args)));
        warnUnknownSource(ctx, args, letters.length);
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
              { header: 'source', value: (l) => l.sourceName, max: 28 },
              { header: 'subject', value: (l) => l.subject, max: 50 },
              { header: 'bytes', value: (l) => l.data.length },
              { header: 'at', value: (l) => l.at },
              { header: 'redriven', value: (l) => (l.redriven ? 'yes' : 'no') },
              // The project of the original subject (what --project matches), whole: a webhook letter's is its notice's, which `notice redeliver` takes.
              { header: 'project', value: (l) => l.project, whole: true },
              // A webhook letter is a notice a webhook never took: its id, whole.
              { header: 'notice', value: (l) => l.notice?.noticeId, whole: true },
            ],
            '(no dead letters)',
          ),
        );
        if (letters.some((l) => l.notice !== undefined))
          ctx.io.stdout.write(
            'letters with a notice are notices a webhook never took (never redriven): once the receiver is fixed, baton notice redeliver <notice> --project <project>\n',
          );
        return ExitCode.ok;
      }
      case 'show': {
        const args = parseCommandArgs(rest, { json: { type: 'boolean' } }, { min: 1, max: 1, names: ['<seq>'] });
        if (args.help) return help(ctx);
        const seq = Number(args.positionals[0]);
        if (!Number.isInteger(seq) || seq < 1) throw new UsageError(`<seq> must be a positive integer, got "${args.positionals[0]}"`);
        const dlq = await admin(ctx);
        const entry = await guarded(ctx, () => dlq.at(seq));
        if (entry === null) throw new CliError(`no dead letter at seq ${seq} in ${dlq.stream}`, { code: CliErrorCode.notFound });
        if (entry.kind !== 'letter') throw notADeadLetter(dlq.stream, entry);
        const letter = entry.letter;
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
            source: letter.sourceName === letter.source ? letter.source : `${letter.sourceName} (recorded as ${letter.source})`,
            subject: letter.subject,
            project: letter.project,
            'original stream': letter.originalStream,
            // A core request (a refused ledger command or publish) has no stream: its number is a key made from its digest.
            ...(letter.originalStream === 'core'
              ? { 'request key': `${letter.originalSeq} (a core request: no stream sequence)` }
              : { 'original seq': letter.originalSeq }),
            deliveries: letter.deliveries,
            at: letter.at,
            redriven: letter.redriven ? 'yes' : 'no',
            ...(letter.notice !== undefined ? { notice: letter.notice.noticeId } : {}),
            headers: letter.headers,
            bytes: letter.data.length,
          }),
        );
        const text = json['data_text'];
        ctx.io.stdout.write(typeof text === 'string' ? `--- data (text) ---\n${text}\n` : `--- data (base64) ---\n${String(json['data_base64'])}\n`);
        if (letter.notice !== undefined)
          ctx.io.stdout.write(
            `--- a notice a webhook never took (never redriven) ---\nnotice ${letter.notice.noticeId} of project ${letter.notice.project}; once the receiver is fixed, send it again:\n  ${noticeRedeliverCommand(letter.notice)}\n`,
          );
        return ExitCode.ok;
      }
      case 'redrive': {
        const args = parseCommandArgs(
          rest,
          {
            until: { type: 'string' },
            ...FILTER_OPTIONS,
            'dry-run': { type: 'boolean' },
            'include-refused': { type: 'boolean' },
            'allow-missing-original': { type: 'boolean' },
            json: { type: 'boolean' },
          },
          { min: 0, max: 0 },
        );
        if (args.help) return help(ctx);
        const dlq = await admin(ctx);
        const dryRun = flag(args, 'dry-run');
        const filter = filterOf(args);
        const report = await guarded(ctx, () =>
          dlq.redrive(filter, { dryRun, allowMissingOriginal: flag(args, 'allow-missing-original'), includeRefused: flag(args, 'include-refused') }),
        );
        warnUnknownSource(ctx, args, report.items.length);
        if (flag(args, 'json')) {
          // snake_case as every --json field (targetSeq stays beside target_seq for scripts written against it).
          const items = report.items.map(({ letterReason, ...item }) => ({
            ...item,
            letter_reason: letterReason,
            ...(item.targetSeq !== undefined ? { target_seq: item.targetSeq } : {}),
          }));
          printJson(ctx.io, { ...report, items });
          return ExitCode.ok;
        }
        for (const item of report.items) {
          const what = item.status === 'skipped' ? `skipped ${item.reason ?? ''}` : item.status;
          const where = item.targetSeq !== undefined ? `\t(seq ${item.targetSeq})` : '';
          ctx.io.stdout.write(`${item.seq}\t${what}\t${item.subject || '-'}${where}${item.detail ? `\t${item.detail}` : ''}\n`);
        }
        ctx.io.stdout.write(
          dryRun
            ? `dry run: ${report.planned} would be redriven, ${report.skipped} skipped\n`
            : `${report.redriven} redriven, ${report.duplicates} duplicates, ${report.skipped} skipped\n`,
        );
        const refused = report.items.filter((item) => item.reason === RedriveSkip.messageRefused).length;
        if (refused > 0)
          ctx.io.stdout.write(
            `${refused} skipped as message_refused: the message itself was refused and would be again; fix the sender and publish a corrected message (--include-refused republishes them unchanged)\n`,
          );
        return ExitCode.ok;
      }
      default:
        throw new UsageError(`unknown dlq command "${sub}" (list, show, redrive)`);
    }
  },
};

/**
 * `dlq show` of a sequence that holds no dead letter but a redrive marker (or an earlier version's
 * marker): exit 1 `not_a_dead_letter`, saying which letter the marker marks and when, with the same
 * in `details` (`kind`, `marks_seq`, `redriven_at`, `target_subject`, `target_seq`, `counts`).
 */
function notADeadLetter(stream: string, entry: Exclude<DlqEntry, { kind: 'letter' }>): CliError {
  if (entry.kind === 'legacy_redrive_marker') {
    return new CliError(
      `seq ${entry.seq} in ${stream} is not a dead letter: it is a redrive marker of an earlier version (on ${entry.subject}) for letter ${entry.marksSeq ?? '?'}${entry.at !== null ? `, written ${entry.at}` : ''}; such markers are ignored (they prove nothing): baton dlq show ${entry.marksSeq ?? '<seq>'}`,
      {
        code: CliErrorCode.notADeadLetter,
        details: { seq: entry.seq, kind: entry.kind, subject: entry.subject, marks_seq: entry.marksSeq, redriven_at: entry.at, counts: false },
      },
    );
  }
  const marker = entry.marker;
  if (marker === null) {
    return new CliError(
      `seq ${entry.seq} in ${stream} is not a dead letter: it is on the redrive marker subject ${entry.subject} but is no marker a redrive wrote (ignored)`,
      {
        code: CliErrorCode.notADeadLetter,
        details: { seq: entry.seq, kind: entry.kind, subject: entry.subject, marks_seq: null, redriven_at: null, counts: false },
      },
    );
  }
  const counts = entry.counts
    ? 'that letter is shown redriven'
    : 'it does not match that letter (another stream, or other bytes), which is not shown redriven by it';
  return new CliError(
    `seq ${entry.seq} in ${stream} is not a dead letter: it is the redrive marker of letter ${marker.dlq_seq}, redriven ${marker.at} to ${marker.target_subject} (seq ${marker.target_seq}); ${counts}. The letter: baton dlq show ${marker.dlq_seq}`,
    {
      code: CliErrorCode.notADeadLetter,
      details: {
        seq: entry.seq,
        kind: entry.kind,
        subject: entry.subject,
        marks_seq: marker.dlq_seq,
        redriven_at: marker.at,
        target_subject: marker.target_subject,
        target_seq: marker.target_seq,
        counts: entry.counts,
      },
    },
  );
}

function help(ctx: CliContext): ExitCode {
  ctx.io.stdout.write(HELP);
  return ExitCode.ok;
}
