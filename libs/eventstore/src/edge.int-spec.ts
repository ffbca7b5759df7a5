import { connect, type Socket } from 'node:net';
import { StorageType } from 'nats';
import { Subjects } from '@baton/contracts';
import { waitFor } from '@baton/wait';
import type { NatsHandle } from './connection';
import { headersFrom } from './connection';
import {
  consumerInfos,
  isKvRevisionConflict,
  newUniqueId,
  openKvBucket,
  orderedConsumerOptions,
  subscribeCore,
  UnreadableHeadersError,
  watchEvents,
  type CoreMessage,
  type WatchedEvent,
} from './edge';
import { connectTest, randomPrefix } from './int/support';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

describe('the message edge helpers (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;

  beforeAll(async () => {
    nats = await connectTest('edge-int');
  });

  afterAll(async () => {
    await nats.close();
  });

  beforeEach(() => {
    prefix = randomPrefix();
  });

  it('newUniqueId gives distinct 22-character ids', () => {
    const ids = new Set(Array.from({ length: 1000 }, () => newUniqueId()));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9]{22}$/);
  });

  it('relay: a header key NATS cannot carry (sent raw: a space in the key) is UnreadableHeadersError, and the connection keeps reading — a handler that throws never stops it', async () => {
    const subject = `${prefix}.edge.x`;
    const outcomes: string[] = [];
    const relayed: string[] = [];
    const errors: string[] = [];
    const target = subscribeCore(nats, `${prefix}.relayed`, (msg) => relayed.push(msg.headers['Nats-Msg-Id']?.[0] ?? '-'));
    const subscription = subscribeCore(
      nats,
      subject,
      (msg) => {
        try {
          // Nats-* headers other than the id dropped on the way.
          msg.relay(`${prefix}.relayed`, undefined, (name) => name.startsWith('Nats-') && name !== 'Nats-Msg-Id');
          outcomes.push('relayed');
        } catch (error) {
          outcomes.push(error instanceof UnreadableHeadersError ? 'unreadable' : String(error));
        }
        if (decoder.decode(msg.data) === 'throw') throw new Error('a handler failed');
      },
      { onError: (error) => errors.push(error.message) },
    );
    await nats.connection.flush();
    // A raw client: nats.js itself refuses to send such a key.
    const raw = await new Promise<Socket>((resolve, reject) => {
      const socket = connect(4222, '127.0.0.1', () => resolve(socket));
      socket.on('error', reject);
    });
    const bad = 'NATS/1.0\r\nX Bad: 1\r\n\r\n';
    raw.write(
      `CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\nHPUB ${subject} ${bad.length} ${bad.length + 2}\r\n${bad}{}\r\nPING\r\n`,
    );
    await new Promise((resolve) => raw.once('data', resolve));
    raw.destroy();
    nats.connection.publish(subject, encoder.encode('throw'));
    nats.connection.publish(subject, encoder.encode('ok'), { headers: headersFrom({ 'Nats-Msg-Id': 'm-1', 'Nats-Expected-Last-Msg-Id': 'probe' }) });
    await waitFor(async () => (relayed.length >= 2 ? true : undefined), 'the later messages relayed', { timeoutMs: 5000 });
    // Sent on two connections (the raw socket and the client): the order they arrive in is not fixed.
    expect([...outcomes].sort()).toEqual(['relayed', 'relayed', 'unreadable']);
    expect(errors).toEqual(['a handler failed']);
    expect(relayed).toEqual(['-', 'm-1']);
    // And the connection still answers.
    const echo = subscribeCore(nats, `${prefix}.echo`, (msg) => msg.respond(msg.data));
    await nats.connection.flush();
    expect(decoder.decode((await nats.connection.request(`${prefix}.echo`, encoder.encode('still here'), { timeout: 2000 })).data)).toBe('still here');
    for (const s of [subscription, target, echo]) s.unsubscribe();
  });

  it('subscribeCore serves requests in a queue group, with headers, and drains', async () => {
    const seen: CoreMessage[] = [];
    const subject = `${prefix}.cmd.echo`;
    const subscription = subscribeCore(
      nats,
      subject,
      (msg) => {
        seen.push(msg);
        msg.respond(encoder.encode(`echo ${decoder.decode(msg.data)}`));
      },
      { queue: 'q' },
    );
    await nats.connection.flush();
    const reply = await nats.connection.request(subject, encoder.encode('hi'), { timeout: 2000, headers: headersFrom({ 'Baton-Probe': 'yes' }) });
    expect(decoder.decode(reply.data)).toBe('echo hi');
    expect(seen).toHaveLength(1);
    expect(seen[0]!.subject).toBe(subject);
    expect(seen[0]!.reply).toBeDefined();
    expect(seen[0]!.headers['Baton-Probe']).toEqual(['yes']);
    // A plain publish has no reply subject: respond says so.
    nats.connection.publish(subject, encoder.encode('plain'));
    await waitFor(() => seen.length === 2, 'the second message', { timeoutMs: 3000 });
    expect(seen[1]!.reply).toBeUndefined();
    expect(seen[1]!.respond(encoder.encode('nobody'))).toBe(false);
    expect(subscription.isClosed()).toBe(false);
    await subscription.drain();
    expect(subscription.isClosed()).toBe(true);
  });

  it('watchEvents hears appends to one aggregate kind and nothing else', async () => {
    const heard: WatchedEvent[] = [];
    const subscription = watchEvents(nats, prefix, 'definition', (event) => heard.push(event));
    await nats.connection.flush();
    nats.connection.publish(Subjects.aggregate(prefix, 'acme', 'definition', 'current'), encoder.encode('{}'));
    nats.connection.publish(Subjects.aggregate(prefix, 'acme', 'run', 'wr-1'), encoder.encode('{}'));
    nats.connection.publish(Subjects.aggregate(prefix, 'Not-A-Project', 'definition', 'current'), encoder.encode('{}'));
    nats.connection.publish(Subjects.aggregate(`${prefix}x`, 'acme', 'definition', 'current'), encoder.encode('{}'));
    nats.connection.publish(Subjects.aggregate(prefix, 'beta', 'definition', 'current'), encoder.encode('{}'));
    await waitFor(() => heard.length >= 2, 'two definition events', { timeoutMs: 3000 });
    await nats.connection.flush();
    expect(heard).toEqual([
      { project: 'acme', kind: 'definition', id: 'current' },
      { project: 'beta', kind: 'definition', id: 'current' },
    ]);
    subscription.unsubscribe();
  });

  it('openKvBucket: create, compare-and-set update, conflicts recognised, deletes read as null values', async () => {
    const name = `${prefix.toUpperCase()}_EDGE_KV`;
    try {
      const kv = await openKvBucket(nats, name, { description: 'edge test', history: 1, ttlMs: 60_000, allowDirect: false, timeoutMs: 2000 });
      expect(await kv.get('a')).toBeNull();
      const first = await kv.create('a', encoder.encode('1'));
      const entry = await kv.get('a');
      expect(entry).toEqual({ value: encoder.encode('1'), revision: first });
      const conflict = await kv.create('a', encoder.encode('again')).then(
        () => null,
        (error: unknown) => error,
      );
      expect(isKvRevisionConflict(conflict)).toBe(true);
      const second = await kv.update('a', encoder.encode('2'), first);
      expect(second).toBeGreaterThan(first);
      const stale = await kv.update('a', encoder.encode('3'), first).then(
        () => null,
        (error: unknown) => error,
      );
      expect(isKvRevisionConflict(stale)).toBe(true);
      expect(isKvRevisionConflict(new Error('something else'))).toBe(false);
      // Opening it again (another instance) finds the same bucket and its data.
      const again = await openKvBucket(nats, name, { history: 1, ttlMs: 60_000, allowDirect: false });
      expect(decoder.decode((await again.get('a'))!.value!)).toBe('2');
      // A deleted key reads as a null value with its revision (update it, do not create it).
      await nats.connection
        .jetstream()
        .views.kv(name)
        .then((raw) => raw.delete('a'));
      const deleted = await kv.get('a');
      expect(deleted?.value).toBeNull();
      expect(deleted?.revision).toBeGreaterThan(second);
    } finally {
      await nats.jsm.streams.delete(`KV_${name}`).catch(() => undefined);
    }
  });

  it('orderedConsumerOptions start an ordered read where asked', async () => {
    const stream = `${prefix.toUpperCase()}_EDGE`;
    // In memory: a file stream created beside another test's deletion can meet nats-server 2.9.10's storage-directory race (JsErrCode.streamStoreFailed).
    await nats.jsm.streams.add({ name: stream, subjects: [`${prefix}.edge.>`], storage: StorageType.Memory });
    try {
      for (let i = 1; i <= 5; i++) await nats.js.publish(`${prefix}.edge.${i % 2 === 0 ? 'even' : 'odd'}`, encoder.encode(String(i)));
      // One message at a time (`next`) until the stream has no more for this consumer.
      const read = async (options: ReturnType<typeof orderedConsumerOptions>) => {
        const consumer = await nats.js.consumers.get(stream, options);
        const out: string[] = [];
        for (let msg = await consumer.next({ expires: 1000 }); msg !== null; msg = msg.info.pending > 0 ? await consumer.next({ expires: 1000 }) : null) {
          out.push(decoder.decode(msg.data));
        }
        return out;
      };
      expect(await read(orderedConsumerOptions({ from: 'all' }))).toEqual(['1', '2', '3', '4', '5']);
      expect(await read(orderedConsumerOptions({ from: 'seq', seq: 4 }))).toEqual(['4', '5']);
      expect(await read(orderedConsumerOptions({ from: 'all' }, `${prefix}.edge.even`))).toEqual(['2', '4']);
      expect(await read(orderedConsumerOptions({ from: 'time', time: new Date(Date.now() + 60_000) }))).toEqual([]);
      expect(orderedConsumerOptions({ from: 'new' })).toMatchObject({ deliver_policy: 'new' });
    } finally {
      await nats.jsm.streams.delete(stream).catch(() => undefined);
    }
  });

  it('consumerInfos lists every consumer with its state while others are being created and deleted', async () => {
    const stream = `${prefix.toUpperCase()}_LIST`;
    await nats.jsm.streams.add({ name: stream, subjects: [`${prefix}.list.>`], storage: StorageType.Memory });
    try {
      await nats.jsm.consumers.add(stream, { durable_name: 'keeper', ack_policy: 'explicit' as never });
      for (let round = 0; round < 3; round++) {
        const names = await Promise.all(
          Array.from({ length: 40 }, async (_, i) => (await nats.jsm.consumers.add(stream, { name: `gone_${round}_${i}`, ack_policy: 'none' as never })).name),
        );
        // Deleted while the list is walked (what range readers do under load).
        const deleting = Promise.all(names.map((name) => nats.jsm.consumers.delete(stream, name)));
        const listed: string[] = [];
        for await (const info of consumerInfos(nats.jsm, stream)) {
          expect(info).not.toBeNull();
          expect(typeof info.num_pending).toBe('number');
          listed.push(info.name);
        }
        expect(listed).toContain('keeper');
        await deleting;
      }
      const quiet: string[] = [];
      for await (const info of consumerInfos(nats.jsm, stream)) quiet.push(info.name);
      expect(quiet).toEqual(['keeper']);
    } finally {
      await nats.jsm.streams.delete(stream).catch(() => undefined);
    }
  });
});
