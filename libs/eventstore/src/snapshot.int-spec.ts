import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { StreamConfig, StreamState } from 'nats';
import { connectNats, type NatsHandle } from './connection';
import { startNatsServer, type PrivateNatsServer } from './int/servers';
import { acknowledgedThrough, realignRestoredConsumers, restoreStream } from './snapshot';

/*
 * A snapshot taken while its stream is written and read: nats-server 2.9 copies the stream's
 * messages, then its consumers' states, so a consumer in it may have delivered past the last message
 * the snapshot holds. The fixture is such a snapshot (made by int/fixtures/make-consumer-ahead.js):
 * BKFIX_DLQ, whose durable `ahead` had delivered past the restored stream's end. A private nats-server.
 */

const fixtures = join(__dirname, 'int', 'fixtures');
const manifest = JSON.parse(readFileSync(join(fixtures, 'consumer-ahead.json'), 'utf8')) as { config: StreamConfig; state: StreamState };
const bytes = readFileSync(join(fixtures, 'consumer-ahead.snapshot'));
const STREAM = 'BKFIX_DLQ';

async function* chunksOf(buffer: Buffer): AsyncIterable<Uint8Array> {
  for (let at = 0; at < buffer.length; at += 16 * 1024) yield buffer.subarray(at, at + 16 * 1024);
}

let server: PrivateNatsServer;
let nats: NatsHandle;

beforeEach(async () => {
  server = await startNatsServer({ jetstream: true });
  nats = await connectNats({ servers: server.url, name: 'snapshot-int' });
  await restoreStream(nats, STREAM, manifest, chunksOf(bytes));
});

afterEach(async () => {
  await nats?.close();
  await server?.remove();
});

it('left as restored, the consumer ahead of its stream skips the next message the stream is given: lost to it', async () => {
  const last = (await nats.jsm.streams.info(STREAM)).state.last_seq;
  expect((await nats.jsm.consumers.info(STREAM, 'ahead')).delivered.stream_seq).toBeGreaterThan(last);
  expect((await nats.js.publish('bkfix.dlq.router', new TextEncoder().encode('{"after":1}'))).seq).toBe(last + 1);
  const next = await (await nats.js.consumers.get(STREAM, 'ahead')).next({ expires: 1_000 });
  expect(next).toBeNull();
});

it('realignRestoredConsumers makes it again from its floor: it delivers what the stream is given next; a consumer not ahead is left as it was', async () => {
  const last = (await nats.jsm.streams.info(STREAM)).state.last_seq;
  const before = await nats.jsm.consumers.info(STREAM, 'ahead');
  await nats.jsm.consumers.add(STREAM, { durable_name: 'level', ack_policy: before.config.ack_policy });
  const level = await nats.jsm.consumers.info(STREAM, 'level');
  // Its ack floor, or what it delivered when nothing awaits an acknowledgement (acknowledgedThrough), within the stream.
  const start = Math.min(acknowledgedThrough(before), last) + 1;

  expect(await realignRestoredConsumers(nats, STREAM)).toEqual([
    {
      consumer: 'ahead',
      delivered: before.delivered.stream_seq,
      ack_floor: before.ack_floor.stream_seq,
      stream_last_seq: last,
      start_seq: start,
      reason: 'ahead',
    },
  ]);
  const after = await nats.jsm.consumers.info(STREAM, 'ahead');
  expect(after.config).toMatchObject({
    durable_name: 'ahead',
    ack_policy: before.config.ack_policy,
    deliver_policy: 'by_start_sequence',
    opt_start_seq: start,
  });
  expect((await nats.jsm.consumers.info(STREAM, 'level')).created).toBe(level.created);

  expect((await nats.js.publish('bkfix.dlq.router', new TextEncoder().encode('{"after":1}'))).seq).toBe(last + 1);
  const consumer = await nats.js.consumers.get(STREAM, 'ahead');
  const seen: number[] = [];
  for (let seq = start; seq <= last + 1; seq++) {
    const msg = await consumer.next({ expires: 2_000 });
    if (msg === null) break;
    seen.push(msg.seq);
    msg.ack();
  }
  // What it had acknowledged past its floor and up to the stream's end comes again, then the new message.
  expect(seen).toEqual(Array.from({ length: last + 2 - start }, (_, i) => start + i));
  // Run again, it finds nothing ahead.
  expect(await realignRestoredConsumers(nats, STREAM)).toEqual([]);
});

it('realignRestoredConsumers given where readers stood when the backup began makes again each that acknowledged past it, from there: it reads those messages again', async () => {
  const last = (await nats.jsm.streams.info(STREAM)).state.last_seq;
  await realignRestoredConsumers(nats, STREAM);
  // Two readers that read the whole stream; the backup began when `reader` had acknowledged through last - 3, `still` through last.
  for (const name of ['reader', 'still']) {
    await nats.jsm.consumers.add(STREAM, { durable_name: name, ack_policy: 'explicit' as never });
    const consumer = await nats.js.consumers.get(STREAM, name);
    for (;;) {
      const msg = await consumer.next({ expires: 1_000 });
      if (msg === null) break;
      msg.ack();
      await msg.ackAck();
      if (msg.seq === last) break;
    }
  }
  const still = await nats.jsm.consumers.info(STREAM, 'still');
  const realigned = await realignRestoredConsumers(
    nats,
    STREAM,
    new Map([
      ['reader', last - 3],
      ['still', last],
    ]),
  );
  expect(realigned).toEqual([expect.objectContaining({ consumer: 'reader', stream_last_seq: last, start_seq: last - 2, reason: 'rewound' })]);
  expect((await nats.jsm.consumers.info(STREAM, 'still')).created).toBe(still.created);
  const consumer = await nats.js.consumers.get(STREAM, 'reader');
  const seen: number[] = [];
  for (;;) {
    const msg = await consumer.next({ expires: 1_000 });
    if (msg === null) break;
    seen.push(msg.seq);
    msg.ack();
  }
  expect(seen).toEqual([last - 2, last - 1, last]);
});
