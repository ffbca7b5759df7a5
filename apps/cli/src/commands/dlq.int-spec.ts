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
    // Two dead letters as the services write them: a malformed result the router's consumer read
    // from the inbox (its original is in the inbox at seq 1), and a refused ledger request (core
    // NATS, no stream; binary bytes).
    const original = await nats.js.publish(inboxSubject(), encoder.encode('{"result_id": "broken", '), { msgID: 'orig-1', headers: traceHeaders() });
    await deadLetter(nats.js, {
      prefix,
      source: RESULTS_SOURCE,
      reason: 'malformed_json',
      detail: 'not valid JSON',
      subject: inboxSubject(),
      headers: { 'Nats-Msg-Id': ['orig-1'], 'X-Trace': ['abc', 'def'] },
      data: encoder.encode('{"result_id": "broken", '),
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
      [1, 'malformed_json', RESULTS_SOURCE, inboxSubject(), false],
      [2, 'schema_violation', 'ledger', `${prefix}.cmd.ledger.p1.claim`, false],
    ]);
    expect(all.map((l) => l['dlq_subject'])).toEqual([`${prefix}.dlq.router-results`, `${prefix}.dlq.ledger`]);
    expect((await json<unknown[]>('dlq', 'list', '--source', 'ledger', '--json')).length).toBe(1);
    expect((await json<unknown[]>('dlq', 'list', '--reason', 'malformed_json', '--json')).length).toBe(1);
    expect((await json<unknown[]>('dlq', 'list', '--reason', 'nope', '--json')).length).toBe(0);
    const table = await baton('dlq', 'list');
    expect(table.out).toContain('malformed_json');
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
    const original = await nats.js.publish(inboxSubject(), encoder.encode('{"result_id": "old", '), { msgID: 'orig-old' });
    await deadLetter(nats.js, {
      prefix,
      source: RESULTS_DURABLE,
      reason: 'malformed_json',
      subject: inboxSubject(),
      data: encoder.encode('{"result_id": "old", '),
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
    const report = await json<{ items: Array<{ seq: number; status: string }> }>('dlq', 'redrive', '--source', 'router-results', '--json');
    expect(report.items.map((i) => [i.seq, i.status])).toEqual([
      [1, 'redriven'],
      [3, 'redriven'],
    ]);
  });

  it('dlq show gives the reason, original subject, original headers and the original bytes (text, or base64 when not UTF-8)', async () => {
    const text = await json<Record<string, unknown>>('dlq', 'show', '1', '--json');
    expect(text).toMatchObject({
      seq: 1,
      reason: 'malformed_json',
      detail: 'not valid JSON',
      subject: inboxSubject(),
      original_seq: 1,
      deliveries: 1,
      at: '2025-01-01T00:00:00.000Z',
      headers: { 'Nats-Msg-Id': ['orig-1'], 'X-Trace': ['abc', 'def'] },
      data_text: '{"result_id": "broken", ',
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
    items: Array<{ seq: number; status: string; reason?: string; detail?: string }>;
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
    expect(decoder.decode(republished.data)).toBe('{"result_id": "broken", ');
    expect(republished.header.values('X-Trace')).toEqual(['abc', 'def']);
    expect(republished.header.get('Nats-Msg-Id')).toBe(redriveMsgId(batonStreamNames(prefix).dlq, 1));
    expect(republished.header.get('Baton-Original-Msg-Id')).toBe('orig-1');
    expect(republished.header.get('Baton-Redriven-From')).toBe(`${batonStreamNames(prefix).dlq}:1`);

    const again = await json<Report>('dlq', 'redrive', '--json');
    expect(again).toMatchObject({ redriven: 0, skipped: 2 });
    expect(again.items.map((i) => i.reason)).toEqual(['already_redriven', 'core_request']);
    expect(await inboxCount()).toBe(2);
    const listed = await json<Array<{ redriven: boolean }>>('dlq', 'list', '--json');
    expect(listed.map((l) => l.redriven)).toEqual([true, false]);
  });

  it('a redrive cut short before its marker is recognised as a duplicate on the next run (Nats-Msg-Id redrive:<stream>:<seq>)', async () => {
    // The republish of seq 1 reached the inbox, but the process died before writing the marker.
    await nats.js.publish(inboxSubject(), encoder.encode('{"result_id": "broken", '), { msgID: redriveMsgId(batonStreamNames(prefix).dlq, 1) });
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

  it('dlq with no subcommand prints its usage and exits 2; an unknown subcommand is a usage error', async () => {
    expect((await baton('dlq')).code).toBe(2);
    expect((await baton('dlq', 'purge')).code).toBe(2);
  });
});
