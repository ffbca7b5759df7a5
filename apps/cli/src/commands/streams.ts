import { batonStreamNames, consumerInfos } from '@baton/eventstore';
import type { Command } from '../command';
import { flag, parseCommandArgs } from '../command';
import { ExitCode, streamReadError } from '../errors';
import { printJson, renderTable } from '../output';
import { accountStorage, streamCapacity, type AccountStorage, type StreamCapacity } from './capacity';

/** One consumer's health, as `baton streams --json` prints it. */
export interface ConsumerHealth {
  name: string;
  /** False for ephemeral consumers (readers, replays). */
  durable: boolean;
  filter_subject: string | null;
  /** Messages not yet delivered (`num_pending`). */
  pending: number;
  /** Delivered, not yet acknowledged (`num_ack_pending`). */
  ack_pending: number;
  /** Delivered more than once and not yet acknowledged (`num_redelivered`). */
  redelivered: number;
  /** Pull requests waiting (`num_waiting`): a live consumer has at least one most of the time. */
  waiting: number;
  /** Messages the consumer has not finished: `pending + ack_pending`. */
  lag: number;
  /** Last stream sequence delivered, and the floor below which everything is acknowledged. */
  delivered_seq: number;
  ack_floor_seq: number;
  /** When the consumer last acknowledged (ISO), or null. */
  last_active: string | null;
}

/** One stream's health and capacity ({@link StreamCapacity}: max_bytes, discard, max_age_ms, replicas, used_pct). */
export interface StreamHealth extends StreamCapacity {
  stream: string;
  /** `events`, `inbox` or `dlq`. */
  role: string;
  subjects: string[];
  messages: number;
  bytes: number;
  first_seq: number;
  last_seq: number;
  first_ts: string | null;
  last_ts: string | null;
  consumers: ConsumerHealth[];
  /** The account's JetStream storage limit and usage (`jsm.getAccountInfo`): one account, the same on every stream. */
  account: AccountStorage;
}

const ZERO_TIME = '0001-01-01T00:00:00Z';
const isoOrNull = (value: unknown) => (typeof value === 'string' && value !== '' && value !== ZERO_TIME ? value : null);

