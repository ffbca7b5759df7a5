import { randomBytes } from 'node:crypto';
import {
  batonStreamNames,
  batonTopology,
  connectNats,
  DeadLetterReason,
  DlqAdmin,
  DlqSources,
  provision,
  type DeadLetterInput,
  type NatsHandle,
} from '@baton/eventstore';
import { JsonLogger } from '../logging/logger';
import { RefusedLetterCap } from './refused-letter-cap';
import { RefusedLetters } from './refused-letters';

/*
 * The budget of refused letters (BATON_REFUSED_LETTERS_PER_MINUTE) against a real DLQ: what it
 * may sum up and what it may not. A message the inbox stream stored and acknowledged, refused for a
 * reason a fix elsewhere cures, has no way back but its letter: it always gets one, whatever the
 * budget. A flood of core requests (answered to their senders) and of stored messages refused for
 * themselves is still summed up, and the summary says truthfully where its messages are.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const BUDGET = 3;
const N = 10;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

describe('RefusedLetters (real NATS): the budget sums up only what redrive would not republish', () => {
  let prefix: string;
  let nats: NatsHandle;
  let letters: RefusedLetters;
  let admin: DlqAdmin;

  beforeEach(async () => {
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    const logger = new JsonLogger('router', 'error', {}, () => undefined);
    letters = new RefusedLetters(
      { nats, config: { BATON_PREFIX: prefix } as never, logger: logger.child({}), instance: 'router-t' },
      new RefusedLetterCap(BUDGET, 60_000),
      'agent inbox messages',
    );
    admin = new DlqAdmin({ js: nats.js, jsm: nats.jsm, prefix });
  });

  afterEach(async () => {
    await letters.stop();
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    await nats.close();
  });

  /** Publish `n` messages on `subject` into the inbox (each acknowledged) and refuse each as `source` would, for `reason`. */
  const storeAndRefuse = async (sender: string, subject: string, source: string, reason: string, n: number) => {
    const outcomes: string[] = [];
    const seqs: number[] = [];
    for (let i = 0; i < n; i++) {
      const data = encoder.encode(JSON.stringify({ workflow_run_id: `wr-${i}`, project: 'acme', workflow: 'later', started_by: 'sam' }));
      const ack = await nats.js.publish(subject, data);
      seqs.push(ack.seq);
      const letter: DeadLetterInput = {
        prefix,
        source,
        reason,
        detail: `${reason}: refused`,
        subject,
        headers: {},
        data,
        deliveries: 1,
        stream: batonStreamNames(prefix).inbox,
        seq: ack.seq,
        consumer: 'router_t',
      };
      const { outcome, written } = letters.refuse(sender, letter);
      await written;
      outcomes.push(outcome);
    }
    return { outcomes, seqs };
  };

  it('acknowledged starts refused unknown_workflow, far past the budget, each get a letter of their own, and each redrives', async () => {
    const { outcomes, seqs } = await storeAndRefuse('acme', `${prefix}.in.acme.start`, DlqSources.routerStarts, 'unknown_workflow', N);
    expect(outcomes).toEqual(Array(N).fill('refused'));
    await letters.stop();
    const stored = await admin.list();
    expect(stored.map((l) => [l.reason, l.originalSeq])).toEqual(seqs.map((seq) => ['unknown_workflow', seq]));
    // They spent none of the budget: the sender's refusals for itself are still lettered three times.
    const report = await admin.redrive({}, { dryRun: true });
    expect(report.items.map((i) => i.status)).toEqual(Array(N).fill('planned'));
  });

  it('a flood of core requests is still summed up past the budget: one summary, skipped summary_letter as core messages no stream stores', async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < N; i++) {
      const { outcome, written } = letters.refuse('acme/claims.bob', {
        prefix,
        source: DlqSources.ledger,
        reason: 'schema_violation',
        subject: `${prefix}.cmd.ledger.acme.claim`,
        headers: {},
        data: encoder.encode(`{"n":${i}}`),
        deliveries: 1,
        stream: 'core',
        seq: 0,
      });
      await written;
      outcomes.push(outcome);
    }
    expect(outcomes).toEqual([...Array(BUDGET).fill('refused'), ...Array(N - BUDGET).fill('suppressed')]);
    await letters.stop();
    const all = await admin.list();
    expect(all.map((l) => l.reason)).toEqual([...Array(BUDGET).fill('schema_violation'), DeadLetterReason.refusalsSuppressed]);
    const summary = all[BUDGET]!;
    expect(summary.originalStream).toBe('core');
    const body = JSON.parse(decoder.decode(summary.data)) as Record<string, unknown>;
    expect(body).toMatchObject({ sender: 'acme/claims.bob', suppressed: N - BUDGET });
    expect(body).not.toHaveProperty('stored');
    const report = await admin.redrive();
    expect(report.items.map((i) => [i.status, i.reason])).toEqual([...Array(BUDGET).fill(['skipped', 'core_request']), ['skipped', 'summary_letter']]);
    expect(report.items[BUDGET]!.detail).toContain('core NATS messages no stream stores');
  });

  it('stored messages refused for themselves are still summed up; the summary names their stream and sequences, and its skip says so', async () => {
    const { outcomes, seqs } = await storeAndRefuse('acme', `${prefix}.in.acme.start`, DlqSources.routerStarts, 'schema_violation', N);
    expect(outcomes).toEqual([...Array(BUDGET).fill('refused'), ...Array(N - BUDGET).fill('suppressed')]);
    await letters.stop();
    const all = await admin.list();
    expect(all.map((l) => l.reason)).toEqual([...Array(BUDGET).fill('schema_violation'), DeadLetterReason.refusalsSuppressed]);
    const summary = all[BUDGET]!;
    const inbox = batonStreamNames(prefix).inbox;
    const rest = seqs.slice(BUDGET);
    expect({ stream: summary.originalStream, seq: summary.originalSeq }).toEqual({ stream: inbox, seq: rest[0] });
    expect(JSON.parse(decoder.decode(summary.data))).toMatchObject({
      suppressed: N - BUDGET,
      stored: [
        {
          stream: inbox,
          count: N - BUDGET,
          first_seq: rest[0],
          last_seq: rest[rest.length - 1],
          sequences: [`${rest[0]}-${rest[rest.length - 1]}`],
          sequences_unlisted: 0,
        },
      ],
    });
    expect(summary.detail).toContain(`${N - BUDGET} stored in ${inbox}, sequences ${rest[0]} to ${rest[rest.length - 1]}`);
    const report = await admin.redrive({}, { includeRefused: true, dryRun: true });
    expect(report.items.map((i) => [i.status, i.reason ?? null])).toEqual([...Array(BUDGET).fill(['planned', null]), ['skipped', 'summary_letter']]);
    expect(report.items[BUDGET]!.detail).toContain(`${inbox} stored them`);
    expect(report.items[BUDGET]!.detail).not.toContain('core');
  });
});
