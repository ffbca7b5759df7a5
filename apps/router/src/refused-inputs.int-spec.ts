import { randomBytes } from 'node:crypto';
import { createEventRegistry, MsgIds, Subjects } from '@baton/contracts';
import { batonStreamNames, connectNats, DeadLetterReason, DlqAdmin, DlqHeader, JetStreamEventStore, type NatsHandle } from '@baton/eventstore';
import { durableNameFor, type BatonMetrics, type RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
import { startRouter } from './router.app';
import { deleteStreams, publishDefinition } from './int/support';

/*
 * What an agent publishes and the router refuses is lettered under a per-sender budget
 * (BATON_REFUSED_LETTERS_PER_MINUTE): an agent refused in a loop — each result under its own id,
 * so the stream stores every one — gets its budget of letters and then one `refusals_suppressed`
 * letter naming the stream and sequences of the rest; before, every refusal kept a letter of its
 * own, whole, in the shared DLQ. The budget is only for what redrive would not republish: a start
 * the stream acknowledged, refused for a workflow not published yet, always keeps a letter of its
 * own (before, past the budget it was summed up, and lost: the summary cannot be redriven).
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const BUDGET = 4;
const encoder = new TextEncoder();

describe('router: refused agent inputs are lettered under a per-sender budget (real NATS)', () => {
  const prefix = `t${randomBytes(5).toString('hex')}`;
  let nats: NatsHandle;
  let router: RunningService | null = null;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    router = await startRouter({
      ...process.env,
      NATS_URL,
      BATON_PREFIX: prefix,
      HTTP_PORT: '0',
      LOG_LEVEL: 'error',
      BATON_REFUSED_LETTERS_PER_MINUTE: String(BUDGET),
    });
  }, 20_000);

  afterAll(async () => {
    await router?.stop();
    await deleteStreams(nats, prefix);
    await nats.close();
  }, 20_000);

  /** The router-results letters of `agent` (by the subject each names), oldest first. */
  const lettersOf = async (agent: string) => {
    const stream = batonStreamNames(prefix).dlq;
    const info = await nats.jsm.streams.info(stream);
    const out: Array<{ reason: string; source: string; seq: number; body: unknown }> = [];
    for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
      const msg = await nats.jsm.streams.getMessage(stream, { seq }).catch(() => null);
      if (msg === null || msg.header.get(DlqHeader.subject) !== Subjects.agentResult(prefix, 'acme', agent)) continue;
      out.push({
        reason: msg.header.get(DlqHeader.reason),
        source: msg.header.get(DlqHeader.source),
        seq: Number(msg.header.get(DlqHeader.seq)),
        body: JSON.parse(new TextDecoder().decode(msg.data)),
      });
    }
    return out;
  };

  /** `n` results of `agent` the router refuses (a body that breaks the contract), each under its own id; their inbox sequences. */
  const publishRefused = async (agent: string, n: number) => {
    const seqs: number[] = [];
    for (let i = 0; i < n; i++) {
      const ack = await nats.js.publish(Subjects.agentResult(prefix, 'acme', agent), encoder.encode(JSON.stringify({ junk: i })), {
        msgID: MsgIds.result('acme', 'run-1', `${agent}-${i}`),
      });
      seqs.push(ack.seq);
    }
    return seqs;
  };

  /** The value of one series of a counter of the router's metrics (0 when it has none). */
  const counted = async (metrics: BatonMetrics, name: string, labels: Record<string, string>) => {
    const metric = await metrics.registry.getSingleMetric(name)?.get();
    const series = metric?.values.find((v) => Object.entries(labels).every(([k, value]) => v.labels[k] === value));
    return series?.value ?? 0;
  };

  it('acknowledged starts of a workflow not published yet, far past the budget, each keep a letter of their own: published, then redriven, every one runs', async () => {
    const N = 3 * BUDGET;
    const ids = Array.from({ length: N }, (_, i) => `wr-later-${i}`);
    const start = (id: string) => ({ workflow_run_id: id, project: 'acme', workflow: 'later', started_by: 'sam', issue_author: 'ivy', input: 'go' });
    // Each one stored and acknowledged by the stream: its publisher is told it is in, and never sends it again.
    for (const id of ids) expect((await nats.js.publish(Subjects.runStart(prefix, 'acme'), encoder.encode(JSON.stringify(start(id))))).seq).toBeGreaterThan(0);
    const startsDurable = durableNameFor('router', '{prefix}.in.*.start');
    await waitFor(async () => {
      const info = await nats.jsm.consumers.info(batonStreamNames(prefix).inbox, startsDurable);
      return info.delivered.stream_seq > 0 && info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined;
    }, 'the starts consumer to settle every start');

    const admin = new DlqAdmin({ js: nats.js, jsm: nats.jsm, prefix });
    const letters = await admin.list({ source: 'router-starts' });
    expect(letters.map((l) => l.reason)).toEqual(Array(N).fill('unknown_workflow'));
    // Counted as what they are: N messages dead-lettered, each with its letter; none suppressed.
    const metrics = router!.metrics;
    expect(await counted(metrics, 'baton_events_handled_total', { consumer: startsDurable, outcome: 'dead_lettered' })).toBe(N);
    expect(await counted(metrics, 'baton_events_handled_total', { consumer: startsDurable, outcome: 'suppressed' })).toBe(0);
    expect(await counted(metrics, 'baton_dead_letters_total', { source: 'router-starts', reason: 'unknown_workflow' })).toBe(N);

    // The fix: the definition is published; every letter redrives, and every run starts.
    const published = await publishDefinition(nats, prefix, 'acme', {
      project: 'acme',
      agents: [{ name: 'triage', role: 'Triage' }],
      workflows: [{ name: 'later', version: 1, entry: 'triage', steps: [{ id: 'triage', agent: 'triage', terminal: true }] }],
    });
    expect(published).toMatchObject({ ok: true });
    const report = await admin.redrive({ source: 'router-starts' });
    expect({ redriven: report.redriven, skipped: report.skipped }).toEqual({ redriven: N, skipped: 0 });
    const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    for (const id of ids)
      await waitFor(
        async () => ((await store.read({ project: 'acme', kind: 'run', id })).events.some((e) => e.type === 'run.started') ? true : undefined),
        `run ${id} started`,
      );
  }, 60_000);

  it('a flooding agent gets its budget of letters, then one summary naming the stream and sequences of the rest (written at the latest when the router stops); another agent keeps its own budget', async () => {
    const floodSeqs = await publishRefused('flood', 20);
    await publishRefused('calm', 3);
    // Every refusal of the calm agent is lettered in full: its own budget.
    const calm = await waitFor(async () => {
      const found = await lettersOf('calm');
      return found.length === 3 ? found : undefined;
    }, 'the calm agent`s three letters');
    expect(calm.map((l) => [l.source, l.reason])).toEqual(Array(3).fill(['router-results', 'schema_violation']));
    // The flooding one: its budget, and no more while its minute lasts.
    await waitFor(async () => ((await lettersOf('flood')).length >= BUDGET ? true : undefined), 'the flooding agent`s letters');
    const consumer = await waitFor(async () => {
      const infos = await nats.jsm.consumers.list(batonStreamNames(prefix).inbox).next();
      const results = infos.find((c) => c.config.filter_subject?.includes('.result.'));
      return results !== undefined && results.num_pending === 0 && results.num_ack_pending === 0 ? results : undefined;
    }, 'the results consumer to settle every message');
    expect(consumer.delivered.stream_seq).toBeGreaterThanOrEqual(23);
    expect((await lettersOf('flood')).map((l) => l.reason)).toEqual(Array(BUDGET).fill('schema_violation'));

    // Stopping sums up the window still open: one letter for the 16 refusals without one.
    const metrics = router!.metrics;
    await router!.stop();
    router = null;
    const flood = await lettersOf('flood');
    expect(flood).toHaveLength(BUDGET + 1);
    // The ones past the budget: every result published but the four with letters of their own.
    const own = flood.slice(0, BUDGET).map((l) => l.seq);
    const rest = floodSeqs.filter((seq) => !own.includes(seq));
    const inbox = batonStreamNames(prefix).inbox;
    expect(flood[BUDGET]).toMatchObject({
      source: 'router-results',
      reason: DeadLetterReason.refusalsSuppressed,
      body: {
        sender: 'acme/flood',
        suppressed: 20 - BUDGET,
        reasons: { schema_violation: 20 - BUDGET },
        letters_per_window: BUDGET,
        stored: [{ stream: inbox, count: 20 - BUDGET, first_seq: Math.min(...rest), last_seq: Math.max(...rest), sequences_unlisted: 0 }],
      },
    });
    const listed = (flood[BUDGET]!.body as { stored: Array<{ sequences: string[] }> }).stored[0]!.sequences.flatMap((run) => {
      const [from, to = from] = run.split('-').map(Number);
      return Array.from({ length: to! - from! + 1 }, (_, i) => from! + i);
    });
    expect(listed.sort((a, b) => a - b)).toEqual(rest);
    // Its redrive skip says what it is: stored messages, where they are — not a core request.
    const report = await new DlqAdmin({ js: nats.js, jsm: nats.jsm, prefix }).redrive({ reason: DeadLetterReason.refusalsSuppressed }, { dryRun: true });
    expect(report.items).toHaveLength(1);
    expect(report.items[0]).toMatchObject({ status: 'skipped', reason: 'summary_letter' });
    expect(report.items[0]!.detail).toContain(`${inbox} stored them`);
    expect(report.items[0]!.detail).not.toContain('core NATS');
    // Counted consistently: 4 dead-lettered with their own letters, 16 suppressed into one summary.
    const resultsDurable = durableNameFor('router', '{prefix}.in.*.result.*');
    expect(await counted(metrics, 'baton_events_handled_total', { consumer: resultsDurable, outcome: 'dead_lettered' })).toBe(BUDGET + 3);
    expect(await counted(metrics, 'baton_events_handled_total', { consumer: resultsDurable, outcome: 'suppressed' })).toBe(20 - BUDGET);
    expect(await counted(metrics, 'baton_dead_letters_total', { source: 'router-results', reason: 'schema_violation' })).toBe(BUDGET + 3);
    expect(await counted(metrics, 'baton_dead_letters_total', { source: 'router-results', reason: DeadLetterReason.refusalsSuppressed })).toBe(1);
    expect(await lettersOf('calm')).toHaveLength(3);
  }, 60_000);
});
