import { headers as natsHeaders } from 'nats';
import type { NatsHandle } from './connection';
import { connectTest, deleteTopology, provisionTopology, randomPrefix } from './int/support';
import { streamReader } from './stream-reader';
import { batonStreamNames } from './topology';

/*
 * A range read gives one header from the raw header block (no decode of every header, the
 * replay's hot path); it must give exactly what the decoded headers give.
 */
describe('range reads: one header from the raw block (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;

  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest('raw-header');
    await provisionTopology(nats, prefix);
  });

  afterEach(async () => {
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  it("header(name) equals the decoded headers' first value, for present, absent, repeated, padded and empty headers, and messages without headers", async () => {
    const cases: Array<Array<[string, string]> | null> = [
      [['traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01']],
      [
        ['Baton-Event-Type', 'run.started'],
        ['traceparent', '  00-aa-bb-01  '],
      ],
      [
        ['traceparent', 'first'],
        ['traceparent', 'second'],
      ],
      [
        ['Traceparent', 'other case'],
        ['x-traceparent', 'prefixed'],
      ],
      [['traceparent', '']],
      [
        ['a', 'é ü – unicode'],
        ['traceparentx', 'longer name'],
      ],
      null,
    ];
    const encoder = new TextEncoder();
    for (const [i, entries] of cases.entries()) {
      const opts = entries === null ? {} : { headers: natsHeaders() };
      for (const [k, v] of entries ?? []) opts.headers?.append(k, v);
      await nats.js.publish(`${prefix}.ev.p.run.r${i}`, encoder.encode(`{"n":${i}}`), opts);
    }
    const seen: number[] = [];
    for await (const msg of streamReader(nats, batonStreamNames(prefix).events).range({ fromSeq: 1 })) {
      seen.push(msg.seq);
      const decoded = msg.headers();
      for (const name of ['traceparent', 'Traceparent', 'a', 'Baton-Event-Type', 'missing']) {
        expect({ seq: msg.seq, name, value: msg.header(name) }).toEqual({ seq: msg.seq, name, value: decoded[name]?.[0] || undefined });
      }
    }
    expect(seen).toEqual(cases.map((_, i) => i + 1));
  });
});
