import { randomBytes } from 'node:crypto';
import { createEventRegistry, Subjects } from '@baton/contracts';
import { batonStreamNames, connectNats, DlqAdmin, DlqHeader, JetStreamEventStore, REFUSED_LETTER_BYTES, type NatsHandle } from '@baton/eventstore';
import { durableNameFor, type BatonMetrics, type RunningService } from '@baton/platform';
import { publishMeshResult, startMesh } from '@baton/sdk';
import { waitFor } from '@baton/wait';
import { startRouter } from './router.app';
import { deleteStreams, publishDefinition } from './int/support';

/*
 * The router's records of what an agent (or the customer channel) can have refused at will, each
 * under its sender's budget (BATON_REFUSED_LETTERS_PER_MINUTE, the sender named by the subject):
 * the refusals it records on a run or a mesh (`run.result_rejected` of customer messages,
 * `mesh.turn_rejected` of turns) and the `not_found` letters of messages naming a run that does
 * not exist. Past the budget each is only counted, in one `refusals_suppressed` letter naming the
 * inbox sequences of the rest. And the letters of refused messages redrive never republishes keep
 * at most 4 KiB of them (before, the whole message, up to 256 KiB).
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const BUDGET = 3;
const N = 10;
const P = 'acme';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

const definition = {
  project: P,
  agents: [
    { name: 'triage', role: 'Front desk' },
    { name: 'billing', role: 'Billing' },
  ],
  workflows: [{ name: 'flow', version: 1, entry: 'triage', steps: [{ id: 'triage', agent: 'triage', terminal: true }] }],
  meshes: [{ name: 'support', entry: 'triage', handoffs: { triage: ['billing'], billing: ['triage'] }, outputs: ['triage'], max_iterations: 4 }],
};

interface Letter {
  reason: string;
  detail: string;
  subject: string;
  truncated: string | undefined;
  bytes: number;
  data: Uint8Array;
}

describe('router: refusals an agent can cause at will are recorded under its sender`s budget (real NATS)', () => {
  let nats: NatsHandle;
  let prefix = '';
  let router: RunningService | null = null;
  let store: JetStreamEventStore;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
  });

  beforeEach(async () => {
    prefix = `rb${randomBytes(5).toString('hex')}`;
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    router = await startRouter({
      ...process.env,
      NATS_URL,
      BATON_PREFIX: prefix,
      HTTP_PORT: '0',
      LOG_LEVEL: 'error',
      BATON_REFUSED_LETTERS_PER_MINUTE: String(BUDGET),
    });
    expect(await publishDefinition(nats, prefix, P, definition)).toMatchObject({ ok: true });
  }, 20_000);

  afterEach(async () => {
    await router?.stop();
    router = null;
    await deleteStreams(nats, prefix);
  }, 20_000);

  afterAll(async () => {
    await nats.close();
  });

  /** The letters on `<prefix>.dlq.<source>`, oldest first: every message on that DLQ subject. */
  const lettersOn = async (source: string): Promise<Letter[]> => {
    const stream = batonStreamNames(prefix).dlq;
    const info = await nats.jsm.streams.info(stream);
    const out: Letter[] = [];
    for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
      const msg = await nats.jsm.streams.getMessage(stream, { seq }).catch(() => null);
      if (msg === null || msg.subject !== Subjects.deadLetter(prefix, source)) continue;
      out.push({
        reason: msg.header.get(DlqHeader.reason),
        detail: msg.header.get(DlqHeader.detail),
        subject: msg.header.get(DlqHeader.subject),
        truncated: msg.header.has(DlqHeader.truncated) ? msg.header.get(DlqHeader.truncated) : undefined,
        bytes: msg.data.length,
        data: msg.data,
      });
    }
    return out;
  };

  /** Wait until the router's consumer of `pattern` has settled every message of the inbox. */
  const settled = (pattern: string) =>
    waitFor(async () => {
      const info = await nats.jsm.consumers.info(batonStreamNames(prefix).inbox, durableNameFor('router', pattern));
      const inbox = await nats.jsm.streams.info(batonStreamNames(prefix).inbox);
      return info.num_pending === 0 && info.num_ack_pending === 0 && info.delivered.stream_seq > 0 && inbox.state.messages > 0 ? true : undefined;
    }, `the consumer of ${pattern} to settle every message`);

  const eventsOf = async (kind: 'run' | 'mesh', id: string, type: string) => (await store.read({ project: P, kind, id })).events.filter((e) => e.type === type);

  /** The value of one series of a counter of the router's metrics (0 when it has none). */
  const counted = async (metrics: BatonMetrics, name: string, labels: Record<string, string>) => {
    const metric = await metrics.registry.getSingleMetric(name)?.get();
    const series = metric?.values.find((v) => Object.entries(labels).every(([k, value]) => v.labels[k] === value));
    return series?.value ?? 0;
  };

  /** Stop the router: the windows still open are summed up, one `refusals_suppressed` letter per sender. */
  const stopRouter = async () => {
    await router!.stop();
    router = null;
  };

  const summaryBody = (letter: Letter) => JSON.parse(decoder.decode(letter.data)) as Record<string, unknown>;

  it('customer messages a run refuses, far past the sender`s budget, are recorded on the run only within it; the rest are summed up in one letter naming their inbox sequences', async () => {
    const run = 'wr-conv-1';
    await nats.js.publish(
      Subjects.runStart(prefix, P),
      encoder.encode(JSON.stringify({ workflow_run_id: run, project: P, workflow: 'flow', started_by: 'sam', issue_author: 'ivy', input: 'go' })),
    );
    await waitFor(async () => ((await eventsOf('run', run, 'run.started')).length > 0 ? true : undefined), 'the run to start');
    // A workflow run takes no customer messages: each one, under a new id, is refused (run_not_awaiting_input).
    const seqs: number[] = [];
    for (let i = 0; i < N; i++) {
      const ack = await nats.js.publish(
        Subjects.sessionMessage(prefix, P),
        encoder.encode(JSON.stringify({ workflow_run_id: run, project: P, message_id: `m-${i}`, text: `hello ${i}` })),
      );
      seqs.push(ack.seq);
    }
    await settled('{prefix}.in.*.message');
    const refusals = await eventsOf('run', run, 'run.result_rejected');
    expect(refusals).toHaveLength(BUDGET);
    expect(refusals.map((e) => (e.payload as { result_id: string }).result_id)).toEqual(['m-0', 'm-1', 'm-2']);
    expect(await lettersOn('router-messages')).toEqual([]);

    await stopRouter();
    const letters = await lettersOn('router-messages');
    expect(letters.map((l) => l.reason)).toEqual(['refusals_suppressed']);
    const body = summaryBody(letters[0]!);
    expect(body).toMatchObject({ sender: P, suppressed: N - BUDGET, reasons: { run_not_awaiting_input: N - BUDGET }, letters_per_window: BUDGET });
    expect(body['stored']).toEqual([
      expect.objectContaining({ stream: batonStreamNames(prefix).inbox, count: N - BUDGET, first_seq: seqs[BUDGET], last_seq: seqs[N - 1] }),
    ]);
  }, 60_000);

  it('one budget per sender and source: letters of messages refused for themselves and refusals recorded on a run spend the same budget; the summary says how many were refused on their run', async () => {
    const run = 'wr-conv-shared';
    await nats.js.publish(
      Subjects.runStart(prefix, P),
      encoder.encode(JSON.stringify({ workflow_run_id: run, project: P, workflow: 'flow', started_by: 'sam', issue_author: 'ivy', input: 'go' })),
    );
    await waitFor(async () => ((await eventsOf('run', run, 'run.started')).length > 0 ? true : undefined), 'the run to start');
    const junk = () => nats.js.publish(Subjects.sessionMessage(prefix, P), encoder.encode(JSON.stringify({ junk: true })));
    // BUDGET - 1 messages refused for themselves (schema_violation letters, through the consumer's letter gate)…
    for (let i = 0; i < BUDGET - 1; i++) await junk();
    // …then N customer messages the run refuses (run_not_awaiting_input), then 2 more refused for themselves.
    for (let i = 0; i < N; i++)
      await nats.js.publish(
        Subjects.sessionMessage(prefix, P),
        encoder.encode(JSON.stringify({ workflow_run_id: run, project: P, message_id: `s-${i}`, text: `hello ${i}` })),
      );
    for (let i = 0; i < 2; i++) await junk();
    await settled('{prefix}.in.*.message');

    // One budget: BUDGET - 1 letters, then the one refusal left is recorded on the run, and nothing more.
    expect((await lettersOn('router-messages')).map((l) => l.reason)).toEqual(Array(BUDGET - 1).fill('schema_violation'));
    expect((await eventsOf('run', run, 'run.result_rejected')).map((e) => (e.payload as { result_id: string }).result_id)).toEqual(['s-0']);
    const durable = durableNameFor('router', '{prefix}.in.*.message');
    expect(await counted(router!.metrics, 'baton_events_handled_total', { consumer: durable, outcome: 'suppressed' })).toBe(2);

    await stopRouter();
    const summaries = (await lettersOn('router-messages')).filter((l) => l.reason === 'refusals_suppressed');
    expect(summaries).toHaveLength(1);
    expect(summaryBody(summaries[0]!)).toMatchObject({
      sender: P,
      suppressed: N - 1 + 2,
      on_run_or_mesh: N - 1,
      reasons: { run_not_awaiting_input: N - 1, schema_violation: 2 },
    });
    expect(summaries[0]!.detail).toContain(`${N - 1} of them inbox messages refused on their run or mesh`);
  }, 60_000);

  it('mesh turns a mesh refuses, far past the agent`s budget, are recorded on the mesh only within it; the rest are summed up per agent', async () => {
    const mesh = 'mesh-flood-1';
    await startMesh({ js: nats.js, prefix }, { mesh_run_id: mesh, project: P, mesh: 'support', input: 'charged twice', started_by: 'sam' });
    await waitFor(async () => ((await eventsOf('mesh', mesh, 'mesh.started')).length > 0 ? true : undefined), 'the mesh to start');
    // It is triage's turn: every turn of billing, each under its own result id, is refused (unexpected_agent).
    for (let i = 0; i < N; i++)
      await publishMeshResult({ js: nats.js, prefix }, { project: P, mesh_run_id: mesh, agent: 'billing', result_id: `t-${i}`, text: `me ${i}` });
    await settled('{prefix}.in.*.mesh_result.*');
    expect(await eventsOf('mesh', mesh, 'mesh.turn_rejected')).toHaveLength(BUDGET);
    expect(await lettersOn('router-mesh-turns')).toEqual([]);

    await stopRouter();
    const letters = await lettersOn('router-mesh-turns');
    expect(letters.map((l) => l.reason)).toEqual(['refusals_suppressed']);
    expect(summaryBody(letters[0]!)).toMatchObject({ sender: `${P}/billing`, suppressed: N - BUDGET, reasons: { unexpected_agent: N - BUDGET } });
  }, 60_000);

  it('a not_found flood (results naming runs that do not exist) gets its budget of whole letters, then is counted; another agent keeps its own budget', async () => {
    const result = (agent: string, i: number, body: string) => ({
      result_id: `${agent}-r-${i}`,
      run_id: `${agent}-run-${i}`,
      project: P,
      workflow_run_id: `no-such-run-${agent}-${i}`,
      agent,
      body,
      produced_at: new Date().toISOString(),
    });
    const big = 'y'.repeat(6_000); // larger than a refused letter keeps: a not_found letter is redriven, so it stays whole
    for (let i = 0; i < N; i++) await nats.js.publish(Subjects.agentResult(prefix, P, 'ghost'), encoder.encode(JSON.stringify(result('ghost', i, big))));
    await nats.js.publish(Subjects.agentResult(prefix, P, 'calm'), encoder.encode(JSON.stringify(result('calm', 0, 'hi'))));
    await settled('{prefix}.in.*.result.*');

    const letters = await lettersOn('router-results');
    const ghost = letters.filter((l) => l.subject === Subjects.agentResult(prefix, P, 'ghost'));
    expect(ghost.map((l) => l.reason)).toEqual(Array(BUDGET).fill('not_found'));
    for (const letter of ghost) expect({ truncated: letter.truncated, whole: letter.bytes > 6_000 }).toEqual({ truncated: undefined, whole: true });
    expect(letters.filter((l) => l.subject === Subjects.agentResult(prefix, P, 'calm')).map((l) => l.reason)).toEqual(['not_found']);
    // Counted as what they are: the rest of the flood has no letter of its own.
    const durable = durableNameFor('router', '{prefix}.in.*.result.*');
    expect(await counted(router!.metrics, 'baton_events_handled_total', { consumer: durable, outcome: 'suppressed' })).toBe(N - BUDGET);
    expect(await counted(router!.metrics, 'baton_events_handled_total', { consumer: durable, outcome: 'dead_lettered' })).toBe(BUDGET + 1);

    await stopRouter();
    const summaries = (await lettersOn('router-results')).filter((l) => l.reason === 'refusals_suppressed');
    expect(summaries).toHaveLength(1);
    expect(summaryBody(summaries[0]!)).toMatchObject({ sender: `${P}/ghost`, suppressed: N - BUDGET, reasons: { not_found: N - BUDGET } });
    expect(summaries[0]!.detail).toContain('published again from there by hand');
  }, 60_000);

  it('an unknown_mesh flood (mesh starts naming a mesh the project does not define: the edge checks none) gets its budget of whole letters, then is counted; published, the letters within the budget redrive and their meshes start', async () => {
    const big = 'y'.repeat(6_000); // larger than a refused letter keeps: an unknown_mesh letter is redriven, so it stays whole
    const ids = Array.from({ length: N }, (_, i) => `m-later-${i}`);
    const seqs: number[] = [];
    for (const id of ids)
      seqs.push(
        (
          await nats.js.publish(
            Subjects.meshStart(prefix, P),
            encoder.encode(JSON.stringify({ mesh_run_id: id, project: P, mesh: 'later', started_by: 'sam', input: big })),
          )
        ).seq,
      );
    await settled('{prefix}.in.*.mesh_start');

    const letters = await lettersOn('router-mesh-starts');
    expect(letters.map((l) => l.reason)).toEqual(Array(BUDGET).fill('unknown_mesh'));
    for (const letter of letters) expect({ truncated: letter.truncated, whole: letter.bytes > 6_000 }).toEqual({ truncated: undefined, whole: true });
    const durable = durableNameFor('router', '{prefix}.in.*.mesh_start');
    expect(await counted(router!.metrics, 'baton_events_handled_total', { consumer: durable, outcome: 'suppressed' })).toBe(N - BUDGET);
    expect(await counted(router!.metrics, 'baton_events_handled_total', { consumer: durable, outcome: 'dead_lettered' })).toBe(BUDGET);

    // The fix: the mesh is published; the letters within the budget redrive, and their meshes start.
    expect(
      await publishDefinition(nats, prefix, P, {
        ...definition,
        meshes: [...definition.meshes, { ...definition.meshes[0]!, name: 'later' }],
      }),
    ).toMatchObject({ ok: true });
    const report = await new DlqAdmin({ js: nats.js, jsm: nats.jsm, prefix }).redrive({ source: 'router-mesh-starts' });
    expect({ redriven: report.redriven, skipped: report.skipped }).toEqual({ redriven: BUDGET, skipped: 0 });
    for (const id of ids.slice(0, BUDGET))
      await waitFor(async () => ((await eventsOf('mesh', id, 'mesh.started')).length > 0 ? true : undefined), `mesh ${id} started`);

    // The rest: one summary naming their inbox sequences, where the originals stay.
    await stopRouter();
    const summaries = (await lettersOn('router-mesh-starts')).filter((l) => l.reason === 'refusals_suppressed');
    expect(summaries).toHaveLength(1);
    const body = summaryBody(summaries[0]!);
    expect(body).toMatchObject({ sender: P, suppressed: N - BUDGET, reasons: { unknown_mesh: N - BUDGET } });
    expect((body['stored'] as Array<{ first_seq: number; last_seq: number; count: number }>)[0]).toMatchObject({
      first_seq: seqs[BUDGET],
      last_seq: seqs[N - 1],
      count: N - BUDGET,
    });
    expect(summaries[0]!.detail).toContain('published again from there by hand');
  }, 60_000);

  it('a refused router letter keeps at most 4 KiB of the message and says it was cut: a refused definition request and a refused result', async () => {
    const junk = 'x'.repeat(20_000);
    // A core request: refused (its body breaks the schema) and answered; its letter is never redriven.
    const reply = await publishDefinition(nats, prefix, P, { ...definition, junk });
    expect(reply).toMatchObject({ ok: false, error: { code: 'schema_violation' } });
    // An inbox message refused for itself: its letter is one redrive would not republish.
    await nats.js.publish(Subjects.agentResult(prefix, P, 'triage'), encoder.encode(JSON.stringify({ junk })));
    await settled('{prefix}.in.*.result.*');

    const definitionLetters = await waitFor(async () => {
      const found = await lettersOn('router-definitions');
      return found.length > 0 ? found : undefined;
    }, 'the refused definition`s letter');
    const resultLetters = await lettersOn('router-results');
    expect(resultLetters.map((l) => l.reason)).toEqual(['schema_violation']);
    for (const letter of [definitionLetters[0]!, resultLetters[0]!]) {
      expect(letter.bytes).toBe(REFUSED_LETTER_BYTES);
      expect(Number(letter.truncated)).toBeGreaterThan(20_000);
      expect(letter.detail).toContain(`(first ${REFUSED_LETTER_BYTES} of ${letter.truncated} bytes kept)`);
    }
  }, 60_000);
});
