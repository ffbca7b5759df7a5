import { randomBytes } from 'node:crypto';
import { headers as natsHeaders } from 'nats';
import { batonStreamNames, batonTopology, connectNats, deadLetter, durableNameFor, provision, redriveMsgId, type NatsHandle } from '@baton/eventstore';
import { main } from '../main';
import { bufferedIo } from '../output';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const encoder = new TextEncoder();
const decoder = new TextDecoder();
/** The readable source of the router's agent-result consumer: what its dead letters carry. */
const RESULTS_SOURCE = 'router-results';
/** Its durable name: the source of the letters it wrote before readable names. */
const RESULTS_DURABLE = durableNameFor('router', '{prefix}.in.*.result.*');
/** The body of the first letter: a result for a run the router did not know yet (redriven once the run is started). */
const BODY = '{"result_id":"late","workflow_run_id":"wr-1","handoff_id":"ho-1"}';

describe('baton dlq (real NATS): list, show and an idempotent redrive', () => {
  let nats: NatsHandle;
  let prefix: string;

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { NATS_URL, BATON_PREFIX: prefix } });
    return { code, out: io.out(), err: io.err() };
  }
  async function json<T>(...argv: string[]): Promise<T> {
    const result = await baton(...argv);
    expect({ code: result.code, err: result.err }).toEqual({ code: 0, err: '' });
    return JSON.parse(result.out) as T;
  }
  const inboxSubject = () => `${prefix}.in.p1.result.alpha`;
  const inboxCount = async () => (await nats.jsm.streams.info(batonStreamNames(prefix).inbox)).state.messages;
  const traceHeaders = () => {
    const hdrs = natsHeaders();
    hdrs.append('X-Trace', 'abc');
    hdrs.append('X-Trace', 'def');
    return hdrs;
  };

  beforeEach(async () => {
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, name: 'cli-dlq-int', reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    // Two dead letters as the services write them: a result for a run the router did not know
    // (its original is in the inbox at seq 1), and a refused ledger request (core NATS, no stream;
    // binary bytes).
    const original = await nats.js.publish(inboxSubject(), encoder.encode(BODY), { msgID: 'orig-1', headers: traceHeaders() });
    await deadLetter(nats.js, {
      prefix,
      source: RESULTS_SOURCE,
      reason: 'not_found',
      detail: 'run wr-1 not found',
      subject: inboxSubject(),
      headers: { 'Nats-Msg-Id': ['orig-1'], 'X-Trace': ['abc', 'def'] },
      data: encoder.encode(BODY),
      deliveries: 1,
      stream: batonStreamNames(prefix).inbox,
      seq: original.seq,
      at: '2025-01-01T00:00:00.000Z',
    });
    await deadLetter(nats.js, {
      prefix,
      source: 'ledger',
      reason: 'schema_violation',
      subject: `${prefix}.cmd.ledger.p1.claim`,
      data: new Uint8Array([0xff, 0xfe, 0x00, 0x01]),
      deliveries: 1,
      stream: 'core',
      seq: 0,
    });
  });

  afterEach(async () => {
    const names = batonStreamNames(prefix);
    for (const stream of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(stream).catch(() => undefined);
    await nats.close();
  });

  it('dlq list shows each dead letter with its reason and original subject, filtered by --source and --reason', async () => {
    const all = await json<Array<Record<string, unknown>>>('dlq', 'list', '--json');
    expect(all.map((l) => [l['seq'], l['reason'], l['source'], l['subject'], l['redriven']])).toEqual([
      [1, 'not_found', RESULTS_SOURCE, inboxSubject(), false],
      [2, 'schema_violation', 'ledger', `${prefix}.cmd.ledger.p1.claim`, false],
    ]);
    expect(all.map((l) => l['dlq_subject'])).toEqual([`${prefix}.dlq.router-results`, `${prefix}.dlq.ledger`]);
    expect((await json<unknown[]>('dlq', 'list', '--source', 'ledger', '--json')).length).toBe(1);
    expect((await json<unknown[]>('dlq', 'list', '--reason', 'not_found', '--json')).length).toBe(1);
    expect((await json<unknown[]>('dlq', 'list', '--reason', 'nope', '--json')).length).toBe(0);
    const table = await baton('dlq', 'list');
    expect(table.out).toContain('not_found');
    expect(table.out).toContain('ledger');
    // A source no consumer writes (a typo) matches nothing, and says so rather than look like a clean queue.
    const typo = await baton('dlq', 'list', '--source', 'router-resluts');
    expect(typo.code).toBe(0);
    expect(typo.out).toContain('(no dead letters)');
    expect(typo.err).toMatch(/"router-resluts", which is not a source Baton writes/);
    expect((await baton('dlq', 'list', '--source', 'router-agent-starts')).err).toBe('');
  });

  it('sources are the readable names the help lists; a letter stored under the old durable name is shown and filtered by its readable name, and redriven', async () => {
    const help = await baton('dlq', '--help');
    for (const name of ['router-results', 'router-starts', 'router-answers', 'ledger-handoff-reactor', 'notifier-projections'])
      expect(help.out).toContain(name);
    const original = await nats.js.publish(inboxSubject(), encoder.encode('{"result_id": "old"}'), { msgID: 'orig-old' });
    await deadLetter(nats.js, {
      prefix,
      source: RESULTS_DURABLE,
      reason: 'max_deliveries',
      subject: inboxSubject(),
      data: encoder.encode('{"result_id": "old"}'),
      deliveries: 1,
      stream: batonStreamNames(prefix).inbox,
      seq: original.seq,
    });
    const listed = await json<Array<Record<string, unknown>>>('dlq', 'list', '--source', 'router-results', '--json');
    expect(listed.map((l) => [l['seq'], l['source'], l['source_name']])).toEqual([
      [1, RESULTS_SOURCE, 'router-results'],
      [3, RESULTS_DURABLE, 'router-results'],
    ]);
    const table = await baton('dlq', 'list');
    expect(table.out).not.toContain(RESULTS_DURABLE);
    expect(table.out.match(/router-results/g)).toHaveLength(2);
    const shown = await baton('dlq', 'show', '3');
    expect(shown.out).toContain(`router-results (recorded as ${RESULTS_DURABLE})`);
    const report = await json<{ items: Array<{ seq: number; status: string; target_seq?: number; targetSeq?: number }> }>(
      'dlq',
      'redrive',
      '--source',
      'router-results',
      '--json',
    );
    expect(report.items.map((i) => [i.seq, i.status])).toEqual([
      [1, 'redriven'],
      [3, 'redriven'],
    ]);
    // The inbox sequence it was republished at, snake_case as every --json field (and as before).
    expect(report.items.every((i) => typeof i.target_seq === 'number' && i.target_seq === i.targetSeq)).toBe(true);
  });

  it('dlq show gives the reason, original subject, original headers and the original bytes (text, or base64 when not UTF-8)', async () => {
    const text = await json<Record<string, unknown>>('dlq', 'show', '1', '--json');
    expect(text).toMatchObject({
      seq: 1,
      reason: 'not_found',
      detail: 'run wr-1 not found',
      subject: inboxSubject(),
      original_seq: 1,
      deliveries: 1,
      at: '2025-01-01T00:00:00.000Z',
      headers: { 'Nats-Msg-Id': ['orig-1'], 'X-Trace': ['abc', 'def'] },
      data_text: BODY,
      digest: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    const binary = await json<Record<string, unknown>>('dlq', 'show', '2', '--json');
    expect(binary).toMatchObject({ data_text: null, data_base64: Buffer.from([0xff, 0xfe, 0x00, 0x01]).toString('base64'), bytes: 4, original_stream: 'core' });
    const human = await baton('dlq', 'show', '2');
    expect(human.out).toContain('--- data (base64) ---\n//4AAQ==');
    const missing = await baton('dlq', 'show', '99');
    expect(missing.code).toBe(1);
  });

  type Report = {
    items: Array<{ seq: number; status: string; reason?: string; detail?: string; letter_reason: string; target_seq?: number; targetSeq?: number }>;
    redriven: number;
    skipped: number;
    duplicates: number;
    planned: number;
  };

  it('a plain redrive reports every letter, skips the ledger request (core_request) and goes on; it republishes the result once, with its headers', async () => {
    const dry = await json<Report>('dlq', 'redrive', '--dry-run', '--json');
    expect(dry.items.map((i) => [i.seq, i.status, i.reason ?? null])).toEqual([
      [1, 'planned', null],
      [2, 'skipped', 'core_request'],
    ]);
    expect(await inboxCount()).toBe(1);

    const text = await baton('dlq', 'redrive');
    expect(text.code).toBe(0);
    expect(text.out).toContain(`1\tredriven\t${inboxSubject()}\t(seq 2)`);
    expect(text.out).toContain(`2\tskipped core_request\t${prefix}.cmd.ledger.p1.claim`);
    expect(text.out).toContain('1 redriven, 0 duplicates, 1 skipped');
    expect(await inboxCount()).toBe(2);
    const republished = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { seq: 2 });
    expect(republished.subject).toBe(inboxSubject());
    expect(decoder.decode(republished.data)).toBe(BODY);
    expect(republished.header.values('X-Trace')).toEqual(['abc', 'def']);
    expect(republished.header.get('Nats-Msg-Id')).toBe(redriveMsgId(batonStreamNames(prefix).dlq, 1));
    expect(republished.header.get('Baton-Original-Msg-Id')).toBe('orig-1');
    expect(republished.header.get('Baton-Redriven-From')).toBe(`${batonStreamNames(prefix).dlq}:1`);

    const again = await json<Report>('dlq', 'redrive', '--json');
    expect(again).toMatchObject({ redriven: 0, skipped: 2 });
    expect(again.items.map((i) => i.reason)).toEqual(['already_redriven', 'core_request']);
    // Each item says the letter's own reason too (why its consumer gave up), typed: no prose to parse.
    expect(again.items.map((i) => i.letter_reason)).toEqual(['not_found', 'schema_violation']);
    const planned = await json<Report>('dlq', 'redrive', '--dry-run', '--include-refused', '--json');
    expect(planned.items.every((i) => typeof i.letter_reason === 'string')).toBe(true);
    expect(await inboxCount()).toBe(2);
    const listed = await json<Array<{ redriven: boolean }>>('dlq', 'list', '--json');
    expect(listed.map((l) => l.redriven)).toEqual([true, false]);
  });

  it('a redrive cut short before its marker is recognised as a duplicate on the next run (Nats-Msg-Id redrive:<stream>:<seq>)', async () => {
    // The republish of seq 1 reached the inbox, but the process died before writing the marker.
    await nats.js.publish(inboxSubject(), encoder.encode(BODY), { msgID: redriveMsgId(batonStreamNames(prefix).dlq, 1) });
    const report = await json<Report>('dlq', 'redrive', '--until', '1', '--json');
    expect(report.items).toEqual([expect.objectContaining({ seq: 1, status: 'duplicate' })]);
    expect(await inboxCount()).toBe(2);
    const again = await json<Report>('dlq', 'redrive', '--until', '1', '--json');
    expect(again.items.map((i) => [i.status, i.reason])).toEqual([['skipped', 'already_redriven']]);
  });

  it('an original that aged out is skipped (original_gone) unless --allow-missing-original is given', async () => {
    await nats.jsm.streams.deleteMessage(batonStreamNames(prefix).inbox, 1);
    const skipped = await json<Report>('dlq', 'redrive', '--until', '1', '--json');
    expect(skipped.items.map((i) => [i.status, i.reason])).toEqual([['skipped', 'original_gone']]);
    const allowed = await json<Report>('dlq', 'redrive', '--until', '1', '--allow-missing-original', '--json');
    expect(allowed.items).toEqual([expect.objectContaining({ seq: 1, status: 'redriven', original: 'gone' })]);
  });

  /** Publish `body` to the inbox on `subject` and dead-letter it as the router's consumer `source` does, with `reason`. */
  async function inboxLetter(subject: string, body: string, reason: string, source = RESULTS_SOURCE): Promise<number> {
    const original = await nats.js.publish(subject, encoder.encode(body), { msgID: `orig-${subject}-${body}` });
    const letter = await deadLetter(nats.js, {
      prefix,
      source,
      reason,
      subject,
      headers: { 'Nats-Msg-Id': [`orig-${subject}-${body}`] },
      data: encoder.encode(body),
      deliveries: 1,
      stream: batonStreamNames(prefix).inbox,
      seq: original.seq,
    });
    return letter.seq;
  }

  it('dlq list --project, --run and --handoff find the letters of a project, a run, a handoff; composable with --source and --reason; --json keeps its shape', async () => {
    const other = await inboxLetter(`${prefix}.in.p2.result.alpha`, '{"result_id":"x","workflow_run_id":"wr-1"}', 'not_found');
    const start = await inboxLetter(`${prefix}.in.p2.start`, '{"workflow_run_id":"wr-2","workflow":"w"}', 'unknown_workflow', 'router-starts');
    const malformed = await inboxLetter(`${prefix}.in.p1.result.alpha`, '{"workflow_run_id":"wr-1", ', 'malformed_json');
    const seqs = async (...filters: string[]) => (await json<Array<{ seq: number }>>('dlq', 'list', ...filters, '--json')).map((l) => l.seq);

    // Letter 2 is the ledger request on <prefix>.cmd.ledger.p1.claim: project p1 by its subject.
    expect(await seqs('--project', 'p1')).toEqual([1, 2, malformed]);
    expect(await seqs('--project', 'p2')).toEqual([other, start]);
    expect(await seqs('--project', 'p3')).toEqual([]);
    // The run: named by the body of both projects' letters; a body that is not JSON names none.
    expect(await seqs('--run', 'wr-1')).toEqual([1, other]);
    expect(await seqs('--run', 'wr-1', '--project', 'p2')).toEqual([other]);
    expect(await seqs('--run', 'wr-2', '--source', 'router-starts', '--reason', 'unknown_workflow')).toEqual([start]);
    expect(await seqs('--run', 'wr-2', '--source', 'router-results')).toEqual([]);
    expect(await seqs('--handoff', 'ho-1')).toEqual([1]);
    expect(await seqs('--handoff', 'ho-1', '--run', 'wr-2')).toEqual([]);

    // --json is one object per letter, as before (plus `notice`, null but for a webhook consumer's letter).
    const [letter] = await json<Array<Record<string, unknown>>>('dlq', 'list', '--run', 'wr-1', '--project', 'p1', '--json');
    expect(letter!['notice']).toBeNull();
    expect(Object.keys(letter!).sort()).toEqual(
      [
        'seq',
        'reason',
        'detail',
        'source',
        'source_name',
        'subject',
        'project',
        'dlq_subject',
        'original_stream',
        'original_seq',
        'deliveries',
        'consumer',
        'at',
        'redriven',
        'notice',
        'digest',
        'headers',
        'bytes',
        'data_text',
        'data_base64',
      ].sort(),
    );
    const table = await baton('dlq', 'list', '--project', 'p2');
    expect(table.out).toContain(`${prefix}.in.p2.start`);
    expect(table.out).not.toContain(`${prefix}.in.p1.`);
    // An empty filter would match nothing without a word: a usage error.
    expect((await baton('dlq', 'list', '--project', '')).code).toBe(2);
    const help = await baton('dlq', '--help');
    for (const option of ['--project <p>', '--run <id>', '--handoff <id>', '--include-refused', 'message_refused', 'no paging'])
      expect(help.out).toContain(option);
  });

  it('redrive skips a letter whose message itself was refused (schema_violation) and says why; --include-refused redrives it, once', async () => {
    const refused = await inboxLetter(`${prefix}.in.p1.result.alpha`, '{"result_id":"bad"}', 'schema_violation');
    const inboxBefore = await inboxCount();

    const dry = await baton('dlq', 'redrive', '--dry-run');
    expect(dry.code).toBe(0);
    expect(dry.out).toContain(`1\tplanned\t${inboxSubject()}`);
    expect(dry.out).toMatch(
      new RegExp(`${refused}\tskipped message_refused\t${inboxSubject().replace(/\./g, '\\.')}\tschema_violation: the message itself is refused`),
    );
    expect(dry.out).toContain('fix the sender and publish a corrected message');
    expect(dry.out).toContain('dry run: 1 would be redriven, 2 skipped');
    expect(dry.out).toContain('1 skipped as message_refused');

    const report = await json<Report>('dlq', 'redrive', '--json');
    expect(report.items.map((i) => [i.seq, i.status, i.reason ?? null])).toEqual([
      [1, 'redriven', null],
      [2, 'skipped', 'core_request'],
      [refused, 'skipped', 'message_refused'],
    ]);
    expect(await inboxCount()).toBe(inboxBefore + 1);

    const forced = await json<Report>('dlq', 'redrive', '--include-refused', '--json');
    expect(forced.items.map((i) => [i.seq, i.status, i.reason ?? null])).toEqual([
      [1, 'skipped', 'already_redriven'],
      [2, 'skipped', 'core_request'],
      [refused, 'redriven', null],
    ]);
    expect(await inboxCount()).toBe(inboxBefore + 2);
    const again = await json<Report>('dlq', 'redrive', '--include-refused', '--reason', 'schema_violation', '--source', 'router-results', '--json');
    expect(again.items.map((i) => [i.seq, i.status, i.reason ?? null])).toEqual([[refused, 'skipped', 'already_redriven']]);
    expect(await inboxCount()).toBe(inboxBefore + 2);
  });

  it('redrive --project redrives only that project’s letters and leaves the others alone (the dry run lists only them)', async () => {
    const theirs = await inboxLetter(`${prefix}.in.p2.result.alpha`, '{"result_id":"theirs"}', 'max_deliveries');
    const inboxBefore = await inboxCount();
    const dry = await json<Report>('dlq', 'redrive', '--project', 'p2', '--dry-run', '--json');
    expect(dry.items.map((i) => [i.seq, i.status])).toEqual([[theirs, 'planned']]);
    const report = await json<Report>('dlq', 'redrive', '--project', 'p1', '--json');
    expect(report.items.map((i) => [i.seq, i.status, i.reason ?? null])).toEqual([
      [1, 'redriven', null],
      [2, 'skipped', 'core_request'],
    ]);
    expect(await inboxCount()).toBe(inboxBefore + 1);
    const listed = await json<Array<{ seq: number; redriven: boolean }>>('dlq', 'list', '--json');
    expect(listed.map((l) => [l.seq, l.redriven])).toEqual([
      [1, true],
      [2, false],
      [theirs, false],
    ]);
    const last = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { seq: await inboxCount() });
    expect(last.subject).toBe(inboxSubject());
  });

  it('dlq with no subcommand prints its usage and exits 2; an unknown subcommand is a usage error', async () => {
    expect((await baton('dlq')).code).toBe(2);
    expect((await baton('dlq', 'purge')).code).toBe(2);
  });

  it('a notice a webhook never took (notifier-webhooks, notifier-mesh-webhooks): list shows its project and notice id (text and --json), show prints the ready-to-run baton notice redeliver', async () => {
    const notice = {
      notice_id: 'nt-r-res-wr-7',
      project: 'shop',
      workflow_run_id: 'wr-7',
      reason: 'hold',
      recipient: { handle: 'olga', source: 'started_by' },
      headline: 'needs a person',
      step: null,
      agent: null,
      created_at: '2025-01-01T00:00:00.000Z',
    };
    // The stored notice event, dead-lettered as the notifier's webhook consumer does it.
    const event = {
      id: 'ev-7',
      type: 'run.notice_emitted',
      version: 1,
      aggregate: { kind: 'run', id: 'wr-7' },
      project: 'shop',
      occurredAt: '2025-01-01T00:00:00.000Z',
      actor: 'router',
      origin: 'engine',
      causationId: null,
      correlationId: 'wr-7',
      payload: { notice },
    };
    const subject = `${prefix}.ev.shop.run.wr-7`;
    const data = encoder.encode(JSON.stringify(event));
    const stored = await nats.js.publish(subject, data);
    await deadLetter(nats.js, {
      prefix,
      source: 'notifier-webhooks',
      reason: 'max_deliveries',
      detail: 'TransientError: webhook delivery failed for 0123456789abcdef (connection_refused: connect ECONNREFUSED 10.0.0.7:443)',
      subject,
      data,
      deliveries: 21,
      stream: batonStreamNames(prefix).events,
      seq: stored.seq,
    });
    const command = 'baton notice redeliver nt-r-res-wr-7 --project shop';

    const listed = await json<Array<Record<string, unknown>>>('dlq', 'list', '--json');
    expect(listed.map((l) => [l['seq'], l['source'], l['notice']])).toEqual([
      [1, RESULTS_SOURCE, null],
      [2, 'ledger', null],
      [3, 'notifier-webhooks', { project: 'shop', notice_id: 'nt-r-res-wr-7', redeliver: command }],
    ]);
    const table = await baton('dlq', 'list', '--source', 'notifier-webhooks');
    const [header, row, ...rest] = table.out.split('\n');
    expect(header).toMatch(/PROJECT\s+NOTICE$/);
    expect(row).toMatch(/^3\s+max_deliveries\s+notifier-webhooks\s.*\sshop\s+nt-r-res-wr-7$/);
    expect(rest.join('\n')).toContain('baton notice redeliver <notice> --project <project>');
    // Other letters: no notice, and no hint.
    const others = await baton('dlq', 'list', '--source', 'ledger');
    expect(others.out).not.toContain('notice redeliver');

    const shown = await baton('dlq', 'show', '3');
    expect(shown.out).toMatch(/^project:\s+shop$/m);
    expect(shown.out).toMatch(/^notice:\s+nt-r-res-wr-7$/m);
    expect(shown.out).toContain(`once the receiver is fixed, send it again:\n  ${command}\n`);
    expect((await json<Record<string, unknown>>('dlq', 'show', '3', '--json'))['notice']).toEqual({
      project: 'shop',
      notice_id: 'nt-r-res-wr-7',
      redeliver: command,
    });
    expect((await baton('dlq', 'show', '1')).out).not.toContain('notice redeliver');
  });
  it('every letter shows the project of its original subject — the one --project matches — in list (PROJECT column, --json project) and show; null / - when its subject names none', async () => {
    const other = await inboxLetter(`${prefix}.in.p2.start`, '{"workflow_run_id":"wr-2","workflow":"w"}', 'unknown_workflow', 'router-starts');
    const nowhere = await deadLetter(nats.js, {
      prefix,
      source: 'ledger',
      reason: 'schema_violation',
      subject: 'elsewhere',
      data: encoder.encode('{}'),
      deliveries: 1,
      stream: 'core',
      seq: 0,
    });
    const listed = await json<Array<Record<string, unknown>>>('dlq', 'list', '--json');
    expect(listed.map((l) => [l['seq'], l['project']])).toEqual([
      [1, 'p1'],
      [2, 'p1'],
      [other, 'p2'],
      [nowhere.seq, null],
    ]);
    // The column and --project agree, letter by letter.
    for (const project of ['p1', 'p2']) {
      const matched = await json<Array<Record<string, unknown>>>('dlq', 'list', '--project', project, '--json');
      expect(matched.map((l) => l['seq'])).toEqual(listed.filter((l) => l['project'] === project).map((l) => l['seq']));
    }
    const table = await baton('dlq', 'list');
    const rows = table.out.split('\n');
    expect(rows[0]).toMatch(/\sPROJECT\s+NOTICE$/);
    expect(rows.find((row) => row.startsWith('1 '))).toMatch(/\sp1\s+-$/);
    expect(rows.find((row) => row.startsWith(`${other} `))).toMatch(/\sp2\s+-$/);
    expect(rows.find((row) => row.startsWith(`${nowhere.seq} `))).toMatch(/\s-\s+-$/);
    expect((await baton('dlq', 'show', '1')).out).toMatch(/^project:\s+p1$/m);
    expect((await json<Record<string, unknown>>('dlq', 'show', String(other), '--json'))['project']).toBe('p2');
  });

  it('dlq show of a redrive marker says what is there — the marker of letter N, redriven when, to where — exit 1 not_a_dead_letter with it in details; an empty seq stays not_found', async () => {
    const redrive = await json<Report>('dlq', 'redrive', '--json');
    expect(redrive.redriven).toBe(1);
    // The DLQ now holds letters 1 and 2, and at 3 the marker of letter 1.
    const shown = await baton('dlq', 'show', '3');
    expect(shown.code).toBe(1);
    expect(shown.out).toBe('');
    expect(shown.err).toMatch(
      new RegExp(
        `^baton dlq: seq 3 in ${batonStreamNames(prefix).dlq} is not a dead letter: it is the redrive marker of letter 1, redriven \\d{4}-\\d\\d-\\d\\dT[^ ]+ to ${inboxSubject().replace(/\./g, '\\.')} \\(seq 2\\); that letter is shown redriven\\. The letter: baton dlq show 1`,
      ),
    );
    const asJson = await baton('dlq', 'show', '3', '--json');
    expect(asJson.code).toBe(1);
    const failure = JSON.parse(asJson.err) as { error: { code: string; details: Record<string, unknown> } };
    expect(failure.error.code).toBe('not_a_dead_letter');
    expect(failure.error.details).toEqual({
      seq: 3,
      kind: 'redrive_marker',
      subject: `${prefix}.dlq._redriven`,
      marks_seq: 1,
      redriven_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as string,
      target_subject: inboxSubject(),
      target_seq: 2,
      counts: true,
    });
    // A marker of an earlier version (empty body on <prefix>.dlq.redriven): said as such, and that it counts for nothing.
    const legacy = natsHeaders();
    legacy.set('Baton-Dlq-Redriven-Seq', '2');
    legacy.set('Baton-Dlq-Redriven-At', '2024-01-01T00:00:00.000Z');
    const old = await nats.js.publish(`${prefix}.dlq.redriven`, new Uint8Array(0), { headers: legacy });
    const oldShown = JSON.parse((await baton('dlq', 'show', String(old.seq), '--json')).err) as { error: { code: string; details: Record<string, unknown> } };
    expect(oldShown.error).toMatchObject({ code: 'not_a_dead_letter', details: { kind: 'legacy_redrive_marker', marks_seq: 2, counts: false } });
    // Nothing at that seq: not_found, as before.
    const none = await baton('dlq', 'show', '99', '--json');
    expect(none.code).toBe(1);
    expect((JSON.parse(none.err) as { error: { code: string } }).error.code).toBe('not_found');
    // The letters themselves still show.
    expect((await baton('dlq', 'show', '1')).code).toBe(0);
  });
});