export const streamsCommand: Command = {
  name: 'streams',
  summary: 'stream and consumer health and capacity: messages, bytes, max_bytes and % used, the account storage; per consumer pending, ack pending, lag',
  help: `Usage: baton streams [--json]

Show Baton's JetStream streams (<PREFIX>_EVENTS, _INBOX, _DLQ): messages, bytes, first and last
sequence and time; their capacity: max_bytes (- for none), the bytes as a percentage of it, the
discard policy (new: full, it refuses what comes; old: it drops its oldest), and the account's
JetStream storage limit (baton nats-config --max-store) and usage; and for each consumer on them: pending (not yet delivered: num_pending),
ack pending (delivered, not acknowledged), redelivered (delivered more than once, unacknowledged),
waiting pulls, lag (pending + ack pending), the last delivered sequence and the ack floor.

A growing lag on a durable consumer means its service is behind or down; a growing redelivered
count means its handler keeps failing (its messages end in the DLQ after BATON_MAX_DELIVER); any
message in _DLQ needs a look (\`baton dlq\`). An inbox near 100 % of its max_bytes, or an account
near its limit, refuses publishes soon (storage_full; docs/sre.md, Capacity).

Options:
  --json   print [{ stream, role, messages, bytes, first_seq, last_seq, ..., max_bytes, discard,
           max_age_ms, replicas, used_pct, account: { limit, used, used_pct }, consumers: [...] }]
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { json: { type: 'boolean' } }, { min: 0, max: 0 });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const prefix = ctx.config().BATON_PREFIX;
    const nats = await ctx.nats();
    const names = batonStreamNames(prefix);
    const report: StreamHealth[] = [];
    let account: AccountStorage;
    try {
      account = await accountStorage(nats.jsm);
    } catch (error) {
      throw streamReadError(error, names.events, prefix, ctx.natsUrl());
    }
    for (const [role, stream] of [
      ['events', names.events],
      ['inbox', names.inbox],
      ['dlq', names.dlq],
    ] as const) {
      let info;
      try {
        info = await nats.jsm.streams.info(stream);
      } catch (error) {
        throw streamReadError(error, stream, prefix, ctx.natsUrl());
      }
      const consumers: ConsumerHealth[] = [];
      // Listing the consumers reads JetStream too: one that stopped answering here (no leader) says so.
      try {
        for await (const consumer of consumerInfos(nats.jsm, stream)) {
          consumers.push({
            name: consumer.name,
            durable: Boolean(consumer.config.durable_name),
            filter_subject: consumer.config.filter_subject ?? null,
            pending: consumer.num_pending,
            ack_pending: consumer.num_ack_pending,
            redelivered: consumer.num_redelivered,
            waiting: consumer.num_waiting,
            lag: consumer.num_pending + consumer.num_ack_pending,
            delivered_seq: consumer.delivered.stream_seq,
            ack_floor_seq: consumer.ack_floor.stream_seq,
            // The server sends a time string here, whatever the client's types say.
            last_active: isoOrNull((consumer.ack_floor as { last_active?: unknown }).last_active),
          });
        }
      } catch (error) {
        throw streamReadError(error, stream, prefix, ctx.natsUrl());
      }
      consumers.sort((a, b) => Number(b.durable) - Number(a.durable) || a.name.localeCompare(b.name));
      report.push({
        stream,
        role,
        subjects: info.config.subjects ?? [],
        messages: info.state.messages,
        bytes: info.state.bytes,
        first_seq: info.state.first_seq,
        last_seq: info.state.last_seq,
        first_ts: isoOrNull(info.state.first_ts),
        last_ts: isoOrNull(info.state.last_ts),
        ...streamCapacity(info),
        consumers,
        account,
      });
    }
    if (flag(args, 'json')) {
      printJson(ctx.io, report);
      return ExitCode.ok;
    }
    ctx.io.stdout.write(
      renderTable(report, [
        { header: 'stream', value: (s) => s.stream },
        { header: 'messages', value: (s) => s.messages },
        { header: 'bytes', value: (s) => s.bytes },
        { header: 'max bytes', value: (s) => s.max_bytes ?? '-' },
        { header: 'used', value: (s) => (s.used_pct === null ? '-' : `${s.used_pct}%`) },
        { header: 'discard', value: (s) => s.discard },
        { header: 'first seq', value: (s) => s.first_seq },
        { header: 'last seq', value: (s) => s.last_seq },
        { header: 'first message', value: (s) => s.first_ts ?? '-' },
        { header: 'last message', value: (s) => s.last_ts ?? '-' },
        { header: 'consumers', value: (s) => s.consumers.length },
      ]),
    );
    const { limit, used, used_pct } = account;
    ctx.io.stdout.write(
      `\naccount JetStream storage: ${used} bytes used, ${limit === null ? 'no limit (baton nats-config --max-store sets one)' : `of ${limit} (${used_pct}%)`}\n`,
    );
    for (const stream of report) {
      ctx.io.stdout.write(`\n${stream.stream} consumers:\n`);
      ctx.io.stdout.write(
        renderTable(
          stream.consumers,
          [
            { header: 'consumer', value: (c) => `${c.name}${c.durable ? '' : ' (ephemeral)'}` },
            { header: 'filter', value: (c) => c.filter_subject ?? '(all)' },
            { header: 'lag', value: (c) => c.lag },
            { header: 'pending', value: (c) => c.pending },
            { header: 'ack pending', value: (c) => c.ack_pending },
            { header: 'redelivered', value: (c) => c.redelivered },
            { header: 'waiting', value: (c) => c.waiting },
            { header: 'delivered', value: (c) => c.delivered_seq },
            { header: 'ack floor', value: (c) => c.ack_floor_seq },
          ],
          '  (no consumers)',
        ),
      );
    }
    return ExitCode.ok;
  },
};
