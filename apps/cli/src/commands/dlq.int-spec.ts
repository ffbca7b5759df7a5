import { randomBytes } from 'node:crypto';
import { batonStreamNames, batonTopology, connectNats, deadLetter, provision, redriveMsgId, type NatsHandle } from '@baton/eventstore';
import { main } from '../main';
import { bufferedIo } from '../output';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

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

  beforeEach(async () => {
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, name: 'cli-dlq-int', reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    // Two dead letters as the transport writes them: a malformed result (text) and a binary blob.
    await deadLetter(nats.js, {
      prefix,
      source: 'router-results',
      reason: 'malformed_json',
      detail: 'not valid JSON',
      subject: inboxSubject(),
      headers: { 'Nats-Msg-Id': ['orig-1'], 'X-Trace': ['abc', 'def'] },
      data: encoder.encode('{"result_id": "broken", '),
      deliveries: 1,
      stream: batonStreamNames(prefix).inbox,
      seq: 11,
      at: '2025-01-01T00:00:00.000Z',
    });
    await deadLetter(nats.js, {
      prefix,
      source: 'ledger-commands',
      reason: 'schema_violation',
      subject: `${prefix}.in.p1.answer`,
      data: new Uint8Array([0xff, 0xfe, 0x00, 0x01]),
      deliveries: 5,
      stream: batonStreamNames(prefix).inbox,
      seq: 12,
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
      [1, 'malformed_json', 'router-results', inboxSubject(), false],
      [2, 'schema_violation', 'ledger-commands', `${prefix}.in.p1.answer`, false],
    ]);
    expect((await json<unknown[]>('dlq', 'list', '--source', 'ledger-commands', '--json')).length).toBe(1);
    expect((await json<unknown[]>('dlq', 'list', '--reason', 'malformed_json', '--json')).length).toBe(1);
    expect((await json<unknown[]>('dlq', 'list', '--reason', 'nope', '--json')).length).toBe(0);
    const table = await baton('dlq', 'list');
    expect(table.out).toContain('malformed_json');
    expect(table.out).toContain('router-results');
  });

  it('dlq show gives the reason, original subject, original headers and the original bytes (text, or base64 when not UTF-8)', async () => {
    const text = await json<Record<string, unknown>>('dlq', 'show', '1', '--json');
    expect(text).toMatchObject({
      seq: 1,
      reason: 'malformed_json',
      detail: 'not valid JSON',
      subject: inboxSubject(),
      original_seq: 11,
      deliveries: 1,
      at: '2025-01-01T00:00:00.000Z',
      headers: { 'Nats-Msg-Id': ['orig-1'], 'X-Trace': ['abc', 'def'] },
      data_text: '{"result_id": "broken", ',
    });
    const binary = await json<Record<string, unknown>>('dlq', 'show', '2', '--json');
    expect(binary).toMatchObject({ data_text: null, data_base64: Buffer.from([0xff, 0xfe, 0x00, 0x01]).toString('base64'), bytes: 4 });
    const human = await baton('dlq', 'show', '2');
    expect(human.out).toContain('--- data (base64) ---\n//4AAQ==');
    const missing = await baton('dlq', 'show', '99');
    expect(missing.code).toBe(1);
  });

  it('a redrive is idempotent: it republishes each original once, with its headers, and a second run republishes nothing', async () => {
    const dry = await json<{ items: { status: string }[] }>('dlq', 'redrive', '--dry-run', '--json');
    expect(dry.items.map((i) => i.status)).toEqual(['planned', 'planned']);
    expect(await inboxCount()).toBe(0);

    const first = await json<{ republished: number; skipped: number }>('dlq', 'redrive', '--until', '1', '--json');
    expect(first).toMatchObject({ republished: 1, skipped: 0 });
    expect(await inboxCount()).toBe(1);
    const republished = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { seq: 1 });
    expect(republished.subject).toBe(inboxSubject());
    expect(decoder.decode(republished.data)).toBe('{"result_id": "broken", ');
    expect(republished.header.values('X-Trace')).toEqual(['abc', 'def']);
    expect(republished.header.get('Nats-Msg-Id')).toBe(redriveMsgId(batonStreamNames(prefix).dlq, 1));
    expect(republished.header.get('Baton-Original-Msg-Id')).toBe('orig-1');
    expect(republished.header.get('Baton-Redriven-From')).toBe(`${batonStreamNames(prefix).dlq}:1`);

    const second = await json<{ republished: number; skipped: number }>('dlq', 'redrive', '--json');
    expect(second).toMatchObject({ republished: 1, skipped: 1 });
    const third = await json<{ republished: number; skipped: number }>('dlq', 'redrive', '--json');
    expect(third).toMatchObject({ republished: 0, skipped: 2 });
    expect(await inboxCount()).toBe(2);
    const listed = await json<Array<{ redriven: boolean }>>('dlq', 'list', '--json');
    expect(listed.map((l) => l.redriven)).toEqual([true, true]);
  });

  it('a redrive cut short before its marker is recognised as a duplicate on the next run (Nats-Msg-Id redrive:<stream>:<seq>)', async () => {
    // The republish of seq 1 reached the inbox, but the process died before writing the marker.
    await nats.js.publish(inboxSubject(), encoder.encode('{"result_id": "broken", '), { msgID: redriveMsgId(batonStreamNames(prefix).dlq, 1) });
    const report = await json<{ items: { seq: number; status: string }[]; duplicates: number }>('dlq', 'redrive', '--until', '1', '--json');
    expect(report.items).toEqual([expect.objectContaining({ seq: 1, status: 'duplicate' })]);
    expect(await inboxCount()).toBe(1);
    const again = await json<{ items: { status: string }[] }>('dlq', 'redrive', '--until', '1', '--json');
    expect(again.items.map((i) => i.status)).toEqual(['skipped']);
  });

  it('dlq with no subcommand prints its usage and exits 2; an unknown subcommand is a usage error', async () => {
    expect((await baton('dlq')).code).toBe(2);
    expect((await baton('dlq', 'purge')).code).toBe(2);
  });
});
