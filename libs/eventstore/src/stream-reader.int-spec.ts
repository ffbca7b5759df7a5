import { waitFor } from '@baton/wait';
import { headersFrom, type NatsHandle } from './connection';
import { StreamNotFound } from './errors';
import { connectTest, deleteTopology, provisionTopology, randomPrefix, sleep, steadyPublisher } from './int/support';
import { shareReads } from './shared-reads';
import { streamReader, type StoredMessage } from './stream-reader';
import { batonStreamNames } from './topology';

/*
 * The one stream reader: ranges complete to what the consumer reported pending, point reads,
 * the first sequence at a time, shared reads over a range, and a follow's byte-bounded pulls. (Its
 * follower's consumer-loss recovery is proven by apps/watchdog/src/stream/stream-follower.int-spec.ts.)
 */
describe('stream reader (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;
  let stream: string;
  const encoder = new TextEncoder();

  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest('stream-reader');
    await provisionTopology(nats, prefix);
    stream = batonStreamNames(prefix).events;
  });

  afterEach(async () => {
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  const seqsOf = async (messages: AsyncIterable<StoredMessage>) => {
    const seqs: number[] = [];
    for await (const msg of messages) seqs.push(msg.seq);
    return seqs;
  };

  it('a range yields every message from fromSeq to toSeq in order, filtered, across many pulls, and leaves no consumer behind', async () => {
    for (let i = 1; i <= 1200; i++) await nats.js.publish(`${prefix}.ev.p.handoff.${i % 2 === 0 ? 'even' : 'odd'}`, encoder.encode(String(i)));
    const reader = streamReader(nats, stream);
    expect(await seqsOf(reader.range({ fromSeq: 1, batch: 100 }))).toEqual(Array.from({ length: 1200 }, (_, i) => i + 1));
    expect(await seqsOf(reader.range({ fromSeq: 11, toSeq: 30, filterSubject: `${prefix}.ev.p.handoff.even` }))).toEqual([
      12, 14, 16, 18, 20, 22, 24, 26, 28, 30,
    ]);
    expect(await seqsOf(reader.range({ fromSeq: 1300 }))).toEqual([]);
    // Pulls are asked for ahead (half-way through the previous one): odd sizes, a bound that ends
    // inside a pull, and a caller that stops early still get exactly their messages, in order.
    expect(await seqsOf(reader.range({ fromSeq: 5, batch: 7 }))).toEqual(Array.from({ length: 1196 }, (_, i) => i + 5));
    expect(await seqsOf(reader.range({ fromSeq: 1, toSeq: 533, batch: 100 }))).toEqual(Array.from({ length: 533 }, (_, i) => i + 1));
    expect(await seqsOf(reader.range({ fromSeq: 1, batch: 1 }))).toHaveLength(1200);
    const early: number[] = [];
    for await (const msg of reader.range({ fromSeq: 1, batch: 100 })) {
      early.push(msg.seq);
      if (early.length === 150) break;
    }
    expect(early).toEqual(Array.from({ length: 150 }, (_, i) => i + 1));
    const consumers: string[] = [];
    for await (const consumer of nats.jsm.consumers.list(stream)) consumers.push(consumer.name);
    expect(consumers).toEqual([]);
  });

  it('a range over large messages asks for pulls that fit its byte bound, and still reads every message in order', async () => {
    const big = new Uint8Array(200 * 1024).fill(120);
    for (let i = 1; i <= 30; i++) await nats.js.publish(`${prefix}.ev.p.handoff.big`, big);
    for (let i = 31; i <= 60; i++) await nats.js.publish(`${prefix}.ev.p.handoff.small`, encoder.encode(String(i)));
    let pulls = 0;
    const reader = streamReader(nats, stream, { onRoundTrip: (kind) => void (kind === 'pull' && pulls++) });
    // 1 MiB a pull: at most five of the 200 KB messages each (the first pull, sized at the
    // server's 1 MiB max_payload, brings one); the small ones then come in one or two pulls.
    expect(await seqsOf(reader.range({ fromSeq: 1, batch: 500, pullBytes: 1024 * 1024 }))).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    expect(pulls).toBeGreaterThanOrEqual(1 + Math.ceil(29 / 5));
    expect(pulls).toBeLessThanOrEqual(12);
    // Without a byte bound worth the name, the same range is one or two pulls.
    pulls = 0;
    expect(await seqsOf(reader.range({ fromSeq: 1, batch: 500, pullBytes: 1024 ** 3 }))).toHaveLength(60);
    expect(pulls).toBeLessThanOrEqual(2);
  });

  it('a range whose small messages give way to large ones: the server ends each pull at its byte bound, and every message still comes in order', async () => {
    for (let i = 1; i <= 600; i++) await nats.js.publish(`${prefix}.ev.p.handoff.small`, encoder.encode(String(i)));
    const big = new Uint8Array(300 * 1024).fill(120);
    for (let i = 601; i <= 630; i++) await nats.js.publish(`${prefix}.ev.p.handoff.big`, big);
    const asked: { batch: number; max_bytes: number }[] = [];
    const requests = nats.connection.subscribe(`$JS.API.CONSUMER.MSG.NEXT.${stream}.>`, {
      callback: (_, msg) => void asked.push(JSON.parse(new TextDecoder().decode(msg.data)) as { batch: number; max_bytes: number }),
    });
    try {
      // After pulls of small messages the count asked for is the whole batch (500): only the
      // server's byte bound (2 MiB: twice the 1 MiB max_payload) keeps a pull of the 300 KB
      // messages to six of them.
      expect(await seqsOf(streamReader(nats, stream).range({ fromSeq: 1, batch: 500, pullBytes: 1024 * 1024 }))).toEqual(
        Array.from({ length: 630 }, (_, i) => i + 1),
      );
      await nats.connection.flush();
      expect(asked.some((pull) => pull.batch >= 100)).toBe(true);
      for (const pull of asked) expect(pull.max_bytes).toBe(2 * 1024 * 1024);
      expect(asked.length).toBeGreaterThanOrEqual(2 + Math.ceil(30 / 6));
    } finally {
      requests.unsubscribe();
    }
  });

  it('a follow over large messages: every pull asks for a count and a byte bound, and the follower still gets every message once, in order, then new ones', async () => {
    const big = new Uint8Array(300 * 1024).fill(120);
    for (let i = 1; i <= 40; i++) await nats.js.publish(`${prefix}.ev.p.handoff.big`, i % 4 === 0 ? encoder.encode(String(i)) : big);
    // The pull requests the follower sends, as the server receives them.
    const asked: { batch: number; max_bytes: number }[] = [];
    const pulls = nats.connection.subscribe(`$JS.API.CONSUMER.MSG.NEXT.${stream}.>`, {
      callback: (_, msg) => void asked.push(JSON.parse(new TextDecoder().decode(msg.data)) as { batch: number; max_bytes: number }),
    });
    const seen: number[] = [];
    const follower = await streamReader(nats, stream).follow({
      filterSubject: `${prefix}.ev.>`,
      batch: 500,
      pullBytes: 1024 * 1024,
      onMessage: (m) => void seen.push(m.seq),
    });
    try {
      await follower.caughtUp;
      expect(seen).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
      // The bound is never under two of the largest message the server takes (1 MiB here): 2 MiB,
      // at most six of these 300 KB messages a pull, so the 30 of them take five pulls or more.
      expect(asked.length).toBeGreaterThanOrEqual(5);
      for (const pull of asked) expect(pull).toMatchObject({ batch: 500, max_bytes: 2 * 1024 * 1024 });
      await nats.js.publish(`${prefix}.ev.p.handoff.late`, encoder.encode('41'));
      await waitFor(() => seen.length === 41, 'the follower handing over a new message');
      expect(seen.at(-1)).toBe(41);
      expect(follower.lastSeq()).toBe(41);
    } finally {
      pulls.unsubscribe();
      await follower.stop();
    }
    const consumers: string[] = [];
    for await (const consumer of nats.jsm.consumers.list(stream)) consumers.push(consumer.name);
    expect(consumers).toEqual([]);
  });

  it('a follow under a steady flow whose pulls expire (nats-server 2.9 may expire one unannounced): it keeps its one consumer and never waits long', async () => {
    // The consumers the follower creates, as the server receives their creation.
    const created: string[] = [];
    const creations = nats.connection.subscribe(`$JS.API.CONSUMER.CREATE.${stream}.>`, { callback: (_, msg) => void created.push(msg.subject) });
    const publisher = steadyPublisher((n) => nats.js.publish(`${prefix}.ev.p.handoff.h${n % 5}`, new Uint8Array(200)));
    const seen: number[] = [];
    let lastAt = Date.now();
    let longestGap = 0;
    // Pulls that never fill (a million messages each): every one ends at its expiry.
    const follower = await streamReader(nats, stream).follow({
      filterSubject: `${prefix}.ev.>`,
      batch: 1_000_000,
      pullExpiresMs: 500,
      onMessage: (m) => {
        const now = Date.now();
        longestGap = Math.max(longestGap, now - lastAt);
        lastAt = now;
        seen.push(m.seq);
      },
    });
    try {
      await sleep(4000);
      const published = await publisher.stop();
      await waitFor(() => seen.length === published, 'the follower handing over every message published');
      expect(seen).toEqual(Array.from({ length: published }, (_, i) => i + 1));
      // A pull the server expired without a word used to stop the follower until a second of
      // silence past the pull's expiry re-created its consumer (1.5 s here); the next pull now
      // follows at the expiry and the grace.
      expect(created).toHaveLength(1);
      expect(longestGap).toBeLessThan(1000);
    } finally {
      await publisher.stop();
      creations.unsubscribe();
      await follower.stop();
    }
  });

  it('point reads: a message by sequence, the next and the last on a subject; null when there is none', async () => {
    await nats.js.publish(`${prefix}.ev.p.run.a`, encoder.encode('a1'));
    await nats.js.publish(`${prefix}.ev.p.run.b`, encoder.encode('b1'));
    await nats.js.publish(`${prefix}.ev.p.run.a`, encoder.encode('a2'));
    const reader = streamReader(nats, stream);
    expect(new TextDecoder().decode((await reader.message(2))!.data)).toBe('b1');
    expect(await reader.message(9)).toBeNull();
    expect((await reader.nextOnSubject(`${prefix}.ev.p.run.a`, 2))!.seq).toBe(3);
    expect(await reader.nextOnSubject(`${prefix}.ev.p.run.b`, 3)).toBeNull();
    expect((await reader.lastOnSubject(`${prefix}.ev.p.run.a`))!.seq).toBe(3);
    expect(await reader.lastOnSubject(`${prefix}.ev.p.run.none`)).toBeNull();
    expect(await reader.bounds()).toEqual({ firstSeq: 1, lastSeq: 3, messages: 3 });
  });

  it("point reads give a message's bytes and headers as stored: repeated headers in order, large and binary data intact", async () => {
    const hdrs = headersFrom({ 'Baton-Event-Type': 'run.routed', 'Nats-Msg-Id': 'ev-1' });
    hdrs.append('Baton-Note', 'first');
    hdrs.append('Baton-Note', ' second ');
    const large = Uint8Array.from({ length: 300_000 }, (_, i) => (i * 7) % 256);
    await nats.js.publish(`${prefix}.ev.p.run.a`, large, { headers: hdrs });
    await nats.js.publish(`${prefix}.ev.p.run.a`, new Uint8Array(0));
    const reader = streamReader(nats, stream);
    const first = (await reader.message(1))!;
    expect(first.subject).toBe(`${prefix}.ev.p.run.a`);
    expect(Buffer.from(first.data).equals(Buffer.from(large))).toBe(true);
    expect(first.header('Baton-Event-Type')).toBe('run.routed');
    expect(first.header('Baton-Note')).toBe('first');
    expect(first.header('Baton-Missing')).toBeUndefined();
    expect(first.headers()).toEqual({ 'Baton-Event-Type': ['run.routed'], 'Nats-Msg-Id': ['ev-1'], 'Baton-Note': ['first', 'second'] });
    const empty = (await reader.lastOnSubject(`${prefix}.ev.p.run.a`))!;
    expect([empty.seq, empty.data.length, empty.headers()]).toEqual([2, 0, {}]);
  });

  it('the first sequence at or after a time; the last + 1 when nothing was stored since', async () => {
    await nats.js.publish(`${prefix}.ev.p.run.a`, encoder.encode('1'));
    await sleep(50);
    const between = new Date();
    await sleep(50);
    await nats.js.publish(`${prefix}.ev.p.run.a`, encoder.encode('2'));
    const reader = streamReader(nats, stream);
    expect(await reader.firstSeqAtOrAfter(new Date(0))).toBe(1);
    expect(await reader.firstSeqAtOrAfter(between)).toBe(2);
    expect(await reader.firstSeqAtOrAfter(new Date(Date.now() + 60_000))).toBe(3);
    // A message stored while it looks (before the time asked for) is not "at or after" it.
    const later = reader.firstSeqAtOrAfter(new Date(Date.now() + 3_600_000));
    await sleep(300);
    await nats.js.publish(`${prefix}.ev.p.run.a`, encoder.encode('3'));
    expect(await later).toBe(4);
  });

  it('reading a stream that does not exist is StreamNotFound', async () => {
    const reader = streamReader(nats, `${stream}_MISSING`);
    await expect(seqsOf(reader.range({ fromSeq: 1 }))).rejects.toBeInstanceOf(StreamNotFound);
    await expect(reader.message(1)).rejects.toBeInstanceOf(StreamNotFound);
  });

  it('shared reads over a range: readers joining at once share one consumer and each gets every message', async () => {
    for (let i = 1; i <= 300; i++) await nats.js.publish(`${prefix}.ev.p.run.a`, encoder.encode(String(i)));
    let opened = 0;
    const reader = streamReader(nats, stream, { onRoundTrip: (kind) => void (kind === 'consumer' && opened++) });
    const shared = shareReads((fromSeq) => reader.range({ fromSeq, batch: 50 }), { window: 64 });
    const results = await Promise.all([1, 2, 3].map(() => seqsOf(shared(1))));
    for (const seqs of results) expect(seqs).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
    expect(opened).toBe(1);
  });
});
